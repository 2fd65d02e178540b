"""Why tmagen misses a target: the measurements docs/misses.md rests on, for tmagen and the peers
of a benchmark's matmul shape or ops case.

* ``clocks``: each candidate launched back to back for about 0.3 s (a window), windows interleaved
  over five rounds, while ``nvidia-smi`` samples the SM clock, board power and throttle reasons
  every 20 ms. A window's time per launch times its mean SM clock is the launch's length in
  cycles, which ncu counts too (``sm__cycles_active.avg``): where two kernels take the same cycles
  and one runs at a lower clock, the GPU held its power at the cap (throttle reason 0x4, SW power
  cap) and the kernel that draws more power per cycle got the lower clock. A benchmark's
  back-to-back launches run in that state; ncu's single replayed launch does not.
* ``once``: one launch of each candidate between ``cudaProfilerStart`` and ``Stop``, after three
  warm-up launches (autotuning and compiles included), for
  ``ncu --profile-from-start off --clock-control none``.
* ``writeback`` (ops cases): each candidate timed as the benchmark times it (queued behind a
  sleeping kernel, buffer sets rotated), back to back and with each launch after an eviction of
  the L2, which tells a kernel's cold start from the write-back its predecessor left.
* ``host`` (``ops`` alone): where the host time of a small ``tmagen.ops`` call goes, in parts and
  under cProfile.

Candidates, on the same tensors: ``bf16`` is tmagen.ops.matmul, cuBLAS (torch.matmul) and Triton's
persistent TMA matmul (and its pointer-tile one for M up to 256); ``fp8-fast`` is
tmagen.ops.matmul with ``use_fast_accum=True``, cuBLASLt's (torch._scaled_mm) and Triton's fp8
matmul, per-tensor scales; ``fp8-blocks`` is tmagen per tensor beside tmagen and cuBLASLt with
1 x 128 / 128 x 128 block scales; ``ops`` takes ops cases (``OP:DTYPE:SHAPE[:DIMS]``, as
``transpose:uint8:4099x4101`` or ``permute:bfloat16:8x256x256x16:0,3,1,2``, a contiguous input) and
launches tmagen.ops (with ``out=``), cudaMemcpyAsync of the same bytes and each Triton kernel the
ops benchmark times on that layout (`lab.ops_bench`).

    python -m lab.miss_probe clocks fp8-fast 1024x4096x65536 8192x8192x8192
    python -m lab.miss_probe once ops permute:bfloat16:8x256x256x16:0,3,1,2
    python -m lab.miss_probe host ops   # where a small tmagen.ops call's host time goes
    python -m lab.miss_probe writeback ops transpose:uint8:500000x48   # back to back, and after an eviction
    ncu --profile-from-start off --clock-control none --section SpeedOfLight -o rep \\
        python -m lab.miss_probe once bf16 1x14336x4096

The parsing and the windows' averages are pure (tested without a GPU); the rest needs PyTorch
and, for its peers, Triton.
"""

from __future__ import annotations

import argparse
import datetime
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

MODES = ("bf16", "fp8-fast", "fp8-blocks", "ops")
SAMPLE_MS = 20  # nvidia-smi's sampling period
WINDOW_S = 0.3  # launches back to back per window
SETTLE_S = 0.08  # a window's first samples are left out: the clock is still moving
ROUNDS = 5
SMI_QUERY = "timestamp,clocks.sm,power.draw,clocks_throttle_reasons.active"


@dataclass(frozen=True)
class Sample:
    """One nvidia-smi reading: when (seconds since the epoch), SM MHz, board watts, throttle reasons."""

    at: float
    sm_mhz: float
    watts: float
    reasons: str


@dataclass(frozen=True)
class Window:
    """One candidate's launches back to back: when they ran and their mean time per launch."""

    shape: str
    name: str
    start: float
    end: float
    us_per_launch: float


def parse_samples(lines: Sequence[str]) -> list[Sample]:
    """nvidia-smi's ``--format=csv,noheader,nounits`` lines of :data:`SMI_QUERY` (its timestamps in
    local time, as ``time.mktime`` reads them); lines it could not read (N/A, a header) are left out."""
    found = []
    for line in lines:
        parts = [p.strip() for p in line.split(",")]
        if len(parts) != 4:
            continue
        try:
            stamp = datetime.datetime.strptime(parts[0], "%Y/%m/%d %H:%M:%S.%f")
            found.append(Sample(time.mktime(stamp.timetuple()) + stamp.microsecond / 1e6, float(parts[1]),
                                float(parts[2]), parts[3]))
        except ValueError:
            continue
    return found


