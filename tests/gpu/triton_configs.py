"""Triton peers pinned to one configuration each, for the GPU tests of the benchmark sections: no
autotuning and one compile per kernel, the lists put back afterwards."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any


def triton_peers() -> Any:
    """lab.triton_peers, or None without Triton."""
    try:
        from lab import triton_peers
    except ImportError:
        return None
    return triton_peers


@contextmanager
def pinned(pick: Callable[[Any], dict[Any, list[Any]]]) -> Iterator[None]:
    """Each kernel ``pick(lab.triton_peers)`` names keeps only the configurations given for it."""
    tp = triton_peers()
    if tp is None:
        yield
        return
    chosen = pick(tp)
    saved = {k: k.configs for k in chosen}
    for k, configs in chosen.items():
        k.configs = configs
        k.cache.clear()
    try:
        yield
    finally:
        for k, configs in saved.items():
            k.configs = configs
            k.cache.clear()
