"""NVRTC: compiling generated device code at run time, without nvcc, for the Python path.

The compiler is ``cuda.bindings.nvrtc``, bound to the ``libnvrtc`` of the CUDA major version the
installed driver runs: a cubin from a newer major release does not load on an older driver, so a
CUDA 12 driver gets NVRTC 12 (``pip install nvidia-cuda-nvrtc-cu12``) and a CUDA 13 driver NVRTC 13
(the ``cuda-toolkit[nvrtc]`` dependency). ``TMAGEN_NVRTC`` names a library to use instead. One
process binds one library, the first time it compiles.

Products are cached under ``tmagen.toolchain.cache_root()/nvrtc`` by the hash of the sources, the
options, the target and the compiler's version, so a second process compiles nothing.
"""

from __future__ import annotations

import ctypes
import hashlib
import json
import os
import re
import sys
import tempfile
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from tmagen.errors import NvrtcError
from tmagen.plan import Plan
from tmagen.render import render

OPTIONS = ("-std=c++17",)  # nvcc's -O3 is NVRTC's default optimization
# NVRTC optimises and generates code on as many threads as the machine has CPUs, so a family's
# kernels compile side by side. The code is the same (SASS and resource usage of the bf16 and fp8
# matmul families compared with and without, NVRTC 13.0, 2026-11-27: 15.8 -> 9.8 s and 7.2 -> 4.9 s
# on 2 cores), so it is not part of the cache key; an NVRTC that does not know it compiles without.
PARALLEL_OPTIONS = ("--split-compile=0",)


@dataclass(frozen=True)
class Nvrtc:
    """The NVRTC this process compiles with."""

    version: tuple[int, int]
    library: str  # the libnvrtc preloaded for it, or "found by cuda-bindings"

    @property
    def name(self) -> str:
        return f"NVRTC {self.version[0]}.{self.version[1]}"


@dataclass(frozen=True)
class Compiled:
    """One compile's product: a cubin or PTX, and where it came from."""

    data: bytes
    kind: Literal["cubin", "ptx"]
    arch: str
    compiler: str
    cache_file: Path
    cached: bool


_LOCK = threading.Lock()
_BOUND: Nvrtc | None = None
_SONAME = re.compile(r"libnvrtc\.so\.(\d+)$")


def driver_major() -> int | None:
    """The CUDA major version the installed driver runs, or None where there is no driver."""
    try:
        from cuda.bindings import driver

        err, version = driver.cuDriverGetVersion()
    except Exception:  # noqa: BLE001 - no libcuda surfaces as various errors
        return None
    return int(version) // 1000 if err == driver.CUresult.CUDA_SUCCESS and version else None


def library_candidates() -> list[tuple[int, Path]]:
    """Every libnvrtc.so.N found in the NVIDIA wheels on sys.path and in CUDA_HOME, CUDA_PATH and
    /usr/local/cuda: (major, path), newest first."""
    folders: list[Path] = []
    for entry in sys.path:
        base = Path(entry or ".") / "nvidia"
        folders += [base / "cu13" / "lib", base / "cuda_nvrtc" / "lib"]
    for var in ("CUDA_HOME", "CUDA_PATH"):
        if os.environ.get(var):
            folders += [Path(os.environ[var]) / "lib64", Path(os.environ[var]) / "lib"]
    folders.append(Path("/usr/local/cuda/lib64"))
    found: dict[int, Path] = {}
    for folder in folders:
        if not folder.is_dir():
            continue
        for lib in folder.glob("libnvrtc.so.*"):
            m = _SONAME.search(lib.name)
            if m and int(m.group(1)) not in found:
                found[int(m.group(1))] = lib
    return sorted(found.items(), reverse=True)


def choose_library(wanted_major: int | None, candidates: Sequence[tuple[int, Path]]) -> tuple[int, Path] | None:
    """The library for a driver of ``wanted_major``: that major, else the newest older one (an older
    compiler's cubin runs on a newer driver). Without a driver, the newest."""
    if wanted_major is None:
        return candidates[0] if candidates else None
    fitting = [c for c in candidates if c[0] <= wanted_major]
    return max(fitting) if fitting else None


