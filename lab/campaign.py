"""The reliability campaign: random valid specs (`lab.fuzz`) built, compiled in batches and
verified bit for bit on the GPU within a time budget, with compute-sanitizer on a random sample of
their kernels and the driver oracle beside them. Writes OUT/reliability.json, the figures that
docs/reliability.md is written from (`lab.reliability`), and OUT/failures/, each failing spec
as a file `tmagen check`/`tmagen verify` read and as a case file that replays its runs.

Processes. This one orchestrates and holds no CUDA context. nvcc runs in a thread pool, one call
per batch: the batch's specs share one translation unit, which works because each spec lives in
its own namespace and its kernels are extern "C" with names of their own. GPU workers
(``python -m lab.campaign worker``) load a batch's cubin, run each spec's runs through
`tmagen.verify.Verifier` and report one line per run. A worker whose kernel hangs (its own
watchdog) or faults (a sticky CUDA error) reports it and exits; a new worker takes the rest of
the batch, so one bad kernel costs seconds, not the run.
"""

from __future__ import annotations

import json
import math
import os
import queue
import random
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from lab.fuzz import Case, OpsCall, draw_case, draw_ops_call, ops_expected, ops_view
from tmagen import __version__
from tmagen.limits import TARGETS
from tmagen.plan import resolve, tensor_maps
from tmagen.render import render
from tmagen.spec import Spec, parse_spec
from tmagen.toolchain import KernelResources, Toolchain, find_toolchain, parse_ptxas_report

RESULT_PREFIX = "TMAGEN-RESULT "  # worker lines; anything else on stdout (sanitizer reports) is not ours
EXIT_HANG, EXIT_FAULT = 4, 5
SANITIZER_TOOLS = ("memcheck", "racecheck", "synccheck")
FAILURE_FILES_PER_CLASS = 12
REPO = Path(__file__).resolve().parent.parent


# ----------------------------------------------------------------------------- batches
@dataclass
class Build:
    """One translation unit of several specs' kernels, compiled to one cubin."""

    names: list[str]
    cubin: Path
    kernels: list[KernelResources]


@dataclass
class Batch:
    number: int
    target: str
    cases: list[Case]
    builds: list[Build] = field(default_factory=list)
    refused: dict[str, str] = field(default_factory=dict)  # spec name -> what nvcc said
    compile_s: float = 0.0
    nvcc_calls: int = 0

    def cubin_of(self, name: str) -> Path | None:
        return next((b.cubin for b in self.builds if name in b.names), None)


def nvcc_command(tc: Toolchain, target: str, source: Path, cubin: Path, extra: Sequence[str] = ()) -> list[str]:
    """The flags `tmagen build --compile` uses for cubins, plus ``extra``."""
    return [str(tc.nvcc), "-std=c++17", "-O3", f"-gencode={TARGETS[target].gencode}", *extra,
            "-Xptxas", "-v", "-cubin", "-o", str(cubin), str(source)]


def write_sources(cases: Sequence[Case], folder: Path) -> dict[str, str]:
    """Each spec's device header and kernels, as `tmagen build` renders them; the specs that do not
    render, with why (a finding too: tmagen accepted them)."""
    folder.mkdir(parents=True, exist_ok=True)
    failed = {}
    for c in cases:
        try:
            files = render(resolve(parse_spec(c.spec)), f"{c.name}.json")
        except Exception as exc:  # noqa: BLE001 - reported as data
            failed[c.name] = f"rendering failed: {type(exc).__name__}: {exc}"[:3000]
            continue
        for rel in (f"{c.name}.cuh", f"{c.name}_kernels.cuh"):
            (folder / rel).write_text(files[rel], encoding="utf-8")
    return failed


def blame(message: str, names: Sequence[str]) -> set[str]:
    """The specs an nvcc or ptxas error names: by their headers' file names or their kernels' symbols."""
    found = set()
    for name in names:
        if (re.search(rf"\b{re.escape(name)}(_kernels)?\.cuh[(:]", message)
                or re.search(rf"'{re.escape(name)}_\w+'", message)):
            found.add(name)
    return found


def compile_batch(batch: Batch, folder: Path, tc: Toolchain, extra: Sequence[str] = ()) -> Batch:
    """Compiles the batch's specs in one nvcc call where they all compile. A refused spec is named by
    nvcc's messages, set aside with them, and the rest compiled again (halves where none is named)."""
    start = time.perf_counter()
    batch.refused.update(write_sources(batch.cases, folder))
    pending: list[list[str]] = [[c.name for c in batch.cases if c.name not in batch.refused]]
    while pending:
        names = pending.pop()
        if not names:
            continue
        unit = folder / f"unit{batch.nvcc_calls}.cu"
        unit.write_text("".join(f'#include "{n}_kernels.cuh"\n' for n in names), encoding="utf-8")
        cubin = unit.with_suffix(".cubin")
        run = subprocess.run(nvcc_command(tc, batch.target, unit, cubin, extra), capture_output=True, text=True)
        batch.nvcc_calls += 1
        report = run.stdout + run.stderr
        if run.returncode == 0:
            batch.builds.append(Build(names, cubin, parse_ptxas_report(report)))
            continue
        named = blame(report, names)
        if named:
            for n in named:
                batch.refused[n] = _lines_about(report, n)
            pending.append([n for n in names if n not in named])
        elif len(names) == 1:
            batch.refused[names[0]] = report.strip()[-3000:]
        else:
            half = len(names) // 2
            pending += [names[:half], names[half:]]
    batch.compile_s = time.perf_counter() - start
    return batch


