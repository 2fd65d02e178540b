"""The lab: tools that test and measure tmagen but are not tmagen.

The reliability campaign and its random specs (`lab.campaign`, `lab.fuzz`), the driver oracle
(`lab.oracle`), the reliability page (`lab.reliability`), the benchmark peers (`lab.peers`,
`lab.triton_peers`) and the benchmark page (`lab.bench_report`). They live in the repository beside
the package, are tested with it, and are not in the wheel: the product (`tmagen`) never imports them.
Run them from the repository root (`python -m lab.bench_report`, `scripts/reliability.py`,
`benchmarks/run.py`).
"""
