"""Timing generated kernels on the GPU against the limit of the same GPU and against peers.

Bandwidth counts bytes read plus bytes written. Two ways of timing:

* :func:`kernel_timing` and :func:`memcpy_timing`: one candidate at a time, the median of ``runs``
  launches (``tmagen bench SPEC``; needs only cuda-python).
* :func:`interleave`: the method of the benchmark suite (needs PyTorch for its events and its
  sleep kernel). Every candidate of one case is timed in one loop, A, B, C, then B, C, A, ...,
  each sample the CUDA events around one launch (or a batch of launches, for short ones), so
  that a slow moment of the GPU (clocks, a neighbour) falls on all candidates alike and the
  ratios stay honest; the loop runs several times (repetitions) and the spread of the
  repetitions' medians is the noise. Each round starts behind a sleep kernel long enough for the
  CPU to queue the whole round, so that no launch waits for Python and the events time the GPU
  alone.
"""

from __future__ import annotations

import itertools
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from tmagen import runtime
from tmagen.errors import SpecError
from tmagen.launch import Array, launch_parameters
from tmagen.plan import Plan

GIB = 1 << 30


@dataclass(frozen=True)
class Timing:
    name: str  # what was timed
    shape: tuple[int, ...]
    dtype: str
    bytes_moved: int  # read + written
    median_ms: float
    spread_ms: float  # max - min over the runs
    role: str = "tmagen"  # "tmagen", "peer" or "limit" (cudaMemcpyAsync)
    q1_ms: float | None = None  # first and third quartiles of the samples
    q3_ms: float | None = None
    rep_medians_ms: tuple[float, ...] = ()  # the median of each repetition of the interleaved loop
    flops: int = 0  # for a matmul: 2 M N K
    note: str = ""  # e.g. the configuration Triton's autotuner chose

    @property
    def gbps(self) -> float:
        return self.bytes_moved / (self.median_ms * 1e-3) / 1e9

    @property
    def tflops(self) -> float:
        return self.flops / (self.median_ms * 1e-3) / 1e12

    def as_dict(self) -> dict[str, Any]:
        d = {**asdict(self), "gbps": self.gbps}
        if self.flops:
            d["tflops"] = self.tflops
        return d


def median_ms(launch: Callable[[], None], runs: int = 20, warmup: int = 3) -> tuple[float, float]:
    for _ in range(warmup):
        launch()
    times = []
    for _ in range(runs):
        with runtime.Timer() as t:
            launch()
        times.append(t.ms)
    return statistics.median(times), max(times) - min(times)


def memcpy_timing(nbytes: int, runs: int = 20) -> Timing:
    """cudaMemcpyAsync device to device: the limit every ratio is taken to."""
    drv = runtime._driver()
    with runtime.Buffer(nbytes) as a, runtime.Buffer(nbytes) as b:
        a.fill(0x3C)

        def launch() -> None:
            runtime.check(drv.cuMemcpyDtoDAsync(b.ptr, a.ptr, nbytes, 0), "cuMemcpyDtoDAsync")

        ms, spread = median_ms(launch, runs)
    return Timing("cudaMemcpyAsync D2D", (nbytes,), "bytes", 2 * nbytes, ms, spread, role="limit")