def _lines_about(report: str, name: str) -> str:
    lines = report.splitlines()
    keep = [i for i, line in enumerate(lines) if name in line]
    out = []
    for i in keep[:6]:
        out += lines[i:i + 3]
    return "\n".join(out)[:3000]


# ----------------------------------------------------------------------------- the GPU worker
def _selected_runs(runs: Sequence[dict[str, Any]], select: str) -> list[int]:
    """All runs, or for each kernel (call and map) the run of the smallest tensor: once per kernel,
    cheaply, for compute-sanitizer."""
    if select == "all":
        return list(range(len(runs)))
    best: dict[tuple[str, str], int] = {}
    for k, run in enumerate(runs):
        key = (run["call"], str(run["args"].get("role", "")))
        size = math.prod(run["args"].get("shape") or [0])
        if key not in best or size < math.prod(runs[best[key]]["args"].get("shape") or [0]):
            best[key] = k
    return sorted(best.values())


def _watchdog_device(launch_timeout_s: float) -> Any:
    """The GPU, whose synchronize() gives up on a kernel after ``launch_timeout_s``: a hung kernel
    becomes a KernelHang instead of a campaign that never ends."""
    from tmagen import runtime

    class KernelHang(runtime.GpuError):
        pass

    class WatchdogDevice(runtime.Device):
        def synchronize(self) -> None:
            drv = runtime._driver()
            event = runtime.check(drv.cuEventCreate(0), "cuEventCreate")
            runtime.check(drv.cuEventRecord(event, 0), "cuEventRecord")
            deadline = time.monotonic() + launch_timeout_s
            while True:
                err, = drv.cuEventQuery(event)
                if err == drv.CUresult.CUDA_SUCCESS:
                    break
                if err != drv.CUresult.CUDA_ERROR_NOT_READY:
                    runtime.check((err,), "the kernel")
                if time.monotonic() > deadline:
                    raise KernelHang(f"the kernel ran for more than {launch_timeout_s:g} s (a hang: an mbarrier "
                                     "that never completes, or a loop that never ends)")
                time.sleep(0.0002)
            runtime.check(drv.cuEventDestroy(event), "cuEventDestroy")

    device = WatchdogDevice.open()
    device.hang_error = KernelHang  # type: ignore[attr-defined]
    return device


def _context_healthy() -> bool:
    from tmagen import runtime

    drv = runtime._driver()
    err, = drv.cuCtxSynchronize()
    return err == drv.CUresult.CUDA_SUCCESS


def run_job(job: dict[str, Any], device: Any, emit: Callable[[dict[str, Any]], None], select: str = "all") -> None:
    """Runs the job's cases on ``device``: one line before and one after each run. Exits the process
    on a hang or a fault, which leave the context unusable."""
    from tmagen import runtime
    from tmagen.verify import Verifier

    modules: dict[str, Any] = {}
    try:
        for case in job["cases"]:
            selected = _selected_runs(case["runs"], select)
            try:
                cubin = case["cubin"]
                if cubin not in modules:
                    modules[cubin] = runtime.Module(Path(cubin).read_bytes())
                spec = parse_spec(case["spec"])
                verifier = Verifier(resolve(spec), None, device, seed=case["data_seed"], module=modules[cubin])
            except Exception as exc:  # noqa: BLE001 - a spec whose kernels cannot even be loaded
                emit({"job": job["job"], "name": case["name"], "run": selected[0], "status": "error",
                      "detail": f"{type(exc).__name__}: {exc}"[:3000]})
                continue
            for k in selected:
                run = case["runs"][k]
                base = {"job": job["job"], "name": case["name"], "run": k}
                emit({**base, "start": True})
                try:
                    o = getattr(verifier, run["call"])(**run["args"])
                except device.hang_error as exc:
                    emit({**base, "status": "hang", "detail": str(exc)})
                    os._exit(EXIT_HANG)
                except Exception as exc:  # noqa: BLE001 - every failure is a finding, reported as data
                    healthy = _context_healthy()
                    emit({**base, "status": "error" if healthy else "fault",
                          "detail": f"{type(exc).__name__}: {exc}"[:3000]})
                    if not healthy:
                        os._exit(EXIT_FAULT)
                    continue
                emit({**base, "status": "match" if o.ok else "mismatch", "kernel": o.kernel, "shape": list(o.shape),
                      "detail": o.detail})
    finally:
        for m in modules.values():
            try:
                m.unload()
            except Exception:  # noqa: BLE001 - a dead context has nothing left to unload
                pass
    emit({"job": job["job"], "done": True})


def worker_main(argv: Sequence[str]) -> int:
    import argparse

    p = argparse.ArgumentParser(prog="python -m lab.campaign worker")
    p.add_argument("--job", help="run this job file and exit (default: jobs as JSON lines on standard input)")
    p.add_argument("--select", choices=["all", "smallest"], default="all")
    p.add_argument("--launch-timeout", type=float, default=5.0)
    args = p.parse_args(argv)

    def emit(record: dict[str, Any]) -> None:
        sys.stdout.write(RESULT_PREFIX + json.dumps(record) + "\n")
        sys.stdout.flush()

    from tmagen import runtime

    reason = runtime.no_gpu_reason()
    if reason:
        print(f"tmagen campaign worker: nothing run, {reason}", file=sys.stderr)
        return 3
    device = _watchdog_device(args.launch_timeout)
    emit({"ready": True, "device": {"name": device.name, "compute_capability": list(device.compute_capability),
                                    "multiprocessors": device.multiprocessors, "driver": device.driver_version}})
    if args.job:
        run_job(json.loads(Path(args.job).read_text()), device, emit, args.select)
        return 0
    for line in sys.stdin:
        if line.strip():
            run_job(json.loads(line), device, emit, args.select)
    return 0


