"""The `tmagen` command: exit statuses 0 / 2, messages on stderr, never a traceback."""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tmagen import __version__
from tmagen.cli import main
from tmagen.rules import RULES

from conftest import REPO, pythonpath_with_repo

EXAMPLES = sorted((REPO / "specs").glob("*.json"))

VALID_FLAGS = ["--dtype", "FLOAT32", "--rank", "2", "--global-address", "0x7f0000000000",
               "--global-dim", "64,64", "--global-strides", "256", "--box-dim", "32,8",
               "--element-strides", "1,1", "--swizzle", "128B"]
VALID_JSON = {"dtype": 7, "rank": 2, "global_address": 0x7F0000000000, "global_dim": [64, 64],
              "global_strides": [256], "box_dim": [32, 8], "element_strides": [1, 1], "swizzle": "128B"}


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    assert "Traceback" not in out and "Traceback" not in err, out + err
    return code, out, err


def write(tmp_path: Path, name: str, content: str | dict | list) -> str:
    p = tmp_path / name
    p.write_text(content if isinstance(content, str) else json.dumps(content), encoding="utf-8")
    return str(p)


# ----------------------------------------------------------------------------- check
@pytest.mark.parametrize("path", EXAMPLES, ids=[p.stem for p in EXAMPLES])
def test_check_example_spec(capsys, path: Path) -> None:
    code, out, err = run(capsys, "check", str(path))
    assert code == 0, err
    assert err == ""
    target = json.loads(path.read_text()).get("target", "sm_90a")
    assert out.startswith(f"{path}: {path.stem} is valid for {target}")


def test_check_all_examples_at_once(capsys) -> None:
    code, out, err = run(capsys, "check", *map(str, EXAMPLES))
    assert code == 0 and err == ""
    assert len(out.splitlines()) == len(EXAMPLES) >= 6


def _spec(**tensor) -> dict:
    t = {"name": "t", "dtype": "float32", "shape": [64, 64], "box": [8, 32], "swizzle": {"mode": "128B"}}
    t.update(tensor)
    return {"name": "cli_case", "tensors": [t], "kernel": {"kind": "inspect"}}


def _matmul_with_a(**fields: object) -> dict:
    raw = json.loads((REPO / "specs" / "matmul_bf16_tn.json").read_text())
    raw["tensors"][0].update(fields)
    return raw


@pytest.mark.parametrize("content, fragments", [
    pytest.param('{"name": "x",', ["not valid JSON at line 1, column 14"], id="malformed-json"),
    pytest.param("", ["not valid JSON at line 1, column 1"], id="empty-file"),
    pytest.param([1, 2], ["(top level) = [1, 2], but tmagen reads a JSON object"], id="json-array"),
    pytest.param(_spec(shape="64x64"), ["tensors[0].shape = '64x64', but it must be a list"], id="wrong-type"),
    pytest.param(_spec(box=[8, "wide"]), ["tensors[0].box[1] = 'wide'"], id="wrong-entry-type"),
    pytest.param(_spec(bogus=True), ["tensors[0].bogus = true, but 'bogus' is not a field"], id="unknown-key"),
    pytest.param(_spec(box=[8, 64]), ["1 rule violation", "tensors[0].box[-1] = 64 float32 = 256 bytes",
                                      "<= 32", "[box-inner-within-swizzle-span;"], id="rule-breaking"),
    pytest.param(_spec(box=[8, 64], smem_offset=64), ["2 rule violations", "box-inner-within-swizzle-span",
                                                      "smem-offset-alignment"], id="two-rules"),
    # a matmul plans a map per size of its loads from A's box, which cannot be laid out there: the rules say why
    pytest.param(_matmul_with_a(smem_offset=64), ["2 rule violations", "tensors[0].smem_offset = 64",
                                                  "[smem-offset-alignment;", "[mma-k-major-boxes-contiguous;"],
                 id="matmul-box-off-128-bytes"),
])
def test_check_bad_spec_returns_2(capsys, tmp_path, content, fragments) -> None:
    path = write(tmp_path, "bad.json", content)
    code, out, err = run(capsys, "check", path)
    assert code == 2
    assert out == ""
    assert err.startswith(f"tmagen check: {path}: ")
    for fragment in fragments:
        assert fragment in err, f"{fragment!r} not in {err!r}"