@dataclass(frozen=True)
class Steady:
    """A candidate's windows summed up: medians over its windows of the time per launch, the SM
    clock and the power; cycles per launch (time x clock), and every throttle reason seen."""

    us_per_launch: float
    sm_mhz: float
    watts: float
    reasons: tuple[str, ...]

    @property
    def kcycles(self) -> float:
        return self.us_per_launch * self.sm_mhz / 1e3


def steady(windows: Sequence[Window], samples: Sequence[Sample]) -> dict[tuple[str, str], Steady]:
    """Each (shape, candidate)'s :class:`Steady` from the samples inside its windows (past the first
    :data:`SETTLE_S`); a window without samples counts for its time alone."""
    grouped: dict[tuple[str, str], list[tuple[float, list[Sample]]]] = {}
    for w in windows:
        inside = [s for s in samples if w.start + SETTLE_S <= s.at <= w.end]
        grouped.setdefault((w.shape, w.name), []).append((w.us_per_launch, inside))
    result = {}
    for key, runs in grouped.items():
        clocks = [statistics.mean(s.sm_mhz for s in inside) for _, inside in runs if inside]
        watts = [statistics.mean(s.watts for s in inside) for _, inside in runs if inside]
        reasons = sorted({s.reasons for _, inside in runs for s in inside})
        result[key] = Steady(statistics.median(us for us, _ in runs),
                             statistics.median(clocks) if clocks else float("nan"),
                             statistics.median(watts) if watts else float("nan"), tuple(reasons))
    return result


def parse_shape(text: str) -> tuple[int, int, int]:
    """``MxNxK`` as three positive integers."""
    parts = text.lower().split("x")
    if len(parts) != 3 or not all(p.isdigit() and int(p) > 0 for p in parts):
        raise ValueError(f"shape {text!r}: expected MxNxK, three positive integers (1024x4096x4096)")
    m, n, k = (int(p) for p in parts)
    return m, n, k


def parse_ops_case(text: str) -> Any:
    """``OP:DTYPE:SHAPE[:DIMS]`` as a `lab.ops_bench.OpsCase` of a contiguous input (class "probe")."""
    from lab.ops_bench import ELEMENT_BYTES, OpsCase

    parts = text.split(":")
    fix = "expected OP:DTYPE:SHAPE[:DIMS], as transpose:uint8:4099x4101 or permute:bfloat16:8x256x256x16:0,3,1,2"
    if len(parts) not in (3, 4) or parts[0] not in ("copy", "transpose", "permute"):
        raise ValueError(f"ops case {text!r}: {fix}")
    op, dtype, shape_text = parts[:3]
    if dtype not in ELEMENT_BYTES:
        raise ValueError(f"ops case {text!r}: dtype {dtype!r} is none of {', '.join(ELEMENT_BYTES)}")
    extents = shape_text.lower().split("x")
    if not all(e.isdigit() and int(e) > 0 for e in extents) or len(extents) < (1 if op == "copy" else 2):
        raise ValueError(f"ops case {text!r}: shape {shape_text!r} is not positive extents joined by x; {fix}")
    shape = tuple(int(e) for e in extents)
    dims: tuple[int, ...] = ()
    if op == "permute":
        given = parts[3].split(",") if len(parts) == 4 else []
        if not all(d.isdigit() for d in given) or sorted(int(d) for d in given) != list(range(len(shape))):
            raise ValueError(f"ops case {text!r}: a permute needs DIMS, a permutation of 0..{len(shape) - 1}; {fix}")
        dims = tuple(int(d) for d in given)
    elif len(parts) == 4:
        raise ValueError(f"ops case {text!r}: only a permute takes DIMS")
    return OpsCase("probe", op, shape, dtype, dims)


def _parse(mode: str, text: str) -> Any:
    return parse_ops_case(text) if mode == "ops" else parse_shape(text)


