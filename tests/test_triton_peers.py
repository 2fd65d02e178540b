"""The Triton peers without a GPU: their outputs in Triton's interpreter, the configurations they
are autotuned over, and tmagen without Triton, PyTorch or CuPy installed.

The first two need PyTorch and Triton (not in the dev extra: the GPU machine has them); they skip
where those are missing.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from conftest import REPO, pythonpath_with_repo


def _need_triton() -> None:
    pytest.importorskip("torch", reason="the Triton peers need PyTorch")
    pytest.importorskip("triton", reason="the Triton peers need Triton")


def test_triton_peers_match_pytorch_in_the_interpreter() -> None:
    """Transposes (pointer tiles and TMA descriptors; 1, 2, 4, 8-byte elements; ragged, batched),
    copies and the persistent matmul, through the wrappers the benchmark calls."""
    _need_triton()
    env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": pythonpath_with_repo()}
    done = subprocess.run([sys.executable, str(REPO / "tests" / "triton_interpreted.py")], capture_output=True,
                          text=True, env=env, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert done.stdout.count("ok ") >= 29 and "WRONG" not in done.stdout


def test_autotuning_sets_are_what_the_budget_counts() -> None:
    """18 configurations for each copy and transpose kernel, the matmul's 16 (TMA; all of which a
    Hopper SM holds for bfloat16: accumulator registers, shared memory) and 10 (pointer tiles):
    benchmarks/run.py's estimate counts these."""
    _need_triton()
    import importlib.util
    import types

    from lab import triton_peers as tp

    spec = importlib.util.spec_from_file_location("bench_run_t", REPO / "benchmarks" / "run.py")
    run = importlib.util.module_from_spec(spec)
    sys.modules["bench_run_t"] = run
    spec.loader.exec_module(run)
    assert [n for n, _ in run.TRITON_KERNELS["copy"]] == [len(tp.copy_kernel.configs)] == [18]
    assert [n for n, _ in run.TRITON_KERNELS["transpose"]] == [len(tp.transpose_kernel.configs),
                                                               len(tp.transpose_tma_kernel.configs)] == [18, 18]
    from lab import matmul_bench

    bf16 = types.SimpleNamespace(base=types.SimpleNamespace(element_size=lambda: 2))
    kept = tp.fitting_matmul_configs(tp.matmul_configs(), {"a_desc": bf16})
    assert len(tp.matmul_configs()) == len(kept) == len(tp.matmul_kernel.configs) == matmul_bench.TRITON_TMA_CONFIGS
    assert len(tp.matmul_pointer_kernel.configs) == matmul_bench.TRITON_POINTER_CONFIGS
    for c in kept:
        bm, bn, bk = c.kwargs["BLOCK_M"], c.kwargs["BLOCK_N"], c.kwargs["BLOCK_K"]
        assert bm * bn // (32 * c.num_warps) <= 128
        assert (c.num_stages * (bm + bn) * bk + bm * bn) * 2 <= 227 * 1024
    # the tutorials' large tiles, and tiles of 64 rows for short M
    tiles = {(c.kwargs["BLOCK_M"], c.kwargs["BLOCK_N"], c.kwargs["BLOCK_K"]) for c in kept}
    assert {(128, 256, 64), (256, 128, 64), (128, 128, 64), (64, 128, 128)} <= tiles
    assert {c.kwargs["GROUP_M"] for c in kept} == {8, 16}
    # fp32 operands: the prune drops what a Hopper SM cannot hold
    fp32 = types.SimpleNamespace(base=types.SimpleNamespace(element_size=lambda: 4))
    assert 0 < len(tp.fitting_matmul_configs(tp.matmul_configs(), {"a_desc": fp32})) < len(kept)
    # the pointer kernel's row tiles start at 16 (M of 1 to 256)
    assert min(c.kwargs["BLOCK_M"] for c in tp.matmul_pointer_kernel.configs) == 16


def test_fp8_autotuning_set_is_what_the_budget_counts() -> None:
    """The fp8 matmul's 12 configurations, BLOCK_K 128 each, all of which a Hopper SM holds with a
    bfloat16 C (accumulator registers, shared memory); a float32 C drops the largest."""
    _need_triton()
    import types

    from lab import fp8_bench
    from lab import triton_peers as tp

    def desc(size: int) -> types.SimpleNamespace:
        return types.SimpleNamespace(base=types.SimpleNamespace(element_size=lambda: size))

    configs = tp.matmul_fp8_configs()
    kept = tp.fitting_fp8_configs(configs, {"c_desc": desc(2)})
    assert len(configs) == len(kept) == len(tp.matmul_fp8_kernel.configs) == fp8_bench.TRITON_FP8_CONFIGS
    assert {c.kwargs["BLOCK_K"] for c in kept} == {128}
    assert {(128, 256), (256, 128), (128, 128), (64, 128)} <= {(c.kwargs["BLOCK_M"], c.kwargs["BLOCK_N"]) for c in kept}
    for c in kept:
        bm, bn, bk = c.kwargs["BLOCK_M"], c.kwargs["BLOCK_N"], c.kwargs["BLOCK_K"]
        assert bm * bn // (32 * c.num_warps) <= 128 and c.num_stages * (bm + bn) * bk + 2 * bm * bn <= 227 * 1024
    assert 0 < len(tp.fitting_fp8_configs(configs, {"c_desc": desc(4)})) < len(kept)


def test_tmagen_imports_without_torch_triton_or_cupy() -> None:
    """The peers import PyTorch, Triton and CuPy only when a benchmark calls them."""
    code = ("import sys\n"
            "class Refuse:\n"
            "    def find_spec(self, name, path=None, target=None):\n"
            "        if name.split('.')[0] in ('torch', 'triton', 'cupy'):\n"
            "            raise ImportError('no ' + name)\n"
            "sys.meta_path.insert(0, Refuse())\n"
            "import tmagen.cli, tmagen.bench, lab.bench_report, lab.peers\n"
            "print(lab.peers.unavailable())\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": pythonpath_with_repo()}, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "'name': 'CuPy'" in done.stdout and "'name': 'Triton'" in done.stdout
