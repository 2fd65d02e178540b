"""The verifier's expectations, on the CPU: the elements a TMA box holds (element strides, partly or
wholly outside the tensor) and tensors in padded memory, against plain loops."""

from __future__ import annotations

import itertools

import numpy as np

from tmagen.verify import _box_of, contiguous_strides, strided_span, strided_view


def _naive_box(host: np.ndarray, coords, box, steps):
    out = np.zeros((*box, host.shape[-1]), dtype=np.uint8)
    inside = np.zeros(tuple(box), dtype=bool)
    for k in itertools.product(*[range(b) for b in box]):
        idx = [c + e * i for c, e, i in zip(coords, steps, k)]
        if all(0 <= x < n for x, n in zip(idx, host.shape[:-1])):
            out[k] = host[tuple(idx)]
            inside[k] = True
    return out, inside


def test_box_of_matches_loops() -> None:
    rng = np.random.default_rng(3)
    for _ in range(300):
        rank = int(rng.integers(1, 5))
        shape = [int(rng.integers(1, 9)) for _ in range(rank)]
        es = int(rng.choice([1, 2, 4, 8]))
        host = rng.integers(0, 256, size=(*shape, es), dtype=np.uint8)
        box = [int(rng.integers(1, 7)) for _ in range(rank)]
        steps = [int(rng.integers(1, 4)) for _ in range(rank)]
        coords = [int(rng.integers(-8, 12)) for _ in range(rank)]
        got, inside = _box_of(host, coords, box, steps)
        want, want_inside = _naive_box(host, coords, box, steps)
        assert np.array_equal(inside, want_inside) and np.array_equal(got, want), (shape, box, steps, coords)


def test_strided_view_reads_padded_memory() -> None:
    shape, strides, es = [3, 4, 5], [48, 8, 1], 2
    memory = np.arange(strided_span(shape, strides) * es, dtype=np.int64).astype(np.uint8).reshape(-1, es)
    view = strided_view(memory, shape, strides)
    for i, j, k in itertools.product(range(3), range(4), range(5)):
        assert np.array_equal(view[i, j, k], memory[i * 48 + j * 8 + k])
    assert contiguous_strides([3, 4, 5]) == [20, 5, 1] and strided_span([3, 4, 5], [20, 5, 1]) == 60