def parse_result(line: str) -> dict[str, Any] | None:
    return json.loads(line[len(RESULT_PREFIX):]) if line.startswith(RESULT_PREFIX) else None


# ----------------------------------------------------------------------------- lanes: one worker each
class _Worker:
    """A started worker process and the lines it prints, read by a thread of its own."""

    def __init__(self, command: list[str], env: dict[str, str], log: Path) -> None:
        err = open(log, "a", encoding="utf-8")
        self.proc = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err, text=True,
                                     bufsize=1, env=env)
        err.close()
        self.lines: queue.Queue[str | None] = queue.Queue()
        lines, proc = self.lines, self.proc

        def read() -> None:
            assert proc.stdout is not None
            for line in proc.stdout:
                lines.put(line)
            lines.put(None)

        threading.Thread(target=read, daemon=True).start()

    def next(self, timeout: float) -> str | None:
        """The next line; None when the worker ended; "" when it said nothing for ``timeout``."""
        try:
            return self.lines.get(timeout=max(0.05, timeout))
        except queue.Empty:
            return ""

    def ready(self, deadline: float, silence_s: float) -> dict[str, Any] | None:
        """The device the worker opened, once it says it is ready; None if it ended or kept silent."""
        while True:
            line = self.next(min(silence_s, deadline - time.monotonic()))
            if not line:
                return None
            record = parse_result(line)
            if record and record.get("ready"):
                return record["device"]

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()


class Lane:
    """One GPU worker at a time, replaced after a hang, a fault or a crash by a spare that has already
    started (CUDA and Python take a second or two): a failing kernel costs its timeout, no more."""

    def __init__(self, command: list[str], env: dict[str, str], log: Path, silence_s: float) -> None:
        self.command, self.env, self.log, self.silence_s = command, env, log, silence_s
        self.worker: _Worker | None = None
        self.spare: _Worker | None = None
        self.device: dict[str, Any] | None = None
        self.restarts = 0
        self.broken = False  # a worker that could not start: this lane verifies nothing more

    @property
    def proc(self) -> subprocess.Popen[str] | None:
        return self.worker.proc if self.worker else None

    def _start(self, deadline: float) -> bool:
        worker, self.spare = self.spare or _Worker(self.command, self.env, self.log), None
        device = worker.ready(deadline, self.silence_s)
        if device is None:
            worker.stop()
            return False
        self.worker, self.device = worker, device
        self.spare = _Worker(self.command, self.env, self.log)
        return True

    def _next(self, deadline: float) -> str | None:
        """The worker's next line; None when it ended; "" when it was silent too long."""
        assert self.worker is not None
        return self.worker.next(min(self.silence_s, deadline - time.monotonic()))

    def stop(self, spare: bool = False) -> None:
        """Stops the worker (and the spare too, at the end)."""
        if self.worker is not None:
            self.worker.stop()
            self.worker = None
        if spare and self.spare is not None:
            self.spare.stop()
            self.spare = None

    def verify(self, job: dict[str, Any], deadline: float) -> dict[str, list[dict[str, Any]]]:
        """Runs ``job``; each case's run records. A case whose run hung, faulted or crashed the worker
        ends there; the cases after it go to a new worker. Cases not reached by ``deadline`` are absent."""
        results: dict[str, list[dict[str, Any]]] = defaultdict(list)
        complete: set[str] = set()  # cases whose runs all reported, or that ended in a failure
        remaining = list(job["cases"])
        while remaining and time.monotonic() < deadline:
            if self.proc is None or self.proc.poll() is not None:
                if not self._start(deadline):
                    self.broken = time.monotonic() < deadline
                    break
            assert self.proc is not None and self.proc.stdin is not None
            try:
                self.proc.stdin.write(json.dumps({**job, "cases": remaining}) + "\n")
                self.proc.stdin.flush()
            except (BrokenPipeError, OSError):
                self.stop()
                continue
            current: dict[str, Any] | None = None
            previous: str | None = None
            finished = False
            while True:
                line = self._next(deadline)
                if line == "" and time.monotonic() >= deadline:
                    self.stop()
                    # a case cut off by the budget is no finding, and not checked
                    return {name: runs for name, runs in results.items() if name in complete}
                if line == "" or line is None:
                    if current is not None:
                        why = (f"the worker said nothing for {self.silence_s:g} s (killed)" if line == ""
                               else f"the worker died (exit {self._exit_status()}): {self._log_tail()}")
                        results[current["name"]].append({**current, "status": "hang" if line == "" else "crash",
                                                          "detail": why})
                        complete.add(current["name"])
                    self.stop()
                    self.restarts += 1
                    break
                record = parse_result(line)
                if record is None or "job" not in record:
                    continue
                if record.get("done"):
                    finished = True
                    break
                if record.get("start"):
                    current = {k: record[k] for k in ("job", "name", "run")}
                    if previous is not None and previous != record["name"]:
                        complete.add(previous)
                    previous = record["name"]
                    continue
                results[record["name"]].append(record)
                previous = record["name"]
                current = None
                if record["status"] in ("hang", "fault"):
                    complete.add(record["name"])
                    # the worker exits: wait for its end of file, then go on
                    continue
            if finished:
                return results
            reached = set(results)
            complete.update(reached)  # what a worker that ended had reported is final: never run again
            last = max((i for i, c in enumerate(remaining) if c["name"] in reached), default=-1)
            if last < 0:  # the worker died before its first run: blame the first case, so that the batch moves on
                results[remaining[0]["name"]].append({"job": job["job"], "name": remaining[0]["name"], "run": 0,
                                                       "status": "crash", "detail": self._log_tail()})
                complete.add(remaining[0]["name"])
                last = 0
            remaining = remaining[last + 1:]
        return results

    def _exit_status(self) -> int | str:
        try:
            return self.proc.wait(timeout=10) if self.proc else "?"
        except subprocess.TimeoutExpired:
            return "none yet"

    def _log_tail(self) -> str:
        try:
            return self.log.read_text(encoding="utf-8", errors="replace")[-1500:]
        except OSError:
            return ""


