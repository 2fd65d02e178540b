"""docs/reliability.md from the JSON of one reliability run (`lab.campaign`): pure, JSON in,
markdown out. Until a run is committed the page says that nothing has been measured."""

from __future__ import annotations

from typing import Any

HEADER = "<!-- Written by `scripts/reliability.py --report RUN.json` from a run's figures: do not edit. -->"
RUN_JSON = "docs/reliability-run.json"  # the committed run this page is written from
REGENERATE = ("To measure: `scripts/gpu_check.sh --reliability-only 540 OUT` on a Hopper GPU (or `--reliability "
              f"SECONDS` after the test suite); copy `OUT/reliability.json` to `{RUN_JSON}` and run "
              f"`scripts/reliability.py --report {RUN_JSON}`.")
DIMENSIONS = [  # (key in the run's "by", heading)
    ("kind", "kernel kind"), ("dtype", "dtype"), ("rank", "rank"), ("swizzle", "swizzle"),
    ("interleave", "interleave"), ("oob_fill", "out-of-bounds fill"), ("element_strides", "element strides"),
    ("strides", "global strides"), ("shape", "shape against the box"), ("box_bytes", "box bytes"),
    ("smem_offset", "smem_offset"), ("l2_promotion", "L2 promotion"), ("tensors", "tensors per spec"),
    ("coords", "inspect start coordinates"), ("matmul_epilogue", "matmul epilogue (verify.MATMUL_EPILOGUES)"),
    ("matmul_launch", "matmul launch (the family's choice at the run's shape)"),
]


def placeholder() -> str:
    return "\n".join([
        "# Reliability", "", HEADER, "",
        "Not measured yet: no GPU run of the reliability campaign has been committed.", "",
        "What a run measures: random valid specs (every dtype kernels take, ranks 1 to 5, every swizzle and "
        "interleave, element strides, both out-of-bounds fills, shared-memory offsets, boxes from one 16-byte chunk "
        "to the largest, ragged shapes, padded strides, every kernel kind) built, compiled and verified bit for bit "
        "on the GPU, each at its own shape and at another; 100,000 random argument sets against "
        "`cuTensorMapEncodeTiled`; compute-sanitizer's memcheck, racecheck and synccheck on a random sample of 50 "
        "of the generated kernels.", "",
        REGENERATE, ""])


def _pct(n: int, total: int) -> str:
    return f"{100 * n / total:.1f}%" if total else "-"


def _table(title: str, cells: dict[str, dict[str, int]]) -> list[str]:
    lines = [f"| {title} | specs | failed |", "|---|---:|---:|"]
    for value, c in cells.items():
        failed = f"**{c['failed']}**" if c["failed"] else "0"
        lines.append(f"| {value} | {c['specs']} | {failed} |")
    return lines


def _gpu(data: dict[str, Any]) -> str:
    g = data.get("gpu") or {}
    if not g:
        return "an unknown GPU"
    cc = g.get("compute_capability", ["?", "?"])
    driver = g.get("driver")
    version = f", driver {driver // 1000}.{driver % 1000 // 10}" if isinstance(driver, int) else ""
    return f"{g.get('name', '?')} (sm_{cc[0]}{cc[1]}{version}, {g.get('multiprocessors', '?')} SMs)"


def _campaign(data: dict[str, Any]) -> list[str]:
    specs, gen, t = data["specs"], data["generator"], data["timings"]
    refused = ", ".join(f"`{rule}` {n}" for rule, n in gen["refused_by_rule"].items()) or "none"
    lines = [
        "## Random specs, end to end", "",
        f"{gen['specs']} specs were drawn (seed {data['seed']}) from {gen['candidates']} candidates: the others broke "
        f"a rule ({refused}; a candidate breaking several counts under each). "
        f"{specs['checked']} were built, compiled and run on the GPU: {data['runs']} runs of {data['kernels']} kernels "
        "on fresh random data into poisoned outputs, each kernel at its spec's own shape and at a run-time shape, "
        "strides or start coordinates of its own, compared bit for bit with numpy and the swizzle model. "
        f"**{specs['passed']} passed, {specs['failed']} failed.** "
        f"{specs['compiled_not_run']} sm_100a specs were compiled only (Hopper cannot run them)"
        + (f", of which nvcc refused {len(specs['compiled_not_run_refused_by_nvcc'])}" if specs[
            "compiled_not_run_refused_by_nvcc"] else "") + "."
        + (f" {specs['not_reached']} compiled specs were not reached in the budget." if specs["not_reached"] else ""),
        "",
        f"Time: {data['elapsed_s']:.0f} s of a {data['budget_s']:.0f} s budget; {t['batches']} batches of up to "
        f"{data['settings']['batch_size']} specs, each in one nvcc call where all compile ({t['nvcc_calls']} calls, "
        f"median {t['compile_s_median']:.1f} s, {t['compile_s_total']:.0f} s of compiler time on "
        f"{data['settings']['nvcc_jobs']} parallel jobs); verification median {t['verify_batch_s_median']:.1f} s per "
        f"batch on {data['settings']['gpu_workers']} GPU workers, {t['worker_restarts']} worker restarts.", "",
    ]
    for key, title in DIMENSIONS:
        cells = data["by"].get(key)
        if cells:
            lines += _table(title, cells) + [""]
    if data.get("compiled_not_run_by", {}).get("swizzle"):
        lines += ["Compiled only (sm_100a):", ""] + _table("swizzle", data["compiled_not_run_by"]["swizzle"]) + [""]
    if data.get("spills"):
        lines += [f"Kernels that spill registers (a `tmagen build --compile` of their spec fails): "
                  f"{', '.join(f'`{k}`' for k in data['spills'])}.", ""]
    lines += _failures(data)
    return lines


