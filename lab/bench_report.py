"""BENCHMARKS.md and its plot from the JSON that benchmarks/run.py wrote: pure functions of that
data (no GPU), so that the page is regenerated and tested anywhere.

    python -m lab.bench_report BENCH_JSON [--markdown BENCHMARKS.md] [--plot benchmarks/bandwidth.svg]

BENCHMARKS.md renders the newest run in benchmarks/results/: the latest `date`, then the last name
(tests/test_bench.py holds it to that).

The run is of the interleaved suite with its peers (``"format": 2``), whose page states the method
and its noise and judges every target with it. The first suite's format 1 (one candidate at a
time, benchmarks/results/h200-2026-11-21.json) is no longer rendered: its page is in git history.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from lab import fp8_bench, ops_bench
from lab.matmul_bench import CLASSES as MATMUL_CLASSES

# ----------------------------------------------------------------------------- the targets
COPY_OF_MEMCPY = 0.97  # issue 10: copies of every rank at or above 0.97 of cudaMemcpyAsync ...
OF_BEST_PEER = 1.0  # ... and, copies and transposes, at or above the best peer on every case
RAGGED_OF_SQUARE = 0.97  # transposes: ragged within 3% of square
MATMUL_GEOMEAN_OF_CUBLAS = 1.00  # issue 18: the matmul's geometric mean over the shape set at or above cuBLAS ...
MATMUL_FLOOR_OF_CUBLAS = 0.90  # ... no shape below 0.90 of it, and ahead of Triton (OF_BEST_PEER) on every shape
# issue 21, fp8 with per-tensor scales: the same three against cuBLASLt (torch._scaled_mm) and Triton's fp8 matmul;
# block-scaled at or above 0.90 of tmagen's own per-tensor speed at 4096^3 and above
FP8_GEOMEAN_OF_CUBLAS, FP8_FLOOR_OF_CUBLAS, FP8_BLOCK_OF_TENSOR = 1.00, 0.90, 0.90


def markdown_report(data: dict[str, Any], plot_file: str = "benchmarks/bandwidth.svg") -> str:
    """BENCHMARKS.md for the run in ``data``."""
    _require_format_2(data)
    return _report(data, plot_file)


def _require_format_2(data: dict[str, Any]) -> None:
    if data.get("format", 1) != 2:
        raise ValueError(f"a run of format {data.get('format', 1)}: only format 2 (the interleaved suite of "
                         "benchmarks/run.py) is rendered")


def paired_ratios(a: dict[str, Any], b: dict[str, Any]) -> list[float]:
    """How many times faster ``a`` ran than ``b`` in each repetition of their common loop (the ratio
    of their throughputs on the same bytes or flops)."""
    return [tb / ta for ta, tb in zip(a["rep_medians_ms"], b["rep_medians_ms"])]


def judge(ratios: list[float], target: float) -> str:
    """met when every repetition reaches the target, missed when none does, else within noise."""
    if min(ratios) >= target:
        return "met"
    if max(ratios) < target:
        return "**missed**"
    return "within noise"


def spread(t: dict[str, Any]) -> float:
    """The range of a candidate's repetition medians, relative to its median: the noise."""
    reps = t["rep_medians_ms"]
    return (max(reps) - min(reps)) / t["median_ms"] if len(reps) > 1 else 0.0


def _ratio(ratios: list[float]) -> str:
    """The median of per-repetition ratios with their range."""
    if len(ratios) == 1:
        return f"{ratios[0]:.3f}"
    return f"{statistics.median(ratios):.3f} ({min(ratios):.3f}-{max(ratios):.3f})"


def _shape(case: dict[str, Any]) -> str:
    return "x".join(map(str, case["shape"]))


def _role(case: dict[str, Any], role: str) -> dict[str, Any] | None:
    return next((c for c in case["candidates"] if c["role"] == role), None)


def best_peer(case: dict[str, Any]) -> dict[str, Any] | None:
    peers = [c for c in case["candidates"] if c["role"] == "peer"]
    return min(peers, key=lambda c: c["median_ms"]) if peers else None


def _label(case: dict[str, Any]) -> str:
    kind = case["shape_kind"]
    return f"{case['group']}" + ("" if kind in ("full", "square") else f" ({kind})")


def noise(data: dict[str, Any]) -> dict[str, float]:
    """The spread of repetition medians over every candidate of every case (not the sweep): its
    median and largest value, and the largest among the memcpy references."""
    all_spreads, memcpy = [], []
    for case in data["cases"]:
        if case["group"] == "sweep":
            continue
        for c in case["candidates"]:
            all_spreads.append(spread(c))
            if c["role"] == "limit":
                memcpy.append(spread(c))
    if not all_spreads:
        return {"median": 0.0, "max": 0.0, "memcpy_max": 0.0}
    return {"median": statistics.median(all_spreads), "max": max(all_spreads),
            "memcpy_max": max(memcpy) if memcpy else 0.0}


def _versions(data: dict[str, Any]) -> str:
    names = {"torch": "PyTorch", "triton": "Triton", "cupy": "CuPy"}
    return ", ".join(f"{names.get(k, k)} {v}" for k, v in data.get("versions", {}).items() if v)


