"""The swizzle model against the GPU: generated inspect kernels load one box each into poisoned
shared memory and copy the raw bytes out; every byte must equal tmagen.swizzle's prediction.

Every swizzle mode Hopper runs x every inner box width from 16 bytes to the span (16 to 128 and
256 without swizzle) x every 128-byte base offset in the 1024-byte pattern x 1, 2, 4 and 8-byte
elements x 2-D and 3-D boxes, at non-zero start coordinates."""

from __future__ import annotations

import numpy as np
import pytest

from tmagen.plan import resolve
from tmagen.verify import Verifier

pytestmark = pytest.mark.gpu

MODES = {"none": [16, 32, 48, 64, 80, 96, 112, 128, 256], "32B": [16, 32], "64B": [16, 32, 48, 64],
         "128B": [16, 32, 48, 64, 80, 96, 112, 128]}
DTYPES = {1: "uint8", 2: "bfloat16", 4: "float32", 8: "float64"}


def sweep_spec(offset: int) -> dict:
    tensors = []
    for mode, widths in MODES.items():
        for es, dtype in DTYPES.items():
            for width in widths:
                if width // es > 256:
                    continue
                for outer in ([7], [3, 5]):
                    box = [*outer, width // es]
                    tensors.append({
                        "name": f"t_{mode}_{es}_{width}_{len(box)}d", "dtype": dtype,
                        "shape": [3 * b + 1 for b in box[:-1]] + [3 * box[-1] + 16 // es],
                        "box": box, "swizzle": {"mode": mode}, "smem_offset": offset})
    return {"name": f"sweep_offset_{offset}", "tensors": tensors, "kernel": {"kind": "inspect"}}


def test_every_byte_matches_the_model(device, compiler, report) -> None:
    compiled = compiler([sweep_spec(offset) for offset in range(0, 1024, 128)])
    rng = np.random.default_rng(2026)
    results, failures = [], []
    for _name, (spec, cubin) in sorted(compiled.items()):
        checker = Verifier(resolve(spec), cubin, device, seed=int(rng.integers(1 << 31)))
        try:
            for t in spec.tensors:
                es = t.dt.nbytes
                # non-zero start: the innermost on a 16-byte step, the outer ones anywhere in the tensor
                coords = [int(rng.integers(1, 2 * b + 1)) for b in t.box[:-1]]
                coords.append(int(rng.integers(1, 2 * t.box[-1] * es // 16 + 1)) * 16 // es)
                o = checker.inspect(t.name, coords=coords)
                results.append({"kernel": o.kernel, "coords": coords, "ok": o.ok, "detail": o.detail})
                if not o.ok:
                    failures.append(f"{o.kernel} at {coords}: {o.detail}")
        finally:
            checker.close()
    report("model_vs_silicon", {"configurations": len(results), "failures": failures, "results": results})
    assert len(results) == 8 * 184
    assert failures == []
