"""lab.miss_probe's pure parts: nvidia-smi's samples read, each window's samples averaged, cycles
per launch from time and clock (the GPU parts run in the lab, their figures in docs/misses.md)."""

from __future__ import annotations

import time

import pytest

from lab import miss_probe
from lab.miss_probe import Sample, Window


def _stamp(at: float) -> str:
    t = time.localtime(at)
    return time.strftime("%Y/%m/%d %H:%M:%S", t) + f".{int(round((at % 1) * 1000)):03d}"


def test_samples_are_read_and_what_is_not_a_sample_is_left_out() -> None:
    at = 1_764_400_000.25
    lines = ["timestamp, clocks.current.sm [MHz], power.draw [W], clocks_event_reasons.active",
             f"{_stamp(at)}, 1410, 692.15, 0x0000000000000004",
             f"{_stamp(at + 0.02)}, [N/A], 690.00, 0x0000000000000004",
             f"{_stamp(at + 0.04)}, 1980, 401.50, 0x0000000000000000", ""]
    got = miss_probe.parse_samples(lines)
    assert [(s.sm_mhz, s.watts, s.reasons) for s in got] == [(1410.0, 692.15, "0x0000000000000004"),
                                                              (1980.0, 401.5, "0x0000000000000000")]
    assert got[0].at == pytest.approx(at, abs=1e-3) and got[1].at == pytest.approx(at + 0.04, abs=1e-3)


def test_a_window_averages_its_own_samples_past_the_settling_time() -> None:
    t0 = 1000.0
    windows = [Window("1x2x3", "tmagen", t0, t0 + 0.3, 400.0), Window("1x2x3", "peer", t0 + 0.4, t0 + 0.7, 380.0),
               Window("1x2x3", "tmagen", t0 + 0.8, t0 + 1.1, 420.0)]
    samples = [Sample(t0 + 0.01, 1980, 300, "0x0"),  # before the window settled: left out
               Sample(t0 + 0.1, 1300, 690, "0x4"), Sample(t0 + 0.2, 1340, 694, "0x4"),
               Sample(t0 + 0.5, 1450, 692, "0x4"),
               Sample(t0 + 0.9, 1310, 691, "0x4"), Sample(t0 + 1.05, 1330, 693, "0x4")]
    got = miss_probe.steady(windows, samples)
    ours, theirs = got[("1x2x3", "tmagen")], got[("1x2x3", "peer")]
    assert ours.us_per_launch == 410.0 and ours.sm_mhz == 1320.0 and ours.watts == 692.0
    assert ours.reasons == ("0x4",) and ours.kcycles == pytest.approx(410.0 * 1320.0 / 1e3)
    # fewer cycles, yet slower: the clock the power cap left it
    assert theirs.kcycles > ours.kcycles and theirs.us_per_launch < ours.us_per_launch


def test_a_window_without_samples_keeps_its_time() -> None:
    got = miss_probe.steady([Window("s", "x", 0.0, 0.3, 12.5)], [])
    assert got[("s", "x")].us_per_launch == 12.5 and got[("s", "x")].sm_mhz != got[("s", "x")].sm_mhz  # NaN


def test_shapes_are_checked_before_anything_runs(capsys) -> None:
    assert miss_probe.parse_shape("1024x4096x65536") == (1024, 4096, 65536)
    for bad in ("1024x4096", "0x1x1", "ax1x1", "1x2x3x4"):
        with pytest.raises(ValueError):
            miss_probe.parse_shape(bad)
    assert miss_probe.main(["clocks", "bf16", "64x14336"]) == 2
    assert "MxNxK" in capsys.readouterr().err


def test_an_ops_case_is_read_as_the_ops_benchmark_names_it() -> None:
    got = miss_probe.parse_ops_case("permute:bfloat16:8x256x256x16:0,3,1,2")
    assert (got.op, got.dtype, got.shape, got.dims, got.view) == ("permute", "bfloat16", (8, 256, 256, 16),
                                                                   (0, 3, 1, 2), "")
    assert got.bytes_moved == 2 * 8 * 256 * 256 * 16 * 2
    assert miss_probe.parse_ops_case("transpose:uint8:4099x4101").source[0] == (4101, 4099)


@pytest.mark.parametrize("text, says", [
    ("transpose:uint8", "expected OP:DTYPE:SHAPE"),
    ("gather:uint8:4x4", "expected OP:DTYPE:SHAPE"),
    ("transpose:int7:4x4", "dtype 'int7'"),
    ("transpose:uint8:4099", "shape '4099'"),
    ("copy:float32:0x4", "shape '0x4'"),
    ("permute:bfloat16:2x3x4", "a permute needs DIMS"),
    ("permute:bfloat16:2x3x4:0,1,1", "a permutation of 0..2"),
    ("permute:bfloat16:2x3x4:1,a,0", "a permutation of 0..2"),
    ("transpose:uint8:4x4:1,0", "only a permute takes DIMS"),
])
def test_a_bad_ops_case_is_refused_with_the_form_it_needs(text: str, says: str) -> None:
    with pytest.raises(ValueError, match=says):
        miss_probe.parse_ops_case(text)
    assert miss_probe.main(["once", "ops", text]) == 2


def test_host_takes_the_ops_mode_alone_and_the_others_need_a_shape() -> None:
    assert miss_probe.main(["host", "bf16"]) == 2
    assert miss_probe.main(["host", "ops", "copy:float32:64x64"]) == 2
    assert miss_probe.main(["once", "bf16"]) == 2
    assert miss_probe.main(["writeback", "bf16", "1x2x3"]) == 2
