"""The random spec generator of the reliability campaign (lab.fuzz), on the CPU: the same spec for
the same seed and number, every spec valid and renderable, every run one the driver would encode,
and a few hundred draws covering every dimension of the space."""

from __future__ import annotations

import math
from collections import Counter

import pytest

from lab import fuzz
from tmagen.dtypes import DTYPES
from tmagen.limits import TARGETS
from tmagen.plan import check, resolve
from tmagen.render import render
from tmagen.rules import check_encode_tiled
from tmagen.spec import loaded_box, parse_spec
from tmagen.verify import contiguous_strides

DRAWS = 450


@pytest.fixture(scope="module")
def drawn() -> list[fuzz.Case]:
    return [fuzz.draw_case(5, i) for i in range(DRAWS)]


def test_same_seed_and_number_same_case() -> None:
    for i in (0, 7, 311):
        a, b = fuzz.draw_case(42, i), fuzz.draw_case(42, i)
        assert a == b and a.spec["name"] == fuzz.case_name(42, i)
    assert fuzz.draw_case(42, 3).spec != fuzz.draw_case(43, 3).spec
    assert fuzz.draw_case(42, 3).spec != fuzz.draw_case(42, 4).spec


def test_every_case_passes_every_rule_and_renders(drawn) -> None:
    for c in drawn:
        spec = parse_spec(c.spec)
        assert check(spec) == [], c.spec
        files = render(resolve(spec), f"{c.name}.json")
        assert f"{c.name}_kernels.cuh" in files
    # the filter has something to filter: some candidates break rules on purpose
    refused = Counter()
    for c in drawn:
        refused.update(c.refused)
    assert sum(c.attempts for c in drawn) > len(drawn) and len(refused) >= 3, refused


