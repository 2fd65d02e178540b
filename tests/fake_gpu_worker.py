"""A stand-in for `python -m lab.campaign worker` where there is no GPU: it speaks the worker's
protocol (a ready line, then for each run a start line and a result line) and misbehaves on the
cases named in FAKE_OUTCOMES ({"name": "mismatch" | "error" | "hang" | "silent" | "crash"}), as a
real worker does on a wrong kernel, a Python error, a kernel that never ends (seen by the worker's
watchdog, or by no one: "silent") and a worker that dies. With --job it runs one job file, as
compute-sanitizer's child."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from lab.campaign import EXIT_HANG, RESULT_PREFIX, _selected_runs  # noqa: E402

OUTCOMES = json.loads(os.environ.get("FAKE_OUTCOMES", "{}"))


def emit(record: dict) -> None:
    sys.stdout.write(RESULT_PREFIX + json.dumps(record) + "\n")
    sys.stdout.flush()


def run_job(job: dict, select: str) -> None:
    for case in job["cases"]:
        assert Path(case["cubin"]).stat().st_size > 0, case["cubin"]
        for k in _selected_runs(case["runs"], select):
            base = {"job": job["job"], "name": case["name"], "run": k}
            emit({**base, "start": True})
            behaviour = OUTCOMES.get(case["name"], "match") if k == len(case["runs"]) - 1 else "match"
            if behaviour == "hang":
                emit({**base, "status": "hang", "detail": "the kernel ran for more than 5 s"})
                os._exit(EXIT_HANG)
            if behaviour == "silent":
                time.sleep(3600)
            if behaviour == "crash":
                print("Segmentation fault (pretend)", file=sys.stderr, flush=True)
                os._exit(1)
            status = {"mismatch": "mismatch", "error": "error"}.get(behaviour, "match")
            emit({**base, "status": status, "kernel": "k", "shape": case["runs"][k]["args"].get("shape"),
                  "detail": "every element" if status == "match" else "3 of 9 elements differ"})
    emit({"job": job["job"], "done": True})


def main(argv: list[str]) -> int:
    select = argv[argv.index("--select") + 1] if "--select" in argv else "all"
    emit({"ready": True, "device": {"name": "Fake GPU", "compute_capability": [9, 0], "multiprocessors": 2,
                                    "driver": 13000}})
    if "--job" in argv:
        run_job(json.loads(Path(argv[argv.index("--job") + 1]).read_text()), select)
        return 0
    for line in sys.stdin:
        if line.strip():
            run_job(json.loads(line), select)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
