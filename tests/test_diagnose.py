"""`tmagen diagnose` on what users paste (the dumps CUTLASS/CuTe, FlashAttention-3 and flashinfer
print when cuTensorMapEncodeTiled fails, the driver's camelCase names, hex addresses), `--result`,
and `--format json` of check, diagnose, verify and rules: one stable object, exit statuses unchanged."""

from __future__ import annotations

import io
import json

import pytest

from tmagen.cli import main
from tmagen.pasted import CU_RESULTS, from_dump, parse_result
from tmagen.rules import RULES

from conftest import REPO

# As cute/atom/copy_traits_sm90_tma.hpp prints it (FlashAttention-3 and flashinfer's CUTLASS kernels
# build their maps through it): 5 entries per array, the element size first among the strides.
CUTE_DUMP = """\
TMA Desc Addr:   0x7ffd5a2c1e80
format         9
dim            2
gmem_address   0x7f3a1c000000
globalDim      (4096,4096,1,1,1)
globalStrides  (2,8192,0,0,0)
boxDim         (128,64,1,1,1)
elementStrides (1,1,1,1,1)
interleave     0
swizzle        3
l2Promotion    2
oobFill        0
Error: Failed to initialize the TMA descriptor 1
"""

# As flashinfer's buildNdTmaDescriptor prints it (no interleave, l2Promotion or oobFill).
FLASHINFER_DUMP = """\
Error: Failed to initialize the TMA descriptor 1
tmaFormat: 9 dim: 3 gmem: 0x7f3a1c000008
Shape: 128 64 4\x20
Stride: 256 16384\x20
tileShapes: 64 64 1\x20
tileStrides: 1 1 1\x20
swizzleType: 3
(in /flashinfer/include/flashinfer/trtllm/gemm/trtllmGen_gemm_export/KernelParams.h:210)
"""

# TensorRT-LLM's variant prints cuGetErrorString's text instead of the number.
TRTLLM_DUMP = FLASHINFER_DUMP.replace("descriptor 1", "descriptor. invalid argument").replace(
    "0x7f3a1c000008", "0x7f3a1c000000").replace("tileShapes: 64 64 1", "tileShapes: 64 300 1")

CAMEL = {"tensorDataType": "CU_TENSOR_MAP_DATA_TYPE_FLOAT32", "tensorRank": 2, "globalAddress": "0x7f0000000000",
         "globalDim": [64, 64], "globalStrides": [256], "boxDim": [32, 8], "elementStrides": [1, 1],
         "interleave": "CU_TENSOR_MAP_INTERLEAVE_NONE", "swizzle": "CU_TENSOR_MAP_SWIZZLE_128B",
         "l2Promotion": "CU_TENSOR_MAP_L2_PROMOTION_NONE", "oobFill": "CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE"}


def run(capsys, monkeypatch, *argv: str, stdin: str | None = None) -> tuple[int, str, str]:
    if stdin is not None:
        monkeypatch.setattr("sys.stdin", io.StringIO(stdin))
    code = main(list(argv))
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    return code, out, err


# ----------------------------------------------------------------------------- pasted dumps
def test_cute_dump_reads_as_the_driver_received_it() -> None:
    got = from_dump(CUTE_DUMP, "paste")
    assert got.values == {"dtype": 9, "rank": 2, "global_address": 0x7F3A1C000000, "global_dim": [4096, 4096],
                          "global_strides": [8192], "box_dim": [128, 64], "element_strides": [1, 1],
                          "interleave": 0, "swizzle": 3, "l2_promotion": 2, "oob_fill": 0}
    assert got.result == "1"
    assert any("element size" in n for n in got.notes)  # the dropped first stride is said, not hidden


