"""Shared test set-up: the repository root on sys.path (for runs without an install), the GPU
marker's skip when no GPU and driver are present, one compile cache for the session, and the
example specs compiled by nvcc in the background while the other tests run."""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from tmagen.plan import resolve

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

HW_DATA = REPO / "tests" / "data" / "hw_h200"
EXAMPLES = sorted((REPO / "specs").glob("*.json"))


def pythonpath_with_repo() -> str:
    """PYTHONPATH for a child Python: the repository first, then whatever this one was given."""
    return os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p)


# ----------------------------------------------------------------------------- compiling once
@pytest.fixture(scope="session", autouse=True)
def session_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The compile cache (TMAGEN_CACHE: nvcc and NVRTC products) of this session, for this process and
    its children: the suite starts cold as CI does, never reads or fills ~/.cache/tmagen, and what
    several tests compile is compiled once. Tests of the cache itself still point it elsewhere."""
    folder = tmp_path_factory.mktemp("tmagen-cache")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TMAGEN_CACHE", str(folder))
        yield folder


_PREWARM = """
import json, os, sys
from concurrent.futures import ThreadPoolExecutor
from tmagen import build, toolchain
out, paths = sys.argv[1], sys.argv[2:]
try:
    tc = toolchain.find_toolchain()
except toolchain.ToolchainError as exc:
    json.dump({"error": str(exc)}, open(out, "w"))
    sys.exit(0)
def one(path):
    rendered = build.render_spec_file(path)
    r = toolchain.compile_folder(rendered.plan, rendered.files, tc)
    return rendered.spec.name, {"cached": r.cached, "cubin": str(r.cubin), "sass": r.sass}
with ThreadPoolExecutor(max_workers=max(1, (os.cpu_count() or 2) - 1)) as pool:
    json.dump(dict(pool.map(one, paths)), open(out, "w"))
"""


class ExampleBuilds:
    """`toolchain.compile_folder` (cubin, PTX and shared library: three nvcc runs) of every example spec,
    as `tmagen build --compile` renders it, into the session's cache, by a child process started when
    the session starts: nvcc runs on a core of its own while the CPU tests run, and the tests that need
    the products find them compiled (``results()`` waits for the child: what it compiled, and whether
    it found anything in the cache, by spec name)."""

    def __init__(self, cache: Path, out: Path) -> None:
        self.out = out
        env = {**os.environ, "TMAGEN_CACHE": str(cache), "PYTHONPATH": pythonpath_with_repo()}
        self.proc = subprocess.Popen([sys.executable, "-c", _PREWARM, str(out),
                                      *(p.relative_to(REPO).as_posix() for p in EXAMPLES)],
                                     cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        self._results: dict[str, Any] | None = None

    def results(self) -> dict[str, Any]:
        if self._results is None:
            _, err = self.proc.communicate()
            if self.proc.returncode != 0:
                raise RuntimeError(f"compiling the example specs failed:\n{err[-4000:]}")
            self._results = json.loads(self.out.read_text())
        return self._results

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.communicate()


_EXAMPLE_BUILDS: list[ExampleBuilds] = []


@pytest.fixture(scope="session", autouse=True)
def _start_example_builds(session_cache: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    # Under pytest-xdist every worker would compile them all: there the first test that asks starts them.
    if "PYTEST_XDIST_WORKER" not in os.environ:
        _EXAMPLE_BUILDS.append(ExampleBuilds(session_cache, tmp_path_factory.mktemp("examples") / "built.json"))
    yield
    for builds in _EXAMPLE_BUILDS:
        builds.stop()


@pytest.fixture(scope="session")
def example_builds(session_cache: Path, tmp_path_factory: pytest.TempPathFactory) -> ExampleBuilds:
    if not _EXAMPLE_BUILDS:
        _EXAMPLE_BUILDS.append(ExampleBuilds(session_cache, tmp_path_factory.mktemp("examples") / "built.json"))
    return _EXAMPLE_BUILDS[0]


def _gpu_reason() -> str | None:
    try:
        from cuda.bindings import driver
    except ImportError as exc:
        return f"cuda-bindings not importable ({exc})"
    try:
        err, = driver.cuInit(0)
    except Exception as exc:  # noqa: BLE001 - no libcuda at all
        return f"no CUDA driver ({exc})"
    if err != driver.CUresult.CUDA_SUCCESS:
        return f"no usable GPU (cuInit returned {err.name})"
    return None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # The tests that read the example specs' background compile run after the other CPU tests, by when
    # the child process has compiled them (nvcc on the second core while the first runs the suite).
    waits = [i for i in items if "example_builds" in getattr(i, "fixturenames", ()) and "gpu" not in i.keywords]
    if waits:
        rest = [i for i in items if i not in waits]
        last_cpu = max((k for k, i in enumerate(rest) if "gpu" not in i.keywords), default=-1)
        items[:] = rest[:last_cpu + 1] + waits + rest[last_cpu + 1:]
    if not any("gpu" in item.keywords for item in items):
        return
    reason = _gpu_reason()
    if reason:
        skip = pytest.mark.skip(reason=f"GPU test: {reason}")
        for item in items:
            if "gpu" in item.keywords:
                item.add_marker(skip)


# ----------------------------------------------------------------------------- the GPU suite
@pytest.fixture(scope="session")
def device() -> Any:
    from tmagen import runtime

    dev = runtime.Device.open()
    if dev.compute_capability != (9, 0):
        pytest.skip(f"the GPU suite needs compute capability 9.0, this is {dev.compute_capability}")
    return dev


@pytest.fixture(scope="session")
def compiler() -> Any:
    """compile(list of spec dicts) -> {name: (Spec, cubin bytes)}, compiled in parallel."""
    from tmagen import toolchain
    from tmagen.render import render
    from tmagen.spec import parse_spec

    tc = toolchain.find_toolchain()

    def compile_all(raw: list[dict]) -> dict[str, tuple[Any, bytes]]:
        def one(data: dict) -> tuple[str, tuple[Any, bytes]]:
            spec = parse_spec(data)
            plan = resolve(spec)
            result = toolchain.compile_folder(plan, render(plan, f"specs/{spec.name}.json"), tc, cubin_only=True)
            return spec.name, (spec, result.cubin.read_bytes())

        with ThreadPoolExecutor(max_workers=os.cpu_count() or 4) as pool:
            return dict(pool.map(one, raw))

    return compile_all


@pytest.fixture(scope="session")
def report() -> Any:
    """report(name, data): records figures under ``name`` in TMAGEN_REPORT_DIR/figures.json when
    that variable is set (scripts/gpu_check.sh sets it)."""
    folder = os.environ.get("TMAGEN_REPORT_DIR")

    def write(name: str, data: object) -> None:
        if folder:
            path = Path(folder) / "figures.json"
            path.parent.mkdir(parents=True, exist_ok=True)
            figures = json.loads(path.read_text()) if path.exists() else {}
            figures[name] = data
            path.write_text(json.dumps(figures, indent=1, default=str))

    return write


def per_call_us(fn: Callable[[], Any], calls: int = 2000, repeats: int = 7) -> float:
    """Median over ``repeats`` of the wall time per call of back-to-back calls on the GPU (nothing
    waits): the host-time tests' clock."""
    import torch

    for _ in range(50):
        fn()
    times = []
    for _ in range(repeats):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        times.append((time.perf_counter() - t0) / calls * 1e6)
        torch.cuda.synchronize()
    return statistics.median(times)