def test_check_missing_file(capsys, tmp_path) -> None:
    missing = str(tmp_path / "nope.json")
    code, out, err = run(capsys, "check", missing)
    assert code == 2 and out == ""
    assert f"{missing}: 1 problem" in err and "cannot read the file: No such file or directory" in err


def test_check_directory_and_binary_file(capsys, tmp_path) -> None:
    binary = tmp_path / "bin.json"
    binary.write_bytes(b"\xff\xfe\x00")
    code, out, err = run(capsys, "check", str(tmp_path), str(binary))
    assert code == 2 and out == ""
    assert "cannot read the file: Is a directory" in err
    assert "bin.json: 1 problem" in err and "utf-8" in err


def test_check_goes_on_after_a_bad_spec(capsys, tmp_path) -> None:
    bad = write(tmp_path, "bad.json", "{")
    code, out, err = run(capsys, "check", bad, str(EXAMPLES[0]))
    assert code == 2
    assert "is valid" in out and str(EXAMPLES[0]) in out
    assert bad in err


def test_check_deeply_nested_json(capsys, tmp_path) -> None:
    code, _, err = run(capsys, "check", write(tmp_path, "deep.json", "[" * 100_000 + "]" * 100_000))
    assert code == 2


def test_check_huge_integer_literal(capsys, tmp_path) -> None:
    code, _, err = run(capsys, "check", write(tmp_path, "big.json", '{"name": ' + "9" * 5000 + "}"))
    assert code == 2


# ----------------------------------------------------------------------------- diagnose
def test_diagnose_valid_flags(capsys) -> None:
    code, out, err = run(capsys, "diagnose", *VALID_FLAGS)
    assert code == 0 and err == ""
    assert out.startswith("valid")


def test_diagnose_rank1_needs_no_strides(capsys) -> None:
    code, out, _ = run(capsys, "diagnose", "--dtype", "7", "--rank", "1", "--global-address", "4096",
                       "--global-dim", "64", "--box-dim", "32", "--element-strides", "1")
    assert code == 0 and out.startswith("valid")


def test_diagnose_misaligned_address(capsys) -> None:
    flags = list(VALID_FLAGS)
    flags[flags.index("0x7f0000000000")] = "0x7f0000000008"
    code, out, err = run(capsys, "diagnose", *flags)
    assert code == 2
    assert "would refuse these arguments (1 problem)" in out
    assert "globalAddress = 0x7f0000000008" in out
    assert "multiple of 16" in out and "[global-address-alignment;" in out


def test_diagnose_lists_every_problem(capsys) -> None:
    flags = list(VALID_FLAGS)
    flags[flags.index("32,8")] = "64,300"
    code, out, _ = run(capsys, "diagnose", *flags)
    assert code == 2
    assert "(2 problems)" in out
    assert "  1. boxDim[1] = 300" in out and "  2. boxDim[0] = 64 float32 = 256 bytes" in out


def test_diagnose_json_file(capsys, tmp_path) -> None:
    code, out, err = run(capsys, "diagnose", write(tmp_path, "args.json", VALID_JSON))
    assert code == 0 and err == "" and out.startswith("valid")


def test_diagnose_json_file_with_a_problem(capsys, tmp_path) -> None:
    code, out, _ = run(capsys, "diagnose", write(tmp_path, "args.json", {**VALID_JSON, "swizzle": 4}))
    assert code == 2
    assert "swizzle = CU_TENSOR_MAP_SWIZZLE_128B_ATOM_32B" in out and "[target-atom-swizzle;" in out


def test_diagnose_json_stdin(capsys, monkeypatch) -> None:
    monkeypatch.setattr(sys, "stdin", io.StringIO(json.dumps(VALID_JSON)))
    code, out, _ = run(capsys, "diagnose", "-")
    assert code == 0 and out.startswith("valid")


def test_diagnose_json_malformed_argument_is_argument_form(capsys, tmp_path) -> None:
    code, out, _ = run(capsys, "diagnose", write(tmp_path, "args.json", {**VALID_JSON, "dtype": 99}))
    assert code == 2
    assert "tensorDataType = 99" in out and "[argument-form;" in out


