"""The matmul's setmaxnreg split is exact: the producer warpgroup drops to 56 registers per thread and
the two consumers rise to 224, which the block's pool holds only if it was launched with 384 x 168
(128 x 56 + 256 x 224). ptxas decides the launch's count under the launch bounds; a kernel compiled
with fewer waits forever in setmaxnreg.inc, so `tmagen build --compile` fails on ptxas's report
instead (issue 18, item 6)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tmagen import toolchain
from tmagen.cli import main
from tmagen.kinds.matmul.plan import MatmulPlan
from tmagen.plan import load, resolve
from tmagen.spec import parse_spec

from conftest import REPO

MATMUL = REPO / "specs" / "matmul_bf16_tn.json"
SYMBOL = "matmul_bf16_tn_matmul"
IN_CI = os.environ.get("CI") == "true"


def _entry(registers: int, symbol: str) -> str:
    return f"""ptxas info    : Compiling entry function '{symbol}' for 'sm_90a'
ptxas info    : Function properties for {symbol}
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used {registers} registers, used 1 barriers, 64 bytes smem, 616 bytes cmem[0]
"""


def _report(registers: int, symbol: str = SYMBOL) -> str:
    """ptxas's report with ``symbol`` at ``registers``, and (for the example matmul) the other kernels
    of its family at a count within their own splits."""
    others = [k for k in load(MATMUL).kernel.family[1:]] if symbol == SYMBOL else []
    return "ptxas info    : 0 bytes gmem\n" + _entry(registers, symbol) + "".join(
        _entry(k.registers.least if k.registers else 128, k.symbol) for k in others)


def _result(report: str) -> toolchain.CompileResult:
    nowhere = Path("/nonexistent")
    return toolchain.CompileResult(nowhere, nowhere / "a.cubin", nowhere / "a.ptx", nowhere / "a.so",
                                   toolchain.parse_ptxas_report(report), None)


@pytest.mark.parametrize(("consumers", "least", "most"), [
    (1, 152, 240),  # 128 x 56 + 128 x 240 = 256 x 148, allotted in 8s; the increase asks for 240
    (2, 168, 168),  # 128 x 56 + 256 x 224 = 384 x 168 exactly, and 168 is all the launch bounds allow
    (3, 128, 128),  # 128 x 56 + 384 x 152 = 512 x 128
])
def test_the_budget_is_the_producers_registers_plus_the_consumers(consumers: int, least: int, most: int) -> None:
    p = MatmulPlan("m", 128, 128, 64, consumers, 4, 8, 2, 2, 0, 0, 0, 0)
    budget = p.register_budget
    assert (budget.least, budget.most) == (least, most)
    pool = p.threads * budget.least
    assert pool >= 128 * (p.producer_registers + consumers * p.setmaxnreg_consumers)
    assert budget.most <= p.setmaxnreg_consumers  # the increase never lowers a consumer's count


@pytest.mark.parametrize(("registers", "fragment"), [
    (168, None),
    (161, None),  # allotted 168: the hardware gives each warp registers in units of 256
    (160, "160 registers per thread (160 allotted), fewer than the setmaxnreg increase needs"),
    (128, "it would wait forever"),
    (176, "more than the setmaxnreg budget"),
])
def test_a_matmul_compiled_off_its_split_is_named(registers: int, fragment: str | None) -> None:
    plan = load(MATMUL)
    problems = toolchain.register_violations(plan, _result(_report(registers)))
    if fragment is None:
        assert problems == []
        return
    assert len(problems) == 1 and problems[0].startswith(f"{SYMBOL}: ptxas compiled it to {registers}")
    assert fragment in problems[0]
    assert "128 producer threads at 56 and 256 consumer threads at 224 take 384 threads x 168" in problems[0]
    assert "exactly 168" in problems[0]


def test_a_kernel_missing_from_the_report_is_named_and_kernels_without_a_split_are_not_checked() -> None:
    problems = toolchain.register_violations(load(MATMUL), _result(_report(168, "other")))
    assert problems[0] == (
        f"{SYMBOL}: not in ptxas's report, so its registers cannot be checked against its setmaxnreg split "
        "(128 producer threads at 56 and 256 consumer threads at 224 take 384 threads x 168)")
    assert len(problems) == len(load(MATMUL).kernel.family)  # every kernel of the family is named
    copy = load(REPO / "specs" / "copy_f32_3d.json")
    assert copy.kernel.registers is None
    assert toolchain.register_violations(copy, _result(_report(255, copy.kernel.symbol))) == []


def test_build_compile_fails_when_ptxas_breaks_the_split(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(REPO)
    monkeypatch.setattr(toolchain, "compile_folder", lambda plan, files: _result(_report(160)))
    assert main(["build", "--compile", "--out", str(tmp_path), "specs/matmul_bf16_tn.json"]) == 1
    captured = capsys.readouterr()
    assert f"registers of {SYMBOL}: 168 per thread for its setmaxnreg split" in captured.out
    assert f"error: {SYMBOL}: ptxas compiled it to 160 registers per thread" in captured.err
    monkeypatch.setattr(toolchain, "compile_folder", lambda plan, files: _result(_report(168)))
    assert main(["build", "--compile", "--out", str(tmp_path), "specs/matmul_bf16_tn.json"]) == 0


@pytest.mark.parametrize("name", ["matmul_bf16_tn", "matmul_f16_nn_f32"])
def test_the_real_compile_gives_the_matmul_the_registers_its_split_needs(name: str) -> None:
    """ptxas itself, on the example specs: the launch bounds give 384 threads 168 registers each."""
    try:
        tc = toolchain.find_toolchain()
    except toolchain.ToolchainError as exc:
        if IN_CI:
            raise  # CI installs the toolchain extra
        pytest.skip(f"no CUDA compiler: {exc}")
    from tmagen.render import render

    plan = resolve(parse_spec(json.loads((REPO / "specs" / f"{name}.json").read_text())))
    result = toolchain.compile_folder(plan, render(plan, f"specs/{name}.json"), tc, cubin_only=True)
    assert {k.name: k.registers for k in result.kernels}[plan.kernel.symbol] == 168
    assert {k.name for k in result.kernels} == {k.symbol for k in plan.kernel.family}
    assert toolchain.register_violations(plan, result) == []