# ----------------------------------------------------------------------------- on the GPU
def ops_set_launches(case: Any) -> tuple[int, dict[str, Callable[[int], Any]]]:
    """The launches of an ops case, each on buffer set ``i`` of as many as the ops benchmark rotates
    (so that no launch finds its input in L2): tmagen.ops, the memcpy of its bytes and the Triton
    kernels `lab.ops_bench` times on its layout, each as that benchmark makes it."""
    from lab import ops_bench, peers

    t = ops_bench.case_tensors(case)
    import tmagen.ops as ops

    memcpy = ops_bench._memcpy(t.xs, t.outs, t.nbytes)
    runs: dict[str, Callable[[int], Any]] = {
        f"tmagen.ops.{case.op}": lambda i: getattr(ops, case.op)(*ops_bench.op_args(case, t.ins[i]), out=t.outs[i]),
        "cudaMemcpyAsync": memcpy.launch}
    tp = peers._triton(True)
    if tp is not None:
        for layout in ops_bench.triton_layouts(case):
            each = [ops_bench._triton_launch(tp, layout, x, o) for x, o in zip(t.xs, t.outs)]
            runs[ops_bench.TRITON_NAMES[layout.kernel]] = _on_set(each)
    return t.sets, runs


def _on_set(each: Sequence[Callable[[], Any]]) -> Callable[[int], Any]:
    return lambda i: each[i]()


def _on_first(run: Callable[[int], Any]) -> Callable[[], Any]:
    return lambda: run(0)


def ops_candidates(case: Any) -> dict[str, Callable[[], Any]]:
    """The launches of an ops case on its first set of tensors (:func:`ops_set_launches`)."""
    _, runs = ops_set_launches(case)
    return {name: _on_first(run) for name, run in runs.items()}


