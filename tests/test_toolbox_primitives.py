"""TMA's toolbox in the device header (multicast, reductions, prefetches, cache hints, cluster
helpers): the names and argument orders kernels call, the spec fields l2_hint and reduce and their
rules against the PTX ISA's table, the cluster rules, and the user kernels of the GPU test compiled
here by nvcc, their SASS holding each primitive's instruction."""

from __future__ import annotations

import copy
import json
import re
import subprocess
import sys

import numpy as np
import pytest

from tmagen import toolchain
from tmagen.dtypes import DTYPES
from tmagen.errors import RuleError
from tmagen.plan import check, resolve
from tmagen.render import render
from tmagen.spec import parse_spec
from tmagen.toolbox import (
    CLUSTER_RULES,
    HW_REDUCE_FAULTS,
    PTX_REDUCE_TYPES,
    REDUCE_OPS,
    REDUCE_TYPES,
    check_cluster,
    reduce_ops_for,
)

from conftest import REPO

sys.path.insert(0, str(REPO / "tests" / "gpu"))
import toolbox_probe  # noqa: E402  (the GPU test's spec, compile and reduction model, pure Python)


def _header() -> str:
    return render(toolbox_probe.plan(), "toolbox.json")["toolbox.cuh"]


# ----------------------------------------------------------------------------- the header's names
def _signature(name: str, params: str) -> str:
    return rf"__device__ __forceinline__ \w+ {name}\({re.escape(params)}\)"


@pytest.mark.parametrize("rank", [1, 2, 3, 4, 5])
def test_the_primitives_have_the_names_and_argument_orders_kernels_call(rank: int) -> None:
    header = _header()
    coords = ", ".join(f"int32_t c{i}" for i in range(rank))
    for name, params in [
        (f"load_{rank}d_multicast", f"void* dst, const CUtensorMap* map, uint64_t* bar, uint16_t cta_mask, {coords}"),
        (f"load_{rank}d_hint", f"void* dst, const CUtensorMap* map, uint64_t* bar, {coords}, uint64_t policy"),
        (f"store_{rank}d_hint", f"const CUtensorMap* map, const void* src, {coords}, uint64_t policy"),
        (f"prefetch_{rank}d", f"const CUtensorMap* map, {coords}"),
        (f"reduce_{rank}d", f"const CUtensorMap* map, const void* src, {coords}"),
    ]:
        assert re.search(_signature(name, params), header), name
    assert f"template <reduce_op Op>\n__device__ __forceinline__ void reduce_{rank}d(" in header


def test_the_helpers_and_the_reduce_ops() -> None:
    header = _header()
    for name, params in [("prefetch_tensormap", "const CUtensorMap* map"), ("policy_evict_first", ""),
                         ("policy_evict_last", ""), ("policy_evict_normal", ""), ("policy", "l2_hint hint"),
                         ("cluster_ctarank", ""), ("cluster_nctarank", ""), ("cluster_sync", ""),
                         ("mbarrier_arrive_cluster", "uint64_t* bar, uint32_t cta"),
                         ("mbarrier_arrive_remote", "uint64_t* bar, uint32_t cta")]:
        assert re.search(_signature(name, params), header), name
    assert "enum class reduce_op : uint32_t { add, min, max, inc, dec, bit_and, bit_or, bit_xor };" in header
    # every op of the enum reaches the instruction with its PTX name, at every rank
    for op in REDUCE_OPS.values():
        for rank in range(1, 6):
            assert (f"if constexpr (Op == reduce_op::{op.cpp})\n    asm volatile(\"cp.reduce.async.bulk.tensor.{rank}d"
                    f".global.shared::cta.{op.ptx}.tile.bulk_group") in header


def test_a_box_carries_its_spec_l2_hint_and_reduce() -> None:
    header = _header()
    assert "static constexpr tma::l2_hint l2_hint = tma::l2_hint::evict_first;" in header  # tile
    assert "static constexpr tma::reduce_op reduce = tma::reduce_op::add;" in header  # r_f32
    assert header.count("static constexpr tma::reduce_op reduce") == 1  # only where the spec says
    data = toolbox_probe.spec_dict()
    data["tensors"][1]["reduce"] = "xor"  # r_u32
    xor = render(resolve(parse_spec(data)), "t.json")["toolbox.cuh"]
    assert "static constexpr tma::reduce_op reduce = tma::reduce_op::bit_xor;" in xor