def bind(library: str | os.PathLike[str] | None = None) -> Nvrtc:
    """Binds ``cuda.bindings.nvrtc`` to ``library`` (default: TMAGEN_NVRTC, else the one
    `choose_library` picks for this driver) the first time; later calls return that binding."""
    global _BOUND
    with _LOCK:
        if _BOUND is not None:
            return _BOUND
        wanted = driver_major()
        chosen = library or os.environ.get("TMAGEN_NVRTC")
        if chosen is None:
            pick = choose_library(wanted, library_candidates())
            chosen = str(pick[1]) if pick else None
        if chosen is not None:
            _preload(Path(chosen))
        try:
            from cuda.bindings import nvrtc

            version = tuple(int(v) for v in _check(nvrtc.nvrtcVersion(), "nvrtcVersion"))
        except NvrtcError:
            raise
        except Exception as exc:  # noqa: BLE001 - a missing library surfaces as various errors
            raise NvrtcError(f"no NVRTC: {exc}. Install it: pip install 'cuda-toolkit[nvrtc]==13.0.2' for a CUDA 13 "
                             "driver, or pip install nvidia-cuda-nvrtc-cu12 for a CUDA 12 driver") from None
        if wanted is not None and version[0] > wanted:
            raise NvrtcError(f"NVRTC {version[0]}.{version[1]} makes code that a CUDA {wanted} driver cannot load: "
                             f"install the NVRTC of CUDA {wanted} (pip install nvidia-cuda-nvrtc-cu{wanted}), or set "
                             "TMAGEN_NVRTC to its libnvrtc")
        _BOUND = Nvrtc((version[0], version[1]), os.fspath(chosen) if chosen else "found by cuda-bindings")
        return _BOUND


def _preload(library: Path) -> None:
    """Loads ``library`` and the builtins library beside it, which NVRTC opens by name at its first
    compile (the wheels' folders are on no search path). cuda-bindings then takes the NVRTC that the
    process has already loaded."""
    try:
        for builtins in sorted(library.parent.glob("libnvrtc-builtins.so.*")):
            if ".alt." not in builtins.name:
                ctypes.CDLL(str(builtins), mode=ctypes.RTLD_GLOBAL)
        ctypes.CDLL(str(library), mode=ctypes.RTLD_GLOBAL)
    except OSError as exc:
        raise NvrtcError(f"cannot load NVRTC from {library}: {exc}") from None


def _check(result: Any, what: str) -> Any:
    from cuda.bindings import nvrtc

    err, *values = result if isinstance(result, tuple) else (result,)
    if err != nvrtc.nvrtcResult.NVRTC_SUCCESS:
        _, text = nvrtc.nvrtcGetErrorString(err)
        raise NvrtcError(f"{what} failed: {text.decode() if isinstance(text, bytes) else err}")
    if not values:
        return None
    return values[0] if len(values) == 1 else tuple(values)


def include_dirs(major: int) -> list[Path]:
    """Folders holding the CUDA headers of release ``major`` that generated code may include
    (cuda_fp16.h, cuda_bf16.h, cuda_fp8.h: NVRTC has them under no builtin name): the
    nvidia-cuda-runtime wheel of that release, else CUDA_HOME, CUDA_PATH or /usr/local/cuda."""
    wheel = "cu13" if major >= 13 else "cuda_runtime"
    candidates = [Path(entry or ".") / "nvidia" / wheel / "include" for entry in sys.path]
    candidates += [Path(os.environ[v]) / "include" for v in ("CUDA_HOME", "CUDA_PATH") if os.environ.get(v)]
    candidates.append(Path("/usr/local/cuda/include"))
    return [c for c in candidates if (c / "cuda_fp16.h").is_file()][:1]


