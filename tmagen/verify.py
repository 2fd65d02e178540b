"""Running generated kernels on the GPU and checking them bit for bit against numpy and the model.

Every output buffer is poisoned before a launch (never zeros) and every input is fresh random
data, so an unwritten byte or a wrong index cannot pass. Tensors may have padded strides: the
padding of a source is random too, and the padding of an output must keep its poison.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from tmagen import fp8, runtime
from tmagen.errors import RuleError
from tmagen.kinds.tiled import Tiles, tiles  # noqa: F401 - where callers of tmagen.verify found them
from tmagen.launch import Array, Workspaces, array_args, contiguous, encode, launch_parameters
from tmagen.plan import Plan, check, resolve
from tmagen.planning import KernelPlan
from tmagen.render import render
from tmagen.spec import InspectKernel, loaded_box


def contiguous_strides(shape: Sequence[int]) -> list[int]:
    """Strides in elements of a contiguous tensor of ``shape``, outermost first."""
    return list(contiguous(shape))


OUT_POISON = 0xA5  # output buffers before a launch
SMEM_POISON = 0x5A  # shared memory before an inspect load: what TMA leaves alone keeps it


@dataclass(frozen=True)
class Outcome:
    kernel: str
    shape: tuple[int, ...]
    dtype: str
    ok: bool
    detail: str
    ms: float | None = None

    @property
    def result(self) -> str:
        return "match" if self.ok else "MISMATCH"


def proof(plan: Plan, files: dict[str, str], spec_file: str) -> tuple[Plan, dict[str, str]]:
    """The plan and files whose kernels verify compiles and runs: ``plan``'s own, or for a spec without
    a kernel the same maps under an inspect kernel each, rendered here and never written beside the
    user's files, so that every box is still loaded on the GPU and compared byte for byte with the model."""
    if plan.has_kernel:
        return plan, files
    inspected = plan.spec.model_copy(update={"kernel": InspectKernel(kind="inspect")})
    violations = check(inspected)  # the inspect kernel's own shared memory: each box + 1024 bytes
    if violations:
        raise RuleError(f"{spec_file} (loaded by an inspect kernel of tmagen's, since the spec has none)", violations)
    inspected_plan = resolve(inspected)
    return inspected_plan, render(inspected_plan, spec_file)


TF32_TYPES = frozenset({"tfloat32", "tfloat32_ftz"})


def through_tma(values: np.ndarray, dtype: str) -> tuple[np.ndarray, np.ndarray | None]:
    """The bytes TMA brings for ``values`` (last axis: one element's bytes) of ``dtype``, and where
    the model leaves them to the hardware (None: nowhere). Every type moves its bits unchanged but
    the TF32 ones: measured on an H200 (scripts/probe/tf32_probe.py), a TFLOAT32 or TFLOAT32_FTZ map
    rounds each float32 to 10 mantissa bits, to nearest even (carrying into the exponent, to infinity
    at the top, denormals too: no flush), and turns a NaN into a NaN of its own (0x7fffe000 seen):
    only NaN-ness is compared there."""
    if dtype not in TF32_TYPES:
        return values, None
    bits = np.ascontiguousarray(values).view(np.uint32)[..., 0].astype(np.uint64)
    nan = ((bits >> 23) & 0xFF == 0xFF) & (bits & 0x7FFFFF != 0)
    low, keep = bits & 0x1FFF, bits & ~np.uint64(0x1FFF)
    up = (low > 0x1000) | ((low == 0x1000) & ((bits >> 13) & 1 == 1))
    inf = (bits >> 23) & 0xFF == 0xFF
    rounded = np.where(inf, bits, np.where(up, keep + 0x2000, keep)).astype(np.uint32)
    return rounded.view(np.uint8).reshape(values.shape), nan


def _is_nan32(elements: np.ndarray) -> np.ndarray:
    bits = np.ascontiguousarray(elements).view(np.uint32)[..., 0]
    return ((bits >> 23) & 0xFF == 0xFF) & (bits & 0x7FFFFF != 0)


def random_bytes(rng: np.random.Generator, shape: Sequence[int], elem_bytes: int) -> np.ndarray:
    return rng.integers(0, 256, size=(*shape, elem_bytes), dtype=np.uint8)


