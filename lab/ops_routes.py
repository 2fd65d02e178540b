"""Every route tmagen.ops could take for a move, timed beside the peers: what the size thresholds
of tmagen/ops_table.json are set from (tests/test_ops_routes.py replays the measurement against the
shipped table). For each case, the shipped route ("default") and the routes the planner takes with
one knob forced (the tile kernel, the plane kernel, the TMA kernels in their tuned and smallest
tiles, no tile kernel), each launched on a move planned once, beside memcpy, PyTorch and the Triton
kernels of the ops section (lab.ops_bench), with the suite's method (tmagen.bench.time_case:
interleaved, sleep-queued, several launches a sample where one is short). Needs PyTorch and a GPU.

    python -m lab.ops_routes OUT.json                  # every case
    python -m lab.ops_routes OUT.json --max-mib 64     # the cases of at most 64 MiB
    python -m lab.ops_routes OUT.json --sides 4=64     # the tile kernel in other sides (a probe)
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lab.ops_bench import OpsCase

EVERY = 1 << 62
_NCHW, _NHWC, _BSHD = (0, 2, 3, 1), (0, 3, 1, 2), (0, 2, 1, 3)
C = OpsCase
CASES = [  # OpsCase(class, op, shape, dtype, dims, view)
    C("small", "transpose", (64, 64), "float32"), C("small", "transpose", (128, 128), "float32"),
    C("small", "transpose", (256, 256), "float32"), C("small", "transpose", (512, 512), "float32"),
    C("small", "transpose", (1024, 1024), "float32"), C("small", "transpose", (512, 512), "bfloat16"),
    C("small", "transpose", (1024, 1024), "bfloat16"), C("small", "transpose", (1024, 2048), "bfloat16"),
    C("small", "transpose", (1024, 1024), "uint8"), C("small", "transpose", (2048, 2048), "uint8"),
    C("small", "transpose", (256, 256), "float64"), C("small", "transpose", (512, 512), "float64"),
    C("small", "transpose", (512, 512), "complex128"), C("small", "transpose", (4, 256, 256), "float32"),
    C("small", "permute", (2, 64, 32, 32), "bfloat16", _NCHW),
    C("small", "permute", (4, 256, 8, 64), "bfloat16", _BSHD),
    C("small", "permute", (8, 128, 16, 64), "float16", _BSHD),
    C("odd_rows", "transpose", (777, 1032), "float16"), C("odd_rows", "transpose", (16385, 8), "bfloat16"),
    C("odd_rows", "transpose", (1000, 1000), "float32"), C("odd_rows", "transpose", (4099, 4101), "uint8"),
    C("odd_rows", "transpose", (3000, 3001), "bfloat16"),
    C("mid", "transpose", (2048, 2048), "float32"), C("mid", "transpose", (4096, 4096), "bfloat16"),
    C("mid", "permute", (8, 512, 16, 64), "bfloat16", _BSHD),
    C("odd_rows", "transpose", (8192, 1001), "float32"), C("odd_rows", "permute", (64, 512, 512, 8), "uint8", _NHWC),
    C("views", "transpose", (8192, 8193), "float32", (), "[:, 1:]"),
    C("views", "copy", (8192, 8192), "float32", (), "mT"),
    C("ragged", "transpose", (12000, 9000), "float32"), C("large", "transpose", (8192, 16384), "float64"),
]
_OFF = {"gather_max_bytes": 0, "gather_max_bytes_transposed": 0}
_NO_TILE = {"tile_max_bytes": 0, "tile_max_bytes_strided": 0}
_ANY_TMA = {"tma_min_plane": 1, "tma_min_row_bytes": 16, "narrow_words": 0}
VARIANTS: dict[str, dict[str, int]] = {  # the knobs each forced route sets in every class
    "tile": {**_OFF, "tile_max_bytes": EVERY, "tile_max_bytes_strided": EVERY},
    "notile": _NO_TILE,
    "plane": {**_OFF, **_NO_TILE, "tma_min_plane": 1 << 40, "tma_min_row_bytes": 1 << 40, "narrow_max_bytes": 0,
              "narrow_words": 0},
    "narrow": {**_OFF, **_NO_TILE, "tma_min_plane": 1 << 40, "tma_min_row_bytes": 1 << 40, "narrow_max_bytes": EVERY},
    "words": {**_OFF, **_NO_TILE, "tma_min_plane": 1 << 40, "tma_min_row_bytes": 1 << 40, "narrow_max_bytes": 0,
              "narrow_words": 1},
    "tma_tuned": {**_OFF, **_NO_TILE, **_ANY_TMA, "tma_tiles_per_sm": 0},
    "tma_small": {**_OFF, **_NO_TILE, **_ANY_TMA, "tma_tiles_per_sm": 1 << 30},
    "tma_mid": {**_OFF, **_NO_TILE, **_ANY_TMA, "tma_tiles_per_sm": 8},
}


def label(move: Any) -> str:
    """A route as the record names it: the kernel, the TMA tile where not the tuned one, and whether
    the narrow kernel moves words ("narrow(words)") or bytes."""
    words = "(words)" if move.how == "narrow" and move.strided.src_words else ""
    return f"{move.how}{words}{'' if move.tile is None else tuple(move.tile)}"


def plan_with(table: dict[str, Any], knobs: dict[str, int], shape: Any, src: Any, dst: Any, itemsize: int,
              src_align: int, dst_align: int, sms: int) -> Any:
    """tmagen.ops.plan_move on this layout with ``knobs`` set in every class of ``table``."""
    import tmagen.ops as ops

    classes = {name: {**config, **knobs} for name, config in table["classes"].items()}
    shipped = ops.table
    ops.table = lambda: {**table, "classes": classes}  # type: ignore[assignment]
    try:
        return ops.plan_move(shape, src, dst, itemsize, src_align, dst_align, sms)
    finally:
        ops.table = shipped


def _captured_views(case: OpsCase, x: Any, out: Any) -> tuple[Any, Any]:
    """The source and output views tmagen.ops moves for the case (its eager path, the move caught)."""
    import tmagen.ops as ops
    from lab.ops_bench import op_args

    got = []
    move = ops.move
    ops.move = lambda call, s, d: got.append((s, d))  # type: ignore[assignment]
    try:
        getattr(ops, f"{case.op}_eager")(*op_args(case, x), out=out)
    finally:
        ops.move = move
    return got[0]


@dataclass
class RouteTimer:
    """One case on the GPU, its routes timed beside each other: its tensors (``t``) and the views
    tmagen.ops moves for each buffer set, its layout as `plan_move` sees it (``layout``), the routes
    added so far by label (``routes``; "default" the shipped call's) and their candidates."""

    case: OpsCase
    t: Any
    views: list[tuple[Any, Any]]
    layout: tuple[Any, ...]
    routes: dict[str, str] = field(default_factory=dict)
    cands: list[Any] = field(default_factory=list)

    @staticmethod
    def of(case: OpsCase) -> RouteTimer:
        """The case's tensors, with the shipped call (tmagen.ops itself) as its first candidate."""
        import tmagen.ops as ops
        from lab import ops_bench as ob
        from tmagen.bench import Candidate
        from tmagen.kernels import multiprocessors

        t = ob.case_tensors(case)
        views = [_captured_views(case, t.ins[i], t.outs[i]) for i in range(t.sets)]
        s0, d0 = views[0]
        layout = (s0.shape, s0.strides, d0.strides, s0.itemsize, s0.ptr & 15, d0.ptr & 15, multiprocessors(0))
        timer = RouteTimer(case, t, views, layout, {"default": label(timer_plan(layout, {}))})

        def shipped(i: int) -> Any:
            return getattr(ops, case.op)(*ob.op_args(case, t.ins[i]), out=t.outs[i])
        timer.cands.append(Candidate("default", "tmagen", shipped, t.writes("default", shipped)))
        return timer

    def force(self, name: str, move: Any) -> None:
        """Adds ``move`` as the route ``name``, unless a route of its label is timed already."""
        if label(move) not in self.routes.values():
            self.routes[name] = label(move)
            self.add(name, move)

    def add(self, name: str, move: Any) -> None:
        """Adds ``move`` (planned once) as the candidate ``name``."""
        import tmagen.ops as ops
        from tmagen.bench import Candidate

        def launch(i: int) -> None:
            s, d = self.views[i]
            ops._RUN[move.how]("lab.ops_routes", move, s, d)
        self.cands.append(Candidate(name, "tmagen", launch, self.t.writes(name, launch)))

    def time(self, method: Any, torch_peer: bool = True) -> dict[str, Any]:
        """Times every candidate beside memcpy, PyTorch (``torch_peer``) and the Triton kernels of
        the case: the case's record, microseconds by candidate."""
        from lab import ops_bench as ob
        from lab import peers
        from tmagen.bench import Candidate, time_case

        case, t = self.case, self.t
        cands = [*self.cands, ob._memcpy(t.xs, t.outs, t.nbytes)]
        if torch_peer:
            cands.append(Candidate("torch", "peer", lambda i: ob.torch_op(case, t.ins[i]),
                                   ob._checked("torch", lambda: ob.torch_op(case, t.ins[0]), lambda: t.want,
                                               [t.xs[0]])))
        tp = peers._triton(True)
        if tp is not None:
            cands += [ob._triton_candidate(tp, layout_t, t.xs, t.outs, t.writes)
                      for layout_t in ob.triton_layouts(case)]
        record = time_case(cands, method, shape=case.shape, dtype=case.dtype, bytes_moved=case.bytes_moved,
                           sets=t.sets, batch=ob.launches_per_sample(case))
        return {"op": case.op, "shape": list(case.shape), "dtype": case.dtype, "dims": list(case.dims),
                "routes": self.routes, "us": {c["name"]: round(c["median_ms"] * 1000, 3) for c in record["candidates"]},
                "failed": record["failed"]}


def timer_plan(layout: tuple[Any, ...], knobs: dict[str, int]) -> Any:
    """`plan_with` the shipped table and ``knobs`` on a `RouteTimer`'s layout."""
    import tmagen.ops as ops

    return plan_with(ops.table(), knobs, *layout)


def measure(case: OpsCase, method: Any) -> dict[str, Any]:
    timer = RouteTimer.of(case)
    for name, knobs in VARIANTS.items():
        timer.force(name, timer_plan(timer.layout, knobs))
    return {"class": case.shape_class, "view": case.view, **timer.time(method)}


def main(argv: list[str] | None = None) -> int:
    import torch

    from tmagen.bench import Method
    from tmagen.kinds.strided import plan as sp

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("out", type=Path)
    p.add_argument("--max-mib", type=float, default=None, help="only the cases of at most this many MiB")
    p.add_argument("--sides", default="", help="tile sides to measure instead, e.g. 1=128,4=64 (a probe)")
    args = p.parse_args(argv)
    for item in filter(None, args.sides.split(",")):
        size, side = (int(v) for v in item.split("="))
        sp.TILE_SIDE[size] = side
        sp.TILE_SIDE_LARGE[size] = side
    cases = [c for c in CASES if args.max_mib is None or c.elements * c.element_bytes <= args.max_mib * 2**20]
    method = Method(rounds=10, repetitions=3, warmup=3)
    records = []
    for case in cases:
        records.append(measure(case, method))
        print(json.dumps(records[-1]), flush=True)
    args.out.write_text(json.dumps({"gpu": torch.cuda.get_device_name(), "tile_side": sp.TILE_SIDE,
                                    "tile_side_large": sp.TILE_SIDE_LARGE, "method": "rounds 10, repetitions 3",
                                    "records": records}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