def test_cute_dump_explains_the_refusal(capsys, monkeypatch) -> None:
    code, out, _ = run(capsys, monkeypatch, "diagnose", "-", stdin=CUTE_DUMP)
    assert code == 2
    assert out.startswith("read: tensorDataType = 9, tensorRank = 2, globalAddress = 0x7f3a1c000000")
    assert "boxDim[0] = 128 bfloat16 = 256 bytes" in out and "[box-inner-within-swizzle-span;" in out
    assert "result CUDA_ERROR_INVALID_VALUE (1)" in out and "the errors above explain it" in out


def test_flashinfer_dump_reads_and_says_what_it_assumed(capsys, monkeypatch) -> None:
    code, out, _ = run(capsys, monkeypatch, "diagnose", "-", stdin=FLASHINFER_DUMP)
    assert code == 2
    assert "globalDim = [128, 64, 4], globalStrides = [256, 16384], boxDim = [64, 64, 1]" in out
    assert "note: interleave, l2Promotion, oobFill not in the dump: taken as 0 (NONE)" in out
    assert "globalAddress = 0x7f3a1c000008" in out and "8 past one" in out


def test_trtllm_dump_with_an_error_string(capsys, monkeypatch) -> None:
    code, out, _ = run(capsys, monkeypatch, "diagnose", "-", stdin=TRTLLM_DUMP)
    assert code == 2 and "boxDim[1] = 300" in out and "CUDA_ERROR_INVALID_VALUE (1)" in out


@pytest.mark.parametrize("printed, address", [("0x7f0000000000", 0x7F0000000000), ("0", 0), ("(nil)", 0),
                                              ("00007FF600000000", 0x7FF600000000)])
def test_dump_addresses_as_each_runtime_prints_a_pointer(printed, address) -> None:
    got = from_dump(CUTE_DUMP.replace("0x7f3a1c000000", printed), "paste")
    assert got.values["global_address"] == address


def test_a_dump_missing_arguments_says_which(capsys, monkeypatch) -> None:
    code, out, err = run(capsys, monkeypatch, "diagnose", "-", stdin="format 9\ndim 2\nboxDim (64,64)\n")
    assert code == 2 and out == ""
    assert "globalAddress, globalDim, globalStrides, elementStrides not found in the pasted text" in err


def test_a_dump_giving_one_argument_twice_is_refused(capsys, monkeypatch) -> None:
    code, _, err = run(capsys, monkeypatch, "diagnose", "-", stdin=CUTE_DUMP + "boxDim (64,64,1,1,1)\n")
    assert code == 2 and "boxDim is given twice" in err


# ----------------------------------------------------------------------------- the driver's names
def test_camel_case_json_with_hex_address_and_enum_names(capsys, monkeypatch) -> None:
    code, out, _ = run(capsys, monkeypatch, "diagnose", "-",
                         stdin=json.dumps({**CAMEL, "globalAddress": 0x7F0000000000}))
    assert code == 0 and out.startswith("valid:")


def test_camel_case_json_address_as_a_hex_string_is_read(capsys, monkeypatch) -> None:
    # A JSON number cannot be hex; a pasted "0x..." string is what users have.
    code, out, _ = run(capsys, monkeypatch, "diagnose", "-", "--format", "json", stdin=json.dumps(CAMEL))
    assert code == 0 and json.loads(out)["arguments"]["globalAddress"] == 0x7F0000000000


def test_json_naming_one_argument_twice_is_refused(capsys, monkeypatch) -> None:
    code, _, err = run(capsys, monkeypatch, "diagnose", "-", stdin=json.dumps({**CAMEL, "box_dim": [32, 8]}))
    assert code == 2 and "box_dim and boxDim name one argument" in err


# ----------------------------------------------------------------------------- --result
def test_every_known_result_parses_by_number_and_name() -> None:
    for code, (name, meaning) in CU_RESULTS.items():
        assert parse_result(code).name == name == parse_result(name).name == parse_result(str(code)).name
        assert meaning
    assert parse_result("INVALID_VALUE").code == 1 and parse_result("0x1").code == 1