def writeback(texts: Sequence[str], launches: int = 200, rounds: int = 5) -> dict[tuple[str, str], tuple[float, float]]:
    """Each candidate of each ops case timed two ways, interleaved over ``rounds``: back to back over
    the rotated buffer sets, as the benchmark times it (each launch meets the write-back its
    predecessor left in L2), and each launch just after a read of twice the L2 (which writes every
    dirty line back first), as ncu's flushed launch runs. Each series is queued behind a sleeping
    kernel longer than the host takes to queue it (as `tmagen.bench` queues), so that the figures are
    the GPU's and not the launch overhead's; a series the host queued too slowly is marked late.
    Median us per launch, both ways."""
    import torch

    from lab import peers
    from tmagen.bench import SM_CLOCK_BOUND_HZ

    evict = torch.ones(2 * peers.l2_bytes() // 4, device="cuda")

    def back_to_back(run: Callable[[int], Any], sets: int) -> Callable[[], Callable[[], float]]:
        def queue() -> Callable[[], float]:
            e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            e0.record()
            for j in range(launches):
                run(j % sets)
            e1.record()
            return lambda: e0.elapsed_time(e1) * 1e3 / launches
        return queue

    def after_eviction(run: Callable[[int], Any], sets: int) -> Callable[[], Callable[[], float]]:
        def queue() -> Callable[[], float]:
            pairs = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
                     for _ in range(launches // 4)]
            for j, (a, b) in enumerate(pairs):
                evict.max()
                a.record()
                run(j % sets)
                b.record()
            return lambda: statistics.median(a.elapsed_time(b) * 1e3 for a, b in pairs)
        return queue

    def timed(queue: Callable[[], Callable[[], float]], sleep_s: float) -> tuple[float, float, bool]:
        torch.cuda.synchronize()
        began = time.perf_counter()
        torch.cuda._sleep(int(sleep_s * SM_CLOCK_BOUND_HZ))
        read = queue()
        queued_s = time.perf_counter() - began
        torch.cuda.synchronize()
        return read(), queued_s, queued_s > sleep_s

    found: dict[tuple[str, str], tuple[list[float], list[float], list[bool]]] = {}
    for text in texts:
        sets, runs = ops_set_launches(parse_ops_case(text))
        series = {name: (back_to_back(run, sets), after_eviction(run, sets)) for name, run in runs.items()}
        sleeps = {name: [timed(q, 0.0)[1] * 2 + 1e-3 for q in both] for name, both in series.items()}  # a dry pass
        for _ in range(rounds):
            for name, both in series.items():
                ours, flushed, lates = found.setdefault((text, name), ([], [], []))
                for k, (queue, into) in enumerate(zip(both, (ours, flushed))):
                    us, queued_s, late = timed(queue, min(sleeps[name][k], 0.5))
                    into.append(us)
                    lates.append(late)
                    if late:
                        sleeps[name][k] = 2 * queued_s
    print(f"{'case':>40} {'candidate':>45} {'back to back us':>16} {'after eviction us':>18}")
    result = {}
    for (text, name), (ours, flushed, lates) in found.items():
        result[(text, name)] = (statistics.median(ours), statistics.median(flushed))
        print(f"{text:>40} {name:>45} {result[(text, name)][0]:16.2f} {result[(text, name)][1]:18.2f}"
              f"{'  (late ' + str(sum(lates)) + ')' if any(lates) else ''}", flush=True)
    return result


def candidates(mode: str, m: int, n: int, k: int) -> dict[str, Callable[[], Any]]:
    """The launches of ``mode`` on one set of tensors of M x N x K (A [M, K], B [N, K], both K-major),
    each made as the benchmark makes it (`lab.matmul_bench`, `lab.fp8_bench`)."""
    import torch

    from lab import fp8_bench, matmul_bench, triton_peers

    if mode == "ops":
        raise ValueError("ops cases go through ops_candidates")

    sms = torch.cuda.get_device_properties(0).multi_processor_count
    c = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
    if mode == "bf16":
        a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
        b = torch.randn(n, k, device="cuda", dtype=torch.bfloat16)
        tmagen = matmul_bench.tmagen_ops()
        runs = {"tmagen": lambda: tmagen(a, b, c), "cuBLAS": lambda: torch.matmul(a, b.T, out=c),
                "Triton TMA": lambda: triton_peers.matmul(a, b, c, sms)}
        if m <= 256:
            runs["Triton pointer tiles"] = lambda: triton_peers.matmul_pointer(a, b, c)
        return runs
    a8 = torch.randn(m, k, device="cuda").to(torch.float8_e4m3fn)
    b8 = torch.randn(n, k, device="cuda").to(torch.float8_e4m3fn)
    one = torch.ones((), device="cuda")
    if mode == "fp8-fast":
        return {"tmagen fast": lambda: fp8_bench.tmagen_ops_fast(a8, b8, one, one, c),
                "cuBLASLt fast": lambda: fp8_bench.scaled_mm_fast(a8, b8, one, one, c),
                "Triton": lambda: triton_peers.matmul_fp8(a8, b8, one, one, c, sms)}
    sa = torch.rand(m, -(-k // 128), device="cuda") + 0.5
    sb = torch.rand(-(-n // 128), -(-k // 128), device="cuda") + 0.5  # B's blocks; both libraries take sb.t()
    sa_m_major = sa.t().contiguous().t()  # torch._scaled_mm's required layout
    return {"tmagen per tensor": lambda: fp8_bench.tmagen_ops(a8, b8, one, one, c),
            "tmagen blocks": lambda: fp8_bench.tmagen_ops(a8, b8, sa, sb.t(), c),
            "cuBLASLt blocks": lambda: fp8_bench.scaled_mm(a8, b8, sa_m_major, sb.t(), c)}


def _runs(mode: str, text: str) -> dict[str, Callable[[], Any]]:
    return ops_candidates(parse_ops_case(text)) if mode == "ops" else candidates(mode, *parse_shape(text))


def _warm(runs: dict[str, Callable[[], Any]]) -> None:
    import torch

    for _ in range(3):
        for run in runs.values():
            run()
    torch.cuda.synchronize()


def once(mode: str, shapes: Sequence[str]) -> None:
    """One profiled launch of each candidate per shape (see the module's notes)."""
    import torch

    for text in shapes:
        runs = _runs(mode, text)
        _warm(runs)
        print(f"{text}: launches in order {list(runs)}", flush=True)
        torch.cuda.profiler.start()
        for run in runs.values():
            run()
        torch.cuda.synchronize()
        torch.cuda.profiler.stop()


def clocks(mode: str, shapes: Sequence[str]) -> dict[tuple[str, str], Steady]:
    """Every candidate's :class:`Steady` per shape (see the module's notes), printed as a table."""
    import torch

    with tempfile.NamedTemporaryFile("w+", suffix=".csv") as log:
        smi = subprocess.Popen(["nvidia-smi", f"--query-gpu={SMI_QUERY}", "--format=csv,noheader,nounits",
                                "-lms", str(SAMPLE_MS)], stdout=log)
        windows = []
        try:
            time.sleep(1.0)
            for text in shapes:
                runs = _runs(mode, text)
                _warm(runs)
                first = next(iter(runs.values()))
                began = time.time()
                for _ in range(20):
                    first()
                torch.cuda.synchronize()
                count = max(20, int(WINDOW_S / ((time.time() - began) / 20)))
                for _ in range(ROUNDS):
                    for name, run in runs.items():
                        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                        torch.cuda.synchronize()
                        start = time.time()
                        e0.record()
                        for _ in range(count):
                            run()
                        e1.record()
                        torch.cuda.synchronize()
                        windows.append(Window(text, name, start, time.time(), e0.elapsed_time(e1) / count * 1e3))
            time.sleep(0.1)
        finally:
            smi.terminate()
            smi.wait()
        log.seek(0)
        found = steady(windows, parse_samples(log.read().splitlines()))
    print(f"{'shape':>18} {'candidate':>22} {'us/launch':>10} {'SM MHz':>7} {'W':>5} {'kcycles':>8}  throttle")
    for (text, name), s in found.items():
        print(f"{text:>18} {name:>22} {s.us_per_launch:10.1f} {s.sm_mhz:7.0f} {s.watts:5.0f} {s.kcycles:8.0f}  "
              f"{' '.join(s.reasons)}", flush=True)
    return found


def host(rounds: int = 5, calls: int = 4000, profiled: int = 20000) -> dict[str, float]:
    """Where the host time of a small ``tmagen.ops`` call goes: on a 64 x 64 float32 tensor, the
    calls below timed by `lab.ops_bench.host_us` (``rounds`` figures of ``calls`` calls each; the best
    returned, in us), then ``tmagen.ops.copy(x)`` ``profiled`` times under cProfile (the functions
    by their own time)."""
    import cProfile
    import io
    import pstats

    import torch

    import tmagen.ops as ops
    from lab import ops_bench

    x = torch.randn(64, 64, device="cuda")
    o = torch.empty_like(x)
    runs: dict[str, Callable[[], Any]] = {
        "tmagen.ops.copy(x)": lambda: ops.copy(x), "tmagen.ops.copy(x, out=o)": lambda: ops.copy(x, out=o),
        "torch x.clone()": lambda: x.clone(), "torch.empty_like(x)": lambda: torch.empty_like(x),
        "tmagen.ops.transpose(x)": lambda: ops.transpose(x),
        "torch x.transpose(-2,-1).contiguous()": lambda: x.transpose(-2, -1).contiguous()}
    best: dict[str, float] = {}
    for name, times in ops_bench.host_us(runs, rounds, calls, warmup=200).items():
        best[name] = min(times)
        print(f"{name:40s} best {min(times):6.2f} us  median {statistics.median(times):6.2f} us", flush=True)
    profile = cProfile.Profile()
    profile.enable()
    for _ in range(profiled):
        ops.copy(x)
    profile.disable()
    torch.cuda.synchronize()
    text = io.StringIO()
    pstats.Stats(profile, stream=text).sort_stats("tottime").print_stats(15)
    print(text.getvalue(), flush=True)
    return best


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m lab.miss_probe", description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("what", choices=("clocks", "once", "host", "writeback"))
    parser.add_argument("mode", choices=MODES)
    parser.add_argument("shapes", nargs="*", help="MxNxK, or an ops case OP:DTYPE:SHAPE[:DIMS]")
    args = parser.parse_args(argv)
    if args.what == "host":
        if args.mode != "ops" or args.shapes:
            print("error: host takes the mode ops and no shapes (python -m lab.miss_probe host ops)", file=sys.stderr)
            return 2
        host()
        return 0
    if not args.shapes:
        print(f"error: {args.what} needs at least one shape or case", file=sys.stderr)
        return 2
    if args.what == "writeback" and args.mode != "ops":
        print("error: writeback takes ops cases (python -m lab.miss_probe writeback ops CASE...)", file=sys.stderr)
        return 2
    try:
        for text in args.shapes:
            _parse(args.mode, text)
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    if args.what == "writeback":
        writeback(args.shapes)
    else:
        (clocks if args.what == "clocks" else once)(args.mode, args.shapes)
    return 0


if __name__ == "__main__":
    sys.exit(main())
