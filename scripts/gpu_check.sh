#!/usr/bin/env bash
# The whole GPU check in one command, from the repository root of a machine with a Hopper GPU,
# nvcc and the Python packages of tmagen (pydantic may come as wheels in .whl/, made by
# ../shared/offline-wheels.sh). Writes its report under $OUT (or the folder given, default
# gpu-report/): machine.txt, the whole test suite's log and JUnit XML (the GPU tests run, the
# others too, the SASS checks among them; tests/gpu/test_user_kernel.py builds and runs the user's
# own kernel of tests/vendor_project), tmagen verify's table (a spec without a kernel is verified
# through inspect kernels of tmagen's), figures.json with what the GPU tests measured, and the
# Python path's figures (benchmarks/python_api.py: python_api.txt and .json).
#
#   scripts/gpu_check.sh [OUT]                              the test suite, tmagen verify, the Python figures
#   scripts/gpu_check.sh --reliability SECONDS [OUT]        and then the reliability campaign for
#                                                           SECONDS (its oracle figures from the suite's)
#   scripts/gpu_check.sh --reliability-only SECONDS [OUT]   only the campaign: random specs, the driver
#                                                           oracle (100,000 sets), compute-sanitizer on 50
#                                                           kernels, within SECONDS (540 fits one 10-minute call)
# The campaign writes OUT/reliability/: reliability.json and .md (docs/reliability.md's source),
# failures/ (each failing spec, to copy into tests/data/reliability/) and logs/.
# With BENCH=full (or BENCH=quick) it also runs the benchmark suite with its peers (benchmarks/run.py,
# about 7 minutes; it needs PyTorch, and CuPy and Triton for their peers) into $OUT/bench/:
# bench.json, bench.log and the page it renders.
set -uo pipefail
reliability=""
only=0
while [ $# -gt 0 ]; do
  case "$1" in
    --reliability) reliability=${2:?--reliability needs the seconds}; shift 2 ;;
    --reliability-only) reliability=${2:?--reliability-only needs the seconds}; only=1; shift 2 ;;
    *) break ;;
  esac
done
OUT=${OUT:-${1:-gpu-report}}
mkdir -p "$OUT"
if compgen -G ".whl/*.whl" > /dev/null; then
  python3 -m pip install -q --no-index --no-deps --target /tmp/tmagen-site .whl/*.whl || exit 2
  export PYTHONPATH=/tmp/tmagen-site:$PWD${PYTHONPATH:+:$PYTHONPATH}
else
  export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
fi
export TMAGEN_REPORT_DIR=$OUT TMAGEN_CACHE=${TMAGEN_CACHE:-/tmp/tmagen-cache} PYTHONUNBUFFERED=1

{
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1
  nvcc --version | tail -1
  python3 --version
} > "$OUT/machine.txt"
cat "$OUT/machine.txt"

tests=0
verify=0
python_api=0
if [ "$only" -eq 0 ]; then
  python3 -m pytest tests -v -rs --junitxml="$OUT/tests.xml" 2>&1 | tee "$OUT/tests.log"
  tests=${PIPESTATUS[0]}
  python3 -m tmagen verify --seed 1 specs/*.json 2>&1 | tee "$OUT/verify.txt"
  verify=${PIPESTATUS[0]}
  # The Python path's figures: first-call compile, cached call, host overhead beside PyTorch, 1 GiB
  # bandwidth beside the C API (tests/gpu/test_python_path.py, in the suite above, checks correctness).
  python3 benchmarks/python_api.py "$OUT" 2>&1 | tee "$OUT/python_api.txt"
  python_api=${PIPESTATUS[0]}
  echo "tests: exit $tests; tmagen verify: exit $verify; benchmarks/python_api.py: exit $python_api"
fi
campaign=0
if [ -n "$reliability" ]; then
  oracle=()
  if [ "$only" -eq 0 ] && [ -f "$OUT/figures.json" ]; then
    oracle=(--oracle-figures "$OUT/figures.json")  # the suite's test_driver_oracle ran 100,000 sets already
  fi
  python3 scripts/reliability.py "$OUT/reliability" --seconds "$reliability" ${oracle[@]+"${oracle[@]}"} 2>&1 \
    | tee "$OUT/reliability.log"
  campaign=${PIPESTATUS[0]}
  echo "reliability campaign: exit $campaign"
fi
bench=0
if [ -n "${BENCH:-}" ]; then
  mkdir -p "$OUT/bench"
  python3 benchmarks/run.py "$OUT/bench" $([ "$BENCH" = quick ] && echo --quick) 2>&1 | tee "$OUT/bench/bench.log"
  bench=${PIPESTATUS[0]}
  [ "$bench" -eq 0 ] && python3 -m lab.bench_report "$OUT/bench/bench.json" \
    --markdown "$OUT/bench/BENCHMARKS.md" --plot "$OUT/bench/bandwidth.svg"
  echo "benchmarks: exit $bench"
fi
[ "$tests" -eq 0 ] && [ "$verify" -eq 0 ] && [ "$python_api" -eq 0 ] && [ "$campaign" -eq 0 ] && [ "$bench" -eq 0 ]