# ----------------------------------------------------------------------------- the kernels pass the hint
def _example(name: str) -> dict:
    return json.loads((REPO / "specs" / f"{name}.json").read_text())


@pytest.mark.parametrize("name, part", [("copy_f32_3d", "copy"), ("transpose_int4_8x8", "transpose")])
def test_copy_and_transpose_pass_each_map_s_l2_hint_to_their_copies(name: str, part: str) -> None:
    plain = render(resolve(parse_spec(_example(name))), "s.json")[f"{name}_kernels.cuh"]
    assert "_hint(" not in plain and "policy" not in plain
    data = _example(name)
    data["tensors"][0]["l2_hint"] = "evict_first"
    hinted = render(resolve(parse_spec(data)), "s.json")[f"{name}_kernels.cuh"]
    assert f"const uint64_t src_policy = tma::policy({'' if part == 'transpose' else name + '::'}src_box::l2_hint);" \
        in hinted
    assert re.search(r"tma::load_\dd_hint\([^;]*, src_policy\);", hinted)
    assert re.search(r"tma::store_\dd_hint\([^;]*, dst_policy\);", hinted, re.S)
    assert not re.search(r"tma::(load|store)_\dd\(", hinted)  # every copy takes the hint


def test_inspect_passes_the_hint_to_its_load() -> None:
    data = _example("nhwc_64b_fp16")
    data["tensors"][0]["l2_hint"] = "evict_last"
    kernels = render(resolve(parse_spec(data)), "s.json")["nhwc_64b_fp16_kernels.cuh"]
    assert "tma::policy(box::l2_hint)" in kernels and "_hint(dst, &map, &loaded" in kernels


# ----------------------------------------------------------------------------- the reductions' rule
BYTE_TYPES = [d for d, t in DTYPES.items() if not t.packed]


