"""docs/fp8-accumulator.md from the accumulator probe's JSON (tests/gpu/test_fp8_accumulator.py writes it,
tests/data/hw_h200/fp8_accumulator.json holds the committed run): pure, JSON in, markdown out; until a
run is committed the page says what is expected and how to measure it.

    python -m lab.fp8_accumulator            rewrites docs/fp8-accumulator.md from the committed JSON
    python -m lab.fp8_accumulator --check    exits 1 when the page is not what the JSON renders
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from typing import Any

RUN_JSON = "tests/data/hw_h200/fp8_accumulator.json"
PAGE = "docs/fp8-accumulator.md"
HEADER = f"<!-- Written by `python -m lab.fp8_accumulator` from {RUN_JSON}: do not edit. -->"
MODES = {  # mode -> what it adds
    "one_instruction": "both terms products of one wgmma (d starts at 0)",
    "carried": "2^X from one wgmma, the small product from the next, accumulating onto it",
    "registers": "d = 2^X loaded from memory, one wgmma adds the small product",
    "passthrough": "d = 2^X +- 2^(X-e) loaded from memory, one wgmma adds zero products",
}
FP32 = {"+": 23, "-": 24}  # float32 with round to nearest even: the largest e of 1 +- 2^-e it holds
MEASURE = ("To measure (under a minute on an H200 or H100): `TMAGEN_REPORT_DIR=OUT python3 -m pytest -q "
           "tests/gpu/test_fp8_accumulator.py`, copy `OUT/fp8_accumulator.json` to "
           f"`{RUN_JSON}` and run `python -m lab.fp8_accumulator`.")
SOURCES = [
    "DeepSeek-V3 Technical Report (arXiv 2412.19437), section 3.3.2, *Increasing Accumulation Precision*: the "
    "accumulation of fp8 GEMMs on H800 tensor cores retains around 14 bits; their kernels promote the partial sums "
    "into fp32 registers every 128 of K (four wgmma of k32). Section 3.5.2 gives the mechanism: fixed-point "
    "accumulation, each product's mantissa right-shifted to the largest exponent, the bits past the highest 14 "
    "truncated.",
    "SageAttention2 (Zhang et al., arXiv 2411.10958): the accumulator of the fp8 `mma` on Ada and Hopper is "
    "\"FP22\" (1 sign, 8 exponent, 13 mantissa bits); a D of more than 13 fraction bits comes back with its "
    "lowest 10 fraction bits cut to zero, even with zero A and B. Discussed beside DeepSeek's figure in "
    "deepseek-ai/DeepGEMM issue 37, where one reader did not reproduce the cut D with `mma.sync` (the probe's "
    "passthrough mode asks it of wgmma).",
    "cuBLASLt's `CUBLASLT_MATMUL_DESC_FAST_ACCUM` and Triton's `max_num_imprecise_acc` (triton-lang/triton pull "
    "request 2300) are the libraries' switches between this accumulation and periodic promotion into fp32.",
]


def _fmt(v: float) -> str:
    """An outcome d / 2^X - 1: 0, +-2^-k, or the number."""
    if v == 0:
        return "0"
    m, k = math.frexp(abs(v))
    return f"{'-' if v < 0 else '+'}2^{k - 1}" if m == 0.5 else repr(v)


def _lost(result: dict[str, Any]) -> str:
    """The outcomes at the first e past the exact run: what the accumulator made of that addend."""
    key = str(result["largest_exact"] + 1)
    outcomes = result["outcomes"].get(key)
    if not outcomes:
        return "-"
    return f"e = {key}: " + ", ".join(f"{_fmt(v)} ({n})" for v, n in outcomes)


def fp8_fraction_bits(data: dict[str, Any]) -> int:
    """The statement's figure: the fewest fraction bits any fp8 case keeps in any mode, for + addends."""
    return min(r["+"]["largest_exact"] for label, case in data["cases"].items() if "e4m3" in label or "e5m2" in label
               for r in case["modes"].values())


def control_fraction_bits(data: dict[str, Any]) -> int:
    return min(r["+"]["largest_exact"] for label, case in data["cases"].items()
               if not ("e4m3" in label or "e5m2" in label) for r in case["modes"].values())