def kernel_timing(plan: Plan, cubin: bytes, device: runtime.Device, shape: Sequence[int],
                  runs: int = 20, seed: int = 0) -> Timing:
    """The plan's copy or transpose kernel on a random contiguous tensor of ``shape``."""
    if plan.kind_name not in ("copy", "transpose") or plan.launcher is None:
        raise SpecError(plan.name, [f"kernel: the spec has {plan.description}, and bench times copy and "
                                    "transpose kernels (benchmarks/run.py times the matmul beside its peers)"])
    src_map = plan.map("src")
    shape = list(shape)
    nbytes = int(np.prod(shape)) * src_map.elem_bytes
    view = plan.kernel
    module = runtime.Module(cubin)
    try:
        kernel = module.function(view.symbol, view.smem_bytes)
        rng = np.random.default_rng(seed)
        with runtime.Buffer(nbytes) as src, runtime.Buffer(nbytes) as dst:
            src.upload(rng.integers(0, 256, size=nbytes, dtype=np.uint8))
            out_shape = plan.launcher.output_shape(plan, [tuple(shape)])
            call, params = launch_parameters(plan, [Array.of(src.ptr, shape)], Array.of(dst.ptr, out_shape),
                                             device.multiprocessors)
            ms, spread = median_ms(
                lambda: kernel.launch(call.grid, view.threads, params, dependent=view.dependent_launch), runs)
    finally:
        module.unload()
    return Timing(view.symbol, tuple(shape), src_map.dtype_name, 2 * nbytes, ms, spread)


# ----------------------------------------------------------------------------- the interleaved method
@dataclass
class Candidate:
    """One contender of a case. ``launch(i)`` queues one run on the default stream on buffer set
    ``i`` (cases that would fit in L2 rotate through several sets of inputs and outputs);
    ``check()`` runs it once and says what is wrong with its output, or None."""

    name: str
    role: str  # "tmagen", "peer" or "limit"
    launch: Callable[[int], object]
    check: Callable[[], str | None] | None = None
    note: Callable[[], str] = field(default=lambda: "")  # read after the first run (autotuned choices)


@dataclass
class Method:
    """How a case is timed; the report states it."""

    rounds: int = 20  # samples of each candidate per repetition
    repetitions: int = 5  # the loop, again: the spread of their medians is the noise
    warmup: int = 3  # launches of each candidate before timing


@dataclass
class Samples:
    """What :func:`interleave` measured: milliseconds per launch, per candidate, per repetition."""

    ms: list[list[list[float]]]
    retried_rounds: int  # rounds timed again because the CPU had not queued them in time
    sleep_us: float  # the sleep that led each round at the end
    late_rounds: int = 0  # rounds kept although still late after MAX_RETRIES (a launch that blocks the CPU)


# The sleep kernel counts clock cycles; this bound on the SM clock (H100 and H200 top out at
# 1.98 GHz) turns a duration into cycles that last at least that long.
SM_CLOCK_BOUND_HZ = 2.0e9
# A round queued later than its sleep is timed again behind a longer sleep, this many times at
# most: a launch that waits for the GPU (a synchronous copy, an allocation) is late whatever the
# sleep, and its rounds are then kept and counted as late.
MAX_RETRIES = 3
MIN_SLEEP_S, MAX_SLEEP_S = 50e-6, 0.05


def sleep_for(queue_s: float) -> float:
    """The sleep :func:`interleave` queues ahead of a round whose launches take ``queue_s`` to queue:
    twice that, within MIN_SLEEP_S and MAX_SLEEP_S."""
    return min(max(2 * queue_s, MIN_SLEEP_S), MAX_SLEEP_S)


def round_seconds(gpu_s: float, queue_s: float) -> float:
    """About how long :func:`interleave` takes over one round whose launches run ``gpu_s`` on the GPU
    and take ``queue_s`` to queue from Python (for budgets): the sleep that leads it (`sleep_for`),
    then the launches; a round queued past the longest sleep is tried 1 + MAX_RETRIES times."""
    sleep_s = sleep_for(queue_s)
    attempts = 1 + MAX_RETRIES if queue_s > MAX_SLEEP_S else 1
    return attempts * (max(sleep_s, queue_s) + gpu_s)