def _reduce_spec(dtype: str, op: str) -> dict:
    size = DTYPES[dtype].nbytes
    return {"name": "r", "tensors": [{"name": "t", "dtype": dtype, "shape": [64, 64], "box": [8, 64 // size],
                                      "reduce": op}]}


@pytest.mark.parametrize("op", list(REDUCE_OPS))
def test_reduce_is_allowed_exactly_on_the_ptx_isa_s_types_that_run(op: str) -> None:
    """Every op on every element type: refused by rule reduce-op-for-type exactly where the table
    (PTX ISA 9.7.10.28.5.4) has no such pair, or the H200 faulted on it (and, or, xor on int64:
    tests/test_hw_replay.py replays the record)."""
    for dtype in BYTE_TYPES:
        found = {v.rule for v in check(parse_spec(_reduce_spec(dtype, op)))}
        assert found == (set() if dtype in REDUCE_TYPES[op] else {"reduce-op-for-type"}), (op, dtype)
        assert (dtype in REDUCE_TYPES[op]) == (dtype in PTX_REDUCE_TYPES[op] and (op, dtype) not in HW_REDUCE_FAULTS)


def test_the_reduction_table() -> None:
    assert reduce_ops_for("uint32") == tuple(REDUCE_OPS)  # u32 takes all eight
    assert reduce_ops_for("float32") == ("add",)
    assert reduce_ops_for("int64") == ("min", "max")  # no add on s64; and, or, xor fault on the H200
    assert reduce_ops_for("uint64") == ("add", "min", "max", "and", "or", "xor")  # measured exact
    assert reduce_ops_for("float16") == reduce_ops_for("bfloat16") == ("add", "min", "max")
    for dtype in ("uint8", "uint16", "float64", "float32_ftz", "tfloat32", "tfloat32_ftz"):
        assert reduce_ops_for(dtype) == ()


def test_a_reducing_map_meets_the_store_rules() -> None:
    """A reduction writes like a store: its rows must be whole 16 bytes (store-inner-extent-16-bytes)."""
    data = _reduce_spec("float32", "add")
    data["tensors"][0].update(shape=[64, 62], strides=[64, 1])  # padded rows of 62 floats: 248 bytes
    assert {v.rule for v in check(parse_spec(data))} == {"store-inner-extent-16-bytes"}
    del data["tensors"][0]["reduce"]
    assert check(parse_spec(data)) == []


def test_a_kernel_that_stores_plainly_refuses_reduce_and_the_matmul_refuses_hints() -> None:
    data = _example("copy_f32_3d")
    data["tensors"][0]["reduce"] = "add"
    with pytest.raises(RuleError, match=r"reduce-in-kernel"):
        resolve(parse_spec(data))
    data = _example("matmul_bf16_tn")
    data["tensors"][2]["l2_hint"] = "evict_first"
    found = check(parse_spec(data))
    assert [(v.rule, v.field) for v in found] == [("l2-hint-in-kernel", "tensors[2].l2_hint")]


def test_verify_s_inspect_proof_of_a_spec_that_reduces_keeps_its_reduce() -> None:
    """tmagen verify loads the boxes of a spec without a kernel through inspect kernels: a tensor that
    reduces is still loaded there (inspect only loads)."""
    from tmagen.verify import proof

    p = toolbox_probe.plan()
    inspected, files = proof(p, render(p, "t.json"), "t.json")
    assert inspected.kind_name == "inspect" and "static constexpr tma::reduce_op reduce" in files["toolbox.cuh"]


# ----------------------------------------------------------------------------- the cluster rules
@pytest.mark.parametrize("kwargs, rules", [
    ({"dims": [2, 1, 1], "cta_masks": [0b11, 0b01, 0b10]}, set()),
    ({"dims": [8, 1, 1]}, set()),
    ({"dims": [2, 2, 2], "cta_masks": [0xFF]}, set()),
    ({"dims": [16], "non_portable": True, "cta_masks": [0xFFFF]}, set()),
    ({"dims": [4], "grid": [132]}, set()),
    ({"dims": [9, 1, 1]}, {"cluster-size"}),
    ({"dims": [4, 4, 1]}, {"cluster-size"}),
    ({"dims": [16], "non_portable": True, "target": "sm_100a"}, {"cluster-size"}),
    ({"dims": [32], "non_portable": True}, {"cluster-size"}),
    ({"dims": [0, 1, 1]}, {"cluster-dims-positive"}),
    ({"dims": [1, 1, 1, 1]}, {"cluster-dims-positive"}),
    ({"dims": [2], "cta_masks": [0]}, {"multicast-mask-in-cluster"}),
    ({"dims": [2], "cta_masks": [0b100]}, {"multicast-mask-in-cluster"}),
    ({"dims": [4], "cta_masks": [0b1111, 0b10000]}, {"multicast-mask-in-cluster"}),
    ({"dims": [4], "cta_masks": [-1]}, {"multicast-mask-in-cluster"}),
    ({"dims": [4], "grid": [130]}, {"cluster-grid-multiple"}),
    ({"dims": [2], "cta_masks": [0b11], "target": "sm_90"}, {"multicast-target"}),
])
def test_cluster_rules(kwargs: dict, rules: set[str]) -> None:
    found = check_cluster(**kwargs)
    assert {v.rule for v in found} == rules, [v.message for v in found]
    for v in found:
        assert v.source == CLUSTER_RULES[v.rule].source and f"[{v.rule}; " in v.message


def test_cluster_messages_say_the_value_the_limit_and_the_fix() -> None:
    size, = check_cluster([3, 3, 1])
    assert size.message.startswith("cluster = [3, 3, 1] = 9 CTAs") and "more than 8" in size.message
    assert "cudaFuncAttributeNonPortableClusterSizeAllowed" in size.message
    mask, = check_cluster([2], cta_masks=[0b101])
    assert mask.message.startswith("cta_masks[0] = 0x5") and "bits at and above 2" in mask.message
    assert "0x3" in mask.message
    grid, = check_cluster([4, 1, 1], grid=[130, 1, 1])
    assert grid.field == "grid[0]" and "launch 132 CTAs" in grid.message


# ----------------------------------------------------------------------------- nvcc and the SASS
def _sass(cubin) -> str:
    tc = toolchain.find_toolchain()
    if tc.cuobjdump is None:
        pytest.skip("no cuobjdump")
    return subprocess.run([str(tc.cuobjdump), "-sass", str(cubin)], capture_output=True, text=True,
                          check=True).stdout


def _functions(sass: str) -> dict[str, str]:
    parts = re.split(r"\n\s*Function : (\S+)\n", sass)
    return dict(zip(parts[1::2], parts[2::2]))


def test_the_user_kernels_compile_and_hold_each_primitive_s_instruction() -> None:
    """nvcc (sm_90a) assembles every primitive the GPU test's kernels call, and the SASS holds them:
    multicast loads, a reduction of each op, L2 prefetches of a box and of the tensor map, cache
    hints and the cluster barrier."""
    try:
        _, cubin = toolbox_probe.compile_kernels()
    except toolchain.ToolchainError as exc:
        pytest.skip(str(exc))
    functions = _functions(_sass(cubin))
    for n in (2, 4):
        whole, slices = functions[f"toolbox_multicast_{n}"], functions[f"toolbox_multicast_slices_{n}"]
        assert "UTMALDG.2D.MULTICAST" in whole and "UTMALDG.2D.MULTICAST" in slices
        assert "UCGABAR_ARV" in whole and "UCGABAR_WAIT" in whole  # cluster_sync
    ops = {"add": "ADD", "min": "MIN", "max": "MAX", "inc": "INC", "dec": "DEC", "and": "AND", "or": "OR",
           "xor": "XOR"}
    for dtype, name in toolbox_probe.REDUCE_MAPS.items():
        body = functions[f"toolbox_reduce_{name}"]
        for op in REDUCE_OPS:
            assert f"UTMAREDG.2D.{ops[op]}" in body, (dtype, op)
    hinted = functions["toolbox_hinted_copy"]
    assert "UTMAPF.L2.2D" in hinted and "UTMACCTL.PF" in hinted  # the box's and the map's prefetch
    assert "UTMALDG.2D" in hinted and "UTMASTG.2D" in hinted


def test_the_hinted_copy_and_transpose_compile() -> None:
    """The l2_hint'ed copy and transpose compile under nvcc (the copies with .L2::cache_hint assemble)."""
    try:
        tc = toolchain.find_toolchain()
    except toolchain.ToolchainError as exc:
        pytest.skip(str(exc))
    for name in ("copy_f32_3d", "transpose_int4_8x8"):
        data = copy.deepcopy(_example(name))
        data["name"] = f"{name}_hinted"
        data["tensors"][0]["l2_hint"] = "evict_last"
        p = resolve(parse_spec(data))
        result = toolchain.compile_folder(p, render(p, f"{name}.json"), tc, cubin_only=True)
        sass = toolchain.sass_opcodes(tc, result.cubin)
        assert sass is not None and {"UTMALDG", "UTMASTG"} <= set(sass[f"{data['name']}_{p.kind_name}"])


# ----------------------------------------------------------------------------- the GPU test's model
@pytest.mark.parametrize("dtype, op", [(d, o) for d in toolbox_probe.REDUCE_MAPS for o in REDUCE_OPS
                                       if d in PTX_REDUCE_TYPES[o]])
def test_the_gpu_test_s_reduction_model_is_the_ptx_definition(dtype: str, op: str) -> None:
    """The numpy model the GPU test holds the hardware to, against an independent element-by-element
    reading of the definitions: integers in Python's unbounded ones wrapped to the type, the 16-bit
    floats added exactly in float64 and rounded once (numpy's float64 -> float16 rounds to nearest
    even; bfloat16 by its bits), so that a double rounding in the model cannot pass unnoticed."""
    rng = np.random.default_rng(3)
    dst, src = toolbox_probe.operands(rng, op, dtype, (64,))
    got = toolbox_probe.reduce_model(op, dtype, dst, src)
    for i in range(64):
        a, b = dst[i], src[i]
        if dtype in toolbox_probe.INT_TYPES:
            bits = 8 * dst.itemsize
            x, y = int(a), int(b)
            want = {"add": x + y, "min": min(x, y), "max": max(x, y), "inc": 0 if x >= y else x + 1,
                    "dec": y if x == 0 or x > y else x - 1, "and": x & y, "or": x | y, "xor": x ^ y}[op]
            assert int(got[i]) % (1 << bits) == want % (1 << bits), (op, dtype, x, y)
        elif dtype == "float32":
            assert got[i] == np.float32(float(a) + float(b))  # float32 addition rounds the exact sum once
        else:
            fa, fb = ((float(toolbox_probe.bfloat16_values(np.array([v]))[0]) for v in (a, b))
                      if dtype == "bfloat16" else (float(a), float(b)))
            if op == "add":
                exact = fa + fb  # exact in float64
                want_bits = (int(toolbox_probe.bfloat16_bits(np.array([exact], dtype=np.float64))[0])
                             if dtype == "bfloat16" else int(np.float16(exact).view(np.uint16)))
            else:
                pick = min(fa, fb) if op == "min" else max(fa, fb)
                want_bits = int((a if pick == fa else b).view(np.uint16))
            assert int(np.asarray(got[i]).view(np.uint16)) == want_bits, (op, dtype, fa, fb)
