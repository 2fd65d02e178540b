"""Text views of the swizzle model: the PTX ISA's pattern tables, rebuilt from `tmagen.swizzle`."""

from __future__ import annotations

from tmagen.enums import Swizzle
from tmagen.errors import ModelError
from tmagen.swizzle import LINE_BYTES, chunk_table, pattern


def pattern_table(swizzle: Swizzle | str | int, base_offset: int = 0) -> str:
    """For each 128-byte line of one period, the logical 16-byte chunk at each physical position,
    with the bank group (four banks) each position covers, as the seeds' tables show it."""
    pat = pattern(swizzle)
    lines_per_period = pat.period // LINE_BYTES
    if not 0 <= base_offset < max(lines_per_period, 1):
        raise ModelError(f"base offset = {base_offset}, but the {pat.swizzle.spec_name} pattern has "
                         f"{lines_per_period} lines: use 0 to {lines_per_period - 1}")
    name = pat.swizzle.spec_name
    head = (f"swizzle {name}: Swizzle<{pat.bits},{pat.base},{pat.shift}>" if pat.cute else f"swizzle {name}")
    head += f", repeats every {pat.period} bytes"
    if base_offset:
        head += f", base offset {base_offset} (buffer {base_offset * LINE_BYTES} bytes past the pattern start)"
    if not pat.measured:
        head += "  [sm_100a only: modelled from the PTX ISA tables, not run on Hopper]"
    if pat.flip_8b:
        head += "  [odd lines also swap the 8-byte halves of each chunk]"
    lines = [head, "line | banks " + " ".join(f"{4 * p:>2}-{4 * p + 3:<2}" for p in range(8))]
    for y, row in enumerate(chunk_table(swizzle, base_offset)):
        lines.append((f"{y:>4} |       " + " ".join(f"{x:^5}" for x in row)).rstrip())
    return "\n".join(lines)


def all_pattern_tables() -> str:
    return "\n\n".join(pattern_table(s) for s in Swizzle)