# ----------------------------------------------------------------------------- the campaign
@dataclass
class Settings:
    out: Path
    seconds: float = 540.0
    seed: int = 0
    batch_size: int = 50
    jobs: int = max(2, (os.cpu_count() or 4) - 8)  # nvcc calls at once
    lanes: int = 4  # GPU workers at once (each with a spare)
    sanitize_kernels: int = 50
    oracle_sets: int = 100_000  # 0: none here
    oracle_figures: Path | None = None  # figures.json of a GPU test run that ran the oracle
    launch_timeout_s: float = 1.0  # the campaign's kernels take milliseconds: longer is a hang
    silence_s: float = 30.0  # a worker reports every run (milliseconds each): silence this long is a hang
    sanitizer_launch_timeout_s: float = 600.0
    margin_s: float = 15.0  # kept at the end for writing the report
    first_cycle_s: float = 20.0  # assumed compile + verify time of a batch until one is measured
    kinds: tuple[str, ...] | None = None
    max_specs: int | None = None  # stop drawing after this many (a smoke run); default: the budget decides
    worker_command: list[str] | None = None  # default: this Python, -m lab.campaign worker
    sanitizer: str | None = None  # compute-sanitizer's path; default: PATH


class Campaign:
    def __init__(self, settings: Settings) -> None:
        self.s = settings
        self.start = time.monotonic()
        self.deadline = self.start + settings.seconds - settings.margin_s
        self.lock = threading.Lock()
        self.batches: list[Batch] = []
        self.results: dict[str, list[dict[str, Any]]] = {}  # spec name -> run records
        self.cases: dict[str, Case] = {}
        self.verify_s: list[float] = []
        self.devices: list[dict[str, Any]] = []
        self.restarts = 0
        self.worker_start_failures: list[str] = []
        self.internal_errors: list[str] = []  # the campaign's own failures (never the kernels')
        self.work = Path(tempfile.mkdtemp(prefix="tmagen-campaign-"))
        self.env = {**os.environ, "PYTHONPATH": os.pathsep.join(
            p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p), "PYTHONUNBUFFERED": "1"}
        self.sanitizer_result: dict[str, Any] | None = None
        self.sanitizer_thread: threading.Thread | None = None

    # -- building
    def _build(self, number: int) -> list[Batch]:
        first = number * self.s.batch_size
        cases = []
        for i in range(first, first + self.s.batch_size):
            try:
                cases.append(draw_case(self.s.seed, i, self.s.kinds))
            except RuntimeError as exc:  # no valid spec in many candidates: the generator's fault
                self._internal_error(f"spec {i}: {exc}")
        out = []
        for target in sorted({c.target for c in cases}):
            batch = Batch(number, target, [c for c in cases if c.target == target])
            out.append(compile_batch(batch, self.work / f"batch{number}_{target}", self.tc))
        return out

    def _worker_command(self, *extra: str) -> list[str]:
        return [*(self.s.worker_command or [sys.executable, "-m", "lab.campaign", "worker"]), *extra]

    # -- verifying
    def _job(self, batch: Batch, cases: Sequence[Case]) -> dict[str, Any]:
        return {"job": f"batch{batch.number}", "cases": [
            {"name": c.name, "spec": c.spec, "runs": list(c.runs), "data_seed": data_seed(c),
             "cubin": str(batch.cubin_of(c.name))} for c in cases if batch.cubin_of(c.name) is not None]}

    def _lane_loop(self, number: int, ready: queue.Queue[Batch | None]) -> None:
        lane = Lane(self._worker_command("--launch-timeout", str(self.s.launch_timeout_s)), self.env,
                    self.s.out / "logs" / f"worker{number}.log", self.s.silence_s)
        try:
            while True:
                batch = ready.get()
                if batch is None or time.monotonic() >= self.deadline:
                    return
                t0 = time.monotonic()
                try:
                    results = lane.verify(self._job(batch, batch.cases), self.deadline)
                except Exception as exc:  # noqa: BLE001 - the campaign goes on; the report says so
                    self._internal_error(f"lane {number}, batch {batch.number}: {type(exc).__name__}: {exc}")
                    lane.stop()
                    continue
                with self.lock:
                    self.results.update(results)
                    if results:
                        self.verify_s.append(time.monotonic() - t0)
                    if lane.device and lane.device not in self.devices:
                        self.devices.append(lane.device)
                if lane.broken:
                    with self.lock:
                        self.worker_start_failures.append(lane._log_tail())
                    ready.put(batch)  # for a lane that works
                    return
                self._maybe_sanitize()
        finally:
            lane.stop(spare=True)
            with self.lock:
                self.restarts += lane.restarts

    def _internal_error(self, what: str) -> None:
        with self.lock:
            self.internal_errors.append(what[:2000])

    # -- compute-sanitizer on a sample
    def _maybe_sanitize(self) -> None:
        """Once enough kernels have matched, draws the sample and starts the sanitizer on it."""
        if self.s.sanitize_kernels <= 0 or self.sanitizer_thread is not None:
            return
        with self.lock:
            passed = [self.cases[n] for n in sorted(self.results) if _passed(self.results[n])]
            if self.sanitizer_thread is not None or sum(_kernel_count(c) for c in passed) < 3 * self.s.sanitize_kernels:
                return
            sample, kernels = [], 0
            for c in random.Random(self.s.seed).sample(passed, len(passed)):
                if kernels >= self.s.sanitize_kernels:
                    break
                sample.append(c)
                kernels += _kernel_count(c)
            self.sanitizer_thread = threading.Thread(target=self._sanitize_safely, args=(sample,), daemon=True)
            self.sanitizer_thread.start()

    def _sanitize_safely(self, sample: list[Case]) -> None:
        try:
            self._sanitize(sample)
        except Exception as exc:  # noqa: BLE001
            self._internal_error(f"sanitizer: {type(exc).__name__}: {exc}")

    def _sanitize(self, sample: list[Case]) -> None:
        tool_path = self.s.sanitizer or shutil.which("compute-sanitizer")
        result: dict[str, Any] = {"specs": [c.name for c in sample], "kernels": sum(_kernel_count(c) for c in sample),
                                  "tools": {}}
        self.sanitizer_result = result
        if tool_path is None:
            result["skipped"] = "no compute-sanitizer on PATH"
            return
        batch = compile_batch(Batch(-1, "sm_90a", sample), self.work / "sanitize", self.tc, ["-lineinfo"])
        job_file = self.work / "sanitize" / "job.json"
        job = self._job(batch, sample)
        job["job"] = "sanitize"
        job_file.write_text(json.dumps(job))
        result["compile_s"] = round(batch.compile_s, 2)
        if batch.refused or not batch.builds:
            result["skipped"] = f"the sample did not compile: {batch.refused}"
            return
        runs: dict[str, subprocess.Popen[str]] = {}
        started = time.monotonic()
        for tool in SANITIZER_TOOLS:
            log = open(self.s.out / "logs" / f"sanitizer-{tool}.log", "w", encoding="utf-8")
            runs[tool] = subprocess.Popen(
                [tool_path, "--tool", tool, "--error-exitcode", "99", "--print-limit", "50",
                 *self._worker_command("--job", str(job_file), "--select", "smallest",
                                       "--launch-timeout", str(self.s.sanitizer_launch_timeout_s))],
                stdout=log, stderr=subprocess.STDOUT, text=True, env=self.env)
            log.close()
        ended: dict[str, float] = {}
        while len(ended) < len(runs) and time.monotonic() < self.deadline:
            for tool, proc in runs.items():
                if tool not in ended and proc.poll() is not None:
                    ended[tool] = time.monotonic()
            time.sleep(0.2)
        for tool, proc in runs.items():
            timed_out = tool not in ended
            if timed_out:
                proc.kill()
                proc.wait()
            text = (self.s.out / "logs" / f"sanitizer-{tool}.log").read_text(encoding="utf-8", errors="replace")
            result["tools"][tool] = {**sanitizer_summary(text), "returncode": proc.returncode, "timed_out": timed_out,
                                     "seconds": round(ended.get(tool, time.monotonic()) - started, 1),
                                     "runs": _run_outcomes(text)}

    # -- the whole run
    def run(self) -> dict[str, Any]:
        (self.s.out / "logs").mkdir(parents=True, exist_ok=True)
        self.tc = find_toolchain()
        oracle = self._start_oracle()
        ready: queue.Queue[Batch | None] = queue.Queue()
        lanes = [threading.Thread(target=self._lane_loop, args=(i, ready), daemon=True) for i in range(self.s.lanes)]
        for t in lanes:
            t.start()
        pool = ThreadPoolExecutor(self.s.jobs)
        building: set[Future[list[Batch]]] = set()
        number = 0
        try:
            while True:
                cycle = self._cycle_estimate()
                while (len(building) < self.s.jobs and ready.qsize() < 2 * self.s.lanes
                       and time.monotonic() + cycle < self.deadline
                       and (self.s.max_specs is None or number * self.s.batch_size < self.s.max_specs)):
                    building.add(pool.submit(self._build, number))
                    number += 1
                with self.lock:
                    no_workers = len(self.worker_start_failures) >= self.s.lanes
                if no_workers:
                    break
                if not building:
                    drawn_all = self.s.max_specs is not None and number * self.s.batch_size >= self.s.max_specs
                    if drawn_all or time.monotonic() + cycle >= self.deadline:
                        break
                    time.sleep(0.2)
                    continue
                done, building = wait(building, timeout=0.5, return_when=FIRST_COMPLETED)
                for f in done:
                    try:
                        built = f.result()
                    except Exception as exc:  # noqa: BLE001 - one batch lost, not the run
                        self._internal_error(f"building a batch: {type(exc).__name__}: {exc}")
                        continue
                    for batch in built:
                        with self.lock:
                            self.batches.append(batch)
                            self.cases.update({c.name: c for c in batch.cases})
                        if TARGETS[batch.target].runs_here and batch.builds:
                            ready.put(batch)
        except Exception as exc:  # noqa: BLE001 - whatever happened, the report of what ran is written
            self._internal_error(f"the campaign stopped early: {type(exc).__name__}: {exc}")
        finally:
            pool.shutdown(wait=True, cancel_futures=True)
            for _ in lanes:
                ready.put(None)
        for t in lanes:
            t.join(timeout=max(1.0, self.deadline - time.monotonic() + 5))
        if self.sanitizer_thread is not None:
            self.sanitizer_thread.join(timeout=max(1.0, self.deadline - time.monotonic() + 10))
        oracle_figures = self._finish_oracle(oracle)
        report = self._report(oracle_figures)
        self._save_failures(report)
        (self.s.out / "reliability.json").write_text(json.dumps(report, indent=1, default=str) + "\n")
        shutil.rmtree(self.work, ignore_errors=True)
        return report

    def _cycle_estimate(self) -> float:
        """Seconds from submitting a batch to its verification: the slowest so far, or a first guess."""
        with self.lock:
            if not self.batches or not self.verify_s:
                return self.s.first_cycle_s
            return max(b.compile_s for b in self.batches) + max(self.verify_s)

    def _start_oracle(self) -> subprocess.Popen[str] | None:
        if self.s.oracle_figures is not None or self.s.oracle_sets <= 0:
            return None
        from lab.oracle import fresh_seed

        log = open(self.s.out / "logs" / "oracle.log", "w", encoding="utf-8")
        proc = subprocess.Popen([sys.executable, "-m", "lab.oracle", "--sets", str(self.s.oracle_sets),
                                 "--seed", str(fresh_seed()), "--out", str(self.s.out / "oracle.json")],
                                stdout=log, stderr=subprocess.STDOUT, text=True, env=self.env)
        log.close()
        return proc

    def _finish_oracle(self, proc: subprocess.Popen[str] | None) -> dict[str, Any] | None:
        if self.s.oracle_figures is not None:
            try:
                return json.loads(self.s.oracle_figures.read_text()).get("driver_oracle")
            except (OSError, ValueError):
                return None
        if proc is None:
            return None
        try:
            proc.wait(timeout=max(1.0, self.deadline - time.monotonic() + self.s.margin_s / 2))
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            return {"error": "the oracle did not finish in the budget"}
        try:
            return json.loads((self.s.out / "oracle.json").read_text())
        except (OSError, ValueError):
            return {"error": f"the oracle exited {proc.returncode} without figures (see logs/oracle.log)"}

    # -- the report
    def _report(self, oracle: dict[str, Any] | None) -> dict[str, Any]:
        with self.lock:
            batches, results, cases = list(self.batches), dict(self.results), dict(self.cases)
        refused = {name: msg for b in batches for name, msg in b.refused.items()}
        runnable = [c for c in cases.values() if TARGETS[c.target].runs_here]
        checked = [c for c in runnable if c.name in results or c.name in refused]
        compile_only = [c for c in cases.values() if not TARGETS[c.target].runs_here]
        failures = []
        for c in sorted([*checked, *compile_only], key=lambda c: c.index):
            if c.name in refused:
                failures.append(_failure(c, {"status": "compile", "detail": refused[c.name]}))
                continue
            failures += [_failure(c, r) for r in results.get(c.name, []) if r["status"] != "match"]
        failed_names = {f["name"] for f in failures}
        compile_only_refused = [c.name for c in compile_only if c.name in refused]
        generator_refusals: Counter[str] = Counter()
        for c in cases.values():
            generator_refusals.update(c.refused)
        spills = sorted(k.name for b in batches for build in b.builds for k in build.kernels if k.spills)
        return {
            "report": "tmagen reliability run", "tmagen": __version__,
            "date": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "gpu": self.devices[0] if self.devices else None, "nvcc": self.tc.version,
            "seed": self.s.seed, "budget_s": self.s.seconds, "elapsed_s": round(time.monotonic() - self.start, 1),
            "settings": {"batch_size": self.s.batch_size, "nvcc_jobs": self.s.jobs, "gpu_workers": self.s.lanes,
                         "launch_timeout_s": self.s.launch_timeout_s},
            "generator": {"specs": len(cases), "candidates": sum(c.attempts for c in cases.values()),
                          "refused_by_rule": dict(generator_refusals.most_common())},
            "specs": {"generated": len(cases), "checked": len(checked),
                      "passed": len([c for c in checked if c.name not in failed_names]),
                      "failed": len([c for c in checked if c.name in failed_names]),
                      "compiled_not_run": len(compile_only),
                      "compiled_not_run_refused_by_nvcc": compile_only_refused,
                      "not_reached": len(runnable) - len(checked)},
            "kernels": sum(_kernel_count(c) for c in checked if c.name not in refused),
            "runs": sum(len(results.get(c.name, [])) for c in checked),
            "by": _coverage(checked, failed_names),
            "compiled_not_run_by": _coverage(compile_only, set(compile_only_refused)),
            "failures": failures,
            "failure_classes": dict(Counter(f["status"] for f in failures)),
            "spills": spills,
            "timings": {
                "batches": len(batches), "nvcc_calls": sum(b.nvcc_calls for b in batches),
                "compile_s_median": _median([b.compile_s for b in batches]),
                "compile_s_max": round(max((b.compile_s for b in batches), default=0.0), 2),
                "compile_s_total": round(sum(b.compile_s for b in batches), 1),
                "verify_batch_s_median": _median(self.verify_s),
                "verify_s_total": round(sum(self.verify_s), 1),
                "worker_restarts": self.restarts,
            },
            "worker_start_failures": self.worker_start_failures,
            "internal_errors": self.internal_errors,
            "oracle": oracle,
            "sanitizer": self.sanitizer_result,
        }

    def _save_failures(self, report: dict[str, Any]) -> None:
        """Failing specs twice under OUT/failures/: NAME.json, which `tmagen check` and `tmagen verify`
        read (its description says what failed), and NAME.case.json, which `replay` runs. At most
        FAILURE_FILES_PER_CLASS of each kernel kind and failure class: a bug that fails thousands of
        specs needs a few to be fixed (the JSON lists them all; `draw_case(seed, index)` redraws any)."""
        folder = self.s.out / "failures"
        saved: Counter[tuple[str, str]] = Counter()
        for f in report["failures"]:
            c = self.cases[f["name"]]
            key = (c.kind, f["status"])
            if saved[key] >= FAILURE_FILES_PER_CLASS or (folder / f"{c.name}.json").exists():
                continue
            saved[key] += 1
            folder.mkdir(parents=True, exist_ok=True)
            what = f"{f['status']} in run {f.get('run', '-')}: {str(f.get('detail', ''))[:300]}"
            spec = {**c.spec, "description": f"reliability campaign seed {c.seed}, spec {c.index}: {what}"}
            (folder / f"{c.name}.json").write_text(json.dumps(spec, indent=1) + "\n")
            (folder / f"{c.name}.case.json").write_text(json.dumps(case_record(c, f), indent=1) + "\n")
            f["spec_file"] = f"failures/{c.name}.json"


