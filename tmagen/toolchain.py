"""nvcc: finding it, compiling generated folders to a cubin, PTX and a shared library, reading
ptxas's resource report, checking each kernel's SASS for the instructions its kind must use, and
caching products by the hash of sources, flags and compiler."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from tmagen.errors import ToolchainError
from tmagen.limits import TARGETS
from tmagen.plan import Plan


@dataclass(frozen=True)
class Toolchain:
    nvcc: Path
    version: str  # the last line of nvcc --version
    found_by: str  # TMAGEN_NVCC, pip, CUDA_HOME, CUDA_PATH or PATH

    @property
    def root(self) -> Path:
        return self.nvcc.parent.parent

    @property
    def cuobjdump(self) -> Path | None:
        """cuobjdump, which disassembles cubins (through nvdisasm): see `binary_tool`."""
        return binary_tool("cuobjdump", self.nvcc)

    @property
    def nvdisasm(self) -> Path | None:
        return binary_tool("nvdisasm", self.nvcc)


def _pip_bin(tool: str) -> Path | None:
    """``tool`` from the pip wheels of CUDA 13 (nvidia-cuda-nvcc, -cuobjdump, -nvdisasm: nvidia/cu13/bin)."""
    spec = importlib.util.find_spec("nvidia")
    for location in (spec.submodule_search_locations or []) if spec else []:
        candidate = Path(location) / "cu13" / "bin" / tool
        if candidate.is_file():
            return candidate
    return None


def _pip_nvcc() -> Path | None:
    return _pip_bin("nvcc")


def binary_tool(tool: str, nvcc: Path | None = None) -> Path | None:
    """A CUDA binary utility (cuobjdump, nvdisasm): beside ``nvcc`` first (the same release as the
    compiler), else from the pip wheels (tmagen[toolchain] brings them: 13.2, which read the cubins
    of older releases too), else CUDA_HOME or CUDA_PATH, else PATH."""
    on_path = shutil.which(tool)
    candidates = [nvcc.parent / tool if nvcc is not None else None, _pip_bin(tool),
                  *(Path(os.environ[v]) / "bin" / tool for v in ("CUDA_HOME", "CUDA_PATH") if os.environ.get(v)),
                  Path(on_path) if on_path else None]
    return next((c for c in candidates if c is not None and c.is_file()), None)


def find_toolchain() -> Toolchain:
    """nvcc from TMAGEN_NVCC, else the pip toolchain (tmagen[toolchain]), else CUDA_HOME or
    CUDA_PATH, else PATH; and a host C++ compiler, which nvcc needs."""
    candidates: list[tuple[str, Path | None]] = [
        ("TMAGEN_NVCC", Path(os.environ["TMAGEN_NVCC"]) if os.environ.get("TMAGEN_NVCC") else None),
        ("pip", _pip_nvcc()),
        ("CUDA_HOME", Path(os.environ["CUDA_HOME"]) / "bin" / "nvcc" if os.environ.get("CUDA_HOME") else None),
        ("CUDA_PATH", Path(os.environ["CUDA_PATH"]) / "bin" / "nvcc" if os.environ.get("CUDA_PATH") else None),
        ("PATH", Path(found) if (found := shutil.which("nvcc")) else None),
    ]
    for found_by, path in candidates:
        if path is None:
            continue
        if not path.is_file():
            if found_by == "TMAGEN_NVCC":
                raise ToolchainError(f"TMAGEN_NVCC = {path}, but there is no such file: point it at an nvcc")
            continue
        if not (shutil.which("g++") or shutil.which("c++")):
            raise ToolchainError("nvcc needs a host C++ compiler and there is no g++ or c++ on PATH: "
                                 "install g++ (Debian/Ubuntu: apt-get install g++)")
        try:
            out = subprocess.run([str(path), "--version"], capture_output=True, text=True, check=True).stdout
        except (OSError, subprocess.CalledProcessError) as exc:
            raise ToolchainError(f"{path} (found by {found_by}) does not run: {exc}") from None
        return Toolchain(path, out.strip().splitlines()[-1], found_by)
    raise ToolchainError("no nvcc: install tmagen's toolchain (pip install 'tmagen[toolchain]'), or set "
                         "TMAGEN_NVCC, CUDA_HOME or CUDA_PATH, or put nvcc on PATH")


@dataclass(frozen=True)
class KernelResources:
    """What ptxas reports of one kernel."""

    name: str
    registers: int
    shared_bytes: int
    stack_frame_bytes: int
    spill_store_bytes: int
    spill_load_bytes: int
    serialized_wgmma: str = ""  # ptxas's reason where it made every wgmma wait for the one before (C7514 to C7520)

    @property
    def spills(self) -> bool:
        return self.spill_store_bytes > 0 or self.spill_load_bytes > 0


_ENTRY = re.compile(r"Compiling entry function '([^']+)'")
_FRAME = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
_USED = re.compile(r"Used (\d+) registers(?:.*?, (\d+) bytes smem)?")


_SERIALIZED = re.compile(r"\((C75\d\d)\) Potential Performance Loss: wgmma\.mma_async instructions are serialized "
                         r"due to (.*?) in the function '([^']+)'")


def parse_ptxas_report(text: str) -> list[KernelResources]:
    serialized = {m.group(3): f"{m.group(1)}: {' '.join(m.group(2).split())}" for m in _SERIALIZED.finditer(text)}
    return [replace(k, serialized_wgmma=serialized.get(k.name, "")) for k in _parse_resources(text)]


def _parse_resources(text: str) -> list[KernelResources]:
    kernels: list[KernelResources] = []
    current: dict[str, int | str] | None = None
    for line in text.splitlines():
        if m := _ENTRY.search(line):
            current = {"name": m.group(1), "frame": 0, "stores": 0, "loads": 0}
        elif current is not None and (m := _FRAME.search(line)):
            current.update(frame=int(m.group(1)), stores=int(m.group(2)), loads=int(m.group(3)))
        elif current is not None and (m := _USED.search(line)):
            kernels.append(KernelResources(str(current["name"]), int(m.group(1)), int(m.group(2) or 0),
                                           int(current["frame"]), int(current["stores"]), int(current["loads"])))
            current = None
    return kernels


@dataclass
class CompileResult:
    folder: Path  # where the products are (inside the cache)
    cubin: Path
    ptx: Path
    shared_library: Path
    kernels: list[KernelResources]
    sass: dict[str, list[str]] | None = None  # kernel -> the opcodes of its SASS; None: no cuobjdump found
    cached: bool = False
    commands: list[list[str]] = field(default_factory=list)


REPORT_FORMAT = 3  # of report.json in the cache: a new format misses the old entries


def cache_root() -> Path:
    return Path(os.environ.get("TMAGEN_CACHE") or Path.home() / ".cache" / "tmagen")


def compile_folder(plan: Plan, files: dict[str, str], toolchain: Toolchain | None = None,
                   cubin_only: bool = False) -> CompileResult:
    """Compiles rendered ``files`` of ``plan`` for its target, or returns the cached products.
    ``cubin_only`` skips the PTX and the shared library (their paths then do not exist)."""
    tc = toolchain or find_toolchain()
    target = plan.target
    spec = plan.spec
    gencode = f"-gencode={target.gencode}"
    common = ["-std=c++17", "-O3", gencode]
    key = hashlib.sha256(json.dumps({"files": files, "flags": common, "nvcc": tc.version, "cubin_only": cubin_only,
                                     "report": REPORT_FORMAT}, sort_keys=True).encode()).hexdigest()[:24]
    folder = cache_root() / f"{spec.name}-{key}"
    report = folder / "report.json"
    products = (folder / f"{spec.name}.cubin", folder / f"{spec.name}.ptx", folder / f"lib{spec.name}.so")
    wanted = products[:1] if cubin_only else products
    if report.is_file() and all(p.is_file() for p in wanted):
        data = json.loads(report.read_text())
        return CompileResult(folder, *products, [KernelResources(**k) for k in data["kernels"]],
                             data["sass"], cached=True)

    with _staged_build(folder, spec.name, files) as staging:
        src = str(staging / f"{spec.name}.cu")
        lib_dir = tc.root / "lib"
        commands = [
            [str(tc.nvcc), *common, "-Xptxas", "-v", "-cubin", "-o", str(staging / products[0].name), src],
            [str(tc.nvcc), "-std=c++17", "-O3", f"--gpu-architecture={target.gencode.split(',')[0].split('=')[1]}",
             "-ptx", "-o", str(staging / products[1].name), src],
            [str(tc.nvcc), *common, "-shared", "-Xcompiler", "-fPIC", f"-L{lib_dir}", "-o",
             str(staging / products[2].name), src],
        ]
        runs = commands[:1] if cubin_only else commands
        # three compiles of the same source, each of the whole family: side by side (a matmul's took
        # 40 s one after another on 2 cores); the first failure in this order is the one raised
        with ThreadPoolExecutor(len(runs)) as pool:
            outputs = list(pool.map(lambda cmd: _run_nvcc(cmd, f"{spec.name} ({' '.join(cmd[1:])})"), runs))
        ptxas = outputs[0]  # the cubin's, with -Xptxas -v
        for product in wanted:
            _check_product(tc, staging / product.name)
        kernels = parse_ptxas_report(ptxas)
        sass = sass_opcodes(tc, staging / products[0].name)
        (staging / "report.json").write_text(json.dumps(
            {"kernels": [asdict(k) for k in kernels], "sass": sass, "nvcc": tc.version}, indent=2))
    return CompileResult(folder, *products, kernels, sass, cached=False, commands=commands)


def compile_cubin(name: str, files: dict[str, str], source: str, target: str,
                  toolchain: Toolchain | None = None) -> tuple[Path, list[KernelResources]]:
    """Compiles ``files[source]`` (which may include the other ``files``) to a cubin for ``target``
    ("sm_90a", "sm_100a"), or returns the cached one: for test and probe kernels of one's own around
    generated headers. Returns the cubin and ptxas's report of its kernels."""
    tc = toolchain or find_toolchain()
    flags = ["-std=c++17", "-O3", f"-gencode={TARGETS[target].gencode}", "-Xptxas", "-v", "-cubin"]
    key = hashlib.sha256(json.dumps({"files": files, "source": source, "flags": flags, "nvcc": tc.version},
                                    sort_keys=True).encode()).hexdigest()[:24]
    folder = cache_root() / f"{name}-{key}"
    cubin, report = folder / f"{name}.cubin", folder / "report.json"
    if cubin.is_file() and report.is_file():
        return cubin, [KernelResources(**k) for k in json.loads(report.read_text())["kernels"]]
    with _staged_build(folder, name, files) as staging:
        output = _run_nvcc([str(tc.nvcc), *flags, "-o", str(staging / cubin.name), str(staging / source)], source)
        _check_product(tc, staging / cubin.name)
        kernels = parse_ptxas_report(output)
        (staging / "report.json").write_text(json.dumps({"kernels": [asdict(k) for k in kernels]}, indent=2))
    return cubin, kernels


