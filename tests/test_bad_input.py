"""Random bad input, 10,000+ cases a run (tests/bad_input.py): mutated specs (wrong types, values out
of range or breaking a rule, unknown and missing keys, hostile names, broken JSON), hostile paths to
read and to write, and mutated `tmagen diagnose` arguments (flags, JSON, pasted CuTe and flashinfer
dumps). Each must exit 2 with a message naming the field, print no traceback and write nothing.
In-process through `tmagen.cli.main`; a few
through the real entry point. Then the bugs this found, each pinned.

TMAGEN_BAD_INPUT_SEED and TMAGEN_BAD_INPUT_CASES explore further than CI's fixed seed."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from tmagen.spec import schema

from bad_input import NULLABLE, BadCase, cases, prepare, problems, run
from conftest import REPO, pythonpath_with_repo

SEED = int(os.environ.get("TMAGEN_BAD_INPUT_SEED", "20261122"))
COUNT = int(os.environ.get("TMAGEN_BAD_INPUT_CASES", "10500"))
CATEGORIES = {"type", "value", "structure", "json", "read-path", "write-path", "diagnose-flags", "diagnose-json",
              "diagnose-dump"}


@pytest.fixture(scope="module")
def folder() -> Iterator[Path]:
    """Where each case runs. In memory where Linux offers it: rewriting a file on some disks costs
    milliseconds, and 10,000 of them would be most of the test."""
    shm = Path("/dev/shm")
    base = str(shm) if shm.is_dir() and os.access(shm, os.W_OK) else None
    path = Path(tempfile.mkdtemp(prefix="tmagen-bad-input-", dir=base))
    prepare(path)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def _clean(folder: Path, written: list[str]) -> None:
    for rel in written:
        p = folder / rel
        if p.is_dir() and not p.is_symlink():
            shutil.rmtree(p, ignore_errors=True)
        elif p.exists() or p.is_symlink():
            p.unlink()


def test_every_bad_input_exits_2_naming_the_field(folder: Path) -> None:
    failures: list[str] = []
    categories: Counter[str] = Counter()
    commands: Counter[str] = Counter()
    for case in cases(SEED, COUNT):
        answer = run(case, folder)
        categories[case.category] += 1
        commands[case.argv[0]] += 1
        found = problems(case, answer, folder)
        if found:
            failures.append(f"{case.what} ({case.argv[:4]}): {'; '.join(found)}\n"
                            f"    {(answer.out + answer.err)[-400:]!r}")
        _clean(folder, answer.written)
        _clean(folder, sorted({name.split("/")[0] for name in case.files if "/" in name}))
    assert sum(categories.values()) == COUNT >= 10_000
    assert set(categories) == CATEGORIES and min(categories.values()) >= COUNT // 50, categories
    assert {"check", "build", "explain", "diagnose", "schema", "docs"} <= set(commands), commands
    assert failures == [], (f"seed {SEED}: {len(failures)} of {COUNT} bad inputs answered wrongly:\n"
                            + "\n".join(failures[:15]))


def test_the_answer_is_checked_strictly(folder: Path) -> None:
    """The checker itself: a good spec (exit 0, prints no field) and a build that writes are caught."""
    good = json.dumps(json.loads((REPO / "specs" / "copy_f32_3d.json").read_text())).encode()
    ok = BadCase("value", "nothing wrong", ["check", "spec.json"], ("tensors[0].box",), {"spec.json": good})
    assert problems(ok, run(ok, folder), folder) == ["exit status 0, not 2", "no mention of any of ['tensors[0].box']"]
    built = BadCase("value", "nothing wrong", ["build", "spec.json", "--out", "out"], ("--out",), {"spec.json": good})
    answer = run(built, folder)
    assert any(p.startswith("wrote ['out'") for p in problems(built, answer, folder))
    _clean(folder, answer.written)


def test_nullable_fields_are_the_schemas() -> None:
    """The mutator's list of fields that may be null is the schema's (or mutations would go stale)."""
    full = schema()
    objects = [full, *full["$defs"].values()]  # the spec's own fields and each object's
    nullable = {name for d in objects for name, prop in d.get("properties", {}).items()
                if any(branch.get("type") == "null" for branch in prop.get("anyOf", []))}
    assert nullable == NULLABLE


# ----------------------------------------------------------------------------- the real entry point
def _entry(*argv: str | bytes, stdin: str | None = None) -> subprocess.CompletedProcess[bytes]:
    env = {**os.environ, "PYTHONPATH": pythonpath_with_repo()}
    return subprocess.run([sys.executable, "-m", "tmagen", *argv], capture_output=True, cwd=REPO, env=env,
                          input=stdin.encode() if stdin is not None else None, timeout=60)


def test_entry_point_refuses_bad_input(tmp_path: Path) -> None:
    broken = tmp_path / "broken.json"
    broken.write_text('{"name": "x", "tensors": [')
    wrong = tmp_path / "wrong.json"
    wrong.write_text(json.dumps({"name": "x", "tensors": [{"name": "t", "dtype": "float32", "shape": [64, 64],
                                                           "box": [8, 64], "swizzle": {"mode": "128B"}}],
                                 "kernel": {"kind": "copy", "stages": 99}}))
    a_file = tmp_path / "a_file"
    a_file.write_text("")
    runs = {
        "broken JSON": (_entry("check", str(broken)), b"not valid JSON at line 1"),
        "out of range": (_entry("build", str(wrong), "--out", str(tmp_path / "out")), b"kernel.stages = 99"),
        "output under a file": (_entry("build", str(REPO / "specs" / "copy_f32_3d.json"), "--out",
                                       str(a_file / "out")), b"--out"),
        "undecodable path": (_entry("check", os.fsencode(str(tmp_path)) + b"/\xff.json"), b"No such file"),
        "diagnose flag": (_entry("diagnose", "--dtype", "FLOAT32", "--rank", "2", "--global-address", "0x1008",
                                 "--global-dim", "64,64", "--global-strides", "256", "--box-dim", "32,8",
                                 "--element-strides", "1,1"), b"globalAddress = 0x1008"),
        "diagnose stdin": (_entry("diagnose", "-", stdin='{"rank": "2"}'), b"is missing"),
    }
    for what, (proc, fragment) in runs.items():
        text = proc.stdout + proc.stderr
        assert proc.returncode == 2, (what, text)
        assert b"Traceback" not in text, (what, text)
        assert fragment in text, (what, text)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a_file", "broken.json", "wrong.json"]


@pytest.mark.skipif(shutil.which("tmagen") is None, reason="the console script is not on PATH")
def test_console_script_refuses_bad_input(tmp_path: Path) -> None:
    proc = subprocess.run(["tmagen", "check", str(tmp_path / "missing.json")], capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr and "missing.json: 1 problem" in proc.stderr


# ----------------------------------------------------------------------------- what the fuzzing found
def _main(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    from tmagen.cli import main

    code = main(list(argv))
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    return code, out + err


@pytest.mark.parametrize("argv, named", [
    (["check", "nul\x00.json"], "nul"),
    (["diagnose", "nul\x00.json"], "nul"),
    (["schema", "-o", "nul\x00.json"], "nul"),
    (["docs", "--out", "nul\x00"], "--out"),
], ids=["check", "diagnose", "schema", "docs"])
def test_a_nul_in_a_path_is_bad_input(capsys, tmp_path, monkeypatch, argv, named) -> None:
    """Python refuses paths with a NUL byte with ValueError, which escaped as a traceback."""
    monkeypatch.chdir(tmp_path)
    code, text = _main(capsys, *argv)
    assert code == 2 and named in text and "embedded null byte" in text
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("out", ["a_file", "a_file/sub", "nul\x00", "/proc/no/such"])
def test_build_into_an_impossible_folder_is_bad_input(capsys, tmp_path, monkeypatch, out) -> None:
    """--out naming a file, a folder under a file or an unwritable place raised OSError."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "a_file").write_text("")
    code, text = _main(capsys, "build", str(REPO / "specs" / "copy_f32_3d.json"), "--out", out)
    assert code == 2 and "--out" in text and "cannot write the output folder" in text
    assert [p.name for p in tmp_path.iterdir()] == ["a_file"]


