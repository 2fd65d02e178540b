"""NVRTC, the Python path's compiler: the generated device code compiles under NVRTC 13 (to a cubin,
as tmagen.load does) and under NVRTC 12.9 to PTX that the ptxas of CUDA 12.9 assembles (what a
CUDA 12 user builds), the choice of library follows the driver, and products are cached by what
went into them. None of it needs a GPU."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tmagen import nvrtc
from tmagen.plan import load as load_plan
from tmagen.plan import resolve

from conftest import REPO, pythonpath_with_repo

IN_CI = os.environ.get("CI") == "true"
HOPPER_SPECS = [p for p in sorted((REPO / "specs").glob("*.json"))
                if json.loads(p.read_text()).get("target", "sm_90a") == "sm_90a"]


def _nvrtc_or_skip() -> nvrtc.Nvrtc:
    try:
        return nvrtc.bind()
    except nvrtc.NvrtcError as exc:
        if IN_CI:
            raise  # CI installs the NVRTC wheels: a missing one there is a failure
        pytest.skip(f"no NVRTC: {exc}")


def _cu12_tools() -> tuple[Path, Path] | None:
    """libnvrtc.so.12 and the ptxas of nvidia-cuda-nvcc-cu12, from the cuda12 extra."""
    lib = dict(nvrtc.library_candidates()).get(12)
    ptxas = next((Path(p) / "nvidia" / "cuda_nvcc" / "bin" / "ptxas" for p in sys.path
                  if (Path(p or ".") / "nvidia" / "cuda_nvcc" / "bin" / "ptxas").is_file()), None)
    return (lib, ptxas) if lib and ptxas else None


def test_the_library_follows_the_driver() -> None:
    both = [(13, Path("/a/libnvrtc.so.13")), (12, Path("/b/libnvrtc.so.12"))]
    assert nvrtc.choose_library(13, both) == both[0]
    assert nvrtc.choose_library(12, both) == both[1], "a CUDA 12 driver cannot load a CUDA 13 cubin"
    assert nvrtc.choose_library(14, both) == both[0], "an older compiler's cubin runs on a newer driver"
    assert nvrtc.choose_library(12, both[:1]) is None
    assert nvrtc.choose_library(None, both) == both[0], "no driver: compile with the newest"
    assert nvrtc.choose_library(None, []) is None


def test_cache_keys_change_with_every_input() -> None:
    base = dict(source='#include "k.cuh"\n', headers={"k.cuh": "int x;"}, arch="sm_90a", kind="cubin",
                compiler="NVRTC 13.0")
    key = nvrtc.cache_key(**base)
    assert key == nvrtc.cache_key(**dict(base))
    for field, other in (("source", "//\n"), ("headers", {"k.cuh": "int y;"}), ("arch", "sm_100a"),
                         ("kind", "ptx"), ("compiler", "NVRTC 12.9")):
        assert nvrtc.cache_key(**{**base, field: other}) != key, field


@pytest.mark.parametrize("spec_path", sorted((REPO / "specs").glob("*.json")), ids=lambda p: p.stem)
def test_every_example_compiles_with_nvrtc_to_a_cubin_with_its_kernels(
        spec_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    compiler = _nvrtc_or_skip()
    monkeypatch.setenv("TMAGEN_CACHE", str(tmp_path))
    spec = load_plan(spec_path).spec
    result = nvrtc.compile_plan(resolve(spec))
    assert not result.cached and result.data[:4] == b"\x7fELF" and result.compiler == compiler.name
    for view in resolve(spec).kernels:  # a code section per kernel, under its extern "C" name
        assert f".text.{view.symbol}\0".encode() in result.data, view.symbol
    again = nvrtc.compile_plan(resolve(spec))
    assert again.cached and again.data == result.data and again.cache_file == result.cache_file
    if spec.kernel is None:
        return  # a header of maps only: it compiled, and has no kernel to look into
    # the tensor-map parameter as cuda.h of the compiling release declares CUtensorMap
    ptx = nvrtc.compile_plan(resolve(spec), kind="ptx").data.decode()
    align = 128 if compiler.version[0] >= 13 else 64
    assert re.search(rf"\.param \.align {align} \.b8 {spec.name}_\w+_param_0\[128\]", ptx)


def test_a_family_compiled_on_several_threads_is_the_same_code(tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """NVRTC compiles with PARALLEL_OPTIONS (a family's kernels side by side), which stay out of the
    cache key: the cubin of the fp8 matmul family holds the same SASS and resource usage without them."""
    _nvrtc_or_skip()
    from tmagen import toolchain

    cuobjdump = toolchain.binary_tool("cuobjdump", None)
    if cuobjdump is None:
        assert not IN_CI, "CI installs cuobjdump with the toolchain extra"
        pytest.skip("no cuobjdump")
    assert nvrtc.PARALLEL_OPTIONS and not set(nvrtc.PARALLEL_OPTIONS) & set(nvrtc.OPTIONS)
    source, headers = nvrtc.kernel_program(load_plan(REPO / "specs" / "matmul_fp8_e4m3.json"))

    def code(cubin: bytes, tmp: Path) -> tuple[str, str]:
        tmp.write_bytes(cubin)
        sass = subprocess.run([str(cuobjdump), "-sass", str(tmp)], capture_output=True, text=True, check=True).stdout
        usage = subprocess.run([str(cuobjdump), "-res-usage", str(tmp)], capture_output=True, text=True,
                               check=True).stdout
        return re.sub(r"/\*[0-9a-f]{4,}\*/", "", sass), "\n".join(sorted(usage.splitlines()))

    parallel = code(nvrtc.compile_source(source, headers, "sm_90a"), tmp_path / "parallel.cubin")
    monkeypatch.setattr(nvrtc, "PARALLEL_OPTIONS", ())
    serial = code(nvrtc.compile_source(source, headers, "sm_90a"), tmp_path / "serial.cubin")
    assert "QGMMA" in parallel[0] and parallel[0].count("Function :") >= 4
    assert parallel == serial


def test_an_nvrtc_without_the_parallel_options_compiles_without_them(monkeypatch: pytest.MonkeyPatch) -> None:
    _nvrtc_or_skip()
    monkeypatch.setattr(nvrtc, "PARALLEL_OPTIONS", ("--no-such-option-in-any-nvrtc",))
    ptx = nvrtc.compile_source("extern \"C\" __global__ void k(int* p) { *p = 1; }\n", {}, "sm_90a", kind="ptx")
    assert b".entry k" in ptx


def test_a_compile_error_names_the_file_and_the_line() -> None:
    _nvrtc_or_skip()
    with pytest.raises(nvrtc.NvrtcError, match=r"broken\.cu.*\n.*broken\.cu\(2\).*undefined"):
        nvrtc.compile_source("// line 1\n__global__ void k() { not_declared = 1; }\n", {}, "sm_90a",
                             name="broken.cu")


def test_hopper_examples_compile_with_nvrtc_12_9_and_ptxas_12_9(tmp_path: Path) -> None:
    """What a CUDA 12 user's build does: NVRTC 12.9 to PTX (in a process of its own, bound to
    libnvrtc.so.12), ptxas 12.9 to a cubin that holds every kernel."""
    tools = _cu12_tools()
    if tools is None:
        if IN_CI:
            pytest.fail("CI installs the cuda12 extra (nvidia-cuda-nvrtc-cu12, nvidia-cuda-nvcc-cu12): not found")
        pytest.skip("no NVRTC 12 and ptxas 12 wheels (pip install -e '.[cuda12]')")
    lib, ptxas = tools
    code = ("import sys; from tmagen import nvrtc; from tmagen.plan import load as load_plan\n"
            "print(nvrtc.bind().name)\n"
            "for p in sys.argv[1:]:\n"
            "    print(nvrtc.compile_plan(load_plan(p), kind='ptx').cache_file)\n")
    env = {**os.environ, "TMAGEN_NVRTC": str(lib), "TMAGEN_CACHE": str(tmp_path / "cache"),
           "PYTHONPATH": pythonpath_with_repo()}
    run = subprocess.run([sys.executable, "-c", code, *map(str, HOPPER_SPECS)], capture_output=True, text=True,
                         env=env, cwd=REPO)
    assert run.returncode == 0, run.stderr
    compiler, *ptx_files = run.stdout.splitlines()
    assert compiler == "NVRTC 12.9", run.stdout
    assert len(ptx_files) == len(HOPPER_SPECS) >= 6
    for spec_path, ptx in zip(HOPPER_SPECS, ptx_files):
        spec = load_plan(spec_path).spec
        assert ".version 8.8" in Path(ptx).read_text()  # PTX ISA 8.8: CUDA 12.9
        cubin = tmp_path / f"{spec.name}.cubin"
        assembled = subprocess.run([str(ptxas), "-arch=sm_90a", ptx, "-o", str(cubin)], capture_output=True, text=True)
        assert assembled.returncode == 0, assembled.stderr
        data = cubin.read_bytes()
        for view in resolve(spec).kernels:
            assert f".text.{view.symbol}\0".encode() in data, view.symbol
