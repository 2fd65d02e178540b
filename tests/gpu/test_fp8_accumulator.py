"""The tensor core's accumulator precision, measured (tests/gpu/fp8_accumulator_probe.py says how):
fp8 wgmma (every pairing of e4m3 and e5m2) against bfloat16 and float16 as controls, within one
instruction, carried from one instruction to the next, onto registers loaded from memory, and through
an instruction of zero products.

Writes TMAGEN_REPORT_DIR/fp8_accumulator.json (copied by hand to tests/data/hw_h200/, from which
`python -m lab.fp8_accumulator` writes docs/fp8-accumulator.md) and figures.json's entry. One nvcc
run (12 kernels), 24 launches.
"""

from __future__ import annotations

import datetime
import json
import os
from pathlib import Path

import pytest

from tmagen.plan import resolve

import fp8_accumulator_probe as probe

pytestmark = pytest.mark.gpu


def test_accumulator_precision_of_fp8_and_16_bit_wgmma(device, report) -> None:
    from tmagen import runtime, toolchain
    from tmagen.launch import array_args
    from tmagen.render import render
    from tmagen.spec import parse_spec

    plans = {c: resolve(parse_spec(probe.spec_for(c))) for c in probe.CASES}
    files = {f"{c.name}.cuh": render(p, f"{c.name}.json")[f"{c.name}.cuh"] for c, p in plans.items()}
    files["acc.cu"] = probe.source()
    cubin, kernels = toolchain.compile_cubin("fp8_accumulator_probe", files, "acc.cu", "sm_90a")
    assert len(kernels) == 2 * len(probe.CASES) and all(not k.spills for k in kernels), kernels
    cases: dict = {}
    module = runtime.Module(cubin.read_bytes())
    try:
        for c, plan in plans.items():
            maps = {m.role: m for m in plan.maps}
            smem = sum(m.operand.stride * 2 for m in maps.values() if m.operand) + 1024

            def map_args(role: str, ptr: int, shape: tuple[int, ...], maps: dict = maps) -> object:
                return array_args(maps[role], ptr, shape)

            modes = {}
            for mode in probe.MODES:
                kernel = module.function(probe.kernel_symbol(c, mode), smem)
                lay = probe.layout(c, mode)
                got = probe.run(c, mode, kernel, device, map_args)
                assert (got[~lay.valid] == 0).all(), (c.label, mode, "cells without terms must stay 0")
                modes[mode] = probe.summarize(lay, got)
            cases[c.label] = {"instruction": c.instruction, "modes": modes}
    finally:
        module.unload()
    record = {"what": "the largest e for which 2^X +- 2^(X-e) comes back exactly (largest_exact) and the largest "
                      "whose addend still changes the sum (largest_changed) from wgmma's fp32 accumulator; outcomes: "
                      "d / 2^X - 1 -> cells, per e (tests/gpu/fp8_accumulator_probe.py)",
              "gpu": f"{device.name}, driver {device.driver_version // 1000}.{device.driver_version % 1000 // 10}",
              "date": datetime.date.today().isoformat(), "cases": cases}
    report("fp8_accumulator", record)
    folder = os.environ.get("TMAGEN_REPORT_DIR")
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        (Path(folder) / "fp8_accumulator.json").write_text(json.dumps(record, indent=1) + "\n")
    # The probe's own sanity, whatever the accumulator keeps: every accumulator keeps 8 bits (a
    # bfloat16's), so e = 1 .. 8 come back exactly in every case, mode and sign; a wrong fragment
    # mapping, slot layout or input encoding would break that.
    for label, case in cases.items():
        for mode, signs in case["modes"].items():
            for sign, result in signs.items():
                assert result["largest_exact"] >= 8, (label, mode, sign, result)
