"""Measures the matmul family on a GPU and fits the dispatch model's constants to it.

    python -m lab.tune_matmul measure OUT.json [--spec specs/matmul_bf16_tn.json] [--seconds 240] [--shapes MxNxK,...]
                                               [--every-kernel] [--block-scales] [--majors mn,mn]
    python -m lab.tune_matmul fit OUT.json [--table dispatch_h100.json] [--keys 64x128c2,...] [--write]  # no GPU
    python -m lab.tune_matmul merge DATA.json NEW.json --note "why"  # no GPU

An fp8 spec (tmagen/ops_specs/bench_matmul_fp8.json) is measured on e4m3 operands with one scale
per tensor, against cuBLASLt's ``torch._scaled_mm``; its fit sets its own tiles' constants (keys
"fp8:...") and keeps the rest. ``--block-scales`` measures that spec's family with its sums scaled
per 1 x 128 block of A and 128 x 128 block of B (as ``tmagen.ops.matmul`` runs block scales; keys
"fp8-blocks:...", cuBLASLt's time still the per-tensor product's). ``--majors A,B`` measures the
16-bit spec's family with A and B in those layouts ("mn": A given as [K, M], B as [K, N]), as
``tmagen.ops.matmul`` derives it (`tmagen.ops_matmul.ops_spec`; keys "mn-a:...", "mn-b:...",
"mn-ab:..."; cuBLAS on the same views). Its fit sets those keys' constants alone.

``merge`` puts a measurement of some of the shapes (``measure --shapes``, of the same family with
the same options) in place of those shapes' rows of a whole one, where a change of the kernels made
those rows stale, and records why in the data's notes.

``measure`` times every kernel of the family at every split of K worth trying on a set of shapes
(the benchmark's classes: squares, LLM projections from M = 1 up, short and long K), through
``tmagen.load`` with ``choice=``, operands rotated through enough copies to leave the L2 cold,
CUDA events around each launch, the median of the samples. ``fit`` searches the constants of
`tmagen.kinds.matmul.dispatch.Dispatch` that make the model's choices fastest on the measured
shapes (the sum over shapes of log(time of the model's choice / time of the best)), prints the
choice against the best for each shape, and with ``--write`` replaces the table of that GPU:
``--table`` names it among ``tmagen/kinds/matmul/dispatch*.json`` (``dispatch.json``, the H200's, by
default; a table not there yet starts from that one's constants). Each table records the GPU's
multiprocessors and DRAM peak, by which a launch picks the table of the GPU most like its own.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from tmagen.kinds.matmul.dispatch import Dispatch, TileCost, TileShape, load_dispatch
from tmagen.kinds.matmul.plan import rows_straddle

REPO = Path(__file__).resolve().parents[1]
DISPATCH_JSON = REPO / "tmagen" / "kinds" / "matmul" / "dispatch.json"
SPLITS = (1, 2, 3, 4, 6, 8, 12, 16)
# How the kernels in pairs cover an odd last row of tiles, recorded with each measurement: "side-by-side"
# since 2026-11-28 (templates/matmul/kernels.cuh.j2, matmul_walk). Data without it measured the stacked
# walk, whose last pair of such a row had one CTA idle: its launches of pairs there are of a kernel gone.
PAIRS_LAST_ROW = "side-by-side"


def tuning_shapes() -> list[tuple[int, int, int]]:
    squares = [(s, s, s) for s in (256, 512, 1000, 1024, 2048, 3000, 4096, 6144, 8192)]
    llm = [(m, n, k) for m in (1, 16, 64, 128, 256, 512, 1024, 2048, 4096)
           for n, k in ((4096, 4096), (14336, 4096), (4096, 14336))]
    odd = [(1000, 1000, 1000), (777, 1032, 4104), (3000, 5000, 2056), (200, 8192, 8192), (96, 1024, 8192)]
    # squares whose rows straddle sectors or whose tiles fill a little over whole waves, and M or N 8
    # rows over a multiple of 128 (M so: an odd count of 128-row tiles, whose last row the pairs run side by side)
    ragged = [(2056, 2056, 2056), (4104, 4104, 4104), (6000, 6000, 6000), (10000, 10000, 10000), (4104, 4096, 4096),
              (4096, 4104, 4096)]
    # large enough that what the running tiles share outgrows L2 (which the model does not see)
    large = [(15000, 15000, 15000), (16384, 16384, 16384), (16384, 14336, 4096), (16384, 4096, 14336),
             (8192, 4096, 14336)]
    short_k = [(4096, 4096, 128), (8192, 8192, 256), (2048, 8192, 512), (16384, 4096, 64)]
    long_k = [(1024, 1024, 16384), (256, 4096, 32768), (2048, 2048, 32768), (64, 1024, 65536)]
    return squares + llm + odd + short_k + long_k + ragged + large


def _measure(args: argparse.Namespace) -> None:
    import torch

    import tmagen
    from lab.fp8_bench import fp8_check
    from tmagen.kernels import memory_bytes_per_us

    majors = tuple(args.majors.split(","))
    plan = _plan(args.spec, args.block_scales, majors, args.fast_accum)
    family = plan.kernel.detail
    kernel = tmagen.load(plan)
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    memory = memory_bytes_per_us(torch.cuda.current_device())
    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    deadline = time.monotonic() + args.seconds
    rows: list[dict[str, Any]] = []
    shapes = [tuple(int(x) for x in s.split("x")) for s in args.shapes.split(",")] if args.shapes else tuning_shapes()
    for m, n, k in shapes:
        if time.monotonic() > deadline:
            break
        if family.fp8:  # an fp8 row must be whole 16 bytes for TMA: K = 1000 is measured as 1008
            k = -(-k // 16) * 16
        a_mn, b_mn = family.a_major == "mn", family.b_major == "mn"
        m, n = (-(-x // 8) * 8 if mn else x for x, mn in ((m, a_mn), (n, b_mn)))  # MN-major rows: whole 16 bytes
        per_set = (m * k + n * k) * 2
        sets = max(1, min(8, math.ceil(3 * l2 / per_set)))
        dtype = torch.float8_e4m3fn if family.fp8 else torch.bfloat16
        # stored as the family takes them: A [M, K] or [K, M], B [N, K] or [K, N]; a_rows and b_rows
        # are their [M, K] and [N, K] views
        # --row-pitch-extra E: K-major rows K + E elements apart (slices of wider tensors), as a user's
        # operands whose rows straddle 32-byte sectors are
        extra = args.row_pitch_extra
        a = [torch.randn(*((k, m) if a_mn else (m, k + extra)), device="cuda").to(dtype)[..., :m if a_mn else k]
             for _ in range(sets)]
        b = [torch.randn(*((k, n) if b_mn else (n, k + extra)), device="cuda").to(dtype)[..., :n if b_mn else k]
             for _ in range(sets)]
        a_rows, b_rows = [x.T if a_mn else x for x in a], [x.T if b_mn else x for x in b]
        c = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
        ref = (a_rows[0].float() @ b_rows[0].float().T)
        # fp8: the benchmark's bound, which grows with K as the sums' magnitude S does; 2^-6 of the
        # largest element of C failed every unpromoted kernel at K = 32768 and 65536 (fast
        # accumulation, an H200, 2026-11-29) though each was right
        magnitude = (a_rows[0].float().abs() @ b_rows[0].float().abs().T) if family.fp8 else None
        one = torch.ones((), device="cuda")
        scales = {"scale_a": one, "scale_b": one} if family.fp8 else {}
        if family.block_scales:  # ones: the product is the unscaled one, which the check compares with
            scales = {"scale_a": torch.ones(m, -(-k // 128), device="cuda"),
                      "scale_b": torch.ones(-(-n // 128), -(-k // 128), device="cuda")}
        k_steps = max(1, -(-k // family.kernels[0].bk))
        flops = 2.0 * m * n * k
        reps = max(3, min(20, int(2e12 / flops)))
        times: dict[str, float] = {}
        # only the kernels a launch of these dense operands chooses among (a twin in pairs where rows
        # straddle sectors, or where the GPU's table offers it on aligned rows), as `fit` scores them;
        # --every-kernel: all of them, so that a fit can judge twins on aligned rows
        straddle = family.dense_rows_straddle(m, n, k) or bool(extra and family.operand_rows_straddle(0, k + extra))
        candidates = (list(range(len(family.kernels))) if args.every_kernel
                      else family.candidates(straddle, m, k, family.table_for(sms, memory)))
        for variant, splits, tail in itertools.product(candidates, SPLITS, (False, True)):
            shape = family.kernels[variant].shape
            groups, slots = shape.groups(m, n), shape.slots(sms)
            tail_from = groups // slots * slots
            if splits > k_steps or (splits > 1 and flops > 2e12 and not tail) or (tail and not 0 < tail_from < groups):
                continue
            if tail and splits == 1:
                continue
            choice = (variant, splits, tail_from if tail else 0)
            kernel(a[0], b[0], out=c, choice=choice, **scales)
            torch.cuda.synchronize()
            if magnitude is not None:
                wrong = fp8_check(c, ref, magnitude) is not None
            else:
                wrong = not (c.float() - ref).abs().max().item() < 2 ** -6 * max(ref.abs().max().item(), 1e-30)
            if wrong:
                times["/".join(map(str, choice))] = float("inf")
                continue
            times["/".join(map(str, choice))] = _median_us(
                torch, lambda r, a=a, b=b, c=c, sets=sets, choice=choice, scales=scales: kernel(
                    a[r % sets], b[r % sets], out=c, choice=choice, **scales), reps * sets)
        if family.fp8 and (k % 16 or n % 16):  # torch._scaled_mm takes K and N in multiples of 16 only
            cublas = float("nan")
        elif family.fp8:  # cuBLASLt with one scale per tensor, its sums promoted (use_fast_accum False)
            cublas = _median_us(torch, lambda r, a=a, b=b, c=c, sets=sets, one=one: torch._scaled_mm(
                a[r % sets], b[r % sets].T, scale_a=one, scale_b=one, out_dtype=torch.bfloat16, out=c), reps * sets)
        else:
            cublas = _median_us(torch, lambda r, a=a_rows, b=b_rows, c=c, sets=sets: torch.matmul(
                a[r % sets], b[r % sets].T, out=c), reps * sets)
        rows.append({"m": m, "n": n, "k": k, "us": times, "cublas_us": cublas})
        best = min(times, key=times.__getitem__)
        print(f"{m}x{n}x{k}: best {best} {times[best]:.1f} us, cuBLAS {rows[-1]['cublas_us']:.1f} us", flush=True)
        del a, b, c, ref, magnitude
        torch.cuda.empty_cache()
    spec = Path(args.spec).resolve()
    out = {"gpu": torch.cuda.get_device_name(0), "sms": sms, "memory_bytes_per_us": memory,
           "spec": str(spec.relative_to(REPO)) if spec.is_relative_to(REPO) else str(spec),
           "kernels": [p.shape.key for p in family.kernels], "bk": family.kernels[0].bk,
           "every_kernel": bool(args.every_kernel), "block_scales": bool(args.block_scales),
           "fast_accum": bool(args.fast_accum), "majors": list(majors), "pairs_last_row": PAIRS_LAST_ROW,
           "row_pitch_extra": args.row_pitch_extra, "rows": rows}
    Path(args.out).write_text(json.dumps(out, indent=1) + "\n")


def _median_us(torch: Any, launch: Any, count: int) -> float:
    """The median time of ``count`` launches, each between CUDA events, queued in groups behind a
    sleep kernel so that the GPU never waits for Python between them."""
    samples = []
    for first in range(0, count, 32):
        group = range(first, min(count, first + 32))
        # about 100 us of GPU time per launch to queue: with 30, a slow moment of the host's (a Python
        # launch can take 40 us) left the GPU waiting between an event and its launch, and runs of
        # candidates came out 2 to 5 times slower than they are (an H200, 2026-11-24)
        torch.cuda._sleep(200_000 * len(group))
        for r in group:
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record()
            launch(r)
            e.record()
            samples.append((s, e))
        torch.cuda.synchronize()
    ms = sorted(s.elapsed_time(e) for s, e in samples)
    return ms[len(ms) // 2] * 1000.0


Candidates = Callable[[int, int, int], tuple[list[int], bool]]


def _candidates(data: dict[str, Any], aligned_pairs: tuple[str, ...] = (),
                straddle: bool | None = None) -> Candidates | None:
    """The kernels a launch of the measured operands chooses among, as the family's ``candidates``
    says (the twins in pairs where rows straddle sectors: dense rows as their shape makes them, or
    ``straddle``; beside their kernels where they do not, those of ``aligned_pairs``), and whether the
    rows straddle (their tiles then priced as such, `TileShape.straddle`); None where the data was
    measured on a family without twins (every kernel is a candidate)."""
    spec = Path(data["spec"])
    family = _plan(spec if spec.is_absolute() else REPO / spec, bool(data.get("block_scales")),
                   tuple(data.get("majors", ("k", "k"))), bool(data.get("fast_accum"))).kernel.detail
    if [p.shape.key for p in family.kernels] != data["kernels"]:
        return None
    family = replace(family, dispatches=(replace(family.dispatches[0], aligned_pairs=aligned_pairs),))
    def chosen_among(m: int, n: int, k: int) -> tuple[list[int], bool]:
        rows_straddle = family.dense_rows_straddle(m, n, k) if straddle is None else straddle
        return family.candidates(rows_straddle, m, k), rows_straddle

    return chosen_among


def _measured_twins(data: dict[str, Any]) -> tuple[str, ...]:
    """The twins in pairs a measurement of every kernel (``--every-kernel``) timed on rows that do not
    straddle: those the table it fits may offer there."""
    if not data.get("every_kernel"):
        return ()
    shapes = {key: TileShape.from_key(key, int(data["bk"])) for key in data["kernels"]}
    alone = {replace(shape, cluster=1) for shape in shapes.values() if shape.cluster == 1}
    return tuple(key for key, shape in shapes.items() if shape.cluster > 1 and replace(shape, cluster=1) in alone)


def _score(d: Dispatch, data: dict[str, Any], shapes: list[TileShape],
           candidates: Candidates | None = None) -> tuple[float, list[tuple[Any, ...]]]:
    """Sum over shapes of log(measured time of the model's choice / measured best), and each shape's line."""
    total, lines = 0.0, []
    for row in data["rows"]:
        times = {_key(key): t for key, t in row["us"].items()}
        best = min(times.values())
        kernels, straddle = candidates(row["m"], row["n"], row["k"]) if candidates else (list(range(len(shapes))),
                                                                                          False)
        c = d.choose([replace(shapes[i], straddle=straddle or shapes[i].straddle) for i in kernels],
                     row["m"], row["n"], row["k"], data["sms"], 16)
        c = replace(c, variant=kernels[c.variant])
        got = times.get((c.variant, c.splits, c.split_from if c.splits > 1 else 0))
        if got is None:  # a split the measurement did not try: the nearest it did
            near = [key for key in times if key[0] == c.variant and (key[2] > 0) == (c.split_from > 0)]
            got = times[min(near, key=lambda key: abs(key[1] - c.splits))] if near else best * 2
        total += math.log(got / best)
        lines.append((row["m"], row["n"], row["k"], f"{c.variant}/{c.splits}/{c.split_from}", got, best,
                      row["cublas_us"]))
    return total, lines


def _key(key: str) -> tuple[int, int, int]:
    """A measured candidate "kernel/splits[/first split group]" as a tuple."""
    parts = [int(x) for x in key.split("/")]
    return parts[0], parts[1], parts[2] if len(parts) > 2 else 0


def _fit(args: argparse.Namespace) -> None:
    data = json.loads(Path(args.out).read_text())
    shapes = [TileShape.from_key(key, int(data["bk"])) for key in data["kernels"]]
    # a measurement on rows that straddle sectors (--row-pitch-extra, or rows with a "pitch" of their
    # own) fits the tiles' constants on such rows ("sx:" keys), from its rows that straddle
    straddling = bool(data.get("row_pitch_extra")) or any("pitch" in row for row in data["rows"])
    if straddling:
        extra = int(data.get("row_pitch_extra", 0))
        shapes = [replace(s, straddle=True) for s in shapes]
        data = {**data, "rows": [row for row in data["rows"] if rows_straddle(
            0, row.get("pitch", row["k"] + extra) * shapes[0].element_bytes)]}
    table = DISPATCH_JSON.parent / args.table
    base_path = table if table.exists() else DISPATCH_JSON
    loaded = load_dispatch(base_path)
    # the twins this table offers on aligned rows: those it offered before, and those this data measured there
    aligned_pairs = tuple(dict.fromkeys(loaded.aligned_pairs + (() if straddling else _measured_twins(data))))
    candidates = _candidates(data, aligned_pairs, True if straddling else None)
    # an fp8 family's measurement fits its own tiles' constants only, the memory system's being the
    # 16-bit families' too (as a block-scaled, MN-major or straddling one's)
    fp8 = any(s.element_bytes == 1 for s in shapes)
    shared = [] if fp8 or args.keys or any(s != s.base or s.straddle for s in shapes) else [
        "sm_bytes_per_us", "hbm_bytes_per_us", "split_ns"]
    # (split_ns starts no lower than 1 us where it is fitted, and stays as it is where it is not)
    start = replace(loaded, split_ns=max(1000, loaded.split_ns) if "split_ns" in shared else loaded.split_ns,
                    aligned_pairs=aligned_pairs)
    keys = [s.key for s in shapes if not args.keys or s.key in args.keys.split(",")]
    # Coordinate descent by factors finds a local best only: the H200's bf16 fit of 2026-11-28 from
    # its own old constants kept 3000^3 on a tile 1.13x slower than the 192 x 192 pairs the H100's
    # constants chose there. So it starts from this table and from every other GPU's table's
    # constants for the fitted tiles too, and keeps the best end.
    # No step is priced faster than the tensor cores ran in the data: the fast-accumulating fp8 fit of
    # 2026-11-29 without this floor priced a 128 x 192 step at 400 ns, where the fastest launch
    # measured (1594 TFLOP/s) does one in 521, and chose that tile, split at the tail, at long K
    # (2048 x 2048 x 32768: 186.7 us against 172.4 for 128 x 256 whole); with it the choices came
    # within 0.9% of the fastest over the 60 shapes, from 1.2%.
    floors = _step_floors(data, shapes)
    starts = [_floored(start, floors, keys)]
    for other in sorted(DISPATCH_JSON.parent.glob("dispatch*.json")):
        first = _floored(_with_constants(start, load_dispatch(other), keys, shared), floors, keys)
        if first not in starts:  # (a table without the fitted tiles' keys starts where this one does)
            starts.append(first)
    best_d, best_score = start, math.inf
    for first in starts:
        found, found_score = _descend(first, data, shapes, candidates, shared + [
            f"{key}.{f}" for key in keys for f in ("step_ns", "tile_ns")], floors)
        if found_score < best_score - 1e-9:
            best_d, best_score = found, found_score
    score, lines = _score(best_d, data, shapes, candidates)
    print(f"sum of log(choice / best) over {len(lines)} shapes: {score:.3f} (geometric mean "
          f"{math.exp(score / max(1, len(lines))):.3f} of the best)")
    for m, n, k, choice, got, best, cublas in lines:
        print(f"{m:>6} {n:>6} {k:>6}  choice {choice:>5}  {got:9.1f} us  best {best:9.1f}  cuBLAS {cublas:9.1f}"
              f"  ({cublas / got:.2f} of cuBLAS)")
    if args.write:
        what = f"python -m lab.tune_matmul on {len(lines)} shapes of {data['spec']}"
        # what the table's other families were fitted on stays named beside this fit, 16-bit first
        if data.get("block_scales"):
            what += " with block scales"
        if data.get("fast_accum"):
            what += " with fast accumulation"
        if tuple(data.get("majors", ("k", "k"))) != ("k", "k"):
            what += " with A {}-major and B {}-major".format(*data["majors"])
        if straddling:
            what += " on rows straddling 32-byte sectors"
        kept = [part for part in loaded.measured.split("; ") if _family_kind(part) != _family_kind(what)
                ] if table.exists() else []
        raw = {"gpu": data["gpu"], "measured": "; ".join(sorted([what, *kept], key=_family_kind)),
               "sms": int(data["sms"]), "memory_bytes_per_us": int(data.get("memory_bytes_per_us", 0)),
               "sm_bytes_per_us": best_d.sm_bytes_per_us, "hbm_bytes_per_us": best_d.hbm_bytes_per_us,
               "tiles": {key: {"step_ns": c.step_ns, "tile_ns": c.tile_ns,
                                **({"tail_margin": c.tail_margin} if c.tail_margin else {})}
                         for key, c in best_d.tiles.items()},
               "default": {"step_ns": best_d.default.step_ns, "tile_ns": best_d.default.tile_ns},
               "split_ns": best_d.split_ns, "aligned_pairs": list(aligned_pairs)}
        table.write_text(json.dumps(raw, indent=2) + "\n")
        print(f"wrote {table}")


def _plan(spec: str | Path, block_scales: bool = False, majors: tuple[str, ...] = ("k", "k"),
          fast_accum: bool = False) -> Any:
    """The plan of a spec file, or, with block scales, fast accumulation (use_fast_accum) or other
    ``majors`` of A and B, tmagen.ops.matmul's family of its types so derived (`fp8_spec`, `ops_spec`:
    from the tuned spec each derives from)."""
    from tmagen.ops_matmul import ops_spec
    from tmagen.ops_matmul_fp8 import fp8_spec
    from tmagen.plan import resolve
    from tmagen.spec import load_spec

    loaded = load_spec(spec)
    if not block_scales and not fast_accum and majors == ("k", "k"):
        return resolve(loaded, str(spec))
    a_type, b_type, out = (t["dtype"] for t in loaded.model_dump(mode="json")["tensors"])
    if majors != ("k", "k"):
        if Path(spec).name != "bench_matmul_bfloat16.json" or block_scales or fast_accum:
            raise SystemExit(f"--majors {','.join(majors)}: layouts are derived from "
                             f"tmagen/ops_specs/bench_matmul_bfloat16.json, as tmagen.ops.matmul derives them "
                             f"(not {spec}{' with block scales' if block_scales else ''})")
        a_major, b_major = majors
        return resolve(ops_spec(a_type, out, b_major, a_major))
    option = "--block-scales" if block_scales else "--fast-accum"
    if Path(spec).name != "bench_matmul_fp8.json" or (block_scales and fast_accum):
        raise SystemExit(f"{option}: block-scaled and fast-accumulating families (one or the other) are derived "
                         f"from tmagen/ops_specs/bench_matmul_fp8.json, as tmagen.ops.matmul derives them "
                         f"(not {spec}{' with both' if block_scales and fast_accum else ''})")
    return resolve(fp8_spec(a_type, b_type, out, block_scales, fast_accum))


def _family_kind(measured: str) -> tuple[int, str]:
    """Which family a part of a table's ``measured`` names: 16-bit, fp8, fp8 with block scales, fp8
    with fast accumulation (in that order), and its operands' layouts and rows straddling sectors
    where it names them."""
    kind = (3 if "fast accumulation" in measured else 2 if "block scales" in measured else
            1 if "fp8" in measured else 0)
    return kind, measured.partition(" with A ")[2] + (" straddling" if "straddling" in measured else "")


def _step_floors(data: dict[str, Any], shapes: list[TileShape]) -> dict[str, int]:
    """Each tile's least step time: its multiply-adds at the fastest rate per multiprocessor that any
    launch of the data reached."""
    rate = max(2.0 * row["m"] * row["n"] * row["k"] / (min(row["us"].values()) * 1000.0) / int(data["sms"])
               for row in data["rows"])  # flop per ns per SM
    return {s.key: int(2 * s.bm * s.bn * s.bk / rate) for s in shapes}


def _floored(d: Dispatch, floors: dict[str, int], keys: list[str]) -> Dispatch:
    """``d`` with the steps of the tiles ``keys`` raised to their floors (a tile the table lacks takes
    the constants the model used for it)."""
    tiles = dict(d.tiles)
    for key in keys:
        cost = tiles[key] if key in tiles else d.cost(TileShape.from_key(key, 64))
        if cost.step_ns < floors.get(key, 0):
            tiles[key] = replace(cost, step_ns=floors[key])
    return replace(d, tiles=tiles)


def _descend(d: Dispatch, data: dict[str, Any], shapes: list[TileShape],
             candidates: Candidates | None, fields: list[str],
             floors: dict[str, int] | None = None) -> tuple[Dispatch, float]:
    """Coordinate descent over ``fields`` of ``d``, each scaled by factors while the score falls, no
    step below its floor (``floors``, by key)."""
    best_d, best_score = d, _score(d, data, shapes, candidates)[0]
    for _ in range(8):
        for field in fields:
            for factor in (0.25, 0.5, 0.7, 0.85, 0.93, 1.08, 1.2, 1.4, 2.0, 4.0):
                trial = _scaled(best_d, field, factor)
                key, _, name = field.partition(".")
                if floors and name == "step_ns" and trial.tiles[key].step_ns < floors.get(key, 0):
                    continue
                score = _score(trial, data, shapes, candidates)[0]
                if score < best_score - 1e-9:
                    best_d, best_score = trial, score
    return best_d, best_score


def _with_constants(d: Dispatch, other: Dispatch, keys: list[str], shared: list[str]) -> Dispatch:
    """``d`` with ``other``'s constants for the tiles ``keys`` (where it has them) and, where the fit
    sets them, the memory system's (``shared``)."""
    tiles = {**d.tiles, **{key: other.tiles[key] for key in keys if key in other.tiles}}
    return replace(d, tiles=tiles, **{field: getattr(other, field) for field in shared})