def test_an_unknown_result_is_refused(capsys, monkeypatch) -> None:
    code, _, err = run(capsys, monkeypatch, "diagnose", "-", "--result", "12345", stdin=json.dumps(CAMEL))
    assert code == 2 and "result = '12345', but tmagen knows no such CUresult" in err


@pytest.mark.parametrize("result, over, fragment, status", [
    ("1", {}, "tmagen finds no rule the driver enforces broken, so it cannot explain the refusal", 0),
    ("1", {"boxDim": [64, 8]}, "the errors above explain it", 2),
    ("CUDA_SUCCESS", {"boxDim": [32, 256], "globalDim": [64, 4096]}, "as tmagen expects", 0),
    ("700", {}, "an earlier kernel faulted", 0),
    ("CUDA_ERROR_NOT_INITIALIZED", {}, "cuInit was not called", 0),
])
def test_result_says_whether_the_findings_explain_it(capsys, monkeypatch, result, over, fragment, status) -> None:
    code, out, _ = run(capsys, monkeypatch, "diagnose", "-", "--result", result, stdin=json.dumps({**CAMEL, **over}))
    assert code == status and fragment in out


# ----------------------------------------------------------------------------- warnings
def test_a_box_no_block_holds_is_a_warning_not_an_error(capsys, monkeypatch) -> None:
    """Driver-encodable: the recorded driver accepted 908 such sets (tests/test_hw_replay.py)."""
    # 16-byte rows under the 128B swizzle each take 128 bytes: 256 x 8 rows = 256 KiB of shared memory,
    # while the driver counts 32 KiB.
    big = {**CAMEL, "tensorDataType": 0, "tensorRank": 3, "globalDim": [256, 256, 8], "globalStrides": [256, 65536],
           "boxDim": [16, 256, 8], "elementStrides": [1, 1, 1], "swizzle": 3}
    code, out, _ = run(capsys, monkeypatch, "diagnose", "-", stdin=json.dumps(big))
    assert code == 0 and out.startswith("valid:")
    assert "warnings: the driver encodes these arguments" in out and "[box-fits-shared-memory;" in out


def test_a_null_address_is_a_warning(capsys, monkeypatch) -> None:
    code, out, _ = run(capsys, monkeypatch, "diagnose", "-", stdin=json.dumps({**CAMEL, "globalAddress": 0}))
    assert code == 0 and "globalAddress = 0 (null)" in out and "[global-address-not-null;" in out


# ----------------------------------------------------------------------------- --format json
FINDING_KEYS = {"rule", "severity", "field", "value", "limit", "fix", "source", "message"}


def _object(out: str, command: str) -> dict:
    data = json.loads(out)
    assert {"command", "ok", "errors", "warnings"} <= set(data) and data["command"] == command
    for f in data["errors"] + data["warnings"]:
        assert set(f) == FINDING_KEYS
    return data


def test_diagnose_json_errors_and_warnings(capsys, monkeypatch) -> None:
    args = {**CAMEL, "interleave": 2, "tensorRank": 3, "tensorDataType": 6, "globalDim": [16, 10, 10],
            "globalStrides": [32, 320], "boxDim": [16, 10, 10], "elementStrides": [1, 1, 1], "swizzle": 2,
            "globalAddress": 8}
    code, out, err = run(capsys, monkeypatch, "diagnose", "-", "--format", "json", "--result", "1",
                         stdin=json.dumps(args))
    data = _object(out, "diagnose")
    assert code == 2 and data["ok"] is False and err == ""
    assert [(f["rule"], f["severity"], f["field"]) for f in data["errors"]] == [
        ("global-address-alignment", "error", "globalAddress")]
    assert [(f["rule"], f["severity"]) for f in data["warnings"]] == [("interleave-32b-needs-swizzle-32b", "warning")]
    assert data["errors"][0]["value"] == "8" and data["errors"][0]["source"] == RULES["global-address-alignment"].source
    assert data["result"]["code"] == 1 and data["result"]["verdict"] == "the errors above explain it"