def _ensure(p: Path) -> Path:
    p.mkdir(parents=True, exist_ok=True)
    return p


@contextmanager
def _staged_build(folder: Path, name: str, files: dict[str, str]) -> Iterator[Path]:
    """A fresh folder holding ``files`` to build in, which becomes the cache entry ``folder`` when
    the block succeeds and is removed when it fails: no half-built entry is ever found."""
    staging = Path(tempfile.mkdtemp(prefix=f"{name}-", dir=_ensure(cache_root())))
    try:
        for rel, text in files.items():
            (staging / rel).write_text(text, encoding="utf-8")
        yield staging
        if folder.exists():
            shutil.rmtree(folder)
        os.replace(staging, folder)
    finally:
        if staging.exists():
            shutil.rmtree(staging, ignore_errors=True)


def _check_product(tc: Toolchain, path: Path) -> None:
    """A compile that nvcc said succeeded wrote its product: an nvcc that exits 0 and writes nothing
    (or garbage) is broken, and the SASS check must not be blamed for it."""
    try:
        head = path.read_bytes()[:4]
    except OSError:
        head = b""
    elf = path.suffix in (".cubin", ".so")
    if not head or (elf and head != b"\x7fELF"):
        raise ToolchainError(f"{tc.nvcc} (found by {tc.found_by}) exited 0 but wrote "
                             f"{'no' if not head else 'no valid'} {path.name}: this nvcc is broken; reinstall it "
                             "(pip install 'tmagen[toolchain]'), or point TMAGEN_NVCC at a working one")