def strided_span(shape: Sequence[int], strides: Sequence[int]) -> int:
    """Elements from the first to the last of a tensor of ``shape`` and element ``strides``."""
    return 1 + sum((n - 1) * s for n, s in zip(shape, strides))


def strided_view(memory: np.ndarray, shape: Sequence[int], strides: Sequence[int]) -> np.ndarray:
    """The tensor of ``shape`` and element ``strides`` in ``memory`` (elements x element bytes)."""
    es = memory.shape[-1]
    return np.lib.stride_tricks.as_strided(memory, shape=(*shape, es), strides=(*[s * es for s in strides], 1),
                                           writeable=False)


def _box_of(host: np.ndarray, coords: Sequence[int], box: Sequence[int],
            steps: Sequence[int] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """The ``box`` elements at ``coords`` of ``host`` (shape + (elem_bytes,)), ``steps`` apart
    (default 1), zeros outside the tensor, and the in-bounds mask."""
    steps = steps or [1] * len(box)
    index = [c + e * np.arange(b) for c, b, e in zip(coords, box, steps)]
    inside_1d = [(i >= 0) & (i < n) for i, n in zip(index, host.shape[:-1])]
    inside = np.ones(tuple(box), dtype=bool)
    for d, mask in enumerate(inside_1d):
        inside &= mask.reshape([-1 if k == d else 1 for k in range(len(box))])
    clipped = [np.clip(i, 0, n - 1) for i, n in zip(index, host.shape[:-1])]
    out = np.array(host[np.ix_(*clipped)], dtype=np.uint8)
    out[~inside] = 0
    return out, inside


class Verifier:
    """Runs the kernels of one compiled spec."""

    def __init__(self, plan: Plan, cubin: bytes | None, device: runtime.Device, seed: int | None = None,
                 module: runtime.Module | None = None) -> None:
        """Loads ``cubin``, or uses ``module`` (already loaded, holding the plan's kernels among
        others, and left loaded by close())."""
        self.plan = plan
        self.spec = plan.spec
        self.device = device
        self.rng = np.random.default_rng(seed)
        self._owns_module = module is None
        self.module = module if module is not None else runtime.Module(cubin)  # type: ignore[arg-type]
        self.views = {k.symbol: k for k in plan.kernels}
        self.maps = {m.name: m for m in plan.maps}

    def run_all(self, timed: bool = True) -> list[Outcome]:
        kind = self.plan.kind_name
        if kind is None:
            raise TypeError(f"{self.spec.name} has no kernel to run: verify its maps through proof()")
        if kind == "inspect":
            return [self.inspect(role, timed=timed) for role in self.maps]
        if kind == "copy":
            return [self.copy(timed=timed)]
        if kind == "matmul":
            return [self.matmul(timed=timed)]
        return [self.transpose(timed=timed)]

    def _kernel(self, view: KernelPlan) -> runtime.Kernel:
        return self.module.function(view.symbol, view.smem_bytes)

    def _time(self, launch: Callable[[], None]) -> float:
        launch()  # warm
        with runtime.Timer() as t:
            launch()
        return t.ms

    def inspect(self, role: str, coords: Sequence[int] | None = None, shape: Sequence[int] | None = None,
                strides: Sequence[int] | None = None, timed: bool = False) -> Outcome:
        """One load of map ``role`` at ``coords`` (default: the spec's) from a random tensor of
        ``shape`` and element ``strides`` (default: the spec's shape and strides; contiguous for a
        shape of the caller's)."""
        m = self.maps[role]
        t = m.tensor
        view = self.views[f"{self.spec.name}_inspect_{role}"]
        if shape is None and strides is None:
            strides = t.strides
        shape = list(shape or t.shape)
        strides = list(strides) if strides is not None else list(contiguous(shape))
        coords = list(coords if coords is not None else view.detail.coords)
        es = t.dt.nbytes
        memory = random_bytes(self.rng, [strided_span(shape, strides)], es)
        host = strided_view(memory, shape, strides)
        loaded, steps = loaded_box(t)
        layout = m.layout
        with runtime.Buffer.from_array(memory) as src, runtime.Buffer(layout.footprint) as out:
            out.fill(OUT_POISON)
            tmap = encode(array_args(m, src.ptr, shape, strides))
            kernel = self._kernel(view)
            params = [tmap, *[ctypes.c_int32(c) for c in coords[::-1]], ctypes.c_uint8(SMEM_POISON),
                      ctypes.c_uint64(out.ptr)]

            def launch() -> None:
                kernel.launch(1, view.threads, params)

            launch()
            self.device.synchronize()
            got = out.download()
            ms = self._time(launch) if timed else None
        box, inside = _box_of(host, coords, loaded, steps)
        box, nan = through_tma(box, t.dtype)
        expected = layout.place(box.view(_uint(es)).reshape(loaded), fill=SMEM_POISON)
        care = np.ones(layout.footprint, dtype=bool)
        # the NaN patterns are the hardware's: the out-of-bounds fill, and TF32's NaNs
        hardwares = ~inside if t.oob_fill == "nan" else np.zeros(loaded, dtype=bool)
        if nan is not None:
            hardwares |= nan & inside
        starts = layout.offsets()[hardwares]
        for b in range(es):
            care[starts + b] = False
        if nan is not None and not np.all(_is_nan32(np.stack([got[starts + b] for b in range(es)], axis=-1))):
            care[:] = True  # a NaN that came out as a number: report the byte differences
        bad = np.nonzero((got != expected) & care)[0]
        detail = "every byte of the footprint" if bad.size == 0 else (
            f"{bad.size} of {layout.footprint} bytes differ, first at offset {bad[0]}: "
            f"got {got[bad[0]]:#04x}, model {expected[bad[0]]:#04x}")
        return Outcome(view.symbol, tuple(shape), t.dtype, bad.size == 0, detail, ms)

    def copy(self, shape: Sequence[int] | None = None, strides: Sequence[int] | None = None,
             timed: bool = False) -> Outcome:
        """A random tensor of ``shape`` and element ``strides`` (default: the spec's; contiguous for a
        shape of the caller's) copied into a poisoned one of the same layout, whose padding must stay
        poisoned."""
        t = self.maps["src"].tensor
        if shape is None and strides is None:
            strides = t.strides
        shape = list(shape or t.shape)
        es = t.dt.nbytes
        if strides is None:
            host = random_bytes(self.rng, shape, es)
            expected, nan = through_tma(host, t.dtype)
            return self._persistent("copy", host, expected, "element", timed, shape, nan=nan)
        memory = random_bytes(self.rng, [strided_span(shape, strides)], es)
        moved, moved_nan = through_tma(memory, t.dtype)
        expected = np.full_like(memory, OUT_POISON)
        nan = np.zeros(memory.shape[:-1], dtype=bool)
        byte_strides = (*[s * es for s in strides], 1)
        np.lib.stride_tricks.as_strided(expected, shape=(*shape, es), strides=byte_strides)[...] = \
            strided_view(moved, shape, strides)
        if moved_nan is not None:  # one flag per element: strides of elements, one byte each
            flags = tuple(strides)
            np.lib.stride_tricks.as_strided(nan, shape=tuple(shape), strides=flags)[...] = \
                np.lib.stride_tricks.as_strided(moved_nan, shape=tuple(shape), strides=flags)
        return self._persistent("copy", memory, expected, "element (padding included)", timed, shape, list(strides),
                                nan=nan if moved_nan is not None else None)

    def transpose(self, shape: Sequence[int] | None = None, timed: bool = False) -> Outcome:
        src_map = self.maps["src"]
        t = src_map.tensor
        shape = list(shape or t.shape)
        es, unit = t.dt.nbytes, src_map.unit_bytes
        per = unit // es
        host = random_bytes(self.rng, shape, es)
        rows, cols = shape[-2], shape[-1] // per
        moved, nan = through_tma(host, t.dtype)
        units = moved.reshape(*shape[:-2], rows, cols, unit)
        expected = np.ascontiguousarray(np.swapaxes(units, -2, -3))  # (..., cols, rows, unit)
        if nan is not None:  # a unit holding a NaN: its bytes are the hardware's there
            nan = np.ascontiguousarray(np.swapaxes(nan.reshape(*shape[:-2], rows, cols, per).any(axis=-1), -1, -2))
        return self._persistent("transpose", host, expected, "unit", timed, shape, nan=nan)

    def _persistent(self, kind: str, host: np.ndarray, expected: np.ndarray, what: str, timed: bool,
                    shape: list[int], strides: list[int] | None = None, nan: np.ndarray | None = None) -> Outcome:
        """Runs the copy or transpose kernel on a tensor of ``shape`` and ``strides`` whose memory is
        ``host`` into a poisoned output and compares the output's memory with ``expected`` (last
        axis: the bytes of one element or unit); where ``nan`` is set, the output need only hold NaNs
        (TF32's NaN patterns are the hardware's)."""
        t = self.maps["src"].tensor
        view = self.views[f"{self.spec.name}_{kind}"]
        launcher = self.plan.launcher
        assert launcher is not None
        out_shape = launcher.output_shape(self.plan, [tuple(shape)])
        with runtime.Buffer.from_array(host) as src, runtime.Buffer(host.nbytes) as dst:
            dst.fill(OUT_POISON)
            # a copy writes its output with the input's strides; a transpose writes a contiguous one
            call, params = launch_parameters(self.plan, [Array.of(src.ptr, shape, strides)],
                                             Array.of(dst.ptr, out_shape, strides if kind == "copy" else None),
                                             self.device.multiprocessors)
            kernel = self._kernel(view)

            def launch() -> None:
                kernel.launch(call.grid, view.threads, params, dependent=view.dependent_launch)

            launch()
            self.device.synchronize()
            got = dst.download().reshape(expected.shape)
            ms = self._time(launch) if timed else None
        differs = np.any(got != expected, axis=-1)
        if nan is not None:  # the 4-byte words of a NaN unit must be NaNs where the input's were
            words_got = got.view(np.uint8).reshape(*got.shape[:-1], -1, 4)
            words_in = expected.view(np.uint8).reshape(*expected.shape[:-1], -1, 4)
            nan_ok = np.all(_is_nan32(words_got) | ~_is_nan32(words_in) & np.all(words_got == words_in, axis=-1),
                            axis=-1)
            differs = np.where(nan, ~nan_ok, differs)
        bad = int(np.count_nonzero(differs))
        count = expected.size // expected.shape[-1]
        detail = f"every {what}" if bad == 0 else f"{bad} of {count} {what}s differ"
        return Outcome(view.symbol, tuple(shape), t.dtype, bad == 0, detail, ms)

    def matmul(self, mnk: Sequence[int] | None = None, timed: bool = False, epilogue: str | None = None) -> Outcome:
        """C = A x B on random normal data against float64, each element within `matmul_tolerance`;
        with ``epilogue`` (one of MATMUL_EPILOGUES) C = alpha A B + beta C_in + bias, each kernel
        epilogue that choice leads to: alpha alone, a bias along N or along M, beta C_in read in pairs
        of columns, or (an odd row pitch, or everything at once) the general one."""
        a_major, b_major = self.plan.kernel.detail.a_major, self.plan.kernel.detail.b_major
        a_t, c_t = self.maps["a"].tensor, self.maps["c"].tensor
        m, n, kk = mnk or (c_t.shape[0], c_t.shape[1], a_t.shape[1] if a_major == "k" else a_t.shape[0])
        family = self.plan.kernel.detail
        b_t = self.maps["b"].tensor
        a = self.rng.standard_normal((m, kk)).astype(np.float32)
        b = self.rng.standard_normal((n, kk)).astype(np.float32)
        a_bits, a = to_inputs(a, a_t.dtype)
        b_bits, b = to_inputs(b, b_t.dtype)
        a_global = a_bits if a_major == "k" else np.ascontiguousarray(a_bits.T)
        b_global = b_bits if b_major == "k" else np.ascontiguousarray(b_bits.T)
        out_bytes = c_t.dt.nbytes
        workspace = Workspaces()
        # Block scales (fp8): a power of two per block, so that the scaled reference is exact.
        k_blocks = -(-kk // 128)
        sa = np.exp2(self.rng.integers(-3, 4, (m, k_blocks))).astype(np.float32)
        sb = np.exp2(self.rng.integers(-3, 4, (-(-n // 128), k_blocks))).astype(np.float32)

        if epilogue not in MATMUL_EPILOGUES:
            raise ValueError(f"epilogue {epilogue!r}: one of {MATMUL_EPILOGUES}")
        alpha = 1.5 if epilogue in ("alpha", "all") else 1.0
        beta = 0.5 if epilogue in ("residual", "residual_odd_pitch", "all") else 0.0
        along = {"bias_n": "n", "bias_m": "m", "all": "n"}.get(epilogue or "")
        c_pitch = n + 1 if epilogue == "residual_odd_pitch" else max(n, 1)
        c_bits, c_in = to_outputs(self.rng.standard_normal((max(m, 1), c_pitch)).astype(np.float32), c_t.dtype)
        bias_bits, bias = to_outputs(self.rng.standard_normal(max(n if along == "n" else m, 1)).astype(np.float32),
                                     c_t.dtype)
        with runtime.Buffer.from_array(a_global) as da, runtime.Buffer.from_array(b_global) as db, \
                runtime.Buffer(m * n * out_bytes) as dc, runtime.Buffer.from_array(sa) as dsa, \
                runtime.Buffer.from_array(sb) as dsb, runtime.Buffer.from_array(c_bits) as dcin, \
                runtime.Buffer.from_array(bias_bits) as dbias:
            dc.fill(OUT_POISON)
            params_in: dict = ({"scale_a": Array.of(dsa.ptr, sa.shape), "scale_b": Array.of(dsb.ptr, sb.shape)}
                               if family.block_scales else {})
            if alpha != 1.0:
                params_in["alpha"] = alpha
            if beta != 0.0:
                params_in.update(c=Array.of(dcin.ptr, (m, n), (c_pitch, 1)), beta=beta)
            if along is not None:
                params_in.update(bias=Array.of(dbias.ptr, (bias.size,)), bias_along=along)
            operands = [Array.of(da.ptr, a_global.shape), Array.of(db.ptr, b_global.shape)]
            call, params = launch_parameters(self.plan, operands, Array.of(dc.ptr, (m, n)), self.device.multiprocessors,
                                             workspace, self.device.memory_bytes_per_us, **params_in)
            view = self.plan.kernel.family[call.kernel]
            kernel = self._kernel(view)

            def launch() -> None:
                if call.clear_output:  # K = 0: an empty sum, which the C API and tmagen.load write as zeros
                    dc.fill(0)
                else:
                    kernel.launch(call.grid, view.threads, params, dependent=view.dependent_launch)

            launch()
            self.device.synchronize()
            got = from_device(dc.download(_uint(out_bytes), (m, n)), c_t.dtype)
            ms = self._time(launch) if timed else None
            workspace.free()
        if family.block_scales:
            a = a * np.repeat(sa, 128, axis=1)[:, :kk]
            b = b * np.repeat(np.repeat(sb, 128, axis=0)[:n], 128, axis=1)[:, :kk]
        product = alpha * (a.astype(np.float64) @ b.astype(np.float64).T)
        terms = np.zeros((m, n))
        if beta != 0.0:
            terms += beta * c_in[:m, :n].astype(np.float64)
        if along is not None:
            terms += bias[None, :n] if along == "n" else bias[:m, None]
        reference = product + terms
        tolerance, rule = matmul_tolerance(abs(alpha) * (np.abs(a).astype(np.float64) @ np.abs(b).astype(np.float64).T),
                                           reference, kk, c_t.dtype, family.promote_every if family.fp8 else None)
        if epilogue is not None:  # fp32 roundings of alpha x, + beta C_in, + bias: one unit of fp32 each, at most
            tolerance = tolerance + 3 * 2.0 ** -24 * (np.abs(product) + np.abs(terms))
            rule += f", epilogue {epilogue} (alpha {alpha}, beta {beta}, bias along {along})"
        bad = int(np.count_nonzero(~(np.abs(got - reference) <= tolerance)))  # NaN counts as bad
        detail = f"every element within {rule}" if bad == 0 else f"{bad} of {m * n} elements outside {rule}"
        return Outcome(view.symbol, (m, n, kk), f"{a_t.dtype}->{c_t.dtype}", bad == 0, detail, ms)

    def close(self) -> None:
        if self._owns_module:
            self.module.unload()


UNIT_ROUNDOFF = {"bfloat16": 2.0 ** -8, "float16": 2.0 ** -11, "float32": 2.0 ** -24}

# What `Verifier.matmul` adds to the product (None: nothing), each leading to one of the kernel's
# epilogues (`tmagen.kinds.matmul.launch.epilogue_mode`): alpha alone; a bias along N or M; beta C_in
# read in pairs of columns; beta C_in of an odd row pitch, and everything at once (the general one).
MATMUL_EPILOGUES = (None, "alpha", "bias_n", "bias_m", "residual", "residual_odd_pitch", "all")


# Bits the fp8 tensor-core accumulator keeps below its leading one, at least (its sums are not
# fp32: docs/fp8-accumulator.md has the probe and the H200's figure).
FP8_ACCUMULATOR_BITS = 13


def matmul_tolerance(abs_product: np.ndarray, reference: np.ndarray, k: int, out_dtype: str,
                     promote_every: int | None = None) -> tuple[np.ndarray, str]:
    """How far a matmul element may be from the float64 product of the same inputs: the rounding of
    C to its type, plus K fp32 additions of at most one unit in the last place each (2^-23 of
    |A|.|B|: the tensor cores' fp32 accumulation is not required to round to nearest). fp8
    (``promote_every`` not None): the tensor core's own sums keep FP8_ACCUMULATOR_BITS, so each of
    the additions before a promotion (K / 32 instructions of 32 products; all K with promote_every
    0) may lose 2^-bits of |A|.|B|."""
    u = UNIT_ROUNDOFF[out_dtype]
    if promote_every is None:
        rule = f"|C - AB| <= 2^{int(np.log2(u))}|AB| + {k}*2^-23*(|A||B|)"
        return u * np.abs(reference) + k * 2.0 ** -23 * abs_product, rule
    steps = -(-(promote_every or k) // 32) + 1
    bits = FP8_ACCUMULATOR_BITS
    rule = f"|C - AB| <= 2^{int(np.log2(u))}|AB| + ({steps}*2^-{bits} + {k}*2^-23)*(|A||B|)"
    return u * np.abs(reference) + (steps * 2.0 ** -bits + k * 2.0 ** -23) * abs_product, rule


def to_inputs(values: np.ndarray, dtype: str) -> tuple[np.ndarray, np.ndarray]:
    """(bit patterns, the values they hold as float32) of float32 ``values`` rounded to a matmul's
    input type: bfloat16, float16 or an fp8 type."""
    if dtype in fp8.FORMATS:
        bits = fp8.encode(values, dtype)
        return bits, fp8.decode(bits, dtype)
    return to_16bit(values, dtype)


def to_outputs(values: np.ndarray, dtype: str) -> tuple[np.ndarray, np.ndarray]:
    """(bit patterns, the values they hold as float32) of float32 ``values`` in a matmul's output
    type (bfloat16, float16 or float32): what C_in and the bias hold."""
    if dtype == "float32":
        v = values.astype(np.float32)
        return v, v
    return to_16bit(values, dtype)


def to_16bit(values: np.ndarray, dtype: str) -> tuple[np.ndarray, np.ndarray]:
    """(bit patterns, the values they hold as float32) of float32 ``values`` rounded to bfloat16 or
    float16, to nearest even."""
    if dtype == "float16":
        h = values.astype(np.float16)
        return h.view(np.uint16), h.astype(np.float32)
    bits = values.astype(np.float32).view(np.uint32)
    rounded = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)
    return rounded, (rounded.astype(np.uint32) << 16).view(np.float32)


def from_device(bits: np.ndarray, dtype: str) -> np.ndarray:
    """Device bit patterns of ``dtype`` as float64."""
    if dtype == "bfloat16":
        return (bits.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    return bits.view({"float16": np.float16, "float32": np.float32}[dtype]).astype(np.float64)


def _uint(nbytes: int) -> np.dtype:
    return np.dtype({1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[nbytes])
