"""fp8 matmul specs on the CPU: what the rules refuse (with the field and the fix), what the plan
decides (instruction K, promotion, the family that fits the registers), what the header and the
kernels print, and what a launch checks of its scales. The GPU half is tests/gpu/test_fp8_matmul_gpu.py."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from spec_edit import edited

from tmagen.errors import RuleError
from tmagen.kinds.base import Array
from tmagen.kinds.matmul.launch import MatmulLauncher
from tmagen.plan import resolve
from tmagen.render import render
from tmagen.spec import parse_spec

SPEC = json.loads((Path(__file__).resolve().parents[1] / "specs" / "matmul_fp8_e4m3.json").read_text())


def _with(**changes: Any) -> dict[str, Any]:
    return edited(SPEC, **changes)


@pytest.mark.parametrize("changes, fragments", [
    ({"kernel__b_major": "mn", "tensors__1__shape": [1024, 1000], "tensors__1__box": [128, 64]},
     ("kernel.b_major = 'mn'", "K-major only", "use 'k'")),
    ({"tensors__1__dtype": "bfloat16"}, ("tensors[1].dtype = 'bfloat16'", "an fp8 A multiplies an fp8 B")),
    ({"kernel__promote_every": 192}, ("kernel.promote_every = 192", "multiple of 128")),
    ({"kernel__block_scales": True, "kernel__promote_every": 256}, ("kernel.promote_every = 256", "use 128")),
    ({"kernel__tile": [128, 128, 48], "tensors__0__box": [64, 48], "tensors__1__box": [64, 48]},
     ("kernel.tile[2] = 48", "K of fp8 types is 32")),
    ({"kernel__tile": [128, 256, 128]}, ("kernel.tile", "promoted fp32 sums", "more consumers")),
])
def test_fp8_spec_errors_name_the_field_and_the_fix(changes: dict, fragments: tuple) -> None:
    with pytest.raises(RuleError) as err:
        resolve(parse_spec(_with(**changes)))
    text = str(err.value)
    for fragment in fragments:
        assert fragment in text, text


def test_fp8_fields_are_refused_on_16_bit_types() -> None:
    data = _with(tensors__0__dtype="bfloat16", tensors__1__dtype="bfloat16", tensors__0__box=[64, 64],
                 tensors__1__box=[64, 64], kernel__tile=[128, 128, 64], kernel__block_scales=True)
    with pytest.raises(RuleError) as err:
        resolve(parse_spec(data))
    assert "kernel.promote_every = 128" in str(err.value) and "kernel.block_scales" in str(err.value)


def test_the_plan_promotes_every_stage_and_keeps_tiles_whose_sums_fit() -> None:
    family = resolve(parse_spec(SPEC)).kernel.detail
    assert family.fp8 and family.promote_every == 128 and not family.block_scales
    # every fp8 tile alone, then the twins in pairs of those whose B boxes can be shared (taken where
    # rows straddle sectors, and where the GPU's table offers them)
    assert [(p.bm, p.bn, p.cluster) for p in family.kernels] == [
        (128, 128, 1), (128, 192, 1), (64, 128, 1), (64, 64, 1), (128, 128, 2), (128, 192, 2), (64, 128, 2)]
    assert family.twins == (4, 5, 6, -1, -1, -1, -1)
    assert all(p.instruction_k == 32 and p.promote_stages == 1 and p.bk == 128 for p in family.kernels)
    # two sets of 64 partial sums and 64 promoted per consumer thread: pipelined where 3 sets fit in 224
    assert family.kernels[0].accumulators == 192 and family.kernels[0].pipelined
    # 128 x 192: 96 + 96, one set of partial sums (a second would need 288)
    assert family.kernels[1].accumulators == 192 and not family.kernels[1].pipelined
    assert all(p.pipelined for p in family.kernels[2:4])  # one consumer: 240 registers
    # a twin differs in its cluster alone, and in B's loads: each CTA multicasts its half of B's rows
    assert [(family.kernels[i].b_map, family.kernels[i].b_load_rows) for i in (0, 1, 2, 4, 5, 6)] == [
        ("b_128", 128), ("b_192", 192), ("b_128", 128), ("b", 64), ("b_96", 96), ("b", 64)]
    assert [replace(family.kernels[i], symbol="", variant=0, cluster=1, b_map="", b_load_rows=0)
            for i in (4, 5, 6)] == [replace(family.kernels[i], symbol="", variant=0, b_map="", b_load_rows=0)
                                    for i in (0, 1, 2)]


def test_block_scales_take_the_registers_per_tensor_scales_do() -> None:
    # with the K loop in uniform registers, a stage's scales fit the 32 registers beside the
    # accumulators (ptxas, 2026-11-28): the block-scaled family has the per-tensor family's tiles,
    # two sets of partial sums where those have them
    blocks = resolve(parse_spec(_with(kernel__block_scales=True))).kernel.detail
    tensor = resolve(parse_spec(SPEC)).kernel.detail
    assert [(p.bm, p.bn, p.cluster, p.pipelined) for p in blocks.kernels] == [
        (p.bm, p.bn, p.cluster, p.pipelined) for p in tensor.kernels]
    assert [(p.bm, p.bn, p.pipelined) for p in blocks.kernels if p.cluster == 1] == [
        (128, 128, True), (128, 192, False), (64, 128, True), (64, 64, True)]


def test_block_scaled_consumers_issue_in_turn_where_they_share_a_tile() -> None:
    blocks = resolve(parse_spec(_with(kernel__block_scales=True))).kernel.detail
    # two consumers with one set of partial sums take turns (128 x 192); with two sets (128 x 128),
    # or a lone consumer, none waits for another
    assert [(p.bm, p.bn, p.cluster, p.ordered) for p in blocks.kernels] == [
        (128, 128, 1, False), (128, 192, 1, True), (64, 128, 1, False), (64, 64, 1, False),
        (128, 128, 2, False), (128, 192, 2, True), (64, 128, 2, False)]
    # sums promoted per tensor gained nothing from turns (an H200 under ncu): none of those take them
    assert not any(p.ordered for p in resolve(parse_spec(SPEC)).kernel.detail.kernels)
    files = render(resolve(parse_spec(_with(kernel__block_scales=True))), "spec.json")
    kernels = next(text for name, text in files.items() if name.endswith("_kernels.cuh"))
    # every turn taken is passed on: the last consumer lets consumer 0 start, and consumer 0 takes
    # the last consumer's last pass before it exits
    assert kernels.count("if constexpr (Ordered) take_turn(consumer);") == 1
    assert kernels.count("if constexpr (Ordered) pass_turn<Consumers>(consumer);") == 1
    assert "if (consumer == Consumers - 1) pass_turn<Consumers>(consumer);" in kernels
    assert "if (consumer == 0) take_turn(consumer);" in kernels
    assert kernels.count(", false, true>(") == 2  # the 128 x 192 kernel and its pairs: not pipelined, in turn


def test_promoting_every_other_stage_keeps_one_set_of_partial_sums() -> None:
    family = resolve(parse_spec(_with(kernel__promote_every=256))).kernel.detail
    assert family.kernels[0].promote_stages == 2 and not any(p.pipelined for p in family.kernels)


def test_without_promotion_the_wide_tiles_come_back() -> None:
    family = resolve(parse_spec(_with(kernel__promote_every=0, kernel__tile=[128, 256, 128],
                                      kernel__stages=4))).kernel.detail
    assert family.promote_every == 0
    assert (128, 256) in [(p.bm, p.bn) for p in family.kernels]
    assert all(p.promote_stages == 0 for p in family.kernels)


def test_the_header_wraps_the_fp8_instruction_without_transpose_immediates() -> None:
    data = _with(tensors__1__dtype="float8_e5m2")
    files = render(resolve(parse_spec(data)), "spec.json")
    header = next(text for name, text in files.items() if name.endswith(".cuh") and "_kernels" not in name)
    assert "wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e5m2" in header
    assert "static_assert(TransA == 0 && TransB == 0" in header
    assert "k16" not in header.split("namespace wgmma")[1]
    kernels = next(text for name, text in files.items() if name.endswith("_kernels.cuh"))
    assert "wgmma::mma_k32<0, 0>" in kernels and "sum[mb][i] += acc[mb][i]" in kernels


def test_block_scales_scale_the_promoted_sums() -> None:
    files = render(resolve(parse_spec(_with(kernel__block_scales=True))), "spec.json")
    kernels = next(text for name, text in files.items() if name.endswith("_kernels.cuh"))
    assert "sum[mb][4 * q] += acc[mb][4 * q] * s0" in kernels
    api = next(text for name, text in files.items() if name.endswith(".h"))
    assert "matmul_launch_scaled" in api and "ceil(N / 128), ceil(K / 128)" in api


def _problems(spec: dict, m: int, n: int, k: int, **params: Any) -> list[str]:
    plan = resolve(parse_spec(spec))
    a, b = Array.of(1 << 20, (m, k)), Array.of(1 << 21, (n, k))
    return [f"{v.field}: {v.why} {v.fix}" for v in MatmulLauncher().problems(plan, [a, b], **params)]


def test_a_launch_takes_scales_per_tensor_or_per_row() -> None:
    one, rows, cols = Array.of(64, (1,)), Array.of(64, (300, 1)), Array.of(64, (1, 200))
    assert _problems(SPEC, 300, 200, 256, scale_a=one, scale_b=one) == []
    assert _problems(SPEC, 300, 200, 256, scale_a=rows, scale_b=cols) == []
    found = _problems(SPEC, 300, 200, 256, scale_a=Array.of(64, (300, 2)))
    assert len(found) == 1 and found[0].startswith("scale_a: ") and "block_scales" in found[0]


def test_a_block_scaled_launch_needs_both_block_arrays() -> None:
    spec = _with(kernel__block_scales=True)
    good_a, good_b = Array.of(64, (300, 3)), Array.of(64, (2, 3))
    assert _problems(spec, 300, 200, 300, scale_a=good_a, scale_b=good_b) == []
    found = _problems(spec, 300, 200, 300, scale_a=good_a)
    assert len(found) == 1 and found[0].startswith("scale_b: ") and "[2, 3]" in found[0]
    found = _problems(spec, 300, 200, 300, scale_a=Array.of(64, (300, 1)), scale_b=good_b)
    assert found and found[0].startswith("scale_a: ")


def test_the_register_rule_keeps_wgmma_accumulators_within_the_launch_count() -> None:
    """ptxas on sm_90a: a 16-bit 256 x 192 tile (192 wgmma accumulators per consumer thread) spilled
    3 KB under the launch's 168 registers, setmaxnreg's 224 notwithstanding, so the rule refuses it;
    fp8 128 x 192 with promoted sums (96 wgmma accumulators + 96 promoted) compiled within 224."""
    from tmagen.kinds.matmul.plan import register_shortfall

    why = register_shortfall(256, 192, 2, 1)
    assert why is not None and "wgmma accumulators (192)" in why and "168" in why
    assert register_shortfall(128, 192, 2, 2) is None  # fp8, one set of partial sums
    assert register_shortfall(128, 128, 2, 3) is None  # fp8, pipelined
    why = register_shortfall(128, 192, 2, 3)  # two sets of 96 partial sums: wgmma accumulators past 168
    assert why is not None and "wgmma accumulators (192)" in why
    why = register_shortfall(64, 256, 1, 2)  # one consumer: 128 + 128 promoted + 32 past its 240
    assert why is not None and "256 accumulators" in why and "240" in why
    assert register_shortfall(128, 256, 2, 1) is None  # the 16-bit default tile


@pytest.mark.parametrize("spec_name", ["matmul_bf16_tn", "matmul_fp8_e4m3"])
def test_each_epilogue_is_chosen_by_what_the_launch_adds(spec_name: str) -> None:
    """The epilogue a launch runs (``matmul_epilogue.plain``): alpha alone (1), per-row scales (2,
    fp8), a bias alone after alpha, its values loaded ahead (3: the general epilogue's loads cost a
    quarter of a 4096^3 bf16 product), beta * C_in alone, read in pairs of columns where each pair is
    one word (4), else the general one (0). With K = 0, only alpha alone clears C without a launch: a
    bias must still be added."""
    raw = json.loads((Path(__file__).resolve().parents[1] / "specs" / f"{spec_name}.json").read_text())
    plan = resolve(parse_spec(raw))
    fp8 = plan.kernel.detail.fp8
    m, n = 300, 200
    one, rows = Array.of(64, (1,)), Array.of(64, (m, 1))
    bias, c = Array.of(1 << 22, (n,)), Array.of(1 << 23, (m, n))

    def launch(k: int, **params: Any) -> Any:
        a, b = Array.of(1 << 20, (m, k)), Array.of(1 << 21, (n, k))
        scales = {"scale_a": one, "scale_b": one} if fp8 and k else {}  # with K = 0 scales are not asked for
        return MatmulLauncher().bind(plan, [a, b], Array.of(1 << 24, (m, n)), 132, **{**scales, **params})

    def mode(call: Any) -> int:
        return next(p for p in call.extra if hasattr(p, "plain")).plain

    assert mode(launch(256)) == 1
    assert mode(launch(256, bias=bias, bias_along="n")) == 3
    assert mode(launch(256, bias=Array.of(1 << 22, (m, 1)), bias_along="m")) == 3
    assert mode(launch(256, c=c, beta=0.5)) == 4  # C_in read two columns at a time
    assert mode(launch(256, c=Array.of(1 << 23, (m, n), (n + 1, 1)), beta=0.5)) == 0  # odd pitch: pairs straddle words
    assert mode(launch(256, c=Array.of((1 << 23) + 2, (m, n)), beta=0.5)) == 0  # nor do they off a word
    assert mode(launch(256, c=c, beta=0.5, bias=bias, bias_along="n")) == 0
    if fp8:
        assert mode(launch(256, scale_a=rows)) == 2
        assert mode(launch(256, scale_a=rows, bias=bias, bias_along="n")) == 0
    assert launch(0).clear_output
    assert not launch(0, bias=bias, bias_along="n").clear_output


@pytest.mark.parametrize("spec_name", ["matmul_bf16_tn", "matmul_fp8_e4m3"])
def test_b_rows_stops_the_b_map_at_b_s_own_rows(spec_name: str) -> None:
    """``b_rows``: a K-major B [N, K] holding fewer rows than N (tmagen.ops.matmul's N padded to
    whole 16 bytes of output): its map's extent is those rows, so TMA reads the rest as zeros and no
    row past B's memory; anything but 1 to N, or an MN-major B, is refused with the field and fix."""
    raw = json.loads((Path(__file__).resolve().parents[1] / "specs" / f"{spec_name}.json").read_text())
    plan = resolve(parse_spec(raw))
    m, n, k = 64, 40, 256
    a, b, out = Array.of(1 << 20, (m, k)), Array.of(1 << 21, (n, k)), Array.of(1 << 24, (m, n))
    scales = {"scale_a": Array.of(64, (1,)), "scale_b": Array.of(64, (1,))} if plan.kernel.detail.fp8 else {}
    call = MatmulLauncher().bind(plan, [a, b], out, 132, b_rows=37, **scales)
    b_map = next(x for x in call.maps if x.role == "b")
    assert b_map.shape == (37, k) and b_map.ptr == 1 << 21 and b_map.strides == (k, 1)
    plain = MatmulLauncher().bind(plan, [a, b], out, 132, **scales)
    assert next(x for x in plain.maps if x.role == "b").shape == (n, k)
    for bad in (0, n + 1, 2.5, True):
        found = MatmulLauncher().problems(plan, [a, b], out, b_rows=bad, **scales)
        assert [(v.rule, v.field) for v in found] == [("matmul-b-rows", "b_rows")], bad
        assert "1 to N = 40" in found[0].why


def test_fast_accumulation_derives_a_family_that_never_promotes() -> None:
    """tmagen.ops.matmul(..., use_fast_accum=True) runs the fp8 spec with promote_every 0: its own
    family (its wide tiles back), beside the promoting one of the same types."""
    from tmagen.ops_matmul_fp8 import fp8_spec

    fast, promoted = fp8_spec("float8_e4m3", "float8_e4m3", "bfloat16", False, True), \
        fp8_spec("float8_e4m3", "float8_e4m3", "bfloat16", False)
    assert fast.name != promoted.name and fast.name.endswith("_fast")
    family, promoting = resolve(fast).kernel.detail, resolve(promoted).kernel.detail
    assert family.fp8 and family.promote_every == 0 and promoting.promote_every == 128
    assert max(p.bm * p.bn for p in family.kernels) > max(p.bm * p.bn for p in promoting.kernels)
