"""Messages a new user meets (issue 20), each pinned: said in tmagen's voice (the field, the value,
the limit, a fix that is true for the case), never pydantic's or Python's, and never a traceback."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import tmagen
import tmagen.ops
from tmagen.cli import main
from tmagen.errors import ArgumentError, RuleError, SpecError

from conftest import REPO


def _cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    return code, out + err


def _write(tmp_path: Path, content: str | bytes | dict, name: str = "spec.json") -> str:
    path = tmp_path / name
    if isinstance(content, dict):
        content = json.dumps(content)
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    return str(path)


MAPS_ONLY = json.loads((REPO / "specs" / "maps_only_bf16_f32.json").read_text())


# ----------------------------------------------------------------------------- the Python calls
def test_load_of_a_spec_without_a_kernel_says_so() -> None:
    """tmagen.load raised AttributeError: 'NoneType' object has no attribute 'kind'."""
    with pytest.raises(SpecError) as info:
        tmagen.load(MAPS_ONLY)
    text = str(info.value)
    assert "kernel is not given" in text and "tmagen.tensor_map" in text and "tmagen build" in text


def test_load_of_a_spec_without_a_kernel_reports_its_rules_first() -> None:
    """...even for an invalid spec, whose rule violation was then never reported."""
    bad = json.loads(json.dumps(MAPS_ONLY))
    bad["tensors"][0]["swizzle"] = {"mode": "32B"}
    with pytest.raises(RuleError, match="box-inner-within-swizzle-span"):
        tmagen.load(bad)


def test_an_ops_call_on_a_cpu_array_says_it_is_on_the_cpu() -> None:
    """tmagen.ops.transpose(numpy_array) said "pass out=" (no output helps a CPU input)."""
    for op in (tmagen.ops.transpose, tmagen.ops.copy):
        with pytest.raises(ArgumentError) as info:
            op(np.zeros((64, 64), np.float32))
        assert [(v.rule, v.field) for v in info.value.violations] == [("array-device", "x.device")]
        assert "pass out=" not in str(info.value) and "GPU" in str(info.value)


# ----------------------------------------------------------------------------- reading JSON
def _base() -> dict:
    return json.loads((REPO / "specs" / "copy_f32_3d.json").read_text())


@pytest.mark.parametrize("text, fragments", [
    pytest.param('{"name": "a", "name": "b", "tensors": []}', ["name is given twice ('a' and then 'b')", "keep one"],
                 id="top-key-twice"),
    pytest.param('{"name": "a", "tensors": [{"box": [8], "box": [16]}]}', ["tensors[0].box is given twice"],
                 id="nested-key-twice"),
    pytest.param("// my tile\n{}", ["not valid JSON at line 1, column 1", "tmagen reads JSON, which has no comments"],
                 id="comment"),
    pytest.param('{"name": "x"} # note', ["which has no comments"], id="hash-comment"),
    pytest.param("name: tile\ntensors:\n  - name: t\n", ["looks like YAML, but tmagen reads JSON"], id="yaml"),
    pytest.param('{"x": ' + "9" * 5000 + "}", ["x = an integer of 5000 digits, but tmagen reads integers of up to 100"],
                 id="5000-digits"),
    pytest.param("null", ["(top level) = null, but tmagen reads a JSON object"], id="null"),
    pytest.param("42", ["(top level) = 42, but tmagen reads a JSON object"], id="number"),
])
def test_json_problems_are_said_in_tmagens_voice(capsys, tmp_path, text, fragments) -> None:
    """Keys given twice were accepted (the last won); comments and YAML got "Expecting value"; 5000
    digits got Python's advice to call sys.set_int_max_str_digits(); null got pydantic's words."""
    code, out = _cli(capsys, "check", _write(tmp_path, text))
    assert code == 2, out
    for fragment in fragments:
        assert fragment in out, out
    assert "set_int_max_str_digits" not in out and "Input should" not in out


def test_a_key_given_twice_in_diagnose_arguments_is_refused(capsys, tmp_path) -> None:
    text = ('{"dtype": 7, "rank": 1, "global_address": 4096, "global_dim": [64], "global_strides": [], '
            '"box_dim": [32], "box_dim": [64], "element_strides": [1]}')
    code, out = _cli(capsys, "diagnose", _write(tmp_path, text, "args.json"))
    assert code == 2 and "box_dim is given twice ([32] and then [64])" in out


@pytest.mark.parametrize("depth", [40, 5000])
def test_deep_nesting_is_refused_alike_whatever_pythons_limit(capsys, tmp_path, depth) -> None:
    """Python 3.11 could not read 1000 levels (RecursionError) and Python 3.12 read them, so the
    same file got two answers; now a named limit answers both."""
    code, out = _cli(capsys, "check", _write(tmp_path, "[" * depth + "]" * depth))
    assert code == 2 and "nested too deeply" in out and "MAX_JSON_DEPTH" in out, out
    code, out = _cli(capsys, "check", _write(tmp_path, '{"name": ' + "[" * 31 + "]" * 31 + "}"))
    assert code == 2 and "nested too deeply" not in out, out  # 32 levels are read (and the name is wrong)


def test_a_byte_order_mark_is_read(capsys, tmp_path) -> None:
    """A UTF-8 BOM (as Windows editors write) was refused as invalid JSON."""
    code, out = _cli(capsys, "check", _write(tmp_path, b"\xef\xbb\xbf" + json.dumps(_base()).encode()))
    assert code == 0, out


def test_an_oversized_input_is_refused_by_its_size(capsys, tmp_path) -> None:
    """60,000 tensors made 328 MB of generated code."""
    from tmagen.limits import MAX_JSON_INPUT_CHARS

    data = _base()
    data["tensors"] = [dict(data["tensors"][0], name=f"t{i}") for i in range(MAX_JSON_INPUT_CHARS // 100)]
    code, out = _cli(capsys, "build", _write(tmp_path, data), "--out", str(tmp_path / "out"))
    assert code == 2 and "characters, but tmagen reads JSON of up to" in out and not (tmp_path / "out").exists()


def test_too_many_tensors_are_refused_by_the_named_limit(capsys, tmp_path) -> None:
    from tmagen.limits import MAX_TENSORS_PER_SPEC

    data = json.loads(json.dumps(MAPS_ONLY))
    data["tensors"] = [dict(data["tensors"][0], name=f"t{i}") for i in range(MAX_TENSORS_PER_SPEC + 1)]
    code, out = _cli(capsys, "check", _write(tmp_path, data))
    assert code == 2 and f"tensors has {MAX_TENSORS_PER_SPEC + 1} tensors, but a spec holds 1 to 1024" in out


# ----------------------------------------------------------------------------- the schema's errors
@pytest.mark.parametrize("change, fragment", [
    pytest.param({"shape": [1] * 6, "box": [1] * 6}, "tensors[0].shape has 6 dimensions, but TMA takes 1 to 5 "
                 "dimensions (MAX_RANK): merge dimensions", id="rank-6"),
    pytest.param({"box": [0, 32, 32]}, "tensors[0].box[0] = 0, but it must be at least 1: use 1 or more", id="box-0"),
    pytest.param({"alignment": "16"}, "tensors[0].alignment = '16', but it must be an integer: write 16 without quotes",
                 id="quoted-int"),
    pytest.param({"alignment": 16.0}, "tensors[0].alignment = 16.0, but it must be an integer: write 16", id="float"),
    pytest.param({"swizzle": "96B"}, "tensors[0].swizzle.mode = '96B', but the choices are 'none', '32B', '64B' or "
                 "'128B': use one of them", id="swizzle-shorthand-unknown"),
    pytest.param({"dtype": "float8_e4m3fn"}, "tensors[0].dtype = 'float8_e4m3fn', but the choices are 'uint8', ",
                 id="pytorch-fp8-name"),
    pytest.param({"dtype": "float8_e4m3fn"}, "or 'float8_e5m2': use 'float8_e4m3'", id="pytorch-fp8-name-fix"),
    pytest.param({"dtype": "Float32"}, "use 'float32'", id="capitalized-dtype"),
])
def test_schema_errors_are_in_the_house_form(capsys, tmp_path, change, fragment) -> None:
    data = _base()
    data["tensors"][0].update(change)
    code, out = _cli(capsys, "check", _write(tmp_path, data))
    assert code == 2 and fragment in out, out
    assert "Input should" not in out and "Field required" not in out


@pytest.mark.parametrize("data, fragment", [
    pytest.param({"name": "x", "tensors": []}, "tensors has 0 tensors, but a spec holds 1 to 1024 tensors",
                 id="no-tensors"),
    pytest.param({"tensors": []}, "name is missing, but it is required: give a C identifier", id="no-name"),
])
def test_structure_errors_are_in_the_house_form(capsys, tmp_path, data, fragment) -> None:
    code, out = _cli(capsys, "check", _write(tmp_path, data))
    assert code == 2 and fragment in out, out


@pytest.mark.parametrize("swizzle, mode", [("64B", "64B"), ("64b", "64B"), ({"mode": "128b"}, "128B"),
                                           ("NONE", "none"), ({"mode": "128B", "atomicity": "16b"}, "128B")])
def test_a_swizzle_mode_alone_and_in_any_case_is_read(swizzle, mode) -> None:
    """"swizzle": "64B" (a natural first spelling) was refused in pydantic's words, and "64b", which
    explain, diagnose and tensor_map take, was refused by the spec."""
    from tmagen.spec import parse_spec

    data = json.loads(json.dumps(MAPS_ONLY))
    data["tensors"][0]["swizzle"] = swizzle
    t = parse_spec(data).tensors[0]
    assert t.swizzle.mode == mode and t.model_dump(mode="json")["swizzle"]["mode"] == mode


# ----------------------------------------------------------------------------- fixes that are true
DIAGNOSE = ["diagnose", "--dtype", "FLOAT32", "--rank", "2", "--global-address", "0x7f0000000000",
            "--element-strides", "1,1"]


def test_no_wider_swizzle_is_offered_beyond_128b(capsys) -> None:
    """The README's own diagnose example (128B) was told to use "a wider swizzle", which does not exist."""
    code, out = _cli(capsys, *DIAGNOSE, "--global-dim", "64,64", "--global-strides", "256", "--box-dim", "64,8",
                     "--swizzle", "128B")
    assert code == 2 and "boxDim[0] <= 32" in out and "wider swizzle" not in out and "or {" not in out
    code, out = _cli(capsys, *DIAGNOSE, "--global-dim", "64,64", "--global-strides", "256", "--box-dim", "32,8",
                     "--swizzle", "64B")
    assert code == 2 and "128B" in out.split("boxDim[0] <= 16")[1].splitlines()[0], out


