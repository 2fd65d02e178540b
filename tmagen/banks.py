"""Static prediction of shared-memory wavefronts and bank conflicts for a warp's access.

The model (sm_90; tmagen-rules section 6, checked with ncu on the generated kernels):

    32 banks of 4 bytes: bank(a) = (a >> 2) & 31, and one wavefront serves 128 bytes.
    A warp-wide ld/st.shared of w bytes per lane is served in phases of 128 / w lanes:
    32 lanes for w <= 4, lanes 16q..16q+15 for w = 8, lanes 8q..8q+7 for w = 16.
    In a phase, each bank serves one distinct 4-byte word per wavefront (lanes that touch the
    same word share it), so the phase takes max over banks of the distinct words it touches.
    conflicts = wavefronts - (number of phases with an active lane)

ncu's ``l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_{ld,st}.sum`` counts the same
excess wavefronts.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

from tmagen.errors import ModelError
from tmagen.swizzle import BoxLayout, pattern

BANKS = 32
BANK_BYTES = 4
WAVEFRONT_BYTES = BANKS * BANK_BYTES
WARP = 32


def lanes_per_phase(width: int) -> int:
    if width not in (1, 2, 4, 8, 16):
        raise ModelError(f"access width = {width} bytes: shared-memory accesses are 1, 2, 4, 8 or 16 bytes")
    return WARP if width <= BANK_BYTES else WAVEFRONT_BYTES // width


def bank(address: int) -> int:
    return (address // BANK_BYTES) % BANKS


@dataclass(frozen=True)
class Prediction:
    wavefronts: int
    ideal: int

    @property
    def conflicts(self) -> int:
        return self.wavefronts - self.ideal


def predict(addresses: Sequence[int | None], width: int) -> Prediction:
    """Wavefronts of one warp-wide access; ``addresses[lane]`` is the lane's byte address, None
    for an inactive lane."""
    if len(addresses) > WARP:
        raise ModelError(f"{len(addresses)} addresses: a warp has {WARP} lanes")
    step = lanes_per_phase(width)
    wavefronts = ideal = 0
    for start in range(0, WARP, step):
        words: dict[int, set[int]] = defaultdict(set)
        for a in addresses[start:start + step]:
            if a is None:
                continue
            if a % width:
                raise ModelError(f"address {a} is not aligned to the {width}-byte access")
            first = a // BANK_BYTES
            for word in range(first, first + max(width // BANK_BYTES, 1)):
                words[word % BANKS].add(word)
        if words:
            ideal += 1
            wavefronts += max(len(w) for w in words.values())
    return Prediction(wavefronts, ideal)


def column_access(shape: Sequence[int], elem_bytes: int, swizzle: str | int, base_address: int = 0,
                  column_chunk: int = 0) -> list[int | None]:
    """Addresses of a warp reading one 16-byte chunk column of a 2-D box, lane i reading row i, as
    the seeds' transpose reads it (rows beyond the box are inactive lanes)."""
    layout = BoxLayout(tuple(shape), elem_bytes, pattern(swizzle), base_address)
    per_chunk = 16 // elem_bytes
    offsets = layout.offsets()
    rows = shape[0]
    return [int(base_address + offsets[r, column_chunk * per_chunk]) if r < rows else None for r in range(WARP)]
