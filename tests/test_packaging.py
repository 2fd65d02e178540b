"""Packaging: the wheel installs into a fresh virtual environment, carries templates/, and its
console script works; CI runs the README's own set-up and test commands."""

from __future__ import annotations

import os
import re
import shutil
import site
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

# Build outputs and caches that must not travel into the copy the wheel is built from.
_IGNORE = shutil.ignore_patterns(".git", ".whl", ".venv", ".ci-venv", "build", "dist", "*.egg-info",
                                 "__pycache__", ".pytest_cache", ".hypothesis", "out", "tests")
# pip's words when the build backend itself is missing from the environment.
_NO_BACKEND = ("No module named 'setuptools'", "Cannot import 'setuptools.build_meta'",
               "invalid command 'bdist_wheel'", "No module named 'wheel'")
_NO_INDEX = ("Could not find a version that satisfies the requirement", "No matching distribution found",
             "Failed to establish a new connection", "Temporary failure in name resolution")


def _readme_setup_block() -> list[str]:
    text = (REPO / "README.md").read_text(encoding="utf-8")
    section = text.split("\n## Set up and test", 1)
    assert len(section) == 2, "README.md has no '## Set up and test' section"
    block = re.search(r"^```bash\n(.*?)^```", section[1], re.S | re.M)
    assert block, "no ```bash block under '## Set up and test'"
    return [line.strip() for line in block.group(1).splitlines() if line.strip()]


def test_ci_runs_the_readme_commands_verbatim() -> None:
    commands = _readme_setup_block()
    assert len(commands) >= 2, commands  # a set-up and a test command
    ci = REPO / ".ci" / "run"
    assert os.access(ci, os.X_OK), ".ci/run is not executable"
    ci_lines = [line.strip() for line in ci.read_text(encoding="utf-8").splitlines()]
    positions = []
    for command in commands:
        assert command in ci_lines, f"README command {command!r} is not a line of .ci/run"
        positions.append(ci_lines.index(command))
    assert positions == sorted(positions), "CI runs the README's commands in another order"


def _clean_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    return env


def _run(cmd: list[str], cwd: Path, timeout: int = 300) -> subprocess.CompletedProcess:
    return subprocess.run([str(c) for c in cmd], cwd=cwd, env=_clean_env(), capture_output=True, text=True,
                          timeout=timeout)


def _build_wheel(tmp: Path) -> Path:
    src = tmp / "src"
    shutil.copytree(REPO, src, ignore=_IGNORE)  # build a copy: no build/ or egg-info in the checkout
    wheels = tmp / "wheels"
    base = [sys.executable, "-m", "pip", "wheel", "--no-deps", "-w", wheels]
    proc = _run([*base, "--no-build-isolation", src], cwd=tmp)
    if proc.returncode != 0:
        log = proc.stdout + proc.stderr
        if not any(s in log for s in _NO_BACKEND):
            pytest.fail(f"pip wheel --no-build-isolation failed:\n{log[-4000:]}")
        # This environment lacks the build backend (setuptools, or wheel for old setuptools);
        # let pip fetch pyproject.toml's build requirements instead.
        isolated = _run([*base, src], cwd=tmp)
        if isolated.returncode != 0:
            ilog = isolated.stdout + isolated.stderr
            if any(s in ilog for s in _NO_INDEX):
                pytest.skip("cannot build a wheel: the environment has no usable setuptools/wheel for "
                            "--no-build-isolation, and pip cannot fetch them: " + log.strip().splitlines()[-1])
            pytest.fail(f"pip wheel (isolated) failed:\n{ilog[-4000:]}")
    found = sorted(wheels.glob("tmagen-*.whl"))
    assert len(found) == 1, found
    return found[0]


