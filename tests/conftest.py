"""Shared test set-up: the repository root on sys.path (for runs without an install), and the
GPU marker's skip when no GPU and driver are present."""

from __future__ import annotations

import json
import os
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from tmagen.plan import resolve

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

HW_DATA = REPO / "tests" / "data" / "hw_h200"


def pythonpath_with_repo() -> str:
    """PYTHONPATH for a child Python: the repository first, then whatever this one was given."""
    return os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p)


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
            result = toolchain.compile_folder(resolve(spec), render(resolve(spec), f"specs/{spec.name}.json"), tc, cubin_only=True)
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