def data_seed(c: Case) -> int:
    """The seed of a case's random data: fixed by the campaign's seed and the case's number."""
    return c.seed * (1 << 32) + c.index


def case_record(c: Case, failure: dict[str, Any] | None = None) -> dict[str, Any]:
    """Everything that replays a case: the spec, its runs and the seed of its data."""
    return {"seed": c.seed, "index": c.index, "data_seed": data_seed(c), "spec": c.spec, "runs": list(c.runs),
            "failure": failure}


def _failure(c: Case, record: dict[str, Any]) -> dict[str, Any]:
    run = c.runs[record["run"]] if "run" in record else None
    return {"name": c.name, "index": c.index, "kind": c.kind, "target": c.target, "status": record["status"],
            "run": record.get("run"), "call": run["call"] if run else None, "args": run["args"] if run else None,
            "detail": record.get("detail", "")}


def _passed(records: list[dict[str, Any]]) -> bool:
    return bool(records) and all(r["status"] == "match" for r in records)


def _kernel_count(c: Case) -> int:
    return len(c.spec["tensors"]) if c.kind == "inspect" else 1


def _coverage(cases: Sequence[Case], failed: set[str]) -> dict[str, dict[str, dict[str, int]]]:
    out: dict[str, dict[str, dict[str, int]]] = {}
    for c in cases:
        for dim, values in c.features().items():
            for value in sorted(set(values)):
                cell = out.setdefault(dim, {}).setdefault(value, {"specs": 0, "failed": 0})
                cell["specs"] += 1
                cell["failed"] += c.name in failed
    return {dim: dict(sorted(v.items(), key=lambda kv: (-kv[1]["specs"], kv[0]))) for dim, v in out.items()}


