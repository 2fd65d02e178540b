"""The wgmma/tcgen05 descriptor model (tmagen.mma), its C++ twin in the generated header, the
GPU's verdict on it replayed, and the matmul kernel kind's spec checks and plan."""

from __future__ import annotations

import itertools
import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from spec_edit import edited

from tmagen import mma
from tmagen.errors import RuleError
from tmagen.kinds.matmul import plan as matmul_plan
from tmagen.plan import check, resolve
from tmagen.render import render
from tmagen.spec import parse_spec

from conftest import HW_DATA, REPO

sys.path.insert(0, str(REPO / "tests" / "gpu"))
import wgmma_probe  # noqa: E402  (the GPU probe's spec generator, pure Python)


def test_fields_encode_and_decode() -> None:
    f = mma.DescriptorFields(start_address=0x12340, lbo=16, sbo=1024, base_offset=0, layout_type=1)
    desc = f.wgmma()
    assert desc & 0x3FFF == 0x1234 and desc >> 16 & 0x3FFF == 1 and desc >> 32 & 0x3FFF == 64
    assert desc >> 62 == 1 and desc >> 49 & 7 == 0
    assert mma.decode_wgmma(desc) == f
    t = f.tcgen05()  # version bits 46-48 = 1, layout in 61-63 (128B is 2 there)
    assert t >> 46 & 7 == 1 and t >> 61 == 1


def _tile(combo: wgmma_probe.Combo, role: str) -> mma.OperandTile:
    spec = parse_spec(wgmma_probe.spec_for(combo))
    tile = resolve(spec).map(role).operand
    assert tile is not None
    return tile


@pytest.mark.parametrize("swizzle, major, lbo, sbo", [
    ("128B", "k", 16, 1024), ("64B", "k", 16, 512), ("32B", "k", 16, 256),
    ("none", "k", 16 * 64 * 1, 128),  # LBO: the next box along K, 64 rows x 16 bytes later
    ("128B", "mn", 8192, 1024), ("64B", "mn", 4096, 512), ("32B", "mn", 2048, 256),
    ("none", "mn", 128, 1024),  # SBO: the next 16-byte column of M, one 64-row box later
])
def test_lbo_and_sbo_of_each_layout(swizzle: str, major: str, lbo: int, sbo: int) -> None:
    tile = _tile(wgmma_probe.Combo(swizzle, major, "k", "bfloat16", 0), "a")
    assert (tile.lbo, tile.sbo) == (lbo, sbo)


def test_k_advances_inside_a_span_and_jumps_between_boxes() -> None:
    k_major = _tile(wgmma_probe.Combo("128B", "k", "k", "bfloat16", 0), "a")  # boxes of 64 x 64
    assert [k_major.offset(0, k) for k in (0, 16, 32, 48, 64)] == [0, 32, 64, 96, k_major.stride]
    assert k_major.offset(8, 0) == 8 * 128
    mn_major = _tile(wgmma_probe.Combo("32B", "k", "mn", "bfloat16", 0), "b")  # boxes of 64 K-rows x 16
    assert mn_major.offset(0, 16) == 16 * 32 and mn_major.offset(16, 0) == mn_major.stride
    assert mn_major.offset(0, 64) == mn_major.mn_boxes * mn_major.stride


def test_base_offset_is_zero_wherever_the_tile_starts() -> None:
    """Measured on an H200: the tensor core swizzles absolute addresses and wants 0 (tmagen.mma)."""
    assert mma.BASE_OFFSET_FROM_ADDRESS is False
    for offset in range(0, 1024, 128):
        tile = _tile(wgmma_probe.Combo("128B", "mn", "mn", "float16", offset), "b")
        f = tile.fields(8192 + offset, 0, 16)
        assert f.base_offset == 0 and f.wgmma() >> 49 & 7 == 0
        assert tile.ptx_base_offset(8192 + offset) == offset // 128


