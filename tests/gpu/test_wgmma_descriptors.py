"""tmagen's wgmma descriptors against the tensor cores: every swizzle mode x A and B major-ness x
16-bit type x the eight shared-memory offsets the rules allow, one wgmma product each, exact.

The descriptor is right when the product is. The probe also runs each combination with the
base offset the PTX ISA's table asks for, (start >> 7) % lines, and records where the silicon
disagrees with it: that, not the table, decides what tmagen.mma puts there (0: see its notes).
"""

from __future__ import annotations

import os
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from tmagen.plan import resolve

import wgmma_probe as probe

pytestmark = pytest.mark.gpu

BATCH = 16


def _compile(batch: list[probe.Combo]) -> tuple[list[probe.Combo], bytes]:
    from tmagen import toolchain
    from tmagen.render import render
    from tmagen.spec import parse_spec

    files: dict[str, str] = {}
    for c in batch:
        rendered = render(resolve(parse_spec(probe.spec_for(c))), f"{c.name}.json")
        files[f"{c.name}.cuh"] = rendered[f"{c.name}.cuh"]
    files["probe.cu"] = probe.batch_source(batch)
    cubin, kernels = toolchain.compile_cubin(f"wgmma_probe_{batch[0].name}", files, "probe.cu", "sm_90a")
    assert all(not k.spills for k in kernels), kernels
    return batch, cubin.read_bytes()


def test_every_descriptor_layout_matches_the_tensor_cores(device, report) -> None:
    from tmagen import mma, runtime
    from tmagen.spec import parse_spec

    combos = probe.combos()
    batches = [combos[i:i + BATCH] for i in range(0, len(combos), BATCH)]
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 4) as pool:
        compiled = list(pool.map(_compile, batches))
    rng = np.random.default_rng(20261122)
    rows = []
    for batch, cubin in compiled:
        module = runtime.Module(cubin)
        try:
            for c in batch:
                spec = parse_spec(probe.spec_for(c))
                tiles = {m.role: m.operand for m in resolve(spec).maps}
                kernel = module.function(f"probe_{c.name}", probe.smem_bytes(c, tiles))
                result = {"combo": c.__dict__, "lbo": {r: t.lbo for r, t in tiles.items()},
                          "sbo": {r: t.sbo for r, t in tiles.items()}}
                for mode, value in probe.BASE_MODES.items():
                    ok, bad = probe.run(c, spec, kernel, device, rng, value)
                    result[mode] = {"match": ok, "bad_elements": bad}
                rows.append(result)
        finally:
            module.unload()
    summary = Counter((r["tmagen"]["match"], r["ptx_formula"]["match"]) for r in rows)
    report("wgmma_descriptors", {"combinations": len(rows), "base_offset_from_address": mma.BASE_OFFSET_FROM_ADDRESS,
                                 "tmagen_and_ptx_formula_match": {f"{k[0]}/{k[1]}": v for k, v in summary.items()},
                                 "rows": rows})
    assert len(rows) == 4 * 2 * 2 * 2 * 8
    failed = [(r["combo"], r["tmagen"]) for r in rows if not r["tmagen"]["match"]]
    assert failed == [], f"{len(failed)} of {len(rows)} combinations differ from numpy, e.g. {failed[:4]}"