def _run_maps(spec, run: dict) -> list[tuple[object, list[int], list[int]]]:
    """(map, shape, element strides) of each tensor map a run encodes."""
    maps = {m.role: m for m in resolve(spec).maps}
    args = run["args"]
    if run["call"] == "matmul":
        m, n, k = args["mnk"]
        a = [m, k] if spec.kernel.a_major == "k" else [k, m]
        b = [n, k] if spec.kernel.b_major == "k" else [k, n]
        return [(maps[role], s, contiguous_strides(s)) for role, s in (("a", a), ("b", b), ("c", [m, n]))]
    shape = list(args.get("shape") or maps[args.get("role", "src")].tensor.shape)
    strides = args.get("strides") or contiguous_strides(shape)
    if run["call"] == "inspect":
        return [(maps[args["role"]], shape, strides)]
    if run["call"] == "copy":
        return [(maps["src"], shape, strides), (maps["dst"], shape, strides)]
    unit, es = maps["src"].unit_bytes, maps["src"].tensor.dt.nbytes
    dst = [*shape[:-2], shape[-1] * es // unit, shape[-2] * unit // es]
    return [(maps["src"], shape, contiguous_strides(shape)), (maps["dst"], dst, contiguous_strides(dst))]


def test_every_run_is_one_the_driver_encodes(drawn) -> None:
    """Run-time shapes, strides and coordinates pass the driver's rules, fit the size cap, and the
    copies and transposes are checked at a shape other than the spec's."""
    other_shape = 0
    for c in drawn:
        spec = parse_spec(c.spec)
        assert c.runs, c.name
        for run in c.runs:
            assert run["call"] in ("inspect", "copy", "transpose", "matmul")
            for m, shape, strides in _run_maps(spec, run):
                t = m.tensor
                es = t.dt.nbytes
                violations = check_encode_tiled(
                    dtype=t.dt.driver, rank=t.rank, global_address=256, global_dim=shape[::-1],
                    global_strides=[s * es for s in strides[::-1][1:]], box_dim=t.box[::-1],
                    element_strides=t.element_strides_or_default[::-1], interleave=t.interleave,
                    swizzle=int(t.swizzle.driver), l2_promotion=t.l2_promotion, oob_fill=t.oob_fill,
                    arch=spec.target)
                assert violations == [], (c.name, run, [str(v) for v in violations])
                assert (1 + sum((n - 1) * s for n, s in zip(shape, strides))) * es <= fuzz.TENSOR_BYTES_CAP
            coords = run["args"].get("coords")
            if coords is not None:
                t = {m.role: m for m in resolve(spec).maps}[run["args"]["role"]].tensor
                assert len(coords) == t.rank and (coords[-1] * t.dt.nbytes) % 16 == 0
        if c.kind in ("copy", "transpose"):
            other_shape += any(r["args"]["shape"] != c.spec["tensors"][0]["shape"] for r in c.runs)
        if c.kind == "matmul":
            a, _, cc = c.spec["tensors"]
            other_shape += any(r["args"]["mnk"] != [a["shape"][0], cc["shape"][1], a["shape"][1]] for r in c.runs)
    kernels = sum(c.kind != "inspect" for c in drawn)
    assert other_shape >= 0.95 * kernels


def test_a_few_hundred_draws_cover_the_space(drawn) -> None:
    seen: dict[str, Counter[str]] = {}
    for c in drawn:
        for dim, values in c.features().items():
            seen.setdefault(dim, Counter()).update(values)
    assert set(seen["kind"]) == set(fuzz.KINDS)
    assert set(seen["target"]) == set(TARGETS)
    assert set(seen["dtype"]) == {n for n, d in DTYPES.items() if not d.packed}
    assert set(seen["rank"]) == {"1", "2", "3", "4", "5"}
    assert set(seen["swizzle"]) == {"none", "32B", "64B", "128B", "128B_atom_32B", "128B_atom_32B_flip_8B",
                                    "128B_atom_64B"}
    assert set(seen["interleave"]) == {"none"}  # interleaved boxes are refused (rule interleave-unmeasured)
    assert set(seen["oob_fill"]) == {"zero", "nan"}
    assert set(seen["l2_promotion"]) == {"none", "64B", "128B", "256B"}
    assert set(seen["l2_hint"]) == {"normal", "evict_first", "evict_last"}
    assert len(set(seen["reduce"]) - {"none"}) >= 3  # inspect specs declare reductions their types allow
    assert set(seen["smem_offset"]) == {str(128 * k) for k in range(8)}
    assert set(seen["element_strides"]) == {"dense", "strided"}
    assert set(seen["strides"]) == {"contiguous", "padded"}
    refused: Counter[str] = Counter()
    for c in drawn:
        refused.update(c.refused)
    assert refused["interleave-unmeasured"] > 0, "interleaved candidates are still drawn, and counted as refused"
    assert refused["reduce-op-for-type"] > 0, "reductions a type lacks are drawn, and counted as refused"
    assert set(seen["shape"]) == {"whole boxes", "ragged", "smaller than the box"}
    assert set(seen["box_bytes"]) == {"16 B", "<= 4 KiB", "<= 64 KiB", "> 64 KiB"}
    assert set(seen["tensors"]) == {"1", "2", "3"}
    assert set(seen["coords"]) == {"origin", "inside", "partly or wholly outside"}
    transposes = [c for c in drawn if c.kind == "transpose"]
    units = {c.spec["kernel"].get("unit_bytes") or DTYPES[c.spec["tensors"][0]["dtype"]].nbytes for c in transposes}
    assert units == {1, 2, 4, 8, 16}
    assert {"unit_bytes" in c.spec["kernel"] for c in transposes} == {True, False}
    copies = [c for c in drawn if c.kind == "copy"]
    assert {c.spec["kernel"]["boxes_per_stage"] > 1 for c in copies} == {True, False}


def test_boxes_reach_the_largest_that_fits(drawn) -> None:
    """From one 16-byte chunk to kernels using most of a block's shared memory, for every kind."""
    limit = TARGETS["sm_90a"].smem_per_block_optin
    for kind in fuzz.KINDS:
        cases = [c for c in drawn if c.kind == kind]
        smem = [max(k.smem_bytes for k in resolve(parse_spec(c.spec)).kernels) for c in cases]
        assert max(smem) > 0.6 * limit, (kind, max(smem))
        inner = [t["box"][-1] * DTYPES[t["dtype"]].nbytes for c in cases for t in c.spec["tensors"]]
        assert min(inner) == 16, kind


def test_loaded_box_of_element_strides() -> None:
    """What the verifier expects of a strided box: ceil(box / stride) elements, the innermost dimension
    whole without interleave (the driver's rule) and strided with it."""
    spec = parse_spec({"name": "s", "tensors": [
        {"name": "a", "dtype": "float32", "shape": [40, 30, 64], "box": [5, 7, 32], "element_strides": [2, 3, 4]},
        {"name": "b", "dtype": "float16", "shape": [2, 9, 64], "box": [2, 3, 16], "element_strides": [1, 2, 2],
         "interleave": "16B"}], "kernel": {"kind": "inspect"}})
    assert loaded_box(spec.tensors[0]) == ((3, 3, 32), (2, 3, 1))
    assert loaded_box(spec.tensors[1]) == ((2, 2, 8), (1, 2, 2))


def test_sizes_are_capped() -> None:
    shape = fuzz._cap([300, 300, 300, 64], 8, 2)
    assert math.prod(shape) * 8 <= fuzz.TENSOR_BYTES_CAP and shape[-1] % 2 == 0


# ----------------------------------------------------------------------------- tmagen.ops calls
OPS_DRAWS = 400
_NUMPY = {"bool": "bool", "uint8": "uint8", "float16": "float16", "bfloat16": "uint16", "float32": "float32",
          "int32": "int32", "float64": "float64", "complex64": "complex64", "complex128": "complex128"}


def test_ops_calls_are_reproducible_and_cover_ragged_rows_views_and_permutes() -> None:
    assert fuzz.draw_ops_call(3, 17) == fuzz.draw_ops_call(3, 17) != fuzz.draw_ops_call(3, 18)
    calls = [fuzz.draw_ops_call(7, i) for i in range(OPS_DRAWS)]
    seen: dict[str, Counter[str]] = {}
    for c in calls:
        assert math.prod(c.base) <= fuzz.OPS_MAX_ELEMENTS
        if c.op == "permute":
            assert sorted(c.dims) == list(range(len(c.view_shape))) and list(c.dims) != sorted(c.dims)
        for key, value in c.classes().items():
            seen.setdefault(key, Counter())[value] += 1
    assert set(seen["op"]) == {"copy", "transpose", "permute"}
    assert seen["rows"]["ragged"] >= 40 and seen["rows"]["whole 16 bytes"] >= 40
    assert set(seen["view"]) == {"contiguous", "sliced", "stepped", "transposed"}
    assert all(seen["view"][v] >= 20 for v in seen["view"])
    assert set(seen["pointer"]) == {"aligned", "misaligned"}
    assert {"2", "3", "4", "5"} <= {r for r in seen["rank"]}
    assert set(seen["bytes"]) == {"1", "2", "4", "8", "16"}
    assert {(c.op, len(c.view_shape)) for c in calls if c.op == "permute"} >= {("permute", r) for r in range(2, 6)}


def test_drawn_ops_calls_are_exact_on_the_numpy_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    """The campaign's draws run through tmagen.ops's routes (tests/numpy_gpu.py) and match numpy bit for bit."""
    import sys

    import numpy as np

    sys.path.insert(0, str(__import__("pathlib").Path(__file__).parent))
    from tmagen import ops

    import numpy_gpu as gpu

    gpu.install(monkeypatch)
    for i in range(60):
        c = fuzz.draw_ops_call(11, i)
        dtype = np.dtype(_NUMPY[c.dtype])
        rng = np.random.default_rng(i)
        base = np.frombuffer(rng.integers(0, 256, math.prod(c.base) * dtype.itemsize, dtype=np.uint8).tobytes(),
                             dtype if dtype != np.bool_ else np.uint8).reshape(c.base)
        base = (base & 1).astype(np.bool_) if dtype == np.bool_ else base
        view = fuzz.ops_view(c, base)
        want = np.ascontiguousarray(fuzz.ops_expected(c, view))
        x = gpu.from_numpy(view, c.offset * dtype.itemsize)
        out = gpu.empty(want.shape, dtype)
        if c.op == "permute":
            ops.permute(x, c.dims, out=out)
        else:
            getattr(ops, c.op)(x, out=out)
        assert gpu.to_numpy(out, dtype).tobytes() == want.tobytes(), c


def test_matmul_runs_draw_every_epilogue(drawn) -> None:
    """The campaign reaches each of the matmul kernel's epilogues (verify.MATMUL_EPILOGUES: alpha, a
    bias along N and M, beta C_in in pairs of columns and of an odd pitch, everything at once)."""
    from tmagen.verify import MATMUL_EPILOGUES

    seen = {r["args"].get("epilogue") for c in drawn if c.kind == "matmul" for r in c.runs}
    assert seen == set(MATMUL_EPILOGUES), seen
    # and the campaign's report tallies them (its "matmul epilogue" table)
    tallied = {v for c in drawn if c.kind == "matmul" for v in c.features()["matmul_epilogue"]}
    assert tallied == {e or "none" for e in MATMUL_EPILOGUES}, tallied


def test_matmul_runs_launch_twins_in_pairs(drawn) -> None:
    """The campaign reaches the family's twins in pairs (taken where rows straddle 32-byte sectors,
    M spans more than one tile and K 16 steps or more), and kernels in pairs whose B stage is an odd
    number of boxes (the CTAs take them in turns)."""
    twins = odd_pairs = 0
    for c in drawn:
        if c.kind != "matmul":
            continue
        family = resolve(parse_spec(c.spec)).kernel.detail
        odd_pairs += any(p.cluster == 2 and p.b_loads % 2 for p in family.kernels)
        for run in c.runs:
            m, n, k = run["args"]["mnk"]
            twins += family.choose(m, n, k, 132).variant in family.twins
    assert twins > 0 and odd_pairs > 0, (twins, odd_pairs)
    # and the campaign's report tallies them (its "matmul launch" table)
    tallied = {v for c in drawn if c.kind == "matmul" for v in c.features()["matmul_launch"]}
    assert tallied == {"own tile", "family tile", "twin in pairs"}, tallied