def test_diagnose_json_unknown_key(capsys, tmp_path) -> None:
    path = write(tmp_path, "args.json", {**VALID_JSON, "box_size": [32, 8]})
    code, out, err = run(capsys, "diagnose", path)
    assert code == 2 and out == ""
    assert err.startswith(f"tmagen diagnose: {path}: 1 problem")
    assert "box_size is not an argument of cuTensorMapEncodeTiled" in err and "box_dim" in err


@pytest.mark.parametrize("content, fragment", [
    ("{", "not valid JSON at line 1, column 2"),
    ("[1, 2]", "(top level) = [1, 2], but tmagen reads a JSON object"),
])
def test_diagnose_json_bad_file(capsys, tmp_path, content, fragment) -> None:
    code, out, err = run(capsys, "diagnose", write(tmp_path, "args.json", content))
    assert code == 2 and out == "" and fragment in err


def test_diagnose_json_missing_file(capsys, tmp_path) -> None:
    code, _, err = run(capsys, "diagnose", str(tmp_path / "none.json"))
    assert code == 2 and "cannot read it: No such file or directory" in err


def test_diagnose_missing_flags(capsys) -> None:
    code, out, err = run(capsys, "diagnose", "--dtype", "FLOAT32", "--rank", "2")
    assert code == 2 and out == ""
    for flag in ("--global-address", "--global-dim", "--global-strides", "--box-dim", "--element-strides"):
        assert f"{flag} is missing" in err
    assert "--dtype is missing" not in err


def test_diagnose_json_missing_keys(capsys, tmp_path) -> None:
    args = {k: v for k, v in VALID_JSON.items() if k != "box_dim"}
    code, _, err = run(capsys, "diagnose", write(tmp_path, "args.json", args))
    assert code == 2 and "box_dim is missing" in err


def test_diagnose_bad_int_list_flag(capsys) -> None:
    flags = list(VALID_FLAGS)
    flags[flags.index("64,64")] = "64,x"
    code, out, err = run(capsys, "diagnose", *flags)
    assert code == 2 and out == ""
    assert "--global-dim" in err and "'64,x' is not a list of integers" in err


def test_diagnose_rank_zero(capsys) -> None:
    code, _, _ = run(capsys, "diagnose", "--dtype", "7", "--rank", "0", "--global-address", "4096",
                     "--global-dim", "", "--global-strides", "", "--box-dim", "", "--element-strides", "")
    assert code == 2


def test_diagnose_json_arch_list(capsys, tmp_path) -> None:
    code, _, _ = run(capsys, "diagnose", write(tmp_path, "args.json", {**VALID_JSON, "arch": []}))
    assert code == 2


# ----------------------------------------------------------------------------- schema
def test_schema_prints_json(capsys) -> None:
    code, out, err = run(capsys, "schema")
    assert code == 0 and err == ""
    s = json.loads(out)
    assert {"tensors", "kernel"} <= set(s["properties"])


def test_schema_to_file(capsys, tmp_path) -> None:
    target = tmp_path / "spec.schema.json"
    code, out, _ = run(capsys, "schema", "-o", str(target))
    assert code == 0 and out == ""
    assert "tensors" in json.loads(target.read_text())["properties"]


def test_schema_to_unwritable_path(capsys, tmp_path) -> None:
    code, _, _ = run(capsys, "schema", "-o", str(tmp_path / "no" / "such" / "dir.json"))
    assert code == 2


# ----------------------------------------------------------------------------- explain
def _rows(text: str) -> list[str]:
    return [" ".join(line.split("|", 1)[1].split()) for line in text.splitlines() if re.match(r"^\s*\d+ \|", line)]


def test_explain_128B(capsys) -> None:
    code, out, err = run(capsys, "explain", "--swizzle", "128B")
    assert code == 0 and err == ""
    assert out.startswith("swizzle 128B: Swizzle<3,4,3>, repeats every 1024 bytes")
    rows = _rows(out)
    assert len(rows) == 8
    assert rows[0] == "0 1 2 3 4 5 6 7"
    assert rows[1] == "1 0 3 2 5 4 7 6"
    assert rows[7] == "7 6 5 4 3 2 1 0"


