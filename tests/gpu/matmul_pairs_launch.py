"""Launches every matmul kernel that runs in clusters of two CTAs (the 128-row tiles, and the twins
in pairs that rows straddling 32-byte sectors take) on small operands whose rows straddle: an odd
number of tile rows (a CTA past M loads B for its partner alone), splits of K through the
workspace, and checks each product. tests/gpu/test_sanitizer.py runs it under compute-sanitizer;
it prints ``PAIRS-OK <launches>`` when every product matched.

    python3 tests/gpu/matmul_pairs_launch.py
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

import tmagen  # noqa: E402
from tmagen.plan import resolve  # noqa: E402
from tmagen.spec import parse_spec  # noqa: E402
from tmagen.verify import matmul_tolerance  # noqa: E402

# bf16: K = 1032 puts every other row 16 bytes off a sector; fp8: K = 1040 likewise
SPECS = {REPO / "specs" / "matmul_bf16_tn.json": (torch.bfloat16, 1032),
         REPO / "tmagen" / "ops_specs" / "bench_matmul_fp8.json": (torch.float8_e4m3fn, 1040)}
M, N = 200, 264


def main() -> None:
    launches = 0
    for path, (dtype, k) in SPECS.items():
        spec = parse_spec(json.loads(path.read_text()), str(path))
        family = resolve(spec).kernel.detail
        assert family.b_major == "k", "B is passed [N, K]"
        kernel = tmagen.load(spec)
        g = torch.Generator(device="cuda").manual_seed(7)
        a = torch.randn(M, k, device="cuda", generator=g).to(dtype)
        b = torch.randn(N, k, device="cuda", generator=g).to(dtype)
        ref = (a.double() @ b.double().T).cpu().numpy()
        bound = (a.double().abs() @ b.double().abs().T).cpu().numpy()
        tol, rule = matmul_tolerance(bound, ref, k, "bfloat16", family.promote_every if family.fp8 else None)
        scales = {"scale_a": torch.ones((), device="cuda"), "scale_b": torch.ones((), device="cuda")} \
            if family.fp8 else {}
        for variant in (v for v, p in enumerate(family.kernels) if p.cluster == 2):
            for splits in (1, 3):
                c = torch.full((M, N), float("nan"), device="cuda", dtype=torch.bfloat16)
                kernel(a, b, out=c, choice=(variant, splits, 0), **scales)
                torch.cuda.synchronize()
                err = abs(c.double().cpu().numpy() - ref)
                bad = int((~(err <= tol)).sum())
                if bad:
                    raise SystemExit(f"{path.name} kernel {variant} splits {splits}: {bad} elements outside {rule}")
                launches += 1
    print(f"PAIRS-OK {launches}", flush=True)


if __name__ == "__main__":
    main()
