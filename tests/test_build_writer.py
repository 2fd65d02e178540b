"""`tmagen build` writes only over what a build wrote: a folder holding anything else is refused
(exit 2, naming the files) unless --force, `build --check` reports such files, parallel builds of
one spec take turns, two specs of one name are refused, and folders get the umask's permissions."""

from __future__ import annotations

import json
import multiprocessing
import os
import stat
from pathlib import Path

import pytest

from conftest import REPO
from tmagen import build
from tmagen.cli import main

SPEC = REPO / "specs" / "copy_f32_3d.json"


def _cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    return code, out + err


def _spec(tmp_path: Path, name: str, file: str | None = None) -> str:
    data = json.loads(SPEC.read_text())
    data["name"] = name
    path = tmp_path / (file or f"{name}.json")
    path.write_text(json.dumps(data))
    return str(path)


def test_a_folder_of_the_users_is_refused_and_kept(capsys, tmp_path, monkeypatch) -> None:
    """A spec named `src` built with --out . deleted the project's src/main.cpp (exit 0)."""
    monkeypatch.chdir(tmp_path)
    spec = _spec(tmp_path, "src")
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "main.cpp").write_text("int main() {}\n")
    code, text = _cli(capsys, "build", spec, "--out", ".")
    assert code == 2 and "main.cpp" in text and "--force" in text
    assert [p.name for p in (tmp_path / "src").iterdir()] == ["main.cpp"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["src", "src.json"], "no staging or lock left"


def test_a_users_file_beside_generated_files_is_refused_and_kept(capsys, tmp_path) -> None:
    """A user's own .cu placed in generated/NAME/ was deleted by the next build."""
    spec = _spec(tmp_path, "tile")
    out = tmp_path / "out"
    assert _cli(capsys, "build", spec, "--out", str(out))[0] == 0
    (out / "tile" / "mine.cu").write_text("// mine\n")
    (out / "tile" / "sub").mkdir()
    code, text = _cli(capsys, "build", spec, "--out", str(out))
    assert code == 2 and "mine.cu" in text and "sub/" in text
    assert (out / "tile" / "mine.cu").read_text() == "// mine\n"
    code, text = _cli(capsys, "build", "--check", spec, "--out", str(out))
    assert code == 1 and "mine.cu: not written by tmagen build" in text and "sub: not written" in text
    code, text = _cli(capsys, "build", spec, "--out", str(out), "--force")
    assert code == 0 and sorted(p.name for p in (out / "tile").iterdir()) == sorted(
        build.render_spec_file(spec).files)


def test_a_file_where_the_folder_goes_is_refused(capsys, tmp_path) -> None:
    spec = _spec(tmp_path, "tile")
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "tile").write_text("mine")
    code, text = _cli(capsys, "build", spec, "--out", str(tmp_path / "out"))
    assert code == 2 and "is a file" in text
    assert (tmp_path / "out" / "tile").read_text() == "mine"


def test_a_previous_build_is_replaced(capsys, tmp_path) -> None:
    spec = _spec(tmp_path, "tile")
    out = tmp_path / "out"
    assert _cli(capsys, "build", spec, "--out", str(out))[0] == 0
    (out / "tile" / "tile.cu").write_text("edited")
    assert _cli(capsys, "build", spec, "--out", str(out))[0] == 0
    assert _cli(capsys, "build", "--check", spec, "--out", str(out))[0] == 0
    assert sorted(p.name for p in out.iterdir()) == ["tile"]


def test_an_empty_folder_is_written(capsys, tmp_path) -> None:
    (tmp_path / "out" / "tile").mkdir(parents=True)
    assert _cli(capsys, "build", _spec(tmp_path, "tile"), "--out", str(tmp_path / "out"))[0] == 0


def test_two_specs_of_one_name_are_refused(capsys, tmp_path) -> None:
    """The second overwrote the first, and `build --check` then failed forever."""
    a, b = _spec(tmp_path, "tile", "a.json"), _spec(tmp_path, "tile", "b.json")
    code, text = _cli(capsys, "build", a, b, "--out", str(tmp_path / "out"))
    assert code == 2 and "a.json" in text and "b.json" in text and "name = 'tile'" in text
    assert not (tmp_path / "out").exists()
    code, text = _cli(capsys, "build", "--check", a, b, "--out", str(tmp_path / "out"))
    assert code == 2 and "b.json" in text
    assert _cli(capsys, "build", a, a, "--out", str(tmp_path / "out"))[0] == 0, "one file given twice is one spec"


def test_an_empty_out_is_refused(capsys, tmp_path, monkeypatch) -> None:
    """--out "" wrote into the current folder."""
    monkeypatch.chdir(tmp_path)
    spec = _spec(tmp_path, "tile")
    code, text = _cli(capsys, "build", spec, "--out", "")
    assert code == 2 and "--out = ''" in text
    assert [p.name for p in tmp_path.iterdir()] == ["tile.json"]


@pytest.mark.parametrize("umask, mode", [(0o022, 0o755), (0o002, 0o775), (0o077, 0o700)])
def test_folders_follow_the_umask(capsys, tmp_path, umask, mode) -> None:
    """Generated folders were 0700 whatever the umask (tempfile.mkdtemp)."""
    spec = _spec(tmp_path, "tile")
    old = os.umask(umask)
    try:
        assert _cli(capsys, "build", spec, "--out", str(tmp_path / "out"))[0] == 0
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "out" / "tile").stat().st_mode) == mode
    assert stat.S_IMODE((tmp_path / "out" / "tile" / "tile.cu").stat().st_mode) == mode & 0o666


def _build_rounds(spec: str, out: str, rounds: int, barrier, errors) -> None:  # type: ignore[no-untyped-def]
    import contextlib
    import io

    for _ in range(rounds):
        barrier.wait()
        err = io.StringIO()
        try:
            with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
                code = main(["build", spec, "--out", out])
        except BaseException as exc:  # noqa: BLE001 - reported to the parent
            code, err = 99, io.StringIO(repr(exc))
        if code != 0:
            errors.put(f"exit {code}: {err.getvalue()[-300:]}")


PROCESSES, ROUNDS = int(os.environ.get("TMAGEN_BUILD_PROCESSES", "6")), int(os.environ.get("TMAGEN_BUILD_ROUNDS", "3"))


@pytest.mark.skipif("fork" not in multiprocessing.get_all_start_methods(), reason="needs fork")
def test_parallel_builds_of_one_spec_all_succeed(tmp_path) -> None:
    """16 processes x 20 rounds failed 13 of 320 builds (OSError: Directory not empty) and left
    .NAME.old.* folders: make -j and ninja build like this."""
    spec, out = _spec(tmp_path, "tile"), str(tmp_path / "out")
    ctx = multiprocessing.get_context("fork")
    barrier, errors = ctx.Barrier(PROCESSES), ctx.Queue()
    procs = [ctx.Process(target=_build_rounds, args=(spec, out, ROUNDS, barrier, errors)) for _ in range(PROCESSES)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
    failures = []
    while not errors.empty():
        failures.append(errors.get())
    assert failures == [] and all(p.exitcode == 0 for p in procs)
    assert sorted(p.name for p in Path(out).iterdir()) == ["tile"], "no staging, retired or lock left"
    assert build.differences(build.render_spec_file(spec), out) == []
