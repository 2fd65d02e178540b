"""Shared test set-up: the repository root on sys.path (for runs without an install), and the
GPU marker's skip when no GPU and driver are present."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

HW_DATA = REPO / "tests" / "data" / "hw_h200"


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