def _run_nvcc(cmd: list[str], what: str) -> str:
    """Runs one nvcc command: its output (ptxas's report among it), or ToolchainError with nvcc's words."""
    run = subprocess.run(cmd, capture_output=True, text=True)
    if run.returncode != 0:
        raise ToolchainError(f"nvcc failed compiling {what}:\n" + (run.stderr or run.stdout).strip())
    return run.stderr + run.stdout


# The instructions the SASS of each kernel kind must hold, or the kernel does not do what it is for
# (its TMA copies lowered to something else, or none left). A new kind adds its row: a kernel that
# uses wgmma expects HGMMA.

_SASS_FUNCTION = re.compile(r"^\s*Function\s*:\s*(\S+)")
# "/*06a0*/  @!P0 UTMALDG.3D [UR16], [UR24] ;": the opcode, without its guard predicate and modifiers
_SASS_INSTRUCTION = re.compile(r"^\s*/\*[0-9a-f]+\*/\s+(?:@!?U?P[T0-9]+\s+)?([A-Z][A-Z0-9_]*)")


def parse_sass(text: str) -> dict[str, list[str]]:
    """The opcodes of each function in ``cuobjdump -sass`` output, sorted, without modifiers
    (UTMALDG.3D is UTMALDG)."""
    out: dict[str, set[str]] = {}
    current: set[str] | None = None
    for line in text.splitlines():
        if m := _SASS_FUNCTION.match(line):
            current = out.setdefault(m.group(1), set())
        elif current is not None and (m := _SASS_INSTRUCTION.match(line)):
            current.add(m.group(1))
    return {name: sorted(ops) for name, ops in out.items()}