def interleave(launches: Sequence[Callable[[int], object]], method: Method, sets: int = 1,
               batch: int = 1) -> Samples:
    """Times ``launches`` in rotation: per round each once (or ``batch`` times between the same two
    events), the order rotated by one each round; ``method.rounds`` rounds per repetition."""
    import torch

    n = len(launches)
    counter = itertools.count()

    def queue(i: int) -> None:
        for _ in range(batch):
            launches[i](next(counter) % sets)

    for _ in range(method.warmup):
        for i in range(n):
            queue(i)
    torch.cuda.synchronize()
    began = time.perf_counter()
    for i in range(n):
        queue(i)
    sleep_s = sleep_for(time.perf_counter() - began)
    torch.cuda.synchronize()

    ms: list[list[list[float]]] = [[[] for _ in range(method.repetitions)] for _ in range(n)]
    retried = late = attempts = 0
    for rep in range(method.repetitions):
        r = 0
        while r < method.rounds:
            order = [(r + j) % n for j in range(n)]
            events = [torch.cuda.Event(enable_timing=True) for _ in range(n + 1)]
            began = time.perf_counter()
            torch.cuda._sleep(int(sleep_s * SM_CLOCK_BOUND_HZ))
            events[0].record()
            for j, i in enumerate(order):
                queue(i)
                events[j + 1].record()
            queued_s = time.perf_counter() - began
            events[-1].synchronize()
            if queued_s > sleep_s:  # the GPU may have waited for a launch
                if attempts < MAX_RETRIES:
                    retried += 1
                    attempts += 1
                    sleep_s = sleep_for(queued_s)  # queued_s > sleep_s >= MIN_SLEEP_S: twice it, up to the longest
                    continue
                late += 1
            attempts = 0
            for j, i in enumerate(order):
                ms[i][rep].append(events[j].elapsed_time(events[j + 1]) / batch)
            r += 1
    return Samples(ms, retried, sleep_s * 1e6, late)


def summarize(name: str, role: str, per_rep: list[list[float]], *, shape: Sequence[int], dtype: str,
              bytes_moved: int, flops: int = 0, note: str = "") -> Timing:
    """A candidate's samples (per repetition) as a Timing: the median and quartiles of all samples,
    the range, and each repetition's median."""
    flat = sorted(x for rep in per_rep for x in rep)
    q1, median, q3 = (float(np.percentile(flat, p)) for p in (25, 50, 75))
    return Timing(name, tuple(shape), dtype, bytes_moved, median, flat[-1] - flat[0], role=role, q1_ms=q1, q3_ms=q3,
                  rep_medians_ms=tuple(statistics.median(rep) for rep in per_rep), flops=flops, note=note)


def checked(candidates: Sequence[Candidate]) -> tuple[list[Candidate], list[dict[str, str]]]:
    """The candidates whose output is right, and for the others what was wrong: a wrong peer is
    never timed, let alone reported as fast."""
    good, failed = [], []
    for c in candidates:
        try:
            problem = c.check() if c.check else None
        except Exception as exc:  # noqa: BLE001 - a peer that cannot run is reported, not fatal
            problem = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"[:300]
        if problem is None:
            good.append(c)
        else:
            failed.append({"name": c.name, "role": c.role, "why": problem})
    return good, failed


def time_case(candidates: Sequence[Candidate], method: Method, *, shape: Sequence[int], dtype: str,
              bytes_moved: int, flops: int = 0, sets: int = 1, batch: int = 1) -> dict[str, Any]:
    """Checks every candidate, times those that pass in one interleaved loop, and returns the
    case's record (JSON-ready): the timings, the failures, and how the loop went."""
    good, failed = checked(candidates)
    samples = interleave([c.launch for c in good], method, sets, batch) if good else Samples([], 0, 0.0)
    timings = [summarize(c.name, c.role, per_rep, shape=shape, dtype=dtype, bytes_moved=bytes_moved, flops=flops,
                         note=c.note()) for c, per_rep in zip(good, samples.ms)]
    return {"shape": list(shape), "dtype": dtype, "sets": sets, "batch": batch,
            "candidates": [t.as_dict() for t in timings], "failed": failed,
            "retried_rounds": samples.retried_rounds, "late_rounds": samples.late_rounds,
            "sleep_us": round(samples.sleep_us, 1)}
