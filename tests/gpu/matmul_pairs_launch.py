"""Launches every matmul kernel that runs in clusters of two CTAs (the 128-row tiles, and the twins
in pairs that rows straddling 32-byte sectors take) on small operands whose rows straddle: an odd
number of tile rows (the last row in pairs side by side, and with an odd number of tile columns a
CTA past N that loads nothing), splits of K through the
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
# M = 300: an odd count of 128- and 64-row tiles; 200: an even one. N = 264: odd counts of 128-column tiles
ROWS, N = (200, 300), 264


def main() -> None:
    launches = 0
    for path, (dtype, k) in SPECS.items():
        spec = parse_spec(json.loads(path.read_text()), str(path))
        family = resolve(spec).kernel.detail
        assert family.b_major == "k", "B is passed [N, K]"
        kernel = tmagen.load(spec)
        for M in ROWS:
            g = torch.Generator(device="cuda").manual_seed(7)
            a = torch.randn(M, k, device="cuda", generator=g).to(dtype)
            b = torch.randn(N, k, device="cuda", generator=g).to(dtype)
            ref = (a.double() @ b.double().T).cpu().numpy()
            bound = (a.double().abs() @ b.double().abs().T).cpu().numpy()
            tol, rule = matmul_tolerance(bound, ref, k, "bfloat16", family.promote_every if family.fp8 else None)
            scales = {"scale_a": torch.ones((), device="cuda"), "scale_b": torch.ones((), device="cuda")} \
                if family.fp8 else {}
            for variant in (v for v, p in enumerate(family.kernels) if p.cluster == 2):
                for splits, split_from in ((1, 0), (3, 0), (2, family.groups(variant, M, N) - 1)):
                    c = torch.full((M, N), float("nan"), device="cuda", dtype=torch.bfloat16)
                    kernel(a, b, out=c, choice=(variant, splits, split_from), **scales)
                    torch.cuda.synchronize()
                    err = abs(c.double().cpu().numpy() - ref)
                    bad = int((~(err <= tol)).sum())
                    if bad:
                        raise SystemExit(f"{path.name} M {M} kernel {variant} splits {splits} from {split_from}: "
                                         f"{bad} elements outside {rule}")
                    launches += 1
    print(f"PAIRS-OK {launches}", flush=True)


if __name__ == "__main__":
    main()
