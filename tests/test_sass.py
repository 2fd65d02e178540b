"""The SASS check of `tmagen build --compile`: each kernel kind's expected instructions, found by
cuobjdump from the toolchain extra on every machine, and a build that fails when one is missing."""

from __future__ import annotations

import json
import typing
from pathlib import Path

import pytest

from tmagen import toolchain
from tmagen.cli import main
from tmagen.plan import resolve
from tmagen.spec import Kernel, parse_spec

from conftest import REPO

SASS = """
	code for sm_90a
		Function : k_copy
	.headerflags	@"EF_CUDA_TEXMODE_UNIFIED EF_CUDA_64BIT_ADDRESS EF_CUDA_ACCELERATORS EF_CUDA_SM90"
        /*0000*/                   LDC R1, c[0x0][0x28] ;                              /* 0x00000a00ff017b82 */
        /*06a0*/                   UTMALDG.3D [UR16], [UR24] ;                         /* 0x00000010180075b4 */
        /*1d90*/              @!P0 UTMASTG.3D [UR8], [UR22] ;                          /* 0x00000008160073b5 */
        /*1dd0*/                   EXIT ;                                              /* 0x000000000000794d */
		..........
		Function : k_inspect
        /*0330*/              @UP0 UTMALDG.2D [UR4], [UR18] ;                          /* 0x00000004120075b4 */
        /*0340*/                   BRA `(.L_x_1) ;                                     /* 0x0000000000007947 */
"""


def test_cuobjdump_output_is_read_per_kernel_without_modifiers_or_predicates() -> None:
    assert toolchain.parse_sass(SASS) == {"k_copy": ["EXIT", "LDC", "UTMALDG", "UTMASTG"],
                                          "k_inspect": ["BRA", "UTMALDG"]}


def test_every_kernel_kind_has_its_expected_instructions() -> None:
    """A new kind (matmul, with HGMMA) cannot be added without saying what its SASS must hold."""
    kinds = {typing.get_args(t.model_fields["kind"].annotation)[0]
             for t in typing.get_args(typing.get_args(Kernel)[0])}
    from tmagen import kinds as registry

    expected = {k.name: k.sass for k in registry.all_kinds()}
    assert set(expected) == kinds
    assert all(ops and ops[0] == "UTMALDG" for ops in expected.values())  # every kind loads by TMA


def _copy_spec():
    return parse_spec(json.loads((REPO / "specs" / "copy_f32_3d.json").read_text()))


def _result(sass: dict[str, list[str]] | None) -> toolchain.CompileResult:
    nowhere = Path("/nonexistent")
    return toolchain.CompileResult(nowhere, nowhere / "a.cubin", nowhere / "a.ptx", nowhere / "a.so", [], sass)


def test_a_kernel_whose_sass_lacks_an_expected_instruction_is_named() -> None:
    spec = _copy_spec()
    symbol = resolve(spec).kernels[0].symbol
    assert toolchain.sass_violations(resolve(spec), _result({symbol: ["UTMALDG", "UTMASTG", "EXIT"]})) == []
    problems = toolchain.sass_violations(resolve(spec), _result({symbol: ["UTMALDG", "LDG", "STG"]}))
    assert len(problems) == 1 and problems[0].startswith(f"{symbol}: its SASS has no UTMASTG")
    assert toolchain.sass_violations(resolve(spec), _result({})) == [f"{symbol}: not in the cubin's SASS"]
    assert toolchain.sass_violations(resolve(spec), _result(None)) == []  # no cuobjdump: said by the CLI, not a failure


def test_build_compile_fails_when_the_sass_lacks_an_instruction(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(REPO)
    symbol = resolve(_copy_spec()).kernels[0].symbol
    monkeypatch.setattr(toolchain, "compile_folder", lambda spec, files: _result({symbol: ["UTMALDG", "STG"]}))
    assert main(["build", "--compile", "--out", str(tmp_path), "specs/copy_f32_3d.json"]) == 1
    captured = capsys.readouterr()
    assert f"SASS of {symbol}: UTMALDG present, UTMASTG ABSENT" in captured.out
    assert f"error: {symbol}: its SASS has no UTMASTG" in captured.err
    monkeypatch.setattr(toolchain, "compile_folder", lambda spec, files: _result({symbol: ["UTMALDG", "UTMASTG"]}))
    assert main(["build", "--compile", "--out", str(tmp_path), "specs/copy_f32_3d.json"]) == 0


def _executable(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\n")
    path.chmod(0o755)
    return path


def test_cuobjdump_is_found_beside_nvcc_first_then_from_the_wheels_then_cuda_home(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A TMAGEN_NVCC or CUDA_HOME toolkit keeps its own cuobjdump; one without gets the pip wheels'."""
    monkeypatch.delenv("CUDA_PATH", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    nvcc = _executable(tmp_path / "toolkit" / "bin" / "nvcc")
    wheel = toolchain._pip_bin("cuobjdump")
    home = _executable(tmp_path / "home" / "bin" / "cuobjdump")
    monkeypatch.setenv("CUDA_HOME", str(tmp_path / "home"))
    assert toolchain.binary_tool("cuobjdump", nvcc) == (wheel or home)
    beside = _executable(tmp_path / "toolkit" / "bin" / "cuobjdump")
    assert toolchain.binary_tool("cuobjdump", nvcc) == beside
    monkeypatch.setattr(toolchain, "_pip_bin", lambda tool: None)
    beside.unlink()
    assert toolchain.binary_tool("cuobjdump", nvcc) == home
    monkeypatch.delenv("CUDA_HOME")
    assert toolchain.binary_tool("cuobjdump", nvcc) is None


def test_the_toolchain_extra_brings_cuobjdump_and_nvdisasm() -> None:
    """Where nvcc comes from pip (CI), so do the disassemblers; the SASS check then runs everywhere."""
    if toolchain._pip_nvcc() is None:
        pytest.skip("the toolchain extra is not installed")
    assert toolchain._pip_bin("cuobjdump") is not None and toolchain._pip_bin("nvdisasm") is not None