def sass_opcodes(tc: Toolchain, cubin: Path) -> dict[str, list[str]] | None:
    """The opcodes of each kernel of ``cubin``, through cuobjdump (and the nvdisasm it runs); None
    where there is no cuobjdump at all."""
    tool = tc.cuobjdump
    if tool is None:
        return None
    env = dict(os.environ)
    if tc.nvdisasm is not None:  # cuobjdump looks beside itself and on PATH, or where this says
        env["NVDISASM_PATH"] = str(tc.nvdisasm.parent)
    run = subprocess.run([str(tool), "-sass", str(cubin)], capture_output=True, text=True, env=env)
    if run.returncode != 0:
        raise ToolchainError(f"{tool} -sass {cubin.name} failed: {(run.stderr or run.stdout).strip()} (the SASS "
                             "check needs cuobjdump and nvdisasm: pip install 'tmagen[toolchain]')")
    return parse_sass(run.stdout)


def sass_check(plan: Plan, result: CompileResult) -> dict[str, dict[str, bool]] | None:
    """For each kernel of ``plan``, each instruction its kind expects (`Kind.sass`) -> whether its SASS
    in ``result`` has it; None where the SASS could not be read (no cuobjdump), {} without a kernel."""
    if result.sass is None:
        return None
    if plan.kind is None:
        return {}
    expected = plan.sass_expected
    return {k.symbol: {op: op in result.sass.get(k.symbol, ()) for op in expected} for k in plan.every_kernel}


def sass_violations(plan: Plan, result: CompileResult) -> list[str]:
    """One message per kernel of ``plan`` whose SASS lacks an instruction its kind expects."""
    out = []
    for symbol, seen in (sass_check(plan, result) or {}).items():
        missing = [op for op, present in seen.items() if not present]
        if symbol not in (result.sass or {}):
            out.append(f"{symbol}: not in the cubin's SASS")
        elif missing:
            out.append(f"{symbol}: its SASS has no {', '.join(missing)}, which a {plan.kind_name} kernel "
                       f"must use ({', '.join(seen)}): the compiler did not emit the instructions the kernel "
                       "is written for")
    return out


def register_violations(plan: Plan, result: CompileResult) -> list[str]:
    """One message per kernel of ``plan`` with a register budget (`KernelPlan.registers`: a
    setmaxnreg split) whose register count in ptxas's report breaks it: a launch with too few
    registers per thread hangs in setmaxnreg.inc, so the build fails instead."""
    reported = {k.name: k.registers for k in result.kernels}
    out = []
    for k in plan.every_kernel:
        if k.registers is None:
            continue
        if k.symbol not in reported:
            out.append(f"{k.symbol}: not in ptxas's report, so its registers cannot be checked against its "
                       f"setmaxnreg split ({k.registers.split})")
            continue
        problem = k.registers.problem(k.symbol, reported[k.symbol])
        if problem:
            out.append(problem)
    return out


def wgmma_violations(result: CompileResult) -> list[str]:
    """Kernels whose wgmmas ptxas serialized: each then waits for the one before it, and the tensor
    cores idle between them (a matmul at a fraction of its speed, correct all the same)."""
    return [f"{k.name}: ptxas serialized its wgmmas ({k.serialized_wgmma}), so none overlaps the next; the "
            "template must keep other instructions off the accumulators of groups in flight"
            for k in result.kernels if k.serialized_wgmma]


def spill_violations(plan: Plan, result: CompileResult) -> list[str]:
    if plan.spec.allow_spills:
        return []
    return [f"{k.name}: {k.spill_store_bytes} bytes spilled to local memory and {k.spill_load_bytes} read back, and "
            "the spec allows no spills (set allow_spills, or lower register pressure)"
            for k in result.kernels if k.spills]