def _report(data: dict[str, Any], plot_file: str) -> str:
    m = data["method"]
    cases = data["cases"]
    moving = [c for c in cases if c["group"] in ("copy", "transpose")]
    matmuls = [c for c in cases if c["group"] == "matmul"]
    nz = noise(data)
    lines = [
        "# Benchmarks",
        "",
        "<!-- Written by `python -m lab.bench_report` from the JSON that benchmarks/run.py measured: do not edit. -->",
        "",
        f"GPU: {data['gpu']} ({data['sms']} SMs, {data['l2_bytes'] >> 20} MiB of L2), driver {data['driver']}, "
        f"measured {data['date']}; {_versions(data)}.",
        "",
        "**Method.** Each case times its candidates in one loop on the same tensors: tmagen's kernel, "
        "`cudaMemcpyAsync` of the same bytes (the limit) and the peers, in an order rotated by one every round, "
        "each sample the CUDA events around one launch, every round queued whole behind a sleep kernel so that no "
        f"launch waits for Python. {m['rounds']} rounds after {m['warmup']} warm-up launches of each, and that loop "
        f"{m['repetitions']} times; a figure is the median of the {m['rounds'] * m['repetitions']} samples. Copies "
        "and transposes move 1 GiB tensors (several times the L2) of random bytes; bandwidth counts bytes read plus "
        "bytes written. Matmuls rotate through enough sets of A and B to leave the L2 cold, and count 2MNK flops. "
        "Every candidate's output was checked against PyTorch's before it was timed (bit for bit; matmuls within "
        "2^-7 of the largest value of a float64 product), and one that failed is listed, not timed. Triton's "
        "kernels were autotuned on each case (their choices are listed below).",
        "",
        f"**Noise.** Over the {m['repetitions']} repetitions of a loop, one candidate's medians spread by "
        f"{100 * nz['median']:.1f}% (the median over every candidate of every case), {100 * nz['max']:.1f}% at most, "
        f"memcpy's by {100 * nz['memcpy_max']:.1f}% at most. Ratios are taken repetition by repetition inside one "
        "loop, and shown as their median (lowest-highest): a target is met when every repetition reaches it, "
        "missed when none does, and otherwise the difference is within noise.",
        "",
    ]
    if moving:
        lines += [
            "## Copies and transposes against memcpy and the best peer",
            "",
            f"Targets (issue 10): transposes at or above the best peer on every case, ragged within "
            f"{100 * (1 - RAGGED_OF_SQUARE):.0f}% of square; copies at or above {COPY_OF_MEMCPY} of memcpy and at or "
            "above the best peer's copy.",
            "",
            "| case | spec | dtype | shape | tmagen GB/s | of memcpy | best peer | its GB/s | tmagen / best peer |",
            "|---|---|---|---|---|---|---|---|---|",
        ]
        for case in moving:
            lines.append(_moving_row(case))
        lines += _ragged_lines(moving)
        lines += _every_candidate(moving)
    if matmuls:
        lines += _matmul_lines(matmuls, data.get("sections", {}).get("matmul"))
    fp8 = [c for c in cases if c["group"] == "fp8"]
    if fp8:
        lines += _fp8_lines(fp8, data.get("sections", {}).get("fp8"))
    ops = [c for c in cases if c["group"] == "ops"]
    if ops:
        lines += _ops_lines(ops, data.get("sections", {}).get("ops"))
    lines += _notes(data)
    if any(c["group"] == "sweep" for c in cases):
        lines += [f"![bandwidth against size]({plot_file})", "",
                  "Bandwidth against size: tmagen's kernels and memcpy of the same bytes, interleaved, from 16 MiB to "
                  "2 GiB (cases that fit in a few L2s rotate through several buffers, short ones time several "
                  "launches a sample).", ""]
    return "\n".join(lines)


def _moving_row(case: dict[str, Any]) -> str:
    head = f"| {_label(case)} | `{case['spec']}` | {case['dtype']} | {_shape(case)} |"
    mine, limit, peer = _role(case, "tmagen"), _role(case, "limit"), best_peer(case)
    if mine is None:
        why = next((f["why"] for f in case["failed"] if f["role"] == "tmagen"), "not timed")
        return f"{head} failed: {why} | | | | |"
    of_memcpy = ""
    if limit is not None:
        r = paired_ratios(mine, limit)
        of_memcpy = _ratio(r) + (f" {judge(r, COPY_OF_MEMCPY)}" if case["group"] == "copy" else "")
    of_peer, peer_name, peer_gbps = "", "none", ""
    if peer is not None:
        r = paired_ratios(mine, peer)
        of_peer = f"{_ratio(r)} {judge(r, OF_BEST_PEER)}"
        peer_name, peer_gbps = peer["name"], f"{peer['gbps']:.0f}"
    return f"{head} {mine['gbps']:.0f} | {of_memcpy} | {peer_name} | {peer_gbps} | {of_peer} |"


def _ragged_lines(moving: list[dict[str, Any]]) -> list[str]:
    """Each transpose's ragged case against its square one (two loops: the range combines both
    candidates' repetition medians)."""
    square = {c["spec"]: _role(c, "tmagen") for c in moving
              if c["group"] == "transpose" and c["shape_kind"] == "square"}
    parts = []
    for case in moving:
        mine = _role(case, "tmagen")
        base = square.get(case["spec"])
        if case["group"] != "transpose" or case["shape_kind"] != "ragged" or mine is None or base is None:
            continue
        # bandwidths per repetition, ragged over square, every pairing: the honest range across two loops
        r = [(base_ms / mine_ms) * (mine["bytes_moved"] / base["bytes_moved"])
             for mine_ms in mine["rep_medians_ms"] for base_ms in base["rep_medians_ms"]]
        mid = mine["gbps"] / base["gbps"]
        parts.append(f"`{case['spec']}` {mid:.3f} ({min(r):.3f}-{max(r):.3f}) {judge(r, RAGGED_OF_SQUARE)}")
    if not parts:
        return []
    return ["", f"Ragged transposes against square ones, tmagen's bandwidth (target: at or above {RAGGED_OF_SQUARE}): "
            + ", ".join(parts) + "."]


def _every_candidate(moving: list[dict[str, Any]]) -> list[str]:
    """One table per group: every candidate's GB/s and its ratio to memcpy."""
    lines: list[str] = []
    for group in ("copy", "transpose"):
        cases = [c for c in moving if c["group"] == group]
        names: list[str] = []
        for case in cases:
            for c in [*case["candidates"], *case["failed"]]:
                if c["role"] == "peer" and c["name"] not in names:
                    names.append(c["name"])
        if not cases:
            continue
        lines += ["", f"Every candidate of the {group} cases: GB/s, and in brackets the ratio to the same loop's "
                  "memcpy (its interquartile range, relative to the median, after the slash for tmagen).", "",
                  "| case | dtype | shape | memcpy | tmagen | " + " | ".join(names) + " |",
                  "|---|---|---|---|---|" + "---|" * len(names)]
        for case in cases:
            limit, mine = _role(case, "limit"), _role(case, "tmagen")
            by_name = {c["name"]: c for c in case["candidates"]}
            failed = {f["name"] for f in case["failed"]}
            iqr = f" / {100 * (mine['q3_ms'] - mine['q1_ms']) / mine['median_ms']:.1f}%" if mine else ""
            peers = " | ".join(_cell(by_name.get(n), limit, failed, n) for n in names)
            lines.append(f"| {_label(case)} `{case['spec']}` | {case['dtype']} | {_shape(case)} | "
                         f"{_cell(limit, limit, failed)} | {_cell(mine, limit, failed)}{iqr} | {peers} |")
    return lines


def _cell(c: dict[str, Any] | None, limit: dict[str, Any] | None, failed: set[str], name: str = "") -> str:
    """One candidate's bandwidth and its ratio to memcpy in the table of every candidate."""
    if c is None:
        return "failed its check" if name in failed else "-"
    ratio = f" ({statistics.median(paired_ratios(c, limit)):.3f})" if limit and c is not limit else ""
    return f"{c['gbps']:.0f}{ratio}"


# ----------------------------------------------------------------------------- matmul
def _cublas(case: dict[str, Any]) -> dict[str, Any] | None:
    return next((c for c in case["candidates"] if c["name"].startswith("cuBLAS")), None)