def test_a_negative_stride_is_not_told_to_shrink_the_tensor(capsys) -> None:
    code, out = _cli(capsys, *DIAGNOSE, "--global-dim", "64,64", "--global-strides=-256", "--box-dim", "32,8")
    assert code == 2 and "smaller tensor" not in out and "positive strides" in out


def test_a_negative_extent_is_not_told_to_drop_empty_tensors(capsys) -> None:
    code, out = _cli(capsys, *DIAGNOSE, "--global-dim=64,-64", "--global-strides", "256", "--box-dim", "32,8")
    assert code == 2 and "drop empty tensors" not in out and "real extent" in out
    code, out = _cli(capsys, *DIAGNOSE, "--global-dim", "64,0", "--global-strides", "256", "--box-dim", "32,8")
    assert code == 2 and "drop empty tensors" in out


@pytest.mark.parametrize("alignment", [3, 8, 24])
def test_an_alignment_promise_is_not_an_address(capsys, tmp_path, alignment) -> None:
    """"alignment": 3 was reported as an address "3 past" a 16-byte boundary."""
    data = json.loads(json.dumps(MAPS_ONLY))
    data["tensors"][0]["alignment"] = alignment
    code, out = _cli(capsys, "check", _write(tmp_path, data))
    assert code == 2 and f"tensors[0].alignment = {alignment}, but the tensor must start on a 16-byte boundary" in out
    assert "past" not in out and "a multiple of 16" in out