def test_explain_base_offset_rotates_rows(capsys) -> None:
    code, out, _ = run(capsys, "explain", "--swizzle", "128B", "--base-offset", "3")
    assert code == 0 and "base offset 3 (buffer 384 bytes past the pattern start)" in out
    rows = _rows(out)
    assert rows[0] == "3 2 1 0 7 6 5 4" and rows[5] == "0 1 2 3 4 5 6 7"


@pytest.mark.parametrize("mode, nrows",
                         [("none", 1), ("32B", 2), ("64B", 4), ("128B_atom_32B", 4), ("128B_atom_64B", 2)])
def test_explain_row_counts(capsys, mode, nrows) -> None:
    code, out, _ = run(capsys, "explain", "--swizzle", mode)
    assert code == 0 and len(_rows(out)) == nrows


def test_explain_all_modes(capsys) -> None:
    code, out, _ = run(capsys, "explain")
    assert code == 0
    heads = [re.split("[:,]", line)[0] for line in out.splitlines() if line.startswith("swizzle ")]
    assert heads == ["swizzle none", "swizzle 32B", "swizzle 64B", "swizzle 128B", "swizzle 128B_atom_32B",
                     "swizzle 128B_atom_32B_flip_8B", "swizzle 128B_atom_64B"]
    assert out.count("[sm_100a only") == 3


def test_explain_bad_swizzle(capsys) -> None:
    code, out, err = run(capsys, "explain", "--swizzle", "96B")
    assert code == 2 and out == ""
    assert err.startswith("tmagen explain: '96B' is not a Swizzle")
    assert "128B (3)" in err


# ----------------------------------------------------------------------------- rules, usage
def test_rules_json_lists_every_rule(capsys) -> None:
    code, out, _ = run(capsys, "rules", "--json")
    assert code == 0
    listed = json.loads(out)
    assert [r["id"] for r in listed] == list(RULES)
    assert all(r["summary"] and r["source"] for r in listed)
    assert [r["id"] for r in listed if not r["documented"]] == ["box-bytes-driver-limit"]


def test_rules_text_lists_every_rule(capsys) -> None:
    code, out, _ = run(capsys, "rules")
    assert code == 0
    from tmagen import kinds
    from tmagen.toolbox import CLUSTER_RULES

    kind_rules = [r.id for k in kinds.all_kinds() for r in k.rules.rules]
    starts = [line.split()[0] for line in out.splitlines() if line and not line[0].isspace()]
    assert starts == list(RULES) + kind_rules + list(CLUSTER_RULES)  # the TMA rules, each kind's, the clusters'
    assert out.count("source: ") == len(RULES) + len(kind_rules) + len(CLUSTER_RULES)


@pytest.mark.parametrize("argv, fragment", [
    (["bogus"], "invalid choice: 'bogus'"),
    ([], "required: command"),
    (["check"], "the following arguments are required: spec"),
    (["explain", "--base-offset", "x"], "invalid int value: 'x'"),
    (["rules", "--bogus"], "unrecognized arguments: --bogus"),
])
def test_usage_errors_return_2(capsys, argv, fragment) -> None:
    code, out, err = run(capsys, *argv)
    assert code == 2 and out == ""
    assert err.startswith("usage: tmagen")
    assert fragment in err


def test_version_and_help_return_0(capsys) -> None:
    code, out, _ = run(capsys, "--version")
    assert code == 0 and out.strip() == f"tmagen {__version__}"
    code, out, _ = run(capsys, "--help")
    assert code == 0 and "diagnose" in out and "explain" in out


# ----------------------------------------------------------------------------- the console entry
def test_module_entry_in_a_subprocess() -> None:
    env = {**os.environ, "PYTHONPATH": pythonpath_with_repo()}
    proc = subprocess.run([sys.executable, "-m", "tmagen", "check", "/nonexistent.json"], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    assert "/nonexistent.json: 1 problem" in proc.stderr
    assert proc.stdout == ""


def test_explain_base_offset_out_of_the_pattern(capsys) -> None:
    code, _, err = run(capsys, "explain", "--swizzle", "64B", "--base-offset", "4")
    assert code == 2 and "use 0 to 3" in err and "Traceback" not in err
    code, out, _ = run(capsys, "explain", "--swizzle", "64B", "--base-offset", "3")
    assert code == 0 and " ".join(out.splitlines()[2].split()) == "0 | 3 2 1 0 7 6 5 4"