def _scaled(d: Dispatch, field: str, factor: float) -> Dispatch:
    if "." not in field:
        scaled: dict[str, Any] = {field: max(1, int(getattr(d, field) * factor))}  # a memory-system constant
        return replace(d, **scaled)
    key, name = field.split(".")
    tiles = dict(d.tiles)
    cost = tiles[key] if key in tiles else d.cost(TileShape.from_key(key, 64))  # a new key: what the model used
    tiles[key] = TileCost(**{**cost.__dict__, name: max(1, int(getattr(cost, name) * factor))})
    return replace(d, tiles=tiles)


def merge(data: dict[str, Any], new: dict[str, Any], note: str) -> dict[str, Any]:
    """``data`` with the rows of ``new``'s shapes replaced by ``new``'s: the same GPU, family and options
    (else the rows would not compare), every shape of ``new`` one of ``data``'s."""
    for field in ("gpu", "spec", "kernels", "bk", "every_kernel"):
        if data.get(field) != new.get(field):
            raise SystemExit(f"merge: the measurements differ in {field}: {data.get(field)!r} and {new.get(field)!r}")
    for field, default in (("block_scales", False), ("fast_accum", False), ("majors", ["k", "k"])):
        if data.get(field, default) != new.get(field, default):
            raise SystemExit(f"merge: the measurements differ in {field}")
    replaced = {(r["m"], r["n"], r["k"]): r for r in new["rows"]}
    missing = set(replaced) - {(r["m"], r["n"], r["k"]) for r in data["rows"]}
    if missing:
        raise SystemExit(f"merge: shapes {sorted(missing)} are not in the data")
    rows = [replaced.get((r["m"], r["n"], r["k"]), r) for r in data["rows"]]
    notes = [*data.get("notes", [data["note"]] if "note" in data else []), note]
    merged = {**{k: v for k, v in data.items() if k != "note"}, "notes": notes, "rows": rows}
    if "pairs_last_row" in new:  # the caller measured again every row that the walk's change touched
        merged["pairs_last_row"] = new["pairs_last_row"]
    return merged