def best_triton(case: dict[str, Any]) -> dict[str, Any] | None:
    """The faster of Triton's kernels in this case (by median), or None."""
    tritons = [c for c in case["candidates"] if c["name"].startswith("Triton")]
    return min(tritons, key=lambda c: c["median_ms"]) if tritons else None


def matmul_class(case: dict[str, Any]) -> str:
    """The case's class in the named shape set, or "unclassified" (a run from before issue 18)."""
    return case["shape_kind"] if case["shape_kind"] in MATMUL_CLASSES else "unclassified"


def geomean(values: Sequence[float]) -> float:
    return math.exp(sum(math.log(v) for v in values) / len(values))


def ratio_band(pairs: Sequence[tuple[dict[str, Any], dict[str, Any]]]) -> tuple[float, float, float]:
    """The geometric mean, over cases, of each case's median per-repetition ratio of its two
    candidates, and the same of their lowest and of their highest: the mean and its noise."""
    per_case = [paired_ratios(a, b) for a, b in pairs]
    return (geomean([statistics.median(r) for r in per_case]), geomean([min(r) for r in per_case]),
            geomean([max(r) for r in per_case]))


def _band(band: tuple[float, float, float], target: float | None = None) -> str:
    mid, low, high = band
    return f"{mid:.3f} ({low:.3f}-{high:.3f})" + (f" {judge([low, high], target)}" if target is not None else "")


def _mnk(case: dict[str, Any]) -> str:
    ld = case.get("ld")
    return _shape(case) + (f" (rows of A and B {ld} apart)" if ld else "")


def _pairs(cases: list[dict[str, Any]], first: Any, second: Any) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    found = [(first(c), second(c)) for c in cases]
    return [(a, b) for a, b in found if a is not None and b is not None]


def _mine(case: dict[str, Any]) -> dict[str, Any] | None:
    return _role(case, "tmagen")


def _tally(matmuls: list[dict[str, Any]], second: Any, target: float, first: Any = _mine) -> str:
    """How many shapes met the per-shape target (``first`` against ``second``), were within noise of
    it and missed it, naming the last two."""
    verdicts: dict[str, list[str]] = {"met": [], "within noise": [], "**missed**": []}
    for case in matmuls:
        mine, other = first(case), second(case)
        if mine is not None and other is not None:
            verdicts[judge(paired_ratios(mine, other), target)].append(_mnk(case))
    parts = [f"{len(verdicts['met'])} met"]
    for verdict in ("within noise", "**missed**"):
        if verdicts[verdict]:
            parts.append(f"{len(verdicts[verdict])} {verdict} ({', '.join(verdicts[verdict])})")
    return ", ".join(parts)


def _matmul_methods(matmuls: list[dict[str, Any]]) -> str:
    counts: dict[tuple[int, int], int] = {}
    for case in matmuls:
        m = case.get("method")
        if m:
            key = (m["rounds"], m["repetitions"])
            counts[key] = counts.get(key, 0) + 1
    if not counts:
        return ""
    parts = [f"{rounds} rounds x {reps} repetitions for {n} shape{'s' if n > 1 else ''}"
             for (rounds, reps), n in sorted(counts.items(), reverse=True)]
    return " Per shape: " + ", ".join(parts) + " (fewer for launches of a millisecond or more)."