def _median(values: Sequence[float]) -> float:
    if not values:
        return 0.0
    s = sorted(values)
    mid = len(s) // 2
    return round(s[mid] if len(s) % 2 else (s[mid - 1] + s[mid]) / 2, 2)


_SUMMARY = re.compile(r"ERROR SUMMARY: (\d+) errors?")
_RACE = re.compile(r"RACECHECK SUMMARY: (\d+) hazards? displayed \((\d+) errors?, (\d+) warnings?\)")


def sanitizer_summary(text: str) -> dict[str, Any]:
    """compute-sanitizer's verdict from its output: errors (and racecheck's hazards); None where it
    printed no summary."""
    errors = [int(m.group(1)) for m in _SUMMARY.finditer(text)]
    races = [(int(m.group(1)), int(m.group(2)), int(m.group(3))) for m in _RACE.finditer(text)]
    if not errors and not races:
        return {"errors": None, "summary": None}
    total = sum(errors) + sum(r[1] for r in races)
    lines = [line.strip("= ").strip() for line in text.splitlines() if "SUMMARY" in line]
    out: dict[str, Any] = {"errors": total, "summary": lines[-3:]}
    if races:
        out["hazards"] = sum(r[0] for r in races)
        out["warnings"] = sum(r[2] for r in races)
    return out


