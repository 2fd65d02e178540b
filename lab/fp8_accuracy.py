"""The fp8 matmul's accuracy study (issue 21, part 2): how far each fp8 product is from the exact
product of its dequantized inputs, as K grows, and what promoting the tensor core's partial sums
costs in speed.

    python -m lab.fp8_accuracy OUT.json                       # on the GPU: measures, writes OUT.json and the page
    python -m lab.fp8_accuracy OUT.json --markdown PAGE.md    # the page elsewhere (default docs/fp8-accuracy.md)
    python -m lab.fp8_accuracy --report OUT.json              # the page from a run's JSON, on any machine

For K in KS and M = N in MNS, e4m3 A [M, K] and B [N, K], each quantized from random values with
one scale per tensor (amax / 448), of two kinds: ``normal`` (signed normal values: products of both
signs, partial sums growing as sqrt(K)) and ``positive`` (the magnitudes of normal values: every
product positive, partial sums growing as K, which makes an accumulator's rounding grow fastest).
Each candidate writes C in float32, compared with a float64 product of the dequantized inputs
(A * sa)(B * sb)^T: the largest and the mean absolute error. The candidates:

* tmagen through ``tmagen.ops.matmul`` (its fp8 kernels promote every 128 of K, the default);
* tmagen through ``tmagen.load`` on a spec of its own per ``promote_every`` in PROMOTE_EVERY (0:
  never, the tensor core's accumulator carries the whole K) (:func:`promote_spec`);
* cuBLASLt through ``torch._scaled_mm``, ``use_fast_accum`` False (its default: promoted) and True.

The target (issue 21): tmagen's largest error no worse than cuBLASLt's (use_fast_accum False) on the
same inputs for every K up to 16384. Then the same kernels timed, interleaved, on a few large
shapes with bfloat16 C: the error/speed trade of the promotion interval.

The page (:func:`accuracy_markdown`) is a pure function of the JSON.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

KS = (256, 1024, 4096, 16384)
MNS = (256, 2048)
INPUTS = {"normal": "signed normal values, per-tensor scale amax / 448",
          "positive": "|normal| values (every product positive: partial sums grow as K)"}
PROMOTE_EVERY = (128, 256, 512, 0)  # tmagen specs of their own: K elements between promotions (0: never)
TIMED_SHAPES = ((4096, 4096, 4096), (8192, 8192, 8192), (4096, 4096, 16384))
PAGE = "docs/fp8-accuracy.md"

OPS = "tmagen.ops.matmul (promote every 128)"
CUBLAS = "cuBLASLt (torch._scaled_mm)"
CUBLAS_FAST = "cuBLASLt, use_fast_accum (torch._scaled_mm)"


def spec_name(every: int) -> str:
    return f"tmagen spec, promote_every {every}" + (" (never)" if every == 0 else "")


def candidate_names() -> list[str]:
    return [OPS, *(spec_name(p) for p in PROMOTE_EVERY), CUBLAS, CUBLAS_FAST]


# ----------------------------------------------------------------------------- tmagen's specs
def default_fp8_spec() -> dict[str, Any]:
    """An fp8 matmul spec as specs/matmul_fp8_e4m3.json has it: e4m3 A and B in [64, 128] boxes (64
    rows of one 128-byte swizzled line), both K-major, 128 x 128 x 128 tiles (the promoted sums
    double the accumulators, so 128 x 256 does not fit a consumer's registers), two consumer
    warpgroups, six stages."""
    def operand(name: str) -> dict[str, Any]:
        return {"name": name, "dtype": "float8_e4m3", "shape": [4096, 4096], "box": [64, 128],
                "swizzle": {"mode": "128B"}}

    return {"name": "fp8_matmul", "tensors": [operand("a"), operand("b"),
                                              {"name": "c", "dtype": "bfloat16", "shape": [4096, 4096],
                                               "box": [64, 64], "swizzle": {"mode": "128B"}}],
            "kernel": {"kind": "matmul", "tile": [128, 128, 128], "consumers": 2, "stages": 6}}


REPO = Path(__file__).resolve().parent.parent
SPEC_FOLDERS = (REPO / "tmagen" / "ops_specs", REPO / "specs")  # the tuned specs first, then the examples


def base_fp8_spec(folders: Sequence[Path] = SPEC_FOLDERS) -> dict[str, Any]:
    """The first fp8 matmul spec (A in float8_e4m3, by file name) of the first of ``folders`` that has
    one: tmagen/ops_specs' tuned one where there is one, else the example specs/matmul_fp8_e4m3.json;
    :func:`default_fp8_spec` where none has one."""
    for folder in folders:
        for path in sorted(folder.glob("*.json")):
            spec = json.loads(path.read_text())
            if spec.get("kernel", {}).get("kind") == "matmul" and spec["tensors"][0].get("dtype") == "float8_e4m3":
                return spec
    return default_fp8_spec()


def promote_spec(every: int, out_dtype: str, base: dict[str, Any] | None = None) -> dict[str, Any]:
    """``base`` (default :func:`base_fp8_spec`) with ``promote_every`` set, C of ``out_dtype``
    (float32 or bfloat16; a 128-byte line of either as C's box row), and one kernel of the spec's
    tile (dispatch single), so that settings differ in nothing else."""
    spec = json.loads(json.dumps(base or base_fp8_spec()))
    spec["name"] = f"fp8_promote_{every}_{out_dtype}"
    spec["description"] = (f"the fp8 matmul with promote_every {every}, {out_dtype} C: lab/fp8_accuracy.py's "
                           "error/speed trade")
    c = next(t for t in spec["tensors"] if t["name"] == spec["kernel"].get("c", "c"))
    c["dtype"] = out_dtype
    c["box"] = [c["box"][0], 128 // {"float32": 4, "bfloat16": 2}[out_dtype]]
    spec["kernel"]["promote_every"] = every
    spec["kernel"]["dispatch"] = "single"
    return spec


# ----------------------------------------------------------------------------- measuring (GPU)
def _torch() -> Any:
    import torch

    return torch


def operands(kind: str, rows: int, k: int, gen: Any) -> tuple[Any, Any]:
    """An e4m3 [rows, K] operand of ``kind`` and its per-tensor fp32 scale (amax / 448)."""
    torch = _torch()
    x = torch.randn(rows, k, device="cuda", generator=gen)
    if kind == "positive":
        x = x.abs()
    scale = x.abs().max().clamp_min(1e-30) / 448.0
    return (x / scale).to(torch.float8_e4m3fn), scale.float().reshape(())


Product = Callable[[Any, Any, Any, Any, Any], object]  # (a, b [N, K], sa, sb, out) -> out = (a sa)(b sb)^T


def products(out_dtype: str) -> dict[str, Product | str]:
    """Each candidate's product into a C of ``out_dtype``, or why it cannot run (a spec refused)."""
    torch = _torch()
    import tmagen
    import tmagen.ops

    matmul: Any = tmagen.ops.matmul  # scale_a and scale_b: issue 21's API

    def ops(a: Any, b: Any, sa: Any, sb: Any, out: Any) -> None:
        matmul(a, b.t(), scale_a=sa, scale_b=sb, out=out)

    def scaled(fast: bool) -> Product:
        def run(a: Any, b: Any, sa: Any, sb: Any, out: Any) -> None:
            torch._scaled_mm(a, b.t(), sa, sb, out_dtype=out.dtype, use_fast_accum=fast, out=out)

        return run

    found: dict[str, Product | str] = {OPS: ops}
    for every in PROMOTE_EVERY:
        try:
            kernel = tmagen.load(promote_spec(every, out_dtype))
        except Exception as exc:  # noqa: BLE001 - a setting the kernel refuses is reported
            found[spec_name(every)] = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
            continue

        def run(a: Any, b: Any, sa: Any, sb: Any, out: Any, kernel: Any = kernel) -> None:
            kernel(a, b, out=out, scale_a=sa, scale_b=sb)

        found[spec_name(every)] = run
    found[CUBLAS] = scaled(False)
    found[CUBLAS_FAST] = scaled(True)
    return found


def _why(exc: Exception) -> str:
    return f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"[:300]


def measure_errors(seed: int = 0, ks: Sequence[int] = KS, mns: Sequence[int] = MNS) -> list[dict[str, Any]]:
    """Every input kind, M = N and K: each candidate's largest and mean absolute error against the
    float64 product of the dequantized inputs."""
    torch = _torch()
    found = products("float32")
    rows = []
    for kind in INPUTS:
        for mn in mns:
            for k in ks:
                gen = torch.Generator(device="cuda")
                gen.manual_seed(seed)
                a, sa = operands(kind, mn, k, gen)
                b, sb = operands(kind, mn, k, gen)
                reference = (a.double() * sa.double()) @ (b.double() * sb.double()).T
                row: dict[str, Any] = {"inputs": kind, "m": mn, "n": mn, "k": k,
                                       "max_abs_reference": reference.abs().max().item(), "candidates": {}}
                for name, product in found.items():
                    if isinstance(product, str):
                        row["candidates"][name] = {"failed": product}
                        continue
                    out = torch.full((mn, mn), float("nan"), device="cuda", dtype=torch.float32)
                    try:
                        product(a, b, sa, sb, out)
                        torch.cuda.synchronize()
                    except Exception as exc:  # noqa: BLE001 - reported in the table
                        row["candidates"][name] = {"failed": _why(exc)}
                        continue
                    err = (out.double() - reference).abs()
                    row["candidates"][name] = {"max_abs": err.max().item(), "mean_abs": err.mean().item()}
                rows.append(row)
                print(one_line(row), flush=True)
    return rows


def measure_speed(method: Any = None, shapes: Sequence[tuple[int, int, int]] = TIMED_SHAPES) -> list[dict[str, Any]]:
    """The same candidates timed on ``shapes`` with bfloat16 C, interleaved (tmagen.bench), each
    checked first to be the product (within 2^-5 of the largest |R|: the table above measures how
    close; this check catches a wrong product, off by about |R|)."""
    from lab import peers
    from tmagen.bench import Method, time_case

    torch = _torch()
    method = method or Method(rounds=10, repetitions=3, warmup=2)
    found = products("bfloat16")
    records = []
    for m, n, k in shapes:
        peers.free_memory()
        gen = torch.Generator(device="cuda")
        gen.manual_seed(1)
        a, sa = operands("normal", m, k, gen)
        b, sb = operands("normal", n, k, gen)
        reference = (a.float() @ b.float().T) * sa * sb
        c = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
        refused = [{"name": name, "role": "tmagen", "why": p} for name, p in found.items() if isinstance(p, str)]
        cands = [_timed(name, p, (a, b, sa, sb, c), reference) for name, p in found.items() if not isinstance(p, str)]
        record = time_case(cands, method, shape=(m, n, k), dtype="float8_e4m3", bytes_moved=(m + n) * k + 2 * m * n,
                           flops=2 * m * n * k)
        record["failed"] = refused + record["failed"]
        records.append(record)
        print("x".join(map(str, (m, n, k))) + ": " + ", ".join(f"{c['name']} {c['tflops']:.0f}"
                                                           for c in record["candidates"]), flush=True)
    return records


def _timed(name: str, product: Product, args: tuple[Any, Any, Any, Any, Any], reference: Any) -> Any:
    """A candidate of the timing: ``product(*args)``, checked to be within 2^-5 of the largest |R|."""
    from tmagen.bench import Candidate

    c = args[4]

    def check() -> str | None:
        c.fill_(float("nan"))
        product(*args)
        err = (c.float() - reference).abs().max().item()
        bound = 2.0 ** -5 * reference.abs().max().item()
        return None if err <= bound else f"max |C - R| = {err:.3g}, more than {bound:.3g}"

    role = "peer" if name.startswith("cuBLAS") else "tmagen"
    return Candidate(name, role, lambda i: product(*args), check)


def one_line(row: dict[str, Any]) -> str:
    parts = []
    for name, r in row["candidates"].items():
        parts.append(f"{name.split(' (')[0]}={r['max_abs']:.3g}" if "max_abs" in r else f"{name}: failed")
    return f"{row['inputs']:8s} {row['m']}x{row['n']}x{row['k']}: " + ", ".join(parts)


def machine() -> dict[str, Any]:
    import importlib

    torch = _torch()
    versions = {"torch": torch.__version__}
    try:
        versions["tmagen"] = importlib.import_module("tmagen").__version__
    except (ImportError, AttributeError):
        pass
    props = torch.cuda.get_device_properties(0)
    return {"gpu": props.name, "sms": props.multi_processor_count, "versions": versions}


# ----------------------------------------------------------------------------- the page (pure)
def _num(x: float) -> str:
    return f"{x:.3g}" if x else "0"


def _cell(r: dict[str, Any] | None) -> str:
    if r is None:
        return "-"
    if "failed" in r:
        return "failed: " + r["failed"].replace("|", "\\|")
    return f"{_num(r['max_abs'])} ({_num(r['mean_abs'])})"


def verdict(row: dict[str, Any], mine: str = OPS, theirs: str = CUBLAS) -> str:
    """met when ``mine``'s largest error is at most ``theirs``' on the row's inputs, **missed**
    when above, "-" where either has no figure."""
    a, b = row["candidates"].get(mine, {}), row["candidates"].get(theirs, {})
    if "max_abs" not in a or "max_abs" not in b:
        return "-"
    return "met" if a["max_abs"] <= b["max_abs"] else "**missed**"


def accuracy_markdown(data: dict[str, Any]) -> str:
    """docs/fp8-accuracy.md for the run in ``data`` (what :func:`main` wrote)."""
    rows = data["errors"]
    names = [n for n in candidate_names() if any(n in r["candidates"] for r in rows)]
    names += sorted({n for r in rows for n in r["candidates"]} - set(names))
    versions = ", ".join(f"{k} {v}" for k, v in data.get("versions", {}).items() if v)
    lines = ["# fp8 matmul accuracy", "",
             "<!-- Written by `python -m lab.fp8_accuracy --report` from a run's JSON: do not edit. -->", "",
             f"GPU: {data['gpu']}, measured {data['date']}; {versions}. To measure: `python -m lab.fp8_accuracy "
             "OUT.json` on a Hopper GPU, which writes OUT.json and this page.", "",
             "C = (A sa)(B sb)^T with A [M, K] and B [N, K] in float8_e4m3fn, one fp32 scale per tensor "
             "(amax / 448 of the values they quantize), C in float32, against a float64 product of the dequantized "
             "inputs. Inputs: " + "; ".join(f"`{k}`, {v}" for k, v in INPUTS.items()) + ". Each cell: the largest "
             "absolute error over C, and in brackets the mean. `promote_every` is the K elements between "
             "promotions of the tensor core's partial sums into fp32 registers (0: never).", "",
             "Target (issue 21): tmagen's largest error (`tmagen.ops.matmul`) no worse than cuBLASLt's "
             "(`torch._scaled_mm`, use_fast_accum False) on the same inputs, for K up to 16384.", ""]
    judged = [(r, verdict(r)) for r in rows if r["k"] <= 16384]
    met = [r for r, v in judged if v == "met"]
    missed = [r for r, v in judged if v == "**missed**"]
    unjudged = [r for r, v in judged if v == "-"]
    summary = f"- Rows at or below cuBLASLt's largest error: {len(met)} of {len(judged)} met"
    if missed:
        summary += "; **missed**: " + ", ".join(f"{r['inputs']} {r['m']}x{r['n']}x{r['k']}" for r in missed)
    if unjudged:
        summary += f"; {len(unjudged)} without both figures"
    lines += [summary, ""]
    lines += ["| inputs | M = N | K | max \\|R\\| | " + " | ".join(names) + " | tmagen / cuBLASLt, largest | "
              "target |", "|---|---|---|---|" + "---|" * len(names) + "---|---|"]
    for r in rows:
        mine, theirs = r["candidates"].get(OPS, {}), r["candidates"].get(CUBLAS, {})
        ratio = (f"{mine['max_abs'] / theirs['max_abs']:.2f}" if "max_abs" in mine and "max_abs" in theirs
                 and theirs["max_abs"] else "-")
        cells = " | ".join(_cell(r["candidates"].get(n)) for n in names)
        lines.append(f"| {r['inputs']} | {r['m']} | {r['k']} | {_num(r['max_abs_reference'])} | {cells} | {ratio} | "
                     f"{verdict(r)} |")
    speed = data.get("speed", [])
    if speed:
        lines += ["", "## The promotion's cost", "",
                  "The same products with bfloat16 C, timed interleaved on the same tensors (tmagen.bench: "
                  f"{_method(speed)}); TFLOP/s count 2MNK over the median time, and in brackets the ratio to "
                  f"`{spec_name(128)}` in the same loop (the median of per-repetition ratios).", ""]
        timed_names = [n for n in candidate_names() if any(n in {c['name'] for c in s['candidates']}
                                                           | {f['name'] for f in s['failed']} for s in speed)]
        lines += ["| M x N x K | " + " | ".join(timed_names) + " |", "|---|" + "---|" * len(timed_names)]
        for s in speed:
            by_name = {c["name"]: c for c in s["candidates"]}
            failed = {f["name"]: f["why"] for f in s["failed"]}
            base = by_name.get(spec_name(128))
            figures: list[str] = []
            for n in timed_names:
                c = by_name.get(n)
                if c is None:
                    figures.append("failed: " + failed[n].replace("|", "\\|") if n in failed else "-")
                    continue
                ratio = ""
                if base is not None and c is not base:
                    per_rep = [tb / tc for tc, tb in zip(c["rep_medians_ms"], base["rep_medians_ms"])]
                    ratio = f" ({statistics.median(per_rep):.3f})"
                figures.append(f"{c['tflops']:.0f}{ratio}")
            lines.append(f"| {'x'.join(map(str, s['shape']))} | " + " | ".join(figures) + " |")
    return "\n".join(lines) + "\n"


def _method(speed: list[dict[str, Any]]) -> str:
    m = speed[0].get("method")
    if not m:
        return "interleaved rounds"
    return f"{m['rounds']} rounds x {m['repetitions']} repetitions after {m['warmup']} warm-up launches"


# ----------------------------------------------------------------------------- the command
def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m lab.fp8_accuracy", description=__doc__.split("\n\n")[0])
    p.add_argument("json", metavar="OUT.json", help="where the run's figures go (with --report: the run to render)")
    p.add_argument("--markdown", default=PAGE, help=f"the page (default {PAGE})")
    p.add_argument("--report", action="store_true", help="write the page from OUT.json; measure nothing")
    p.add_argument("--no-speed", action="store_true", help="errors only")
    args = p.parse_args(argv)
    if args.report:
        try:
            page = accuracy_markdown(json.loads(Path(args.json).read_text(encoding="utf-8")))
        except (OSError, ValueError, KeyError, TypeError) as exc:
            print(f"{p.prog}: {args.json}: {type(exc).__name__}: {exc}", file=sys.stderr)
            return 2
        Path(args.markdown).write_text(page, encoding="utf-8")
        print(f"wrote {args.markdown}")
        return 0
    from tmagen.bench import Method

    began = time.perf_counter()
    data: dict[str, Any] = {"format": 1, **machine(), "date": datetime.now(UTC).strftime("%Y-%m-%d"),
                            "ks": list(KS), "mns": list(MNS), "promote_every": list(PROMOTE_EVERY)}
    data["errors"] = measure_errors()
    Path(args.json).write_text(json.dumps(data, indent=1))
    if not args.no_speed:
        method = Method(rounds=10, repetitions=3, warmup=2)
        data["speed"] = [{**r, "method": {"rounds": method.rounds, "repetitions": method.repetitions,
                                          "warmup": method.warmup}} for r in measure_speed(method)]
    data["seconds"] = round(time.perf_counter() - began, 1)
    Path(args.json).write_text(json.dumps(data, indent=1))
    Path(args.markdown).write_text(accuracy_markdown(data), encoding="utf-8")
    print(f"done in {data['seconds']:.0f} s: {args.json}, {args.markdown}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