def test_diagnose_json_of_unreadable_input_is_still_one_object(capsys, monkeypatch) -> None:
    code, out, err = run(capsys, monkeypatch, "diagnose", "-", "--format", "json", stdin="{")
    data = _object(out, "diagnose")
    assert code == 2 and data["ok"] is False and "not valid JSON" in data["errors"][0]["message"] and err


def test_check_json(capsys, monkeypatch, tmp_path) -> None:
    bad = tmp_path / "bad.json"
    spec = json.loads((REPO / "specs" / "copy_f32_3d.json").read_text())
    spec["tensors"][0]["box"][-1] = 300
    bad.write_text(json.dumps(spec))
    good = str(REPO / "specs" / "copy_f32_3d.json")
    code, out, err = run(capsys, monkeypatch, "check", good, str(bad), "--format", "json")
    data = _object(out, "check")
    assert code == 2 and data["ok"] is False and err == ""
    first, second = data["results"]
    assert first["ok"] and first["name"] == "copy_f32_3d" and first["errors"] == []
    assert not second["ok"] and "box-dim-range" in {f["rule"] for f in second["errors"]}
    assert all(f["severity"] == "error" and set(f) == FINDING_KEYS for f in second["errors"])


def test_check_json_all_valid_exits_0(capsys, monkeypatch) -> None:
    code, out, _ = run(capsys, monkeypatch, "check", str(REPO / "specs" / "copy_f32_3d.json"), "--format", "json")
    assert code == 0 and _object(out, "check")["ok"] is True


def test_spec_path_still_refuses_a_box_no_block_holds(capsys, monkeypatch, tmp_path) -> None:
    """A spec describes a map a kernel uses: what diagnose only warns of is an error here."""
    spec = {"name": "big", "tensors": [{"name": "t", "dtype": "uint8", "shape": [8, 256, 256],
                                        "box": [8, 256, 16], "swizzle": {"mode": "128B"}}]}
    path = tmp_path / "big.json"
    path.write_text(json.dumps(spec))
    code, out, _ = run(capsys, monkeypatch, "check", str(path), "--format", "json")
    errors = _object(out, "check")["results"][0]["errors"]
    assert code == 2 and [(f["rule"], f["severity"]) for f in errors] == [("box-fits-shared-memory", "error")]


def test_rules_json(capsys, monkeypatch) -> None:
    code, out, _ = run(capsys, monkeypatch, "rules", "--format", "json")
    data = _object(out, "rules")
    assert code == 0 and [r["id"] for r in data["rules"]] == list(RULES)
    by_id = {r["id"]: r for r in data["rules"]}
    assert by_id["box-fits-shared-memory"]["diagnose_severity"] == "warning"
    assert by_id["box-bytes-driver-limit"]["diagnose_severity"] == "error"
    assert by_id["smem-offset-alignment"]["driver"] == "spec only"
    assert by_id["global-address-not-null"]["driver_measured"] is True  # measured on an H100
    from tmagen.toolbox import CLUSTER_RULES

    assert [r["id"] for r in data["cluster_rules"]] == list(CLUSTER_RULES)
    assert all(r["summary"] and r["source"] for r in data["cluster_rules"])


def test_verify_json_without_a_gpu_exits_3_with_one_object(capsys, monkeypatch) -> None:
    from tmagen import runtime

    monkeypatch.setattr(runtime, "no_gpu_reason", lambda: "no CUDA driver (test)")
    code, out, _ = run(capsys, monkeypatch, "verify", str(REPO / "specs" / "copy_f32_3d.json"), "--format", "json")
    data = _object(out, "verify")
    assert code == 3 and data["device"] is None and "no CUDA driver (test)" in data["errors"][0]["message"]