def _run_outcomes(text: str) -> dict[str, int]:
    """How the worker's runs ended under the sanitizer (they must still match)."""
    counts: Counter[str] = Counter()
    for line in text.splitlines():
        record = parse_result(line) if line.startswith(RESULT_PREFIX) else None
        if record and "status" in record:
            counts[record["status"]] += 1
    return dict(counts)


# ----------------------------------------------------------------------------- replaying one case
def refused_at_run_time(spec: Spec, run: dict[str, Any]) -> list[str]:
    """The rules a copy run's own shape and strides break: the generated C API and the Python path
    refuse such a call (a finding made before a rule existed, fixed by the refusal)."""
    from dataclasses import replace

    from tmagen.map_args import SpecFieldNames, tensor_map_args
    from tmagen.rules import run_rules

    if run["call"] != "copy":
        return []
    found: list[str] = []
    for m in tensor_maps(spec):
        tensor = m.tensor.model_copy(update={"shape": list(run["args"]["shape"]),
                                             "strides": run["args"].get("strides")})
        found += [v.rule for v in run_rules(tensor_map_args(spec, replace(m, tensor=tensor)),
                                            SpecFieldNames(m.index, tensor.rank))]
    return sorted(set(found))


def replay(record: dict[str, Any], device: Any) -> list[Any]:
    """Compiles a case file's spec on its own (as `tmagen build --compile` does) and runs those of
    its runs that no rule refuses now, with its data seed: the outcomes, for a regression test."""
    from tmagen import toolchain
    from tmagen.verify import Verifier

    spec = parse_spec(record["spec"])
    plan = resolve(spec)
    result = toolchain.compile_folder(plan, render(plan, f"{spec.name}.json"), cubin_only=True)
    verifier = Verifier(plan, result.cubin.read_bytes(), device, seed=record["data_seed"])
    try:
        return [getattr(verifier, run["call"])(**run["args"]) for run in record["runs"]
                if not refused_at_run_time(spec, run)]
    finally:
        verifier.close()


