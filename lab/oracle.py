"""The rules against the driver: `tmagen.rules.check_encode_tiled` and `cuTensorMapEncodeTiled`
itself on the same random argument sets (driver order), biased toward every rule's boundary:
alignment, strides, box limits, swizzle span, interleave, element strides, rank, packed types,
atom swizzles and the driver's box-size limit.

tmagen must accept nothing the driver refuses; a set it refuses that the driver accepts must
break a documented rule (tmagen is stricter on purpose there). `compare` runs on a GPU;
``python -m lab.oracle --sets N --out FILE`` writes its figures as JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections import Counter
from collections.abc import Sequence
from typing import Any

import numpy as np

from tmagen.rules import RULES, check_encode_tiled

ESIZE = {0: 1, 1: 2, 2: 4, 3: 4, 4: 8, 5: 8, 6: 2, 7: 4, 8: 8, 9: 2, 10: 4, 11: 4, 12: 4, 13: 1, 14: 1, 15: 1}
SPAN = {0: 0, 1: 32, 2: 64, 3: 128, 4: 128, 5: 128, 6: 128}


def _pick(rng: np.random.Generator, *choices: int) -> int:
    return choices[int(rng.integers(len(choices)))]


def sample(rng: np.random.Generator, base: int) -> dict:
    rank = int(rng.integers(1, 6)) if rng.random() < 0.97 else int(_pick(rng, 0, 6))
    rank_for_lists = min(max(rank, 1), 5)
    dtype = int(rng.integers(0, 13)) if rng.random() < 0.93 else int(rng.integers(13, 16))
    es = ESIZE[dtype]
    interleave = int(rng.integers(1, 3)) if rng.random() < (0.3 if rank >= 3 else 0.03) else 0
    swizzle = int(rng.integers(0, 4)) if rng.random() < 0.93 else int(rng.integers(4, 7))
    if interleave == 2 and rng.random() < 0.7:
        swizzle = 1
    dims = []
    for _ in range(rank_for_lists):
        k = rng.random()
        dims.append(int(rng.integers(1, 300)) if k < 0.6 else int(rng.integers(1, 70000)) if k < 0.88 else
                    int(_pick(rng, 1, 2, 127, 128, 129, 2**32 - 1, 2**32, 2**32 + 1, 0)))
    align = 32 if interleave == 2 or dtype in (14, 15) else 16
    strides, run = [], dims[0] * es
    for i in range(1, rank_for_lists):
        k = rng.random()
        if k < 0.7:
            s = -(-run // align) * align + align * int(rng.integers(0, 3))
        elif k < 0.88:
            s = 16 * int(rng.integers(1, 4096))
        elif k < 0.95:
            s = int(_pick(rng, 2**40 - 16, 2**40, 2**40 + 16, 8, 24, 48, 2**39))
        else:
            s = int(rng.integers(1, 2**20))
        strides.append(s)
        run = s * dims[i]
    box = []
    for i in range(rank_for_lists):
        k = rng.random()
        if i == 0 and k < 0.75:
            span = SPAN[swizzle] if interleave == 0 and SPAN[swizzle] else 256 * es
            chunks = max(1, min(span, 256 * es) // 16)
            b = max(1, 16 * int(rng.integers(1, chunks + 2)) // es)  # one chunk past the span sometimes
        elif k < 0.9:
            b = int(rng.integers(1, 17))
        else:
            b = int(_pick(rng, 0, 1, 255, 256, 257, 228, 229))
        box.append(int(b))
    estride = [int(rng.integers(1, 9)) if rng.random() < 0.5 else 1 for _ in range(rank_for_lists)]
    if rng.random() < 0.04:
        estride[int(rng.integers(rank_for_lists))] = int(_pick(rng, 0, 9))
    offset = 0 if rng.random() < 0.8 else int(_pick(rng, 4, 8, 16, 32, 48, 64))
    return {
        "dtype": dtype, "rank": rank, "global_address": base + offset, "global_dim": dims,
        "global_strides": strides if rank >= 1 else [], "box_dim": box, "element_strides": estride,
        "interleave": interleave, "swizzle": swizzle, "l2_promotion": int(rng.integers(0, 4)),
        "oob_fill": int(rng.random() < 0.2), "arch": "sm_90a",
    }


def fresh_seed() -> int:
    """TMAGEN_ORACLE_SEED if set (to replay a run), else a new one: every GPU run tries new sets."""
    fixed = os.environ.get("TMAGEN_ORACLE_SEED")
    return int(fixed) if fixed else int.from_bytes(os.urandom(4), "little")


def as_sent(args: dict[str, Any]) -> dict[str, Any]:
    """``args`` as the driver receives them: cuuint64_t extents and strides, cuuint32_t box and
    element strides, so wider values keep their low bits (`runtime.encode_tiled_raw` passes them
    so). The sampler's extents reach 2^32 + 1, and a stride after several of them can pass 2^64:
    2^65 + 16 arrives as 16. tmagen judges what the driver is given."""
    u64, u32 = (1 << 64) - 1, (1 << 32) - 1
    return {**args, "global_dim": [v & u64 for v in args["global_dim"]],
            "global_strides": [v & u64 for v in args["global_strides"]],
            "box_dim": [v & u32 for v in args["box_dim"]],
            "element_strides": [v & u32 for v in args["element_strides"]]}


def compare(sets: int, seed: int, examples: int = 50) -> dict[str, Any]:
    """Both verdicts on ``sets`` random argument sets from ``seed``; the figures as JSON values.

    ``tmagen_accepts_driver_refuses`` lists every such set (the oracle's failures, with the
    driver's CUresult); sets tmagen refuses and the driver accepts are counted by rule, with up to
    ``examples`` of them."""
    from tmagen import runtime

    rng = np.random.default_rng(seed)
    table: Counter[tuple[bool, bool]] = Counter()
    looser: list[dict[str, Any]] = []
    stricter: list[dict[str, Any]] = []
    by_rule: Counter[str] = Counter()
    undocumented: list[dict[str, Any]] = []
    validator_s = 0.0
    start = time.perf_counter()
    base = runtime.Buffer(1 << 20)
    try:
        for _ in range(sets):
            args = as_sent(sample(rng, base.ptr))
            t0 = time.perf_counter()
            violations = check_encode_tiled(**args)
            validator_s += time.perf_counter() - t0
            result, _ = runtime.encode_tiled_raw(**{k: v for k, v in args.items() if k != "arch"})
            ours, theirs = not violations, result == 0
            table[(ours, theirs)] += 1
            if ours and not theirs:
                looser.append({**args, "driver": result})
            elif theirs and not ours:
                rules = sorted({v.rule for v in violations})
                by_rule.update(rules)
                if len(stricter) < examples:
                    stricter.append({**args, "rules": rules})
                if not all(r in RULES and RULES[r].documented for r in rules):
                    undocumented.append({**args, "rules": rules})
    finally:
        base.free()
    elapsed = time.perf_counter() - start
    return {
        "sets": sets, "seed": seed, "seconds": round(elapsed, 2),
        "validator_us_per_set": round(validator_s / max(sets, 1) * 1e6, 1),
        "both_accept": table[(True, True)], "both_refuse": table[(False, False)],
        "tmagen_accepts_driver_refuses": looser,
        "tmagen_refuses_driver_accepts": table[(False, True)],
        "stricter_by_rule": dict(sorted(by_rule.items())),
        "stricter_by_undocumented_rule": undocumented,
        "stricter_examples": stricter,
    }


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m lab.oracle", description=__doc__.split("\n\n")[0])
    p.add_argument("--sets", type=int, default=100_000)
    p.add_argument("--seed", type=int, default=None, help="default: TMAGEN_ORACLE_SEED, else fresh")
    p.add_argument("--out", help="write the figures here as JSON (default: standard output)")
    args = p.parse_args(argv)
    from tmagen import runtime

    reason = runtime.no_gpu_reason()
    if reason:
        print(f"python -m lab.oracle: nothing run, {reason}", file=sys.stderr)
        return 3
    runtime.Device.open()  # the primary context, current: the driver allocates and encodes in it
    figures = compare(args.sets, args.seed if args.seed is not None else fresh_seed())
    text = json.dumps(figures, indent=1)
    if args.out:
        with open(args.out, "w", encoding="utf-8") as f:
            f.write(text)
    else:
        sys.stdout.write(text + "\n")
    return 0 if not figures["tmagen_accepts_driver_refuses"] else 1


if __name__ == "__main__":
    sys.exit(main())
