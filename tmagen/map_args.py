"""The TMA rules' view of a spec's maps: the driver's arguments, innermost first, with the kernel's
use of each map, and field names by spec path (``tensors[0].box[-1]``), so that a violation names
what the user wrote."""

from __future__ import annotations

from tmagen import limits
from tmagen.dtypes import DType
from tmagen.enums import Interleave, L2Promotion, OobFill, Swizzle
from tmagen.planning import MapSpec
from tmagen.rules import FieldNames, MmaUse, TensorMapArgs
from tmagen.spec import InspectKernel, Spec


class SpecFieldNames(FieldNames):
    """Names fields by spec path, outermost-first indices; the innermost is written [-1]."""

    def __init__(self, index: int, rank: int, derived: str | None = None, explicit_strides: bool = True) -> None:
        super().__init__()
        self.tensor_rank = rank
        # The transpose's output map swaps the last two dimensions of the user's tensor: name them as
        # the user wrote them.
        self.transposed = derived is not None
        self.explicit_strides = explicit_strides
        prefix = f"tensors[{index}]" + (f" (transposed, as the kernel's {derived} map)" if derived else "")
        self.prefix = prefix
        self.dtype = f"{prefix}.dtype"
        self.address = f"{prefix}.alignment"
        self.interleave = f"{prefix}.interleave"
        self.swizzle = f"{prefix}.swizzle"
        self.l2 = f"{prefix}.l2_promotion"
        self.oob = f"{prefix}.oob_fill"
        self.smem_offset = f"{prefix}.smem_offset"
        self.rank = f"{prefix}.shape"
        self.target = "target"
        self.coords = "kernel.coords"
        self.atomicity = f"{prefix}.swizzle.atomicity"
        self.mma = f"{prefix}.mma"
        self.l2_hint = f"{prefix}.l2_hint"
        self.reduce = f"{prefix}.reduce"

    def coord(self, k: int) -> str:
        return f"{self.coords}[-1]"

    def _ix(self, driver_index: int) -> str:
        if self.transposed and driver_index in (0, 1):
            driver_index = 1 - driver_index
        return "-1" if driver_index == 0 else str(self.tensor_rank - 1 - driver_index)

    def dim(self, i: int) -> str:
        return f"{self.prefix}.shape[{self._ix(i)}]"

    def stride(self, i: int) -> str:
        name = f"{self.prefix}.strides[{self._ix(i + 1)}]"
        return name if self.explicit_strides else f"{name} (contiguous, from shape)"

    def box(self, i: int) -> str:
        return f"{self.prefix}.box[{self._ix(i)}]"

    def estride(self, i: int) -> str:
        return f"{self.prefix}.element_strides[{self._ix(i)}]"

    def enum(self, value: Interleave | Swizzle | L2Promotion | OobFill) -> str:
        if isinstance(value, Swizzle):
            if value >= Swizzle.B128_ATOM_32B:
                atomicity = {4: "32B", 5: "32B_flip_8B", 6: "64B"}[int(value)]
                return f'{{"mode": "128B", "atomicity": "{atomicity}"}}'
            return f'{{"mode": "{value.spec_name}"}}'
        return value.spec_name

    def dtype_name(self, dtype: DType) -> str:
        return dtype.name


def tensor_map_args(spec: Spec, m: MapSpec, smem: int | None = None, threads: int | None = None, *,
                    l2_hints: bool = True, reduces: bool = True) -> TensorMapArgs:
    """The driver's arguments of map ``m`` (innermost first), plus its use by the kernel: ``smem``
    bytes (dynamic and static) and ``threads`` per block of the kernel that uses it (None without
    a kernel: the box itself is then the budget, rule box-fits-shared-memory), and whether that
    kernel passes a tensor's ``l2_hint`` to its copies and honours its ``reduce`` (`Kind`)."""
    t = m.tensor
    kernel = spec.kernel
    coords: tuple[tuple[int, ...], ...] = ()
    if isinstance(kernel, InspectKernel) and kernel.coords is not None:
        coords = (tuple(kernel.coords[::-1]),)
    return TensorMapArgs(
        dtype=t.dt, rank=t.rank, global_address=t.alignment,
        global_dim=tuple(t.shape[::-1]), global_strides=t.driver_strides(),
        box_dim=tuple(t.box[::-1]), element_strides=tuple(t.element_strides_or_default[::-1]),
        interleave=Interleave.parse(t.interleave), swizzle=t.swizzle.driver,
        l2_promotion=L2Promotion.parse(t.l2_promotion), oob_fill=OobFill.parse(t.oob_fill),
        target=limits.TARGETS[spec.target], smem_offset=t.smem_offset,
        stores=m.stores, loads=not m.stores, start_coords=coords,
        requested_swizzle=(t.swizzle.mode, t.swizzle.atomicity), kernel_smem_bytes=smem, kernel_threads=threads,
        kernel_kind=kernel.kind if kernel is not None else None,
        mma=MmaUse(m.mma.operand, m.mma.major, m.mma.mn_boxes) if m.mma else None,
        l2_hint=t.l2_hint, reduce=t.reduce, kernel_l2_hints=l2_hints, kernel_reduces=reduces)