def test_the_gpu_verdict_is_replayed() -> None:
    """Every combination the H200 ran: tmagen's LBO/SBO then are tmagen's LBO/SBO now, and a base
    offset of 0 (what tmagen writes) gave the exact product in each; the PTX formula did not."""
    data = json.loads((HW_DATA / "wgmma_descriptors.json").read_text())
    rows = data["rows"]
    assert len(rows) == 256 and {r["swizzle"] for r in rows} == {"none", "32B", "64B", "128B"}
    for r in rows:
        combo = wgmma_probe.Combo(r["swizzle"], r["a_major"], r["b_major"], r["dtype"], r["smem_offset"])
        for role in ("a", "b"):
            tile = _tile(combo, role)
            assert (tile.lbo, tile.sbo) == (r["lbo"][role], r["sbo"][role]), (combo, role)
        assert r["base_offset_0"], combo
    formula_wrong = [r for r in rows if not r["ptx_formula"]]
    assert len(formula_wrong) == 122
    assert all(r["smem_offset"] // 128 % {"32B": 2, "64B": 4, "128B": 8}[r["swizzle"]] for r in formula_wrong)


@pytest.mark.skipif(shutil.which("g++") is None, reason="no g++ to compile the header for the host")
def test_generated_descriptors_agree_with_the_model_on_the_host(tmp_path: Path) -> None:
    """The header's wgmma::offset and encode, compiled by g++ as plain C++, equal tmagen.mma for
    every probe combination at several (mn, k)."""
    combos = [c for c in wgmma_probe.combos() if c.dtype == "bfloat16"]
    program, expected = ["#include <cstdio>"], []
    points = [(0, 0), (0, 16), (8, 48), (64, 64), (0, 112)]
    for c in combos:
        spec = parse_spec(wgmma_probe.spec_for(c))
        (tmp_path / f"{c.name}.cuh").write_text(render(resolve(spec), f"{c.name}.json")[f"{c.name}.cuh"])
        program.append(f'#include "{c.name}.cuh"')
    program.append("int main() {")
    for c in combos:
        spec = parse_spec(wgmma_probe.spec_for(c))
        maps = {m.role: m for m in resolve(spec).maps}
        for role in ("a", "b"):
            tile = maps[role].operand
            assert tile is not None
            for mn, k in points:
                if mn >= tile.mn:
                    continue
                address = 16384 + c.smem_offset
                program.append(f'  std::printf("%llu\\n", (unsigned long long){c.name}::{role}_box::wgmma::encode('
                               f'{address}u + {c.name}::{role}_box::wgmma::offset({mn}, {k})));')
                expected.append(tile.wgmma_descriptor(address, mn, k))
    program += ["  return 0;", "}"]
    (tmp_path / "main.cpp").write_text("\n".join(program) + "\n")
    subprocess.run(["g++", "-std=c++17", "-O1", "-o", str(tmp_path / "desc"), str(tmp_path / "main.cpp")],
                   check=True, cwd=tmp_path)
    got = [int(x) for x in subprocess.run([str(tmp_path / "desc")], capture_output=True, text=True,
                                          check=True).stdout.split()]
    assert len(expected) > 500 and got == expected



# --- fp8 operands (the fp8 half of the GPU probe, and its replay) --------------------------------
def test_fp8_bytes_of_the_probe_are_the_ocp_encodings() -> None:
    """The probe's fp8 writer: known bytes of both types (OCP 8-bit floating point; e4m3 is PyTorch's
    float8_e4m3fn), every finite byte round-trips, and a value the type cannot hold is refused."""
    known = {"float8_e4m3": {1.0: 0x38, -2.0: 0xC0, 0.5: 0x30, 448.0: 0x7E, 2.0 ** -6: 0x08, 2.0 ** -9: 0x01,
                             1.125: 0x39},
             "float8_e5m2": {1.0: 0x3C, -2.0: 0xC0, 0.5: 0x38, 57344.0: 0x7B, 2.0 ** -14: 0x04, 2.0 ** -16: 0x01,
                             1.25: 0x3D}}
    for dtype, table in known.items():
        values = np.array(list(table))
        assert wgmma_probe.fp8_bits(values, dtype).tolist() == list(table.values()), dtype
        finite = [b for b in range(256) if (b & 0x7F) <= (0x7E if dtype == "float8_e4m3" else 0x7B)]
        back = wgmma_probe.fp8_values(np.array(finite), dtype)
        assert wgmma_probe.fp8_bits(back, dtype).tolist() == finite, dtype
        assert (wgmma_probe.fp8_values(wgmma_probe.fp8_bits(wgmma_probe.FP8_VALUES, dtype), dtype)
                == wgmma_probe.FP8_VALUES).all()
    for dtype, bad in (("float8_e4m3", 1.0625), ("float8_e4m3", 480.0), ("float8_e5m2", 1.125)):
        with pytest.raises(ValueError):
            wgmma_probe.fp8_bits(np.array([bad]), dtype)


def test_fp8_probe_covers_every_swizzle_type_pair_and_offset_over_several_boxes() -> None:
    combos = wgmma_probe.fp8_combos()
    assert len(combos) == 128 and len({c.name for c in combos}) == 128
    assert {(c.a_dtype, c.b_dtype) for c in combos} == set(itertools.product(wgmma_probe.FP8_DTYPES, repeat=2))
    for c in combos:
        plan = resolve(parse_spec(wgmma_probe.fp8_spec_for(c)))
        assert plan.wgmma is not None and plan.wgmma.k == 32
        for role in ("a", "b"):
            tile = plan.map(role).operand
            assert tile is not None and tile.major == "k" and tile.elem_bytes == 1
            assert wgmma_probe.FP8_K // tile.k_per_box >= 2, c  # the K steps cross boxes


def test_fp8_probe_sums_stay_exact_in_a_short_accumulator() -> None:
    """The probe's inputs keep every running sum (per 32 of K, as wgmma adds them) within 12 significant
    bits, so the descriptor probe's verdict does not hang on the fp8 accumulator's width."""
    rng = np.random.default_rng(20261124)
    for _ in range(8):
        a = rng.choice(wgmma_probe.FP8_VALUES, size=(wgmma_probe.M, wgmma_probe.FP8_K))
        b = rng.choice(wgmma_probe.FP8_VALUES, size=(wgmma_probe.N, wgmma_probe.FP8_K))
        partial = np.cumsum((a[:, None, :] * b[None, :, :]).reshape(wgmma_probe.M, wgmma_probe.N, -1, 32).sum(-1), -1)
        assert np.abs(partial).max() * 4 < 2 ** 12


@pytest.mark.skipif(shutil.which("g++") is None, reason="no g++ to compile the header for the host")
def test_generated_fp8_descriptors_agree_with_the_model_on_the_host(tmp_path: Path) -> None:
    """The fp8 probe's headers' wgmma::offset and encode, as plain C++, equal tmagen.mma (one byte per
    element: K steps of 32 elements, across boxes)."""
    combos = [c for c in wgmma_probe.fp8_combos() if c.a_dtype == c.b_dtype == "float8_e4m3"]
    program, expected = ["#include <cstdio>"], []
    points = [(0, 0), (0, 32), (8, 96), (64, 128), (0, 224)]
    for c in combos:
        spec = parse_spec(wgmma_probe.fp8_spec_for(c))
        (tmp_path / f"{c.name}.cuh").write_text(render(resolve(spec), f"{c.name}.json")[f"{c.name}.cuh"])
        program.append(f'#include "{c.name}.cuh"')
    program.append("int main() {")
    for c in combos:
        maps = {m.role: m for m in resolve(parse_spec(wgmma_probe.fp8_spec_for(c))).maps}
        for role in ("a", "b"):
            tile = maps[role].operand
            assert tile is not None
            for mn, k in points:
                if mn >= tile.mn:
                    continue
                address = 16384 + c.smem_offset
                program.append(f'  std::printf("%llu\\n", (unsigned long long){c.name}::{role}_box::wgmma::encode('
                               f'{address}u + {c.name}::{role}_box::wgmma::offset({mn}, {k})));')
                expected.append(tile.wgmma_descriptor(address, mn, k))
    program += ["  return 0;", "}"]
    (tmp_path / "main.cpp").write_text("\n".join(program) + "\n")
    subprocess.run(["g++", "-std=c++17", "-O1", "-o", str(tmp_path / "desc"), str(tmp_path / "main.cpp")],
                   check=True, cwd=tmp_path)
    got = [int(x) for x in subprocess.run([str(tmp_path / "desc")], capture_output=True, text=True,
                                          check=True).stdout.split()]
    assert len(expected) > 200 and got == expected


FP8_RECORD = HW_DATA / "wgmma_descriptors_fp8.json"


@pytest.mark.skipif(not FP8_RECORD.exists(), reason="no H200 run of the fp8 descriptor probe committed yet "
                    "(tests/gpu/test_wgmma_descriptors.py writes it under TMAGEN_REPORT_DIR)")
def test_the_gpu_verdict_on_fp8_descriptors_is_replayed() -> None:
    """Every fp8 combination the H200 ran: tmagen's LBO/SBO then are tmagen's now, and the descriptors
    tmagen writes (base offset 0) gave the exact product in each."""
    rows = json.loads(FP8_RECORD.read_text())["rows"]
    assert len(rows) == 128
    assert {(r["swizzle"], r["a_dtype"], r["b_dtype"], r["smem_offset"]) for r in rows} == \
        {(c.swizzle, c.a_dtype, c.b_dtype, c.smem_offset) for c in wgmma_probe.fp8_combos()}
    for r in rows:
        combo = wgmma_probe.Fp8Combo(r["swizzle"], r["a_dtype"], r["b_dtype"], r["smem_offset"])
        maps = {m.role: m.operand for m in resolve(parse_spec(wgmma_probe.fp8_spec_for(combo))).maps}
        for role in ("a", "b"):
            assert (maps[role].lbo, maps[role].sbo) == (r["lbo"][role], r["sbo"][role]), (combo, role)
        assert r["base_offset_0"], combo


# --- the matmul kernel kind --------------------------------------------------------------------
SPEC = json.loads((REPO / "specs" / "matmul_bf16_tn.json").read_text())


def _with(**changes: object) -> dict:
    return edited(SPEC, **changes)


def test_the_example_matmul_plans_its_stages_and_registers() -> None:
    spec = parse_spec(SPEC)
    assert check(spec) == []
    (k,) = resolve(spec).kernels
    p = k.detail.kernels[0]
    assert p is not None and k.threads == 384
    assert p.a_stage_bytes == 128 * 128 and p.b_stage_bytes == 256 * 128
    assert p.accumulators == 128 and p.consumer_registers == 224 and p.setmaxnreg_consumers == 224 and p.m_blocks == 1
    assert p.register_budget.most == 168  # the launch's count: 384 threads x 168 fill the register file
    assert k.smem_bytes == 4 * 49152 + 2 * 2 * 8192 + 1024 <= 232448


@pytest.mark.parametrize("changes, fragments", [
    ({"kernel__a": "x"}, ("kernel.a = 'x'", "no tensor has this name")),
    ({"tensors__0__dtype": "float32"}, ("tensors[0].dtype = 'float32'", "bfloat16, float16, float8_e4m3")),
    ({"tensors__1__dtype": "float16"}, ("tensors[1].dtype = 'float16'", "A's type")),
    ({"tensors__1__shape": [1000, 256]}, ("tensors[1].shape", "K = 520")),
    ({"tensors__2__shape": [1000, 992]}, ("tensors[2].shape", "[1000, 1000]")),
    ({"kernel__tile": [96, 256, 64]}, ("kernel.tile[0] = 96", "multiple of 128")),
    ({"kernel__tile": [128, 264, 64]}, ("kernel.tile[1] = 264", "up to 256")),
    ({"kernel__tile": [128, 256, 40]}, ("kernel.tile[2] = 40", "multiple of 16")),
    ({"kernel__tile": [256, 256, 64]}, ("kernel.tile", "registers", "more consumers")),
    ({"tensors__0__box": [96, 64]}, ("tensors[0].box[0] = 96", "divisor of 128")),
    ({"tensors__1__box": [4, 64]}, ("tensors[1].box[0] = 4", "use 256", "back to back")),
    ({"tensors__2__box": [32, 64]}, ("tensors[2].box", "[64, n]")),
    ({"tensors__0__mma": {"operand": "a"}}, ("tensors[0].mma", "remove it")),
])
def test_matmul_spec_errors_name_the_field_and_the_fix(changes: dict, fragments: tuple) -> None:
    with pytest.raises(RuleError) as err:
        resolve(parse_spec(_with(**changes)))
    text = str(err.value)
    for fragment in fragments:
        assert fragment in text, text


def test_matmul_stages_beyond_shared_memory_break_the_kernel_rule() -> None:
    spec = parse_spec(_with(kernel__stages=5))
    assert {v.rule for v in check(spec)} == {"kernel-fits-shared-memory"}


def test_mn_major_b_takes_atoms_along_n() -> None:
    spec = parse_spec(_with(kernel__b_major="mn", tensors__1__box=[64, 64], tensors__1__shape=[520, 1000]))
    assert check(spec) == []
    b = resolve(spec).map("b").operand
    assert b is not None and b.major == "mn" and b.mn_boxes == 4 and b.lbo == b.stride == 8192
    header = render(resolve(spec), "x.json")[f"{spec.name}.cuh"]
    assert "mma_m64n256k16" in header and "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16" in header


def test_register_budget_follows_setmaxnreg() -> None:
    assert [matmul_plan.setmaxnreg_consumers(c) for c in (1, 2, 3, 4)] == [240, 224, 152, 112]
    # the code after setmaxnreg.inc compiles within the increase with up to two consumers (ptxas held
    # three to the launch's count); the launch's count within 65536 / threads
    assert [matmul_plan.consumer_registers(c) for c in (1, 2, 3, 4)] == [240, 224, 128, 96]
    assert [matmul_plan.launch_cap(c) for c in (1, 2, 3, 4)] == [240, 168, 128, 96]


def test_the_wgmma_register_lists_are_the_plans() -> None:
    """The header's inline PTX lists N / 2 accumulators, eight to a line, closed once, and the
    operands after them in order (the template prints these rows; it used to build them)."""
    from tmagen.planning import WgmmaInstruction

    w = WgmmaInstruction(24, "bf16")
    assert w.accumulators == 12
    assert w.operand_rows == ["{%0,%1,%2,%3,%4,%5,%6,%7,", " %8,%9,%10,%11},"]
    assert w.constraint_rows[0].startswith(': "+f"(d[0]),') and w.constraint_rows[-1].endswith('"+f"(d[11])')
    assert [w.operand(k) for k in range(5)] == [12, 13, 14, 15, 16]
    plan = resolve(parse_spec(SPEC))
    assert plan.wgmma == WgmmaInstruction(256, "bf16")
    header = render(plan, "x.json")[f"{plan.name}.cuh"]
    assert "".join(plan.wgmma.operand_rows) in header.replace('\\n"\n      "', "")