def test_an_inspect_kernel_is_not_told_to_use_fewer_stages(capsys, tmp_path) -> None:
    """An inspect kernel, which has no kernel.stages, was told to use fewer of them."""
    data = {"name": "big", "tensors": [{"name": "t", "dtype": "float32", "shape": [256, 256, 32],
                                        "box": [256, 256, 32], "swizzle": "128B"}], "kernel": {"kind": "inspect"}}
    code, out = _cli(capsys, "check", _write(tmp_path, data))
    assert code == 2 and "kernel-fits-shared-memory" in out and "kernel.stages" not in out and "smaller box" in out


def test_a_copy_kernel_is_told_its_own_fields(capsys, tmp_path) -> None:
    data = {"name": "big", "tensors": [{"name": "t", "dtype": "float32", "shape": [4096, 4096], "box": [256, 32],
                                        "swizzle": "128B"}], "kernel": {"kind": "copy", "stages": 16,
                                                                               "boxes_per_stage": 32}}
    code, out = _cli(capsys, "check", _write(tmp_path, data))
    assert code == 2 and "kernel.stages" in out and "kernel.boxes_per_stage" in out and "tiles_per_stage" not in out


def test_a_broken_nvcc_is_blamed_not_cuobjdump(capsys, tmp_path, monkeypatch) -> None:
    """An nvcc that exits 0 and writes nothing was reported as a failed SASS check (cuobjdump)."""
    nvcc = tmp_path / "bin" / "nvcc"
    nvcc.parent.mkdir()
    nvcc.write_text("#!/bin/sh\necho 'Cuda compilation tools, release 13.0, V13.0.48'\nexit 0\n")
    nvcc.chmod(0o755)
    monkeypatch.setenv("TMAGEN_NVCC", str(nvcc))
    monkeypatch.setenv("TMAGEN_CACHE", str(tmp_path / "cache"))
    code, out = _cli(capsys, "build", "--compile", str(REPO / "specs" / "copy_f32_3d.json"), "--out",
                     str(tmp_path / "out"))
    assert code != 0 and "this nvcc is broken" in out and str(nvcc) in out and "cuobjdump" not in out