@pytest.mark.slow
def test_wheel_installs_into_a_fresh_venv(tmp_path: Path) -> None:
    wheel = _build_wheel(tmp_path)
    with zipfile.ZipFile(wheel) as zf:
        tops = {name.split("/", 1)[0] for name in zf.namelist()}
    # the product alone: the lab (campaign, fuzzer, oracle, peers, reports) stays in the repository
    assert "lab" not in tops, "the wheel ships the lab"
    assert {t for t in tops if not t.endswith(".dist-info")} == {"tmagen"}, tops

    venv = tmp_path / "venv"
    proc = _run([sys.executable, "-m", "venv", venv], cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    py = venv / "bin" / "python"
    assert py.exists()
    proc = _run([py, "-m", "pip", "install", "--no-deps", "--no-index", wheel], cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr

    # Expose this interpreter's dependencies (pydantic, numpy) without its site machinery:
    # paths listed in a .pth are only appended, so the venv's own tmagen comes first and no
    # editable install of tmagen in those directories is activated.
    purelib = _run([py, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], cwd=tmp_path)
    assert purelib.returncode == 0, purelib.stderr
    # The dependencies as this interpreter finds them: its site-packages and any PYTHONPATH entry,
    # but not the checkout itself.
    extra = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    deps = [p for p in [*site.getsitepackages(), *extra]
            if Path(p).is_dir() and Path(p).resolve() != REPO.resolve()]
    assert deps, "this interpreter has no site-packages to lend"
    (Path(purelib.stdout.strip()) / "_host_site_packages.pth").write_text("\n".join(deps) + "\n")

    probe = _run([py, "-c", "import tmagen, tmagen.swizzle; print(tmagen.__file__)"], cwd=tmp_path)
    assert probe.returncode == 0, probe.stderr
    installed = Path(probe.stdout.strip()).resolve()
    assert installed.is_relative_to(venv.resolve()), f"tmagen imported from {installed}, not from the venv"

    package = installed.parent
    assert (package / "templates" / "README.txt").is_file(), "the wheel does not carry templates/"
    shipped = {p.name for p in (package / "templates").iterdir() if p.is_file()}
    in_repo = {p.name for p in (REPO / "templates").iterdir() if p.is_file()}
    assert in_repo <= shipped, f"templates missing from the wheel: {sorted(in_repo - shipped)}"
    shipped_specs = {p.name for p in (package / "ops_specs").glob("*.json")}
    assert shipped_specs == {p.name for p in (REPO / "tmagen" / "ops_specs").glob("*.json")} != set(), \
        "the wheel does not carry the tuned specs tmagen.ops runs"
    res = _run([py, "-c", "import importlib.resources as r; "
                "print(r.files('tmagen.templates').joinpath('README.txt').is_file())"], cwd=tmp_path)
    assert res.stdout.strip() == "True", res.stdout + res.stderr

    cli = _run([venv / "bin" / "tmagen", "check", REPO / "specs" / "transpose_int4_8x8.json"], cwd=tmp_path)
    assert cli.returncode == 0, cli.stdout + cli.stderr
    assert "transpose_int4_8x8 is valid" in cli.stdout
    assert "Traceback" not in cli.stderr

    bad = _run([venv / "bin" / "tmagen", "check", tmp_path / "missing.json"], cwd=tmp_path)
    assert bad.returncode == 2 and "Traceback" not in bad.stderr

    assert (package / "py.typed").is_file(), "the wheel does not say it is typed (PEP 561)"
    meta = _run([py, "-c", "import importlib.metadata as m, tmagen; d = m.distribution('tmagen'); "
                 "print(d.version == tmagen.__version__, any(f.name == 'LICENSE' for f in d.files))"], cwd=tmp_path)
    assert meta.stdout.split() == ["True", "True"], meta.stdout + meta.stderr


def test_the_package_metadata_matches_the_repository() -> None:
    """No LICENSE matched the metadata's Apache-2.0, no py.typed was shipped, and the version was
    written twice (pyproject.toml and tmagen.__version__)."""
    import tomllib

    import tmagen

    project = tomllib.loads((REPO / "pyproject.toml").read_text())
    meta = project["project"]
    assert meta["license"] == {"text": "Apache-2.0"}
    assert "License :: OSI Approved :: Apache Software License" in meta["classifiers"]
    license_text = (REPO / "LICENSE").read_text()
    assert "Apache License" in license_text and "Version 2.0, January 2004" in license_text
    assert "version" not in meta and meta["dynamic"] == ["version"]
    assert project["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "tmagen.__version__"}
    assert re.fullmatch(r"\d+\.\d+\.\d+", tmagen.__version__)
    assert (REPO / "tmagen" / "py.typed").is_file()
    assert "py.typed" in project["tool"]["setuptools"]["package-data"]["tmagen"]


def test_the_readme_names_the_symbols_the_headers_define() -> None:
    """The README said the header gives `tma::load_2d`; the names are `NAME::tma::...`, and a
    user's first kernel failed on it."""
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    header = (REPO / "generated" / "maps_only_bf16_f32" / "maps_only_bf16_f32.cuh").read_text()
    api = (REPO / "generated" / "maps_only_bf16_f32" / "maps_only_bf16_f32.h").read_text()
    assert not re.search(r"(?<![\w:])tma::", readme), "a bare tma:: in the README: the namespace is NAME::tma"
    tma = header[header.rindex("namespace tma {"):header.rindex("}  // namespace tma")]  # the primitives
    named = set(re.findall(r"my_tile::tma::(\w+)", readme))
    listed = re.search(r"in the namespace `my_tile::tma` \((.*?)\) and for each map", readme, re.S)
    assert named and listed
    named |= set(re.findall(r"`(\w+)`", listed.group(1)))
    for name in named:
        assert re.search(rf"\b{name}\(", tma), f"README names tma::{name}, which the header does not define"
    for name in re.findall(r"my_tile::(\w+)\(", readme):
        assert re.search(rf"\b{name}\(", header), name
    for member in re.findall(r"<map>_box::(\w+)", readme):
        assert re.search(rf"\b{member}\b", header[header.index("struct x_box"):]), member
    for fn in re.findall(r"my_tile_(\w+?)_<map>\(\)|my_tile_(last_error)\(\)", readme):
        assert f"maps_only_bf16_f32_{fn[0] or fn[1]}" in api, fn
