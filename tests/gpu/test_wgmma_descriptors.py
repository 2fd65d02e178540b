"""tmagen's wgmma descriptors against the tensor cores: every swizzle mode x A and B major-ness x
16-bit type x the eight shared-memory offsets the rules allow, one wgmma product each, exact; and
the same for fp8 operands (K-major only) with e4m3 and e5m2 for A and for B.

The descriptor is right when the product is. The probe also runs each combination with the
base offset the PTX ISA's table asks for, (start >> 7) % lines, and records where the silicon
disagrees with it: that, not the table, decides what tmagen.mma puts there (0: see its notes).
"""

from __future__ import annotations

import datetime
import json
import os
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

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


def test_every_fp8_descriptor_layout_matches_the_tensor_cores(device, report) -> None:
    """The fp8 operands (K-major only): every swizzle mode x e4m3/e5m2 for A and for B x the eight
    128-byte offsets, m64n128k32 over K = 256 (two to sixteen boxes along K), exact against numpy.
    One nvcc run builds all 128 kernels (about 10 s on 2 cores); the launches take well under a second."""
    from tmagen import mma, runtime, toolchain
    from tmagen.render import render
    from tmagen.spec import parse_spec

    combos = probe.fp8_combos()
    specs = {c: parse_spec(probe.fp8_spec_for(c)) for c in combos}
    files = {f"{c.name}.cuh": render(resolve(s), f"{c.name}.json")[f"{c.name}.cuh"] for c, s in specs.items()}
    files["probe.cu"] = probe.fp8_batch_source(combos)
    tc = toolchain.find_toolchain()
    cubin, kernels = toolchain.compile_cubin("wgmma_probe_fp8", files, "probe.cu", "sm_90a", tc)
    assert len(kernels) == len(combos) and all(not k.spills for k in kernels), kernels
    sass = toolchain.sass_opcodes(tc, cubin)  # None without cuobjdump: the products below still decide
    if sass is not None:
        assert all("QGMMA" in ops and "HGMMA" not in ops for ops in sass.values()), sass
    rng = np.random.default_rng(20261124)
    rows = []
    module = runtime.Module(cubin.read_bytes())
    try:
        for c, spec in specs.items():
            tiles = {m.role: m.operand for m in resolve(spec).maps}
            kernel = module.function(f"probe_{c.name}", probe.fp8_smem_bytes(tiles))
            row: dict = {"name": c.name, **c.__dict__, "lbo": {r: t.lbo for r, t in tiles.items()},
                         "sbo": {r: t.sbo for r, t in tiles.items()}}
            for mode, value in probe.BASE_MODES.items():
                ok, bad = probe.fp8_run(c, spec, kernel, device, rng, value)
                row[mode] = {"match": ok, "bad_elements": bad}
            rows.append(row)
    finally:
        module.unload()
    summary = Counter((r["tmagen"]["match"], r["ptx_formula"]["match"]) for r in rows)
    report("wgmma_descriptors_fp8", {"combinations": len(rows),
                                     "base_offset_from_address": mma.BASE_OFFSET_FROM_ADDRESS,
                                     "tmagen_and_ptx_formula_match": {f"{k[0]}/{k[1]}": v for k, v in summary.items()},
                                     "rows": rows})
    _record_fp8(device, rows)
    assert len(rows) == 4 * 4 * 8
    failed = [f"{r['name']} ({r['tmagen']['bad_elements']} of {probe.M * probe.N} elements)"
              for r in rows if not r["tmagen"]["match"]]
    assert failed == [], f"{len(failed)} of {len(rows)} fp8 combinations differ from numpy: {', '.join(failed)}"


def _record_fp8(device, rows: list[dict]) -> None:
    """TMAGEN_REPORT_DIR/wgmma_descriptors_fp8.json, in the form tests/test_mma.py replays from
    tests/data/hw_h200/ (copying it there is the lead's deliberate step)."""
    folder = os.environ.get("TMAGEN_REPORT_DIR")
    if not folder:
        return
    record = {
        "what": "wgmma m64n128k32 products of fp8 operands (K-major A and B) through descriptors of TMA-loaded boxes, "
                "K = 256, exact (halves in [-4, 4]); base_offset_0: the descriptor's base-offset bits 0 (tmagen's); "
                "ptx_formula: (start >> 7) % pattern lines, as the PTX ISA's table asks",
        "gpu": f"{device.name}, driver {device.driver_version // 1000}.{device.driver_version % 1000 // 10}",
        "date": datetime.date.today().isoformat(),
        "rows": [{k: r[k] for k in ("swizzle", "a_dtype", "b_dtype", "smem_offset", "lbo", "sbo")}
                 | {"base_offset_0": r["tmagen"]["match"], "ptx_formula": r["ptx_formula"]["match"]} for r in rows]}
    path = Path(folder) / "wgmma_descriptors_fp8.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(record, indent=1) + "\n")