def _matmul_lines(matmuls: list[dict[str, Any]], about: dict[str, Any] | None = None) -> list[str]:
    """The shape set's verdicts, each class's geometric means, then every shape (``about``: where and
    when, for a section measured apart and merged)."""
    mine_names = sorted({c["name"] for case in matmuls for c in case["candidates"] if c["role"] == "tmagen"})
    timed = [c for c in matmuls if _mine(c) is not None]
    lines = ["", "## Matmul", "",
             "C = A B^T, A [M, K] and B [N, K] both K-major (B passed to `tmagen.ops.matmul` and `torch.matmul` as "
             "the `.T` view of its [N, K] tensor), bfloat16 in, fp32 accumulation, bfloat16 out; C contiguous; the "
             "weight-gradient class passes A and B as transposed views instead (x.T of an x [K, M] and dy [K, N], "
             "both MN-major: `tmagen.ops.matmul(x.T, dy)`), Triton's descriptors lying over them as they are. tmagen "
             f"({', '.join(f'`{n}`' for n in mine_names) or 'none'}) beside cuBLAS (`torch.matmul` on the same "
             "tensors) and Triton: a persistent matmul on TMA descriptors and, for M up to 256, a plain one on "
             "pointer tiles, each autotuned on the shape; \"Triton\" is the faster of the two. Where A and B are "
             "sliced views their rows' padding holds NaN, so that a candidate reading past K fails its check. "
             "Launches shorter than 0.2 ms are timed several to a sample (rotating through the buffer sets)."
             + _matmul_methods(matmuls) + _measured_apart(about), "",
             "Targets (issue 18; ratios to cuBLAS in the same loop): the geometric mean over the shape set at or "
             f"above {MATMUL_GEOMEAN_OF_CUBLAS:.2f}, no shape below {MATMUL_FLOOR_OF_CUBLAS:.2f} (small M included), "
             "and ahead of Triton on every shape. A geometric mean is shown as that of each shape's median ratio, "
             "with, in brackets, that of each shape's lowest and of its highest repetition: the target is met when "
             "the lowest reaches it, missed when the highest does not, and otherwise within noise.", ""]
    if timed:
        lines += [f"- Geometric mean of tmagen / cuBLAS over {len(timed)} shapes: "
                  f"{_band(ratio_band(_pairs(timed, _mine, _cublas)), MATMUL_GEOMEAN_OF_CUBLAS)}",
                  f"- Shapes at or above {MATMUL_FLOOR_OF_CUBLAS:.2f} of cuBLAS: "
                  f"{_tally(matmuls, _cublas, MATMUL_FLOOR_OF_CUBLAS)}",
                  f"- Shapes ahead of Triton: {_tally(matmuls, best_triton, OF_BEST_PEER)}"]
        untimed = [_mnk(c) for c in matmuls if _mine(c) is None]
        if untimed:
            lines.append(f"- Without a tmagen figure (see the notes): {', '.join(untimed)}")
        lines += _why_missed(lines)
        lines.append("")
    lines += ["Each class's geometric means (lowest-highest as above), each over the shapes where both candidates "
              "have a figure, and its lowest shape against cuBLAS:", "",
              "| class | shapes | tmagen / cuBLAS | lowest shape | tmagen / Triton | Triton / cuBLAS |",
              "|---|---|---|---|---|---|"]
    classes = [c for c in [*MATMUL_CLASSES, "unclassified"] if any(matmul_class(m) == c for m in matmuls)]
    for name in [*classes, "all"]:
        cases = [m for m in matmuls if name in ("all", matmul_class(m))]
        timed_here = sum(_mine(m) is not None for m in cases)
        count = f"{len(cases)}" if timed_here == len(cases) else f"{timed_here} of {len(cases)}"
        lines.append(f"| {name} | {count} | {_class_cells(cases)} |")
    llm = [m for m in matmuls if matmul_class(m) == "llm-projection"]
    by_m = sorted({m["shape"][0] for m in llm})
    if by_m:
        parts = []
        for rows in by_m:
            pairs = _pairs([m for m in llm if m["shape"][0] == rows], _mine, _cublas)
            parts.append(f"M = {rows}: {_band(ratio_band(pairs))}" if pairs else f"M = {rows}: -")
        lines += ["", "LLM projections by M, tmagen / cuBLAS over their (N, K) pairs: " + "; ".join(parts) + "."]
    lines += ["", "Every shape: TFLOP/s (2MNK over the median time), and per-repetition ratios as their median "
              "(lowest-highest), each judged against its target.", "",
              "| class | M | N | K | A, B row pitch | tmagen TFLOP/s | cuBLAS | Triton | tmagen / cuBLAS | "
              "tmagen / Triton | Triton / cuBLAS | Triton's kernel |",
              "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for case in matmuls:
        lines.append(_matmul_row(case))
    if not timed:
        lines += ["", "No tmagen matmul was timed in this run."]
    return lines


def _class_cells(cases: list[dict[str, Any]]) -> str:
    def band(first: Any, second: Any) -> str:
        pairs = _pairs(cases, first, second)
        return _band(ratio_band(pairs)) if pairs else "-"

    lowest = "-"
    ratios = [(statistics.median(paired_ratios(a, b)), case) for case in cases
              for a, b in _pairs([case], _mine, _cublas)]
    if ratios:
        r, case = min(ratios, key=lambda x: x[0])
        lowest = f"{r:.3f} at {_mnk(case)}"
    return " | ".join([band(_mine, _cublas), lowest, band(_mine, best_triton), band(best_triton, _cublas)])


def _matmul_row(case: dict[str, Any]) -> str:
    m, n, k = case["shape"]
    ld = case.get("ld")
    pitch = ld if ld else "M, N" if matmul_class(case) == "weight-gradient" else "K"
    head = f"| {matmul_class(case)} | {m} | {n} | {k} | {pitch} |"
    mine, cublas, triton = _mine(case), _cublas(case), best_triton(case)

    def tf(c: dict[str, Any] | None) -> str:
        return "-" if c is None else f"{c['tflops']:.1f}" if c["tflops"] < 10 else f"{c['tflops']:.0f}"

    def vs(a: dict[str, Any] | None, b: dict[str, Any] | None, target: float | None) -> str:
        if a is None or b is None:
            return "-"
        r = paired_ratios(a, b)
        return _ratio(r) + (f" {judge(r, target)}" if target is not None else "")

    if mine is None and any(f["role"] == "tmagen" for f in case["failed"]):
        why = next(f["why"] for f in case["failed"] if f["role"] == "tmagen")
        mine_cell = "failed: " + why.replace("|", "\\|")  # a table cell
    else:
        mine_cell = tf(mine)
    kernel = "" if triton is None else "TMA" if "TMA" in triton["name"] else "pointer tiles"
    return (f"{head} {mine_cell} | {tf(cublas)} | {tf(triton)} | {vs(mine, cublas, MATMUL_FLOOR_OF_CUBLAS)} | "
            f"{vs(mine, triton, OF_BEST_PEER)} | {vs(triton, cublas, None)} | {kernel} |")


# ----------------------------------------------------------------------------- fp8 (issue 21)
MISSES_PAGE = "docs/misses.md"  # each missed target's counters and what was tried, written by hand (matmuls and ops)


def _why_missed(lines: list[str]) -> list[str]:
    """The line pointing to :data:`MISSES_PAGE`, where a section's verdicts hold a miss."""
    if any("**missed**" in line for line in lines):
        return [f"- Why each miss: the counters that explain it (ncu, and the clocks at the power cap) and what "
                f"was tried, in [{MISSES_PAGE}]({MISSES_PAGE})"]
    return []


def _named(name: str) -> Any:
    """The case's candidate of that name, or None."""
    def find(case: dict[str, Any]) -> dict[str, Any] | None:
        return next((c for c in case["candidates"] if c["name"] == name), None)

    return find


_TENSOR, _ROW, _BLOCK = (_named(fp8_bench.TMAGEN_TENSOR), _named(fp8_bench.TMAGEN_ROW),
                         _named(fp8_bench.TMAGEN_BLOCK))
_LT_TENSOR, _LT_ROW, _TRITON8 = (_named(fp8_bench.CUBLAS_TENSOR), _named(fp8_bench.CUBLAS_ROW),
                                 _named(fp8_bench.TRITON))
_FAST, _LT_FAST = _named(fp8_bench.TMAGEN_FAST), _named(fp8_bench.CUBLAS_FAST)
_LT_BLOCK = _named(fp8_bench.CUBLAS_BLOCK)


def _block_target(case: dict[str, Any]) -> bool:
    """Whether the block-scaled target applies: M, N and K all 4096 or more."""
    return min(case["shape"]) >= fp8_bench.BLOCK_SCALED_MIN


def _measured_apart(about: dict[str, Any] | None) -> str:
    """The sentence naming where and when a section merged into the run was measured."""
    if not about:
        return ""
    where = (f" Measured apart from the sections above: {about.get('gpu', '?')}, driver "
             f"{about.get('driver', '?')}, {about.get('date', '?')}.")
    if about.get("note"):  # what the run measured, where the code has moved on since
        where += f" {about['note']}"
    return where


def _fp8_lines(cases: list[dict[str, Any]], about: dict[str, Any] | None) -> list[str]:
    """The fp8 section: the targets' verdicts, each class's geometric means, then every shape."""
    where = _measured_apart(about)
    fast = _has_fast(cases)
    lt_block = _ran(cases, fp8_bench.CUBLAS_BLOCK)
    lines = ["", "## fp8 matmul", "",
             "C = (A sa)(B sb)^T, A [M, K] and B [N, K] in float8_e4m3fn, both K-major (B passed as the `.t()` view "
             "of its [N, K] tensor, the layout `torch._scaled_mm` takes), fp32 accumulation, bfloat16 out; the bf16 "
             "section's shapes, sliced views 16 bytes wider than a row (K + 16 elements). Candidates on the same "
             "tensors, interleaved: `tmagen.ops.matmul(a, b.t(), scale_a=, scale_b=, out=c)` with one scale per "
             "tensor, one per row of A and of B, and (square shapes of 4096 and above) block scales of 1 x 128 on A "
             "and 128 x 128 on B" + (", and per tensor with `use_fast_accum=True`" if fast else "") +
             "; cuBLASLt through `torch._scaled_mm` per tensor (use_fast_accum False, its default"
             + (", and True" if fast else "") + ") and row-wise" + (
                 ", and beside tmagen's block scales with the same ones (scale_a M-major, the layout it requires, "
                 "where tmagen's is row-major; scale_b blocked as b.t() is, for both)" if lt_block else "")
             + "; a persistent Triton fp8 "
             "matmul on TMA descriptors with per-tensor scales, autotuned on the shape, whose `tl.dot` keeps its "
             "sums in the tensor core's short accumulator over the whole of K (Triton 3.6 on sm_90: "
             "`max_num_imprecise_acc` defaults to 2^30, never promoted; `use_fast_accum` True in cuBLASLt's "
             "terms), where tmagen and cuBLASLt promote every 128 of K"
             + (" unless `use_fast_accum` is True" if fast else "") + ". "
             "Each was checked first against an fp32 product of the dequantized inputs: "
             "|C - R| <= 2^-8 |R| + 2^-10 S per element, S = |A sa| |B sb|^T (bfloat16's rounding and a "
             "14-bit tensor-core accumulator promoted every 128 of K; lab/fp8_bench.py says why)." + where
             + _matmul_methods(cases), "",
             f"Targets (issue 21; ratios in the same loop): per-tensor scales at a geometric mean of "
             f"{FP8_GEOMEAN_OF_CUBLAS:.2f} or more of cuBLASLt's per-tensor speed over the shape set, no shape below "
             f"{FP8_FLOOR_OF_CUBLAS:.2f}, ahead of Triton on every shape; block-scaled at {FP8_BLOCK_OF_TENSOR:.2f} "
             "or more of tmagen's own per-tensor speed at 4096^3 and above. Judged as in the bf16 section.", ""]
    timed = _pairs(cases, _TENSOR, _LT_TENSOR)
    if timed:
        lines.append(f"- Geometric mean of tmagen / cuBLASLt, per-tensor scales, over {len(timed)} shapes: "
                     f"{_band(ratio_band(timed), FP8_GEOMEAN_OF_CUBLAS)}")
    else:
        lines.append("- No shape has both tmagen's and cuBLASLt's per-tensor figures.")
    lines += [f"- Shapes at or above {FP8_FLOOR_OF_CUBLAS:.2f} of cuBLASLt (per-tensor): "
              f"{_tally(cases, _LT_TENSOR, FP8_FLOOR_OF_CUBLAS, _TENSOR)}",
              "- Shapes ahead of Triton (per-tensor" + (", tmagen promoting, Triton not" if fast else "") +
              f"): {_tally(cases, _TRITON8, OF_BEST_PEER, _TENSOR)}",
              *([f"- Shapes ahead of Triton with `use_fast_accum=True` (neither promoting): "
                 f"{_tally(cases, _TRITON8, OF_BEST_PEER, _FAST)}"] if fast else []),
              f"- Block-scaled at or above {FP8_BLOCK_OF_TENSOR:.2f} of tmagen per-tensor, 4096^3 and above: "
              f"{_tally([c for c in cases if _block_target(c)], _TENSOR, FP8_BLOCK_OF_TENSOR, _BLOCK)}"]
    lines += _why_missed(lines)
    fast_pairs = _pairs(cases, _FAST, _LT_FAST)
    if fast_pairs:
        lines.append(f"- `use_fast_accum=True` (no target), tmagen / cuBLASLt with it over {len(fast_pairs)} shapes: "
                     f"{_band(ratio_band(fast_pairs))}")
    lt_blocks = _pairs(cases, _BLOCK, _LT_BLOCK)
    if lt_blocks:
        lines.append(f"- Block-scaled (no target), tmagen / cuBLASLt's block scales over {len(lt_blocks)} shapes: "
                     f"{_band(ratio_band(lt_blocks))}; cuBLASLt's block-scaled / tmagen per-tensor: "
                     f"{_band(ratio_band(_pairs(cases, _LT_BLOCK, _TENSOR)))}")
    rows = _pairs(cases, _ROW, _LT_ROW)
    if rows:
        lines.append(f"- Per-row scales (no target), tmagen / cuBLASLt row-wise over {len(rows)} shapes: "
                     f"{_band(ratio_band(rows))}")
    refused = [_mnk(c) for c in cases if any(f["name"] == fp8_bench.CUBLAS_TENSOR and f["why"].startswith("refused")
                                             for f in c["failed"])]
    if refused:
        lines.append(f"- Refused by `torch._scaled_mm` (K and N must be multiples of 16; nothing is padded): "
                     f"{', '.join(refused)}")
    untimed = [_mnk(c) for c in cases if _TENSOR(c) is None]
    if untimed:
        lines.append(f"- Without a tmagen per-tensor figure (see the notes): {', '.join(untimed)}")
    lines += ["", "Each class's geometric means (lowest-highest), each over the shapes where both candidates have a "
              "figure, per-tensor scales unless named:", "",
              "| class | shapes | tmagen / cuBLASLt | lowest shape | tmagen / Triton | tmagen / cuBLASLt, per row | "
              "Triton / cuBLASLt |" + (" fast: tmagen / Triton | fast: tmagen / cuBLASLt |" if fast else ""),
              "|---|---|---|---|---|---|---|" + ("---|---|" if fast else "")]
    classes = [c for c in [*MATMUL_CLASSES, "unclassified"] if any(matmul_class(m) == c for m in cases)]
    for name in [*classes, "all"]:
        here = [m for m in cases if name in ("all", matmul_class(m))]
        count = sum(_TENSOR(m) is not None for m in here)
        lines.append(f"| {name} | {len(here) if count == len(here) else f'{count} of {len(here)}'} | "
                     f"{_fp8_class_cells(here, fast)} |")
    lines += ["", "Every shape: TFLOP/s (2MNK over the median time; \"refused\" where `torch._scaled_mm` refuses the "
              "shape, \"failed\" where a check or a launch failed: see the notes), and per-repetition ratios as "
              "their median (lowest-highest), judged against their targets.", "",
              "| class | M | N | K | A, B row pitch | "
              + " | ".join(_FP8_HEADS[name] for name in _fp8_names(fast, lt_block))
              + " | tmagen / cuBLASLt | tmagen / Triton | per row / cuBLASLt row-wise | block / tmagen |"
              + (" block / cuBLASLt block |" if lt_block else "")
              + (" fast: tmagen / Triton | fast: tmagen / cuBLASLt |" if fast else ""),
              "|---|---|---|---|---|" + "---|" * len(_fp8_names(fast, lt_block)) + "---|---|---|---|"
              + ("---|" if lt_block else "") + ("---|---|" if fast else "")]
    lines += [_fp8_row(case, fast, lt_block) for case in cases]
    return lines


_FP8_HEADS = {fp8_bench.TMAGEN_TENSOR: "tmagen", fp8_bench.TMAGEN_ROW: "tmagen per row",
              fp8_bench.TMAGEN_BLOCK: "tmagen block", fp8_bench.TMAGEN_FAST: "tmagen fast",
              fp8_bench.CUBLAS_TENSOR: "cuBLASLt", fp8_bench.CUBLAS_ROW: "cuBLASLt row-wise",
              fp8_bench.CUBLAS_FAST: "cuBLASLt fast", fp8_bench.CUBLAS_BLOCK: "cuBLASLt block",
              fp8_bench.TRITON: "Triton"}


def _has_fast(cases: list[dict[str, Any]]) -> bool:
    """Whether the run had the use_fast_accum candidates (runs before 2026-11-29 did not)."""
    return _ran(cases, fp8_bench.TMAGEN_FAST) or _ran(cases, fp8_bench.CUBLAS_FAST)


def _ran(cases: list[dict[str, Any]], name: str) -> bool:
    """Whether the run had the candidate (timed or failed): runs before 2026-11-29 had no cuBLASLt
    block-scaled one."""
    return any(c["name"] == name for case in cases for c in [*case["candidates"], *case["failed"]])


def _fp8_names(fast: bool, lt_block: bool = False) -> list[str]:
    """The candidates the per-shape table has a column for."""
    return [n for n in fp8_bench.NAMES if (fast or n not in (fp8_bench.TMAGEN_FAST, fp8_bench.CUBLAS_FAST))
            and (lt_block or n != fp8_bench.CUBLAS_BLOCK)]


def _fp8_class_cells(cases: list[dict[str, Any]], fast: bool) -> str:
    def band(first: Any, second: Any) -> str:
        pairs = _pairs(cases, first, second)
        return _band(ratio_band(pairs)) if pairs else "-"

    ratios = [(statistics.median(paired_ratios(a, b)), case) for case in cases
              for a, b in _pairs([case], _TENSOR, _LT_TENSOR)]
    lowest = "-"
    if ratios:
        r, case = min(ratios, key=lambda x: x[0])
        lowest = f"{r:.3f} at {_mnk(case)}"
    return " | ".join([band(_TENSOR, _LT_TENSOR), lowest, band(_TENSOR, _TRITON8), band(_ROW, _LT_ROW),
                       band(_TRITON8, _LT_TENSOR), *([band(_FAST, _TRITON8), band(_FAST, _LT_FAST)] if fast else [])])


def _fp8_row(case: dict[str, Any], fast: bool, lt_block: bool = False) -> str:
    m, n, k = case["shape"]
    ld = case.get("ld")
    failed = {f["name"]: f["why"] for f in case["failed"]}

    def tf(name: str) -> str:
        c = _named(name)(case)
        if c is not None:
            return f"{c['tflops']:.1f}" if c["tflops"] < 10 else f"{c['tflops']:.0f}"
        if name in failed:
            return "refused" if failed[name].startswith("refused") else "failed"
        return "-"

    def vs(first: Any, second: Any, target: float | None) -> str:
        a, b = first(case), second(case)
        if a is None or b is None:
            return "-"
        r = paired_ratios(a, b)
        return _ratio(r) + (f" {judge(r, target)}" if target is not None else "")

    figures = " | ".join(tf(name) for name in _fp8_names(fast, lt_block))
    block = vs(_BLOCK, _TENSOR, FP8_BLOCK_OF_TENSOR if _block_target(case) else None)
    return (f"| {matmul_class(case)} | {m} | {n} | {k} | {ld if ld else 'K'} | {figures} | "
            f"{vs(_TENSOR, _LT_TENSOR, FP8_FLOOR_OF_CUBLAS)} | {vs(_TENSOR, _TRITON8, OF_BEST_PEER)} | "
            f"{vs(_ROW, _LT_ROW, None)} | {block} |" + (f" {vs(_BLOCK, _LT_BLOCK, None)} |" if lt_block else "")
            + (f" {vs(_FAST, _TRITON8, OF_BEST_PEER)} | {vs(_FAST, _LT_FAST, None)} |" if fast else ""))


def _case_name(case: dict[str, Any]) -> str:
    """A case as the notes name it."""
    if case["group"] == "ops":
        return f"ops ({case['shape_kind']}) `{_ops_call(case)}` {case['dtype']} {_shape(case)}"
    return f"{_label(case)} `{case['spec'] or _shape(case)}` {_shape(case)}"


def _notes(data: dict[str, Any]) -> list[str]:
    """Triton's autotuned choices, the checks that failed, the peers that could not run, and rounds
    timed again."""
    lines = ["", "## Notes", ""]
    choices = [f"{_case_name(c)}: {t['name']}: {t['note']}" for c in data["cases"] for t in c["candidates"]
               if t.get("note")]
    if choices:
        lines += ["Triton's autotuner chose:", ""] + [f"- {x}" for x in choices] + [""]
    failed = [f"{_case_name(c)}: {f['name']}: {f['why']}" for c in data["cases"] for f in c["failed"]]
    lines += (["Failed their check (not timed):", ""] + [f"- {x}" for x in failed] + [""]) if failed else \
        ["Every candidate's output matched PyTorch's.", ""]
    for u in data.get("unavailable", []):
        lines.append(f"{u['name']} could not run: {u['why']}.")
    retried = sum(c.get("retried_rounds", 0) for c in data["cases"])
    lines.append(f"Rounds timed again because the CPU had not queued them before the GPU reached them: {retried}.")
    late = [f"{_case_name(c)} ({c['late_rounds']})" for c in data["cases"] if c.get("late_rounds")]
    if late:
        lines.append("Rounds kept although still queued late (a candidate whose launch waits for the GPU; its "
                     "samples may include launch latency): " + ", ".join(late) + ".")
    lines.append("")
    return lines


# ----------------------------------------------------------------------------- tmagen.ops off the grid (issue 19)
def _ops_call(case: dict[str, Any]) -> str:
    """The call a case timed, e.g. ``permute(x, [0, 2, 3, 1])`` or ``copy(x.mT)``."""
    return case.get("call") or "?"


def _ops_dims(case: dict[str, Any]) -> str:
    op = case.get("op")
    return "-2,-1" if op == "transpose" else ",".join(map(str, case.get("dims", []))) if op == "permute" else "-"


def _ops_order(case: dict[str, Any]) -> int:
    kind = case["shape_kind"]
    return ops_bench.CLASSES.index(kind) if kind in ops_bench.CLASSES else len(ops_bench.CLASSES)


def _triton_copy(case: dict[str, Any]) -> dict[str, Any] | None:
    """Triton's copy of the case: the flat copy, or, for a view, the fastest Triton kernel that
    takes it."""
    flat = next((c for c in case["candidates"] if c["name"] == ops_bench.TRITON_NAMES["copy"]), None)
    return flat if flat is not None else best_triton(case)


def _ops_verdicts(cases: list[dict[str, Any]], second: Any, target: float) -> str:
    verdicts: dict[str, list[str]] = {"met": [], "within noise": [], "**missed**": []}
    for case in cases:
        mine, other = _mine(case), second(case)
        if mine is not None and other is not None:
            verdicts[judge(paired_ratios(mine, other), target)].append(
                f"{case['shape_kind']} `{_ops_call(case)}` {case['dtype']} {_shape(case)}")
    if not any(verdicts.values()):
        return "no case with both figures"
    parts = [f"{len(verdicts['met'])} met"]
    for verdict in ("within noise", "**missed**"):
        if verdicts[verdict]:
            parts.append(f"{len(verdicts[verdict])} {verdict} ({'; '.join(verdicts[verdict])})")
    return ", ".join(parts)


def _host_line(record: dict[str, Any]) -> str:
    """The host time per call, each pair judged round by round (PyTorch's time over tmagen's)."""
    us, median = record["host_us"], record["median_us"]
    parts = []
    for mine, theirs in record["pairs"]:
        if mine not in us or theirs not in us:
            continue
        r = [t / m for m, t in zip(us[mine], us[theirs])]
        parts.append(f"`{mine}` {median[mine]:.1f} us against `{theirs}` {median[theirs]:.1f} us, "
                     f"PyTorch's / tmagen's {_ratio(r)} {judge(r, ops_bench.HOST_OF_TORCH)}")
    shape = "x".join(map(str, record["shape"]))
    return (f"- Host time per call on a {shape} {record['dtype']} tensor (a new output each call; "
            f"{len(next(iter(us.values())))} rounds of {record['calls']} calls, order rotated): " + "; ".join(parts))


def _ops_lines(cases: list[dict[str, Any]], about: dict[str, Any] | None) -> list[str]:
    """The ops section: its targets' verdicts, every case, then every candidate."""
    host = [c for c in cases if "host_us" in c]
    cases = sorted((c for c in cases if "host_us" not in c and c["shape_kind"] != ops_bench.HOST), key=_ops_order)
    lines = ["", "## tmagen.ops on every shape and view", "",
             "`tmagen.ops.transpose`, `copy` and `permute` (each with `out=`) off the 1 GiB grid above: small "
             "tensors (16 KiB to 4 MiB), rows not whole 16 bytes, ragged extents, batches, permutes, views (a copy "
             "of a transposed view is a transpose) and 1 GiB ones, of 1, 2, 4, 8 and 16-byte elements (bool and "
             "complex128 among them). Candidates on the same tensors, interleaved: `cudaMemcpyAsync` of the same "
             "bytes (the limit), PyTorch (`clone()`, `.contiguous()`, `.transpose(-2,-1).contiguous()`, "
             "`.permute(dims).contiguous()`), CuPy, and the Triton kernels a Triton user would write where the "
             "layout is theirs, each autotuned on the case: a flat copy, pointer tiles with `tl.trans` on a 3-D grid "
             "(batches on its third axis), the same on TMA descriptors (where rows are whole 16 bytes), tiles of "
             "rows on a 3-D grid for [P, S, H, D] -> [P, H, S, D], and a strided gather for permutes and views "
             "(Triton has no 16-byte type: complex128 moves as pairs of float64). Each was checked bit for bit "
             "against PyTorch's result first (and a peer that hands back its input fails). Tensors that fit in a "
             "few L2s rotate through several buffer sets; launches shorter than 0.2 ms are timed several to a "
             "sample, so that the figures are the GPU's: the host's time per call is measured apart."
             + _measured_apart(about), "",
             f"Targets (issue 19; ratios in the same loop, judged as above): every case at or above the best peer; "
             f"large cases at or above {ops_bench.LARGE_OF_MEMCPY} of memcpy; copies at or above Triton's copy (for "
             "a copy of a view, the fastest Triton kernel that takes it); host time per call on 64 x 64 no more "
             "than PyTorch's.", ""]
    lines.append(f"- Cases at or above the best peer: {_ops_verdicts(cases, best_peer, ops_bench.OF_BEST_PEER)}")
    large = [c for c in cases if c["shape_kind"] == "large"]
    if large:
        lines.append(f"- Large cases at or above {ops_bench.LARGE_OF_MEMCPY} of memcpy: "
                     f"{_ops_verdicts(large, lambda c: _role(c, 'limit'), ops_bench.LARGE_OF_MEMCPY)}")
    copies = [c for c in cases if c.get("op") == "copy"]
    if copies:
        lines.append(f"- Copies at or above Triton's copy: "
                     f"{_ops_verdicts(copies, _triton_copy, ops_bench.COPY_OF_TRITON)}")
    lines += [_host_line(h) for h in host]
    lines += _why_missed(lines)
    untimed = [f"{c['shape_kind']} `{_ops_call(c)}` {c['dtype']} {_shape(c)}" for c in cases if _mine(c) is None]
    if untimed:
        lines.append(f"- Without a tmagen figure (see the notes): {'; '.join(untimed)}")
    lines += ["", "Every case: GB/s (bytes read plus written over the median time), and per-repetition ratios as "
              "their median (lowest-highest), each judged against its target.", "",
              "| class | op | dtype | shape | dims | tmagen GB/s | of memcpy | best peer | its GB/s | "
              "tmagen / best peer | tmagen / Triton copy |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    lines += [_ops_row(c) for c in cases]
    lines += _ops_every_candidate(cases)
    return lines


def _ops_row(case: dict[str, Any]) -> str:
    head = f"| {case['shape_kind']} | `{_ops_call(case)}` | {case['dtype']} | {_shape(case)} | {_ops_dims(case)} |"
    mine, limit, peer = _mine(case), _role(case, "limit"), best_peer(case)
    if mine is None:
        why = next((f["why"] for f in case["failed"] if f["role"] == "tmagen"), "not timed").replace("|", "\\|")
        return f"{head} failed: {why} | | | | | |"

    def vs(other: dict[str, Any] | None, target: float | None) -> str:
        if other is None:
            return "-"
        r = paired_ratios(mine, other)
        return _ratio(r) + (f" {judge(r, target)}" if target is not None else "")

    of_memcpy = vs(limit, ops_bench.LARGE_OF_MEMCPY if case["shape_kind"] == "large" else None)
    triton_copy = vs(_triton_copy(case), ops_bench.COPY_OF_TRITON) if case.get("op") == "copy" else "-"
    peer_name, peer_gbps = (peer["name"], f"{peer['gbps']:.0f}") if peer else ("none", "")
    return (f"{head} {mine['gbps']:.0f} | {of_memcpy} | {peer_name} | {peer_gbps} | "
            f"{vs(peer, ops_bench.OF_BEST_PEER)} | {triton_copy} |")


def _ops_column(name: str) -> str:
    """The column of a peer in the table of every candidate: one for PyTorch's call and one for
    CuPy's (each case has one of each: the main table names it), one per Triton kernel."""
    return "PyTorch" if name.startswith("torch") else "CuPy" if name.startswith("cupy") else name


def _ops_every_candidate(cases: list[dict[str, Any]]) -> list[str]:
    columns: list[str] = []
    for case in cases:
        for c in [*case["candidates"], *case["failed"]]:
            if c["role"] == "peer" and _ops_column(c["name"]) not in columns:
                columns.append(_ops_column(c["name"]))
    lines = ["", "Every candidate of the ops cases: GB/s, and in brackets the ratio to the same loop's memcpy "
             "(\"-\" where a peer does not take the layout; PyTorch's and CuPy's calls are the op's: see above).",
             "", "| class | op | dtype | shape | memcpy | tmagen | " + " | ".join(columns) + " |",
             "|---|---|---|---|---|---|" + "---|" * len(columns)]
    for case in cases:
        limit, mine = _role(case, "limit"), _mine(case)
        by_column = {_ops_column(c["name"]): c for c in case["candidates"] if c["role"] == "peer"}
        failed = {_ops_column(f["name"]) for f in case["failed"]}
        peers = " | ".join(_cell(by_column.get(n), limit, failed, n) for n in columns)
        lines.append(f"| {case['shape_kind']} | `{_ops_call(case)}` | {case['dtype']} | {_shape(case)} | "
                     f"{_cell(limit, limit, failed)} | {_cell(mine, limit, failed)} | {peers} |")
    return lines


def plot_series(data: dict[str, Any]) -> dict[str, list[tuple[int, float]]]:
    """Bandwidth (GB/s) against size (MiB): one series per kernel and one for memcpy."""
    _require_format_2(data)
    series: dict[str, list[tuple[int, float]]] = {}
    memcpy: dict[int, list[float]] = {}  # each sweep case timed its own memcpy: their median
    for case in data["cases"]:
        if case["group"] != "sweep":
            continue
        for c in case["candidates"]:
            if c["role"] == "limit":
                memcpy.setdefault(case["size_mib"], []).append(c["gbps"])
            else:
                series.setdefault(case["spec"].removeprefix("bench_"), []).append((case["size_mib"], c["gbps"]))
    if memcpy:
        series["cudaMemcpyAsync"] = [(size, statistics.median(v)) for size, v in sorted(memcpy.items())]
    return series


def plot_svg(data: dict[str, Any]) -> str:
    """Bandwidth against size, one line per kernel and one for memcpy, as a small hand-made SVG."""
    series = plot_series(data)
    if not series:  # a run of some groups only (benchmarks/run.py --only)
        return ('<svg xmlns="http://www.w3.org/2000/svg" width="640" height="40"><text x="10" y="24" '
                'style="font:12px sans-serif">This run measured no size sweep.</text></svg>\n')
    sizes = sorted({s for pts in series.values() for s, _ in pts})
    top = max(g for pts in series.values() for _, g in pts) * 1.1
    width, height, left, bottom = 640, 360, 60, 40
    colours = ["#222", "#4e79a7", "#f28e2b", "#e15759", "#59a14f", "#b07aa1"]

    def x(size: int) -> float:
        return left + (sizes.index(size) / max(len(sizes) - 1, 1)) * (width - left - 150)

    def y(gbps: float) -> float:
        return height - bottom - gbps / top * (height - bottom - 20)

    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}">',
             '<style>text{font:11px sans-serif}</style>',
             f'<line x1="{left}" y1="{height - bottom}" x2="{width - 150}" y2="{height - bottom}" stroke="#888"/>',
             f'<line x1="{left}" y1="20" x2="{left}" y2="{height - bottom}" stroke="#888"/>']
    for gb in range(0, int(top) + 1, 1000):
        parts.append(f'<text x="{left - 8}" y="{y(gb) + 4:.0f}" text-anchor="end">{gb}</text>')
    for size in sizes:
        label = f"{size} MiB" if size < 1024 else f"{size // 1024} GiB"
        parts.append(f'<text x="{x(size):.0f}" y="{height - bottom + 16}" text-anchor="middle">{label}</text>')
    parts.append(f'<text x="14" y="{height / 2:.0f}" transform="rotate(-90 14 {height / 2:.0f})" '
                 'text-anchor="middle">GB/s (read + written)</text>')
    for i, (name, pts) in enumerate(sorted(series.items(), key=lambda kv: kv[0] != "cudaMemcpyAsync")):
        pts = sorted(pts)
        colour = colours[i % len(colours)]
        path = " ".join(f"{x(s):.1f},{y(g):.1f}" for s, g in pts)
        parts.append(f'<polyline fill="none" stroke="{colour}" stroke-width="2" points="{path}"/>')
        parts.append(f'<text x="{width - 140}" y="{30 + 16 * i}" fill="{colour}">{name}</text>')
    parts.append("</svg>")
    return "\n".join(parts) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    """Write --markdown and --plot from a run's JSON: 0 when written, 2 for a file that cannot be read,
    is not such a run, or a page that cannot be written."""
    p = argparse.ArgumentParser(prog="python -m lab.bench_report", description=__doc__.split("\n\n")[0])
    p.add_argument("bench_json", metavar="BENCH_JSON", help="the JSON that benchmarks/run.py wrote")
    p.add_argument("--markdown", default="BENCHMARKS.md")
    p.add_argument("--plot", default="benchmarks/bandwidth.svg")
    args = p.parse_args(argv)

    def fail(path: str, why: str) -> int:
        print(f"{p.prog}: {path}: {why}", file=sys.stderr)
        return 2

    try:
        text = Path(args.bench_json).read_text(encoding="utf-8")
    except (OSError, ValueError) as exc:  # ValueError: undecodable bytes, or a NUL in the path
        return fail(args.bench_json, f"cannot read it: {_reason(exc)}")
    try:
        data = json.loads(text)
        page, plot = markdown_report(data, args.plot), plot_svg(data)
    except (KeyError, TypeError, IndexError, ValueError, AttributeError) as exc:
        return fail(args.bench_json, f"not a benchmark run of benchmarks/run.py: {type(exc).__name__} {exc}")
    for path, content in ((args.markdown, page), (args.plot, plot)):
        try:
            Path(path).write_text(content, encoding="utf-8")
        except (OSError, ValueError) as exc:
            return fail(path, f"cannot write it: {_reason(exc)}")
    print(f"wrote {args.markdown} and {args.plot}")
    return 0


def _reason(exc: Exception) -> str:
    return (exc.strerror or str(exc)) if isinstance(exc, OSError) else str(exc)


if __name__ == "__main__":
    sys.exit(main())