def compile_source(source: str, headers: dict[str, str], arch: str, kind: Literal["cubin", "ptx"] = "cubin",
                   name: str = "tmagen.cu") -> bytes:
    """``source`` (with ``headers``, by include name) compiled for ``arch`` (e.g. sm_90a) to a cubin, or
    to PTX for the matching virtual architecture."""
    compiler = bind()
    from cuda.bindings import nvrtc

    gpu = arch if kind == "cubin" else arch.replace("sm_", "compute_")
    options = [f"--gpu-architecture={gpu}".encode(), *(o.encode() for o in OPTIONS),
               *(f"-I{d}".encode() for d in include_dirs(compiler.version[0]))]
    for parallel in ([o.encode() for o in PARALLEL_OPTIONS], []):
        prog = _check(nvrtc.nvrtcCreateProgram(source.encode(), name.encode(), len(headers),
                                               [h.encode() for h in headers.values()],
                                               [n.encode() for n in headers]), "nvrtcCreateProgram")
        err, = nvrtc.nvrtcCompileProgram(prog, len(options) + len(parallel), options + parallel)
        if err == nvrtc.nvrtcResult.NVRTC_ERROR_INVALID_OPTION and parallel:
            nvrtc.nvrtcDestroyProgram(prog)  # an NVRTC without the parallel options: again without them
            continue
        break
    try:
        if err != nvrtc.nvrtcResult.NVRTC_SUCCESS:
            raise NvrtcError(f"NVRTC failed compiling {name} for {arch}:\n{_log(prog)}")
        size_fn, get_fn = ((nvrtc.nvrtcGetCUBINSize, nvrtc.nvrtcGetCUBIN) if kind == "cubin"
                           else (nvrtc.nvrtcGetPTXSize, nvrtc.nvrtcGetPTX))
        size = _check(size_fn(prog), size_fn.__name__)
        out = b" " * size
        _check(get_fn(prog, out), get_fn.__name__)
        return out.rstrip(b"\0") if kind == "ptx" else out
    finally:
        nvrtc.nvrtcDestroyProgram(prog)


def _log(prog: Any) -> str:
    from cuda.bindings import nvrtc

    size = _check(nvrtc.nvrtcGetProgramLogSize(prog), "nvrtcGetProgramLogSize")
    log = b" " * size
    _check(nvrtc.nvrtcGetProgramLog(prog, log), "nvrtcGetProgramLog")
    return log.rstrip(b"\0").decode(errors="replace").strip()


def kernel_program(plan: Plan) -> tuple[str, dict[str, str]]:
    """The translation unit NVRTC compiles for ``plan``: its kernels header, with the device header
    it includes, as `tmagen build` renders them."""
    files = render(plan, f"{plan.name}.json")
    headers = {n: files[n] for n in (f"{plan.name}.cuh", f"{plan.name}_kernels.cuh") if n in files}
    main = f"{plan.name}_kernels.cuh" if plan.has_kernel else f"{plan.name}.cuh"  # maps only: the header
    return f'#include "{main}"\n', headers


def cache_key(source: str, headers: dict[str, str], arch: str, kind: str, compiler: str) -> str:
    """The hash that names a product: every input of the compile, and the compiler's version."""
    text = json.dumps({"source": source, "headers": headers, "arch": arch, "kind": kind, "compiler": compiler,
                       "options": OPTIONS}, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:24]


def compile_plan(plan: Plan, kind: Literal["cubin", "ptx"] = "cubin") -> Compiled:
    """The plan's kernels compiled by NVRTC for its target, from the disk cache when there."""
    source, headers = kernel_program(plan)
    return compile_cached(plan.spec.name, source, headers, plan.target.name, kind)


def compile_cached(name: str, source: str, headers: dict[str, str], arch: str,
                   kind: Literal["cubin", "ptx"] = "cubin") -> Compiled:
    """``source`` (with ``headers``) compiled by NVRTC for ``arch``, from the disk cache when there
    (``name`` names the cached file)."""
    from tmagen.toolchain import cache_root

    compiler = bind().name
    key = cache_key(source, headers, arch, kind, compiler)
    folder = cache_root() / "nvrtc"
    path = folder / f"{name}-{key}.{kind}"
    if path.is_file():
        return Compiled(path.read_bytes(), kind, arch, compiler, path, cached=True)
    data = compile_source(source, headers, arch, kind, name=f"{name}.cu")
    folder.mkdir(parents=True, exist_ok=True)
    fd, staging = tempfile.mkstemp(prefix=f".{name}-", dir=folder)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(staging, path)  # whole or absent, even with several processes compiling at once
    finally:
        if os.path.exists(staging):
            os.unlink(staging)
    return Compiled(data, kind, arch, compiler, path, cached=False)