def _failures(data: dict[str, Any]) -> list[str]:
    failures = data["failures"]
    if not failures:
        return ["No failures.", ""]
    classes = ", ".join(f"{k} {n}" for k, n in sorted(data["failure_classes"].items()))
    by_kind: dict[str, dict[str, int]] = {}
    for f in failures:
        cell = by_kind.setdefault(f["kind"], {})
        cell[f["status"]] = cell.get(f["status"], 0) + 1
    statuses = sorted({f["status"] for f in failures})
    lines = [f"### Failures ({classes})", "",
             "| kind | " + " | ".join(statuses) + " |", "|---|" + "---:|" * len(statuses)]
    lines += [f"| {kind} | " + " | ".join(str(cells.get(s, 0)) for s in statuses) + " |"
              for kind, cells in sorted(by_kind.items())]
    lines += ["", "Specs that reproduce them are in `tests/data/reliability/` (from the run's `failures/`), "
              "replayed by `tests/gpu/test_reliability_regressions.py`.", "",
              "| spec | kind | what | run | detail |", "|---|---|---|---|---|"]
    for f in failures[:60]:
        detail = " ".join(str(f.get("detail", "")).split())[:160].replace("|", "\\|")
        args = f.get("args") or {}
        run = f"{f.get('call') or '-'} {'x'.join(map(str, args.get('shape') or []))}".strip()
        lines.append(f"| `{f['name']}` | {f['kind']} | {f['status']} | {run} | {detail} |")
    if len(failures) > 60:
        lines.append(f"| ... | | | | {len(failures) - 60} more in the run's JSON |")
    return lines + [""]


def _oracle(o: dict[str, Any] | None) -> list[str]:
    lines = ["## The rules against the driver", ""]
    if not o or "sets" not in o:
        return lines + [f"Not run{': ' + o['error'] if o and 'error' in o else ''}.", ""]
    n = o["sets"]
    looser = len(o["tmagen_accepts_driver_refuses"])
    stricter = o["tmagen_refuses_driver_accepts"]
    lines += [
        f"{n} random `cuTensorMapEncodeTiled` argument sets (seed {o['seed']}, biased toward every rule's boundary), "
        "each checked by `tmagen.rules.check_encode_tiled` and encoded by the driver:", "",
        "| verdicts | sets | share |", "|---|---:|---:|",
        f"| both accept | {o['both_accept']} | {_pct(o['both_accept'], n)} |",
        f"| both refuse | {o['both_refuse']} | {_pct(o['both_refuse'], n)} |",
        f"| tmagen accepts, the driver refuses | **{looser}** | {_pct(looser, n)} |",
        f"| tmagen refuses, the driver accepts | {stricter} | {_pct(stricter, n)} |", "",
    ]
    if o["stricter_by_rule"]:
        lines += ["Where tmagen is stricter, the rules that refused (a set may break several), each documented:", "",
                  "| rule | sets |", "|---|---:|"]
        lines += [f"| `{rule}` | {count} |" for rule, count in o["stricter_by_rule"].items()] + [""]
    if o.get("stricter_by_undocumented_rule"):
        lines += [f"**{len(o['stricter_by_undocumented_rule'])} stricter sets break no documented rule.**", ""]
    lines += [f"The validator took {o['validator_us_per_set']} µs per set; the whole comparison "
              f"{o['seconds']:.0f} s.", ""]
    return lines


def _sanitizer(s: dict[str, Any] | None) -> list[str]:
    lines = ["## compute-sanitizer", ""]
    if not s:
        return lines + ["Not run.", ""]
    if s.get("skipped"):
        return lines + [f"Not run: {s['skipped']}.", ""]
    lines += [f"{s['kernels']} kernels of {len(s['specs'])} specs drawn at random from those that passed, compiled "
              "together with `-lineinfo`, each run once (at its smallest run's shape) under each tool:", "",
              "| tool | errors | seconds | runs that matched | |", "|---|---:|---:|---:|---|"]
    for tool, r in s["tools"].items():
        errors = "no summary" if r["errors"] is None else str(r["errors"])
        note = "timed out" if r["timed_out"] else (f"exit {r['returncode']}" if r["returncode"] else "")
        if "hazards" in r:
            note = (note + "; " if note else "") + f"{r['hazards']} hazards, {r['warnings']} warnings"
        matched = r["runs"].get("match", 0)
        lines.append(f"| {tool} | {errors} | {r['seconds']:.0f} | {matched} of {sum(r['runs'].values())} | {note} |")
    return lines + [""]


def markdown_report(data: dict[str, Any]) -> str:
    """The page for one run's JSON (what `scripts/reliability.py` wrote)."""
    lines = [
        "# Reliability", "", HEADER, "",
        f"Measured on {_gpu(data)} with {data['nvcc']}, {data['date']}, tmagen {data['tmagen']}. {REGENERATE}", "",
    ]
    lines += _campaign(data) + _oracle(data.get("oracle")) + _sanitizer(data.get("sanitizer"))
    return "\n".join(lines)
