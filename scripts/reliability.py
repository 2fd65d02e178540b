#!/usr/bin/env python3
"""The reliability campaign on a machine with a Hopper GPU, or the page from a run's figures.

  scripts/reliability.py OUT [--seconds 540] [--seed N] [--oracle-sets 100000 | --oracle-figures FIGURES_JSON]
      random valid specs compiled in batches and verified bit for bit on the GPU until the budget
      is spent, the driver oracle and compute-sanitizer on 50 of the kernels: OUT/reliability.json,
      OUT/reliability.md (the page), OUT/failures/ (each failing spec), OUT/logs/.
  scripts/reliability.py --report RUN_JSON [--markdown docs/reliability.md]
      the page from a run's JSON (no GPU needed).

Exit status: 0 when every spec passed, the oracle found no set tmagen accepts and the driver
refuses, and the sanitizer found no error; 1 otherwise; 2 for bad arguments.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from lab.campaign import Campaign, Settings  # noqa: E402
from lab.reliability import markdown_report  # noqa: E402
from tmagen.errors import TmagenError  # noqa: E402


def verdict(report: dict) -> list[str]:
    """What keeps the run from being clean, in words."""
    problems = []
    if report["specs"]["checked"] == 0:
        problems.append("no spec was checked on the GPU")
    if report["failures"]:
        problems.append(f"{len(report['failures'])} failures ({report['failure_classes']})")
    oracle = report.get("oracle") or {}
    if oracle.get("tmagen_accepts_driver_refuses"):
        problems.append(f"{len(oracle['tmagen_accepts_driver_refuses'])} oracle sets tmagen accepts and the "
                        "driver refuses")
    if oracle.get("error"):
        problems.append(f"oracle: {oracle['error']}")
    if report.get("internal_errors"):
        problems.append(f"{len(report['internal_errors'])} errors of the campaign itself: "
                        f"{report['internal_errors'][0][:300]}")
    if report.get("worker_start_failures"):
        problems.append(f"GPU workers could not start: {report['worker_start_failures'][0][-300:]}")
    sanitizer = report.get("sanitizer") or {}
    for tool, r in (sanitizer.get("tools") or {}).items():
        if r["errors"] != 0 or r["timed_out"] or r["returncode"]:
            problems.append(f"{tool}: errors {r['errors']}, exit {r['returncode']}, timed out {r['timed_out']}")
    return problems


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("out", nargs="?", help="folder for the run's figures, failures and logs")
    p.add_argument("--seconds", type=float, default=540, help="the whole run's budget, report included")
    p.add_argument("--seed", type=int, default=None, help="the specs' seed (default: fresh, printed)")
    p.add_argument("--batch", type=int, default=50, help="specs per nvcc call")
    p.add_argument("--jobs", type=int, default=None, help="nvcc calls at once (default: cores - 8)")
    p.add_argument("--workers", type=int, default=4, help="GPU worker processes (each with a spare)")
    p.add_argument("--sanitize", type=int, default=50, help="kernels to run under compute-sanitizer (0: none)")
    p.add_argument("--oracle-sets", type=int, default=100_000, help="driver oracle sets (0: none)")
    p.add_argument("--oracle-figures", type=Path, help="take the oracle's figures from a test run's figures.json")
    p.add_argument("--kinds", help="comma-separated kernel kinds (default: all)")
    p.add_argument("--report", metavar="RUN_JSON", help="write --markdown from this run's JSON and exit")
    p.add_argument("--markdown", default=str(REPO / "docs" / "reliability.md"))
    args = p.parse_args(argv)

    if args.report:
        data = json.loads(Path(args.report).read_text(encoding="utf-8"))
        Path(args.markdown).write_text(markdown_report(data), encoding="utf-8")
        print(f"wrote {args.markdown}")
        return 0
    if not args.out:
        p.error("give the output folder, or --report RUN_JSON")
    seed = args.seed if args.seed is not None else int.from_bytes(os.urandom(3), "little")
    settings = Settings(out=Path(args.out), seconds=args.seconds, seed=seed, batch_size=args.batch,
                        lanes=args.workers, sanitize_kernels=args.sanitize, oracle_sets=args.oracle_sets,
                        oracle_figures=args.oracle_figures,
                        kinds=tuple(args.kinds.split(",")) if args.kinds else None)
    if args.jobs:
        settings.jobs = args.jobs
    print(f"reliability campaign: seed {seed}, {args.seconds:.0f} s, into {args.out}", flush=True)
    try:
        report = Campaign(settings).run()
    except TmagenError as exc:  # no nvcc: nothing can be built
        print(f"scripts/reliability.py: {exc}", file=sys.stderr)
        return 2
    (Path(args.out) / "reliability.md").write_text(markdown_report(report), encoding="utf-8")
    s = report["specs"]
    print(f"{s['checked']} specs checked ({report['kernels']} kernels, {report['runs']} runs), {s['passed']} passed, "
          f"{s['failed']} failed; {s['compiled_not_run']} compiled only; {report['elapsed_s']:.0f} s")
    problems = verdict(report)
    for line in problems:
        print(f"  {line}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