def test_the_c_api_prints_a_negative_stride_as_negative_and_keeps_earlier_errors() -> None:
    """The C API printed a negative stride as 18446744073709436416 bytes, and its cudaGetLastError
    cleared an error of the caller's that the caller had yet to see."""
    from tmagen import build

    for spec in ("copy_f32_3d", "transpose_int4_8x8", "inspect_bf16_offset384"):
        host = build.render_spec_file(REPO / "specs" / f"{spec}.json").files[f"{spec}.cu"]
        assert "= cudaGetLastError()" not in host and "cudaPeekAtLastError" in host
        negative = host.index("if (stride < 1)")
        assert negative < host.index("static_cast<uint64_t>(stride) * elem_bytes") and "positive strides" in host
    # the matmul launches through the driver, whose result it reports: the runtime's last error is not touched
    host = build.render_spec_file(REPO / "specs" / "matmul_bf16_tn.json").files["matmul_bf16_tn.cu"]
    assert "cudaGetLastError" not in host and "cudaPeekAtLastError" not in host
    assert "cached_entry(\"cuLaunchKernel\"" in host and ">>>(" not in host


# ----------------------------------------------------------------------------- the command
def test_check_reads_standard_input(capsys, monkeypatch) -> None:
    """`tmagen check -` looked for a file named '-', though `diagnose -` reads standard input."""
    import io

    monkeypatch.setattr("sys.stdin", io.StringIO((REPO / "specs" / "copy_f32_3d.json").read_text()))
    code, out = _cli(capsys, "check", "-")
    assert code == 0 and "-: copy_f32_3d is valid" in out
    bad = json.loads(json.dumps(MAPS_ONLY))
    bad["tensors"][0]["alignment"] = 8
    monkeypatch.setattr("sys.stdin", io.StringIO(json.dumps(bad)))
    code, out = _cli(capsys, "check", "-")
    assert code == 2 and "standard input: 1 rule violation" in out


@pytest.mark.parametrize("command", ["verify", "bench"])
def test_verify_and_bench_of_a_missing_file_are_bad_input(capsys, tmp_path, command) -> None:
    """They answered exit 3 ("no CUDA driver") before reading the spec."""
    code, out = _cli(capsys, command, str(tmp_path / "missing.json"))
    assert code == 2 and "missing.json" in out


def test_ctrl_c_is_one_line_and_exit_130() -> None:
    import os
    import signal
    import subprocess
    import sys
    import time

    from conftest import pythonpath_with_repo

    proc = subprocess.Popen([sys.executable, "-m", "tmagen", "check", "-"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env={**os.environ, "PYTHONPATH": pythonpath_with_repo()})
    time.sleep(1.5)  # past the imports, reading standard input
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 130 and b"Traceback" not in err and err.decode().strip() == "tmagen check: interrupted"
