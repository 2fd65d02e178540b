"""lab/capi_host_time.py without a GPU: its arguments, the nvcc line, the result's shape and the
one-line summary on made-up results (not measurements), and its driver built by nvcc, whose
matmul_choice timing needs no GPU."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from lab import capi_host_time as cht
from tmagen import toolchain


def _timing(best: float) -> dict[str, float]:
    return {"best_us": best, "median_us": best * 1.1}


def _run(shape: list[int], repeat: float, alternate: float) -> dict[str, Any]:
    us = dict.fromkeys(cht.TIMED, _timing(1.5))
    us["matmul_launch_repeat"] = _timing(repeat)
    us["matmul_launch_scaled_repeat"] = _timing(repeat + 0.1)
    us["matmul_launch_alternate"] = _timing(alternate)
    return {"api": "x", "gpu": "made up", "sms": 132, "shape": shape, "iters": 200, "batches": 20,
            "choice": {"kernel": 0, "splits": 1, "split_from": 0},
            "encodes_per_launch": {"repeat": 0.0, "alternate": 3.0},
            "lookups_per_launch": {"repeat": 0.0, "alternate": 3.0}, "us": us}


def _result(worst_repeat: float) -> dict[str, Any]:
    choice = {"api": "x", "sms": 132, "choice_us": [
        {"shape": [64, 64, 64], "kernel": 5, "splits": 1, "best_us": 0.1, "median_us": 0.1},
        {"shape": [4096, 4096, 4096], "kernel": 0, "splits": 1, "best_us": 2.9, "median_us": 3.0}]}
    return {"tool": "lab.capi_host_time", "target_us": 3.0, "batches": 20, "apis": {
        "bf16": {"spec": "s", "choice": choice, "runs": [_run([64, 64, 64], 2.0, 9.0),
                                                         _run([4096, 4096, 4096], worst_repeat, 12.0)]}}}


# ----------------------------------------------------------------------------- arguments
def test_defaults_time_both_apis_on_a_tiny_a_split_and_a_large_shape() -> None:
    o = cht.parse_args(["out.json"])
    assert o.out == Path("out.json") and o.apis == ("bf16", "fp8") and not o.choice_only
    assert [s.label for s in o.shapes] == ["64x64x64", "1x4096x4096", "4096x4096x4096"]
    assert o.shapes[0].iters == 200 and o.shapes[-1].iters == 20 and o.batches == 20


def test_options_are_read() -> None:
    o = cht.parse_args(["--apis", "fp8", "o.json", "--shapes", "128x256x64:50,64x64x64", "--batches", "5",
                        "--choice-only"])
    assert o.apis == ("fp8",) and o.batches == 5 and o.choice_only
    assert o.shapes == (cht.Shape(128, 256, 64, 50), cht.Shape(64, 64, 64, 200))


@pytest.mark.parametrize("argv,words", [
    ([], "usage"),
    (["a.json", "b.json"], "one output file"),
    (["o.json", "--apis", "bf32"], "choose among bf16, fp8"),
    (["o.json", "--shapes", "64x64"], "MxNxK"),
    (["o.json", "--shapes", "64x60x64"], "multiple of 8"),
    (["o.json", "--shapes", "0x64x64"], "1 or more"),
    (["o.json", "--batches", "0"], "1 or more"),
    (["o.json", "--batches"], "needs a value"),
    (["o.json", "--fast"], "unknown option --fast"),
])
def test_bad_arguments_say_what_to_write(argv: list[str], words: str) -> None:
    with pytest.raises(cht.UsageError, match=words):
        cht.parse_args(argv)
    assert cht.main(argv) == 2


def test_the_driver_is_built_around_the_generated_source_for_hopper() -> None:
    cmd = cht.driver_command(Path("/x/nvcc"), Path("/x/lib"), Path("/f"), "ops_mm", Path("/f/exe"))
    assert cmd[0] == "/x/nvcc" and "-gencode=arch=compute_90a,code=sm_90a" in cmd
    assert "-DTMAGEN_API=ops_mm" in cmd and '-DTMAGEN_SOURCE="ops_mm.cu"' in cmd and "-I/f" in cmd
    assert cmd[-1] == "/f/capi_host_time.cu" and cmd[cmd.index("-o") + 1] == "/f/exe"


# ----------------------------------------------------------------------------- the result
def test_a_complete_result_has_no_problems_and_a_broken_one_names_them() -> None:
    assert cht.check_result(_result(2.5)) == []
    broken = copy.deepcopy(_result(2.5))
    del broken["apis"]["bf16"]["runs"][1]["us"]["encode_a"]
    broken["apis"]["bf16"]["runs"][0]["encodes_per_launch"] = {"repeat": 0.0}
    broken["apis"]["bf16"]["choice"]["choice_us"] = []
    del broken["batches"]
    problems = cht.check_result(broken)
    assert "no batches" in problems
    assert any("[4096, 4096, 4096]: no best_us and median_us for encode_a" in p for p in problems)
    assert any("[64, 64, 64]: encodes_per_launch needs repeat and alternate" in p for p in problems)
    assert any("choice row" in p for p in problems)


def test_the_summary_gives_each_shape_the_floors_and_the_verdict() -> None:
    line = cht.summary(_result(2.5))
    assert "\n" not in line
    assert "bf16: repeat 2.00 (64x64x64), 2.50 (4096x4096x4096) us, 0 encodes" in line
    assert "alternate 9.00 to 12.00 us, 3 encodes" in line
    assert "floors <<<>>> 1.50 us" in line and "cuLaunchKernel 1.50 us" in line
    assert line.endswith("target <= 3 us on repeats: met (worst 2.50 us, 4096x4096x4096)")
    assert cht.summary(_result(3.4)).endswith("missed (worst 3.40 us, 4096x4096x4096)")


def test_a_choice_only_summary_gives_the_dispatch_cost() -> None:
    result = _result(2.0)
    del result["apis"]["bf16"]["runs"]
    assert cht.summary(result).endswith("bf16: matmul_choice 0.10 to 2.90 us (4096x4096x4096)")


# ----------------------------------------------------------------------------- the driver, built
def test_the_driver_builds_and_times_the_dispatch_without_a_gpu() -> None:
    try:
        toolchain.find_toolchain()
    except toolchain.ToolchainError as exc:
        pytest.skip(f"no CUDA compiler: {exc}")
    exe = cht.build_driver(cht.APIS["bf16"]())
    data = cht.run_driver(exe, "choice", 10, 2)
    rows = data["choice_us"]
    assert data["api"] == "ops_matmul_bfloat16_bfloat16_k" and len(rows) == 7
    assert all(r["best_us"] > 0 and r["splits"] >= 1 for r in rows)
    with pytest.raises(RuntimeError, match="usage"):
        cht.run_driver(exe, "nonsense")