def test_docs_into_a_file_is_bad_input(capsys, tmp_path) -> None:
    (tmp_path / "a_file").write_text("")
    code, text = _main(capsys, "docs", "--out", str(tmp_path / "a_file"))
    assert code == 2 and "--out" in text and "cannot write the documents" in text


def test_png_into_a_folder_writes_nothing_else(capsys, tmp_path, monkeypatch) -> None:
    """matplotlib added ".png" to a path without it: asked for the folder `dir`, it wrote `dir.png`."""
    pytest.importorskip("matplotlib")
    monkeypatch.chdir(tmp_path)
    (tmp_path / "dir").mkdir()
    code, text = _main(capsys, "explain", str(REPO / "specs" / "nhwc_64b_fp16.json"), "--png", "dir")
    assert code == 2 and "dir: 1 problem" in text and "cannot write it: Is a directory" in text
    assert [p.name for p in tmp_path.iterdir()] == ["dir"]


def _spec(tmp_path: Path, **changes: object) -> str:
    data = json.loads((REPO / "specs" / "inspect_bf16_offset384.json").read_text())
    for key, value in changes.items():
        target, _, field = key.partition("__")
        (data["kernel"] if target == "kernel" else data["tensors"][0])[field] = value
    path = tmp_path / "spec.json"
    path.write_text(json.dumps(data))
    return str(path)


@pytest.mark.parametrize("changes, named", [
    ({"kernel__coords": [1 << 31, 0]}, "kernel.coords[0] = 2147483648"),
    ({"kernel__coords": [0, -(1 << 40)]}, "kernel.coords[1] = -1099511627776"),
    ({"tensor__alignment": 1 << 70}, "tensors[0].alignment = 1180591620717411303424"),
], ids=["coords-int32", "coords-negative", "alignment"])
def test_values_the_generated_code_cannot_hold_are_refused(capsys, tmp_path, changes, named) -> None:
    """Coordinates beyond 32 bits and alignments beyond 64 passed the spec and broke the generated
    C++ (a narrowing error, a constant too large)."""
    code, text = _main(capsys, "check", _spec(tmp_path, **changes))
    assert code == 2 and named in text


def test_unit_bytes_zero_is_refused(capsys, tmp_path) -> None:
    """`unit_bytes: 0` was read as "no unit given" and passed."""
    data = json.loads((REPO / "specs" / "transpose_int4_8x8.json").read_text())
    data["kernel"]["unit_bytes"] = 0
    path = tmp_path / "spec.json"
    path.write_text(json.dumps(data))
    code, text = _main(capsys, "check", str(path))
    assert code == 2 and "kernel.unit_bytes = 0" in text
