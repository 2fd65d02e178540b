"""The generated matmul C API's per-thread caches on the GPU (issue 18, item 5: "a repeat call must not
re-encode or look up the driver again"), through lab/capi_host_time.cu: the generated host code
built behind a hook that counts its cuTensorMapEncodeTiled calls and its driver entry-point
lookups. Asserts what each launch of a sequence encoded (not how long it took: the timings are
lab/capi_host_time.py's), for the bf16 and fp8 C APIs tmagen.ops uses."""

from __future__ import annotations

import pytest

from lab import capi_host_time

pytestmark = pytest.mark.gpu

# step -> the tensor maps it must encode (the driver's sequence, on 64 x 64 x 64; see the .cu)
EXPECTED_ENCODES = {
    "first": 3,
    "repeat": 0,
    "repeat_scaled": 0,  # the scaled entry point shares the caches
    "other_pointers": 3,
    "first_pointers_again": 3,  # one entry per operand: the other set evicted it
    "new_a": 1,
    "new_k": 2,  # A's and B's shapes change, C's does not
    "new_ldc": 1,
    "repeat_after_changes": 0,
    "other_thread_first": 3,  # the caches are per thread
    "other_thread_repeat": 0,
    "this_thread_after_other": 0,  # the other thread did not disturb this one's
}


@pytest.mark.parametrize("api", list(capi_host_time.APIS))
def test_a_repeat_launch_encodes_no_map_and_asks_the_driver_nothing(device, api: str) -> None:
    exe = capi_host_time.build_driver(capi_host_time.APIS[api]())
    data = capi_host_time.run_driver(exe, "check", timeout=300)
    assert data["synchronize"] == "no error"
    steps = {s["step"]: s for s in data["steps"]}
    assert {k: s["status"] for k, s in steps.items()} == dict.fromkeys(EXPECTED_ENCODES, 0)
    assert {k: s["encodes"] for k, s in steps.items()} == EXPECTED_ENCODES
    for name, s in steps.items():  # a hit asks nothing of the driver; a miss at most once per map
        assert (s["lookups"] <= s["encodes"]) if s["encodes"] else (s["lookups"] == 0), (name, s)


def test_the_timing_driver_runs_and_counts_encodes_per_launch(device) -> None:
    """The lab tool's timing mode on a few launches (a smoke test of the tool, not a measurement):
    its JSON has every row, repeats encode nothing and alternating pointers encode all three maps."""
    exe = capi_host_time.build_driver(capi_host_time.APIS["bf16"]())
    run = capi_host_time.run_driver(exe, "time", 64, 64, 64, 8, 2, timeout=300)
    choice = capi_host_time.run_driver(exe, "choice", 8, 2, timeout=300)
    result = {"tool": "lab.capi_host_time", "target_us": capi_host_time.TARGET_US, "batches": 2,
              "apis": {"bf16": {"spec": "x", "choice": choice, "runs": [run]}}}
    assert capi_host_time.check_result(result) == []
    assert run["encodes_per_launch"] == {"repeat": 0.0, "alternate": 3.0}
    assert run["lookups_per_launch"]["repeat"] == 0.0
    assert all(t["best_us"] > 0 for t in run["us"].values())
    assert "target <= 3 us on repeats" in capi_host_time.summary(result)