def _merge(args: argparse.Namespace) -> None:
    path = Path(args.data)
    merged = merge(json.loads(path.read_text()), json.loads(Path(args.new).read_text()), args.note)
    path.write_text(json.dumps(merged, indent=1) + "\n")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m lab.tune_matmul", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    m = sub.add_parser("measure")
    m.add_argument("out")
    m.add_argument("--spec", default=str(REPO / "specs" / "matmul_bf16_tn.json"))
    m.add_argument("--seconds", type=float, default=240.0)
    m.add_argument("--shapes", help="MxNxK,... in place of the tuning set (a probe of a few shapes)")
    m.add_argument("--majors", default="k,k", choices=["k,k", "mn,k", "k,mn", "mn,mn"],
                   help="A's and B's layouts (mn: A [K, M], B [K, N]) of tmagen.ops.matmul's 16-bit family")
    m.add_argument("--block-scales", action="store_true", help="an fp8 spec's family with its sums scaled per "
                   "block (1 x 128 of A, 128 x 128 of B), as tmagen.ops.matmul runs block scales")
    m.add_argument("--fast-accum", action="store_true", help="an fp8 spec's family with its sums never promoted "
                   "(promote_every 0), as tmagen.ops.matmul runs use_fast_accum=True")
    m.add_argument("--row-pitch-extra", type=int, default=0, help="K-major operands' rows K + this many elements "
                   "apart (slices of wider tensors: 8 makes 16-bit rows straddle 32-byte sectors)")
    m.add_argument("--every-kernel", action="store_true", help="every kernel of the family, its twins in pairs "
                   "too whatever the rows (a probe of what a kernel the dispatch does not offer would give)")
    f = sub.add_parser("fit")
    f.add_argument("out")
    f.add_argument("--write", action="store_true")
    f.add_argument("--keys", help="KEY,... (as in the data's kernels): fit these tiles' constants alone, keeping "
                   "the table's others and its memory system's")
    f.add_argument("--table", default=DISPATCH_JSON.name, help="the table fitted and written: dispatch.json (the "
                   "H200's) or dispatch_<gpu>.json, beside it")
    g = sub.add_parser("merge")
    g.add_argument("data")
    g.add_argument("new")
    g.add_argument("--note", required=True, help="why those rows were measured again")
    args = parser.parse_args(argv)
    {"measure": _measure, "fit": _fit, "merge": _merge}[args.command](args)


if __name__ == "__main__":
    main()