# ----------------------------------------------------------------------------- tmagen.ops calls
def run_ops_call(call: OpsCall) -> dict[str, Any]:
    """One drawn tmagen.ops call on the GPU against PyTorch, bit for bit, on a poisoned output."""
    import torch

    import tmagen.ops

    dtype = getattr(torch, call.dtype)
    n = math.prod(call.base)
    raw = torch.randint(0, 256, ((n + call.offset) * call.itemsize,), dtype=torch.uint8, device="cuda",
                        generator=torch.Generator(device="cuda").manual_seed(call.offset + n))
    flat = raw.view(torch.bool) if dtype == torch.bool else raw.view(dtype)
    if dtype == torch.bool:
        raw.bitwise_and_(1)
    view = ops_view(call, flat[call.offset:].view(call.base))
    want = ops_expected(call, view).contiguous()
    record: dict[str, Any] = {"name": call.name, "classes": call.classes()}
    tmagen.ops._MOVES.clear()  # planned afresh: the routes this call takes are the cache's entries after it
    tmagen.ops._forget_replays()
    try:
        out = torch.empty(want.shape, dtype=want.dtype, device=want.device)  # contiguous, poisoned below
        (torch.view_as_real(out) if out.is_complex() else out).reshape(-1).view(torch.uint8).fill_(0xA5)
        if call.op == "permute":
            tmagen.ops.permute(view, call.dims, out=out)
            got = tmagen.ops.permute(view, call.dims)
        else:
            getattr(tmagen.ops, call.op)(view, out=out)
            got = getattr(tmagen.ops, call.op)(view)
        same = all(g.shape == want.shape and torch.equal(_bytes(g), _bytes(want)) for g in (out, got))
        record["ok"] = bool(same)
        record["classes"]["route"] = ",".join(sorted({m.how for m in tmagen.ops._MOVES.values()})) or "none"
    except Exception as exc:  # noqa: BLE001 - a refusal or a failure is a finding, recorded
        record.update(ok=False, error=f"{type(exc).__name__}: {str(exc)[:500]}")
    return record


def _bytes(t: Any) -> Any:
    import torch

    # a fresh 1-D copy: .contiguous() keeps any stride of an extent-1 dimension (a (1, 1) result
    # strided (1, 17) reshapes to stride 17), which cannot be viewed as bytes
    flat = t.new_empty(t.numel())
    flat.copy_(t.reshape(-1))
    if flat.is_complex():
        flat = torch.view_as_real(flat).reshape(-1)
    return flat.view(torch.uint8) if flat.numel() else flat


def run_ops_calls(seed: int, start: int, count: int) -> dict[str, Any]:
    """Draws ``count`` tmagen.ops calls from number ``start`` of ``seed`` and runs them: the tally per
    class and the failures (each replayed by its name's seed and number)."""
    records = [run_ops_call(draw_ops_call(seed, i)) for i in range(start, start + count)]
    tally: dict[str, Counter[str]] = defaultdict(Counter)
    for r in records:
        for key, value in r["classes"].items():
            tally[key][f"{value} {'ok' if r['ok'] else 'failed'}"] += 1
    return {"seed": seed, "start": start, "count": count, "passed": sum(r["ok"] for r in records),
            "classes": {k: dict(v) for k, v in tally.items()}, "failures": [r for r in records if not r["ok"]]}


def kernels_of(spec: dict[str, Any]) -> list[str]:
    """The kernel symbols a spec's batch must hold."""
    return [k.symbol for k in resolve(parse_spec(spec)).kernels]


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == ["worker"]:
        return worker_main(args[1:])
    if args[:1] == ["ops"]:  # python -m lab.campaign ops SEED COUNT [START]
        seed, count, start = int(args[1]), int(args[2]), int(args[3]) if len(args) > 3 else 0
        result = run_ops_calls(seed, start, count)
        print(json.dumps(result, indent=1))
        return 0 if result["passed"] == count else 1
    print("usage: python -m lab.campaign worker [--job FILE] [--select all|smallest] [--launch-timeout S]\n"
          "       python -m lab.campaign ops SEED COUNT [START]  (random tmagen.ops calls against PyTorch)\n"
          "(the campaign itself: scripts/reliability.py)", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