def statement(data: dict[str, Any]) -> str:
    """The one-line finding, derived from the JSON (the CPU test holds the page to it)."""
    f8, ctl = fp8_fraction_bits(data), control_fraction_bits(data)
    return (f"**Measured on the {data['gpu']} ({data['date']}): the fewest fraction bits an fp8 wgmma's sum kept, "
            f"in any operand pairing and mode below, is {f8} ({f8 + 1} significant bits); the bfloat16 and float16 "
            f"controls kept {ctl} (float32 holds {FP32['+']}).**")


def markdown_report(data: dict[str, Any]) -> str:
    lines = ["# The fp8 tensor-core accumulator", "", HEADER, "", statement(data), "",
             "Each figure is the largest e for which the accumulator returned 2^X +- 2^(X-e) exactly (\"exact to\"), "
             "and the largest whose addend still changed every sum (\"changes to\"), from "
             "`tests/gpu/fp8_accumulator_probe.py`: e = 1 .. 32, magnitudes 2^X of 2^0 and 2^16, the big term first "
             "and last in the instruction, normal fp8 factors only. float32 with round to nearest even would give "
             f"{FP32['+']} / {FP32['+']} for + and {FP32['-']} / {FP32['-']} for -. \"First lost\" lists the outcomes "
             "(d / 2^X - 1, with their cell counts) at the first e past the exact run.", "",
             "| operands | instruction | mode | + exact to | + changes to | - exact to | - changes to | first lost (+) "
             "| first lost (-) |",
             "|---|---|---|---:|---:|---:|---:|---|---|"]
    for label, case in data["cases"].items():
        for mode, r in case["modes"].items():
            lines.append(f"| {label} | `{case['instruction']}` | {mode} | {r['+']['largest_exact']} | "
                         f"{r['+']['largest_changed']} | {r['-']['largest_exact']} | {r['-']['largest_changed']} | "
                         f"{_lost(r['+'])} | {_lost(r['-'])} |")
    lines += ["", "Modes:", ""] + [f"- {mode}: {what}" for mode, what in MODES.items()]
    lines += ["", *_implications(), "", "## Sources", ""] + [f"- {s}" for s in SOURCES] + ["", MEASURE, ""]
    return "\n".join(lines)


def _implications() -> list[str]:
    return ["What tmagen does about it: the matmul kind's `promote_every` (128 of K by default for fp8) adds the "
            "tensor core's partial sums into fp32 registers that often, so no more than 128 products pass through "
            "the short accumulator before they reach a full float32; `promote_every: 0` leaves the whole K to it."]


def placeholder() -> str:
    return "\n".join([
        "# The fp8 tensor-core accumulator", "", HEADER, "",
        "Not measured yet: no GPU run of the accumulator probe has been committed.", "",
        "What the probe measures (`tests/gpu/fp8_accumulator_probe.py`): how many bits of 2^X +- 2^(X-e) "
        "(e = 1 .. 32) come back from wgmma's fp32 accumulator, with both terms products of one instruction, "
        "carried from one instruction into the next, added onto registers loaded from memory, and passed through "
        "an instruction of zero products; for every pairing of e4m3 and e5m2 (m64n16k32) and for bfloat16 and "
        "float16 (m64n8k16) as controls. Public characterisations lead one to expect about 13 to 14 bits for fp8 "
        "and the full float32 for the controls:", "",
        *[f"- {s}" for s in SOURCES], "", *_implications(), "", MEASURE, ""])


def render(repo: Path) -> str:
    run = repo / RUN_JSON
    return markdown_report(json.loads(run.read_text())) if run.exists() else placeholder()


def main(argv: list[str]) -> int:
    repo = Path(__file__).resolve().parents[1]
    page, text = repo / PAGE, render(repo)
    if "--check" in argv:
        current = page.read_text() if page.exists() else ""
        if current != text:
            print(f"{PAGE} is not what {RUN_JSON} renders: run python -m lab.fp8_accumulator", file=sys.stderr)
            return 1
        return 0
    page.write_text(text)
    print(f"wrote {PAGE}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
