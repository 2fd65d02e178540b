"""What a kernel of the user's own gets: accessors that give each element as its CUDA type, specs
without a kernel (the device header, the encode API and CMake, nothing else), and generated code
without template leftovers."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest
from test_codegen import IN_CI, _sweep_specs, _toolchain_or_skip

from tmagen import toolchain, verify
from tmagen.cli import main
from tmagen.limits import TARGETS
from tmagen.plan import resolve
from tmagen.render import render
from tmagen.spec import parse_spec

from conftest import REPO

# Written out here, not read from tmagen.dtypes: what a CUDA programmer expects each type to read as.
CUDA_TYPES = {
    "uint8": ("uint8_t", "uint8_t"), "uint16": ("uint16_t", "uint16_t"), "uint32": ("uint32_t", "uint32_t"),
    "int32": ("int32_t", "uint32_t"), "uint64": ("uint64_t", "uint64_t"), "int64": ("int64_t", "uint64_t"),
    "float16": ("__half", "uint16_t"), "float32": ("float", "uint32_t"), "float64": ("double", "uint64_t"),
    "bfloat16": ("__nv_bfloat16", "uint16_t"), "float32_ftz": ("float", "uint32_t"),
    "tfloat32": ("float", "uint32_t"), "tfloat32_ftz": ("float", "uint32_t"),
}
UINT8_AS = {"int8": "int8_t", "fp8_e4m3": "__nv_fp8_e4m3", "fp8_e5m2": "__nv_fp8_e5m2"}


def _every_type_spec() -> dict:
    tensors = [{"name": f"t_{d}", "dtype": d, "shape": [64, 64], "box": [4, 16 // min(8, _size(d)) * 2]}
               for d in CUDA_TYPES]
    tensors += [{"name": f"u_{a}", "dtype": "uint8", "element_type": a, "shape": [64, 64], "box": [4, 32]}
                for a in UINT8_AS]
    return {"name": "every_type", "tensors": tensors}


def _size(dtype: str) -> int:
    return {"uint8": 1, "uint16": 2, "float16": 2, "bfloat16": 2, "uint64": 8, "int64": 8, "float64": 8}.get(dtype, 4)


def test_a_spec_without_a_kernel_renders_the_header_the_encode_api_and_cmake_only() -> None:
    spec = parse_spec(json.loads((REPO / "specs" / "maps_only_bf16_f32.json").read_text()))
    files = render(resolve(spec), "specs/maps_only_bf16_f32.json")
    name = spec.name
    assert set(files) == {f"{name}.cuh", f"{name}.h", f"{name}.cu", "CMakeLists.txt", "manifest.json"}
    assert "_launch(" not in files[f"{name}.h"] and "__global__" not in "".join(files.values())
    assert "<<<" not in files[f"{name}.cu"]
    assert f'#include "{name}.cuh"' in files[f"{name}.cu"]  # every build compiles the device header
    for m in ("x", "w"):
        assert f"{name}_status {name}_encode_{m}(" in files[f"{name}.h"]
        assert f"struct {m}_box {{" in files[f"{name}.cuh"]
    assert set(json.loads(files["manifest.json"])["files"]) == set(files) - {"manifest.json"}


def test_the_header_includes_the_cuda_type_headers_it_needs_and_no_others() -> None:
    def includes(data: dict) -> set[str]:
        header = render(resolve(parse_spec(data)), "specs/x.json")[f"{data['name']}.cuh"]
        return set(re.findall(r"#include <(cuda_\w+\.h)>", header))

    tensor = {"name": "t", "shape": [64, 64], "box": [8, 32]}
    assert includes({"name": "a", "tensors": [{**tensor, "dtype": "float32"}]}) == set()
    assert includes({"name": "a", "tensors": [{**tensor, "dtype": "bfloat16"}]}) == {"cuda_bf16.h"}
    assert includes({"name": "a", "tensors": [{**tensor, "dtype": "float16"}, {**tensor, "name": "u", "dtype": "uint8",
                                                                                "element_type": "fp8_e4m3"}]}) == \
        {"cuda_fp16.h", "cuda_fp8.h"}


def test_accessors_give_each_element_its_cuda_type(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """at() of every byte-sized dtype (and of uint8 holding int8 or fp8) returns a reference of the
    element's CUDA type, raw_at() its bits; nvcc checks it, and compiles a kernel that does arithmetic
    on what it reads."""
    tc = _toolchain_or_skip()
    data = _every_type_spec()
    spec = parse_spec(data)
    (tmp_path / "every_type.cuh").write_text(render(resolve(spec), "specs/every_type.json")["every_type.cuh"])
    checks = []
    for t in data["tensors"]:
        element, raw = (UINT8_AS[t["element_type"]], "uint8_t") if "element_type" in t else CUDA_TYPES[t["dtype"]]
        box = f"every_type::{t['name']}_box"
        checks += [f"static_assert(std::is_same<decltype({box}::at(p, 0, 0)), {element}&>::value, \"{t['name']}\");",
                   f"static_assert(std::is_same<decltype({box}::raw_at(p, 0, 0)), {raw}&>::value, \"{t['name']}\");"]
    source = "\n".join([
        "#include <type_traits>", '#include "every_type.cuh"',
        "__device__ void check_types(void* p) {", *checks, "}",
        "// Arithmetic on what the accessors read, as a user writes it: no casts of bit patterns.",
        "__global__ void use(float* out, double* out64) {",
        "  extern __shared__ uint8_t box[];",
        "  const float a = every_type::t_float32_box::at(box, 1, 2);",
        "  const float b = every_type::t_bfloat16_box::at(box, 3, 4);",
        "  const float c = __half2float(every_type::t_float16_box::at(box, 0, 1));",
        "  const float d = static_cast<float>(every_type::u_fp8_e4m3_box::at(box, 2, 3));",
        "  every_type::t_float32_box::at(box, 0, 0) = 2.0f * a;  // a reference: writes too",
        "  out[threadIdx.x] = a * 0.5f + b - c + d + every_type::t_int32_box::at(box, 1, 1);",
        "  out64[threadIdx.x] = every_type::t_float64_box::at(box, 1, 1) * 3.0;",
        "}", ""])
    (tmp_path / "use.cu").write_text(source)
    target = TARGETS[spec.target].gencode
    run = subprocess.run([str(tc.nvcc), "-std=c++17", f"-gencode={target}", "-c", "-o", str(tmp_path / "use.o"),
                          str(tmp_path / "use.cu")], capture_output=True, text=True, cwd=tmp_path)
    assert run.returncode == 0, run.stderr


def test_the_layout_part_of_a_header_with_cuda_types_compiles_as_plain_cpp(tmp_path: Path) -> None:
    """g++ knows no __nv_bfloat16: the typed accessors and their includes stay inside __CUDACC__."""
    import shutil

    if shutil.which("g++") is None:
        pytest.skip("no g++")
    spec = parse_spec(_every_type_spec())
    (tmp_path / "every_type.cuh").write_text(render(resolve(spec), "specs/every_type.json")["every_type.cuh"])
    (tmp_path / "main.cpp").write_text('#include "every_type.cuh"\nint main() { return '
                                       'every_type::t_bfloat16_box::offset(0, 1, 0) == 32 ? 0 : 1; }\n')
    subprocess.run(["g++", "-std=c++17", "-Wall", "-Werror", "-o", str(tmp_path / "m"), str(tmp_path / "main.cpp")],
                   check=True, cwd=tmp_path)
    assert subprocess.run([str(tmp_path / "m")]).returncode == 0


LEFTOVERS = [
    (re.compile(r"static_assert\(\s*[\d\s()+\-*/%<>=!&|]+,"), "a static_assert of constants only"),
    (re.compile(r"\b\d+ == 0 \|\|"), "a condition that a template left constant"),
    (re.compile(r"% 1 != 0|\* 1\)|/ 1\)"), "arithmetic by 1"),
    (re.compile(r", false>"), "a template argument that repeats its default"),
    (re.compile(r"\n\n\n"), "two blank lines in a row"),
]


def _generated_texts() -> dict[str, str]:
    texts = {}
    for path in sorted((REPO / "generated").glob("*/*")):
        texts[str(path.relative_to(REPO))] = path.read_text()
    for data in _sweep_specs()[::7] + [_every_type_spec()]:  # every mode, width, element size and rank
        spec = parse_spec(data)
        for rel, text in render(resolve(spec), f"specs/{spec.name}.json").items():
            texts[f"{spec.name}/{rel}"] = text
    for kind in ({"kind": "transpose"}, {"kind": "copy", "boxes_per_stage": 2}):
        spec = parse_spec({"name": "k", "tensors": [{"name": "m", "dtype": "float32", "shape": [64, 64],
                                                     "box": [32, 32], "swizzle": {"mode": "none"}}], "kernel": kind})
        for rel, text in render(resolve(spec), "specs/k.json").items():
            texts[f"{kind['kind']}/{rel}"] = text
    return texts


def test_generated_code_carries_no_template_leftovers() -> None:
    found = [f"{path}: {what}: {m.group(0)!r}" for path, text in _generated_texts().items()
             for pattern, what in LEFTOVERS for m in [pattern.search(text)] if m]
    assert found == []


def test_the_swizzle_span_assert_is_rendered_only_for_a_swizzle() -> None:
    def header(mode: str) -> str:
        spec = parse_spec({"name": "s", "tensors": [{"name": "t", "dtype": "float32", "shape": [64, 64],
                                                     "box": [8, 32], "swizzle": {"mode": mode}}]})
        return render(resolve(spec), "specs/s.json")["s.cuh"]

    assert 'static_assert(row_bytes <= 128, "a swizzled row fits the 128-byte swizzle span");' in header("128B")
    assert "swizzle span" not in header("none")


# ----------------------------------------------------------------------------- the commands
def test_check_explain_and_build_take_a_spec_without_a_kernel(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(REPO)
    spec = "specs/maps_only_bf16_f32.json"
    assert main(["check", spec]) == 0
    assert "(2 tensors, no kernel)" in capsys.readouterr().out
    assert main(["explain", spec, "--map", "w", "--svg", str(tmp_path / "w.svg")]) == 0
    out = capsys.readouterr().out
    assert "maps_only_bf16_f32::x_box::at(box, i0, i1) gives __nv_bfloat16&" in out
    assert "maps_only_bf16_f32::w_box::at(box, i0, i1) gives float&" in out
    assert "no kernel:" in out and "\nkernel " not in out
    assert (tmp_path / "w.svg").read_text().startswith("<svg")
    assert main(["build", "--out", str(tmp_path / "out"), spec]) == 0
    assert sorted(p.name for p in (tmp_path / "out" / "maps_only_bf16_f32").iterdir()) == [
        "CMakeLists.txt", "manifest.json", "maps_only_bf16_f32.cu", "maps_only_bf16_f32.cuh", "maps_only_bf16_f32.h"]


def test_verify_proves_the_maps_of_a_spec_without_a_kernel_through_an_inspect_kernel_of_its_own() -> None:
    """What verify compiles for a kernel-less spec: an inspect kernel per map, rendered privately with
    the same boxes; a spec with a kernel is verified as it is."""
    data = json.loads((REPO / "specs" / "maps_only_bf16_f32.json").read_text())
    spec = parse_spec(data)
    files = render(resolve(spec), "specs/maps_only_bf16_f32.json")
    proved, proof_files = verify.proof(resolve(spec), files, "specs/maps_only_bf16_f32.json")
    assert proved.kind_name == "inspect" and proved.spec.tensors == spec.tensors
    assert [k.symbol for k in proved.kernels] == ["maps_only_bf16_f32_inspect_x", "maps_only_bf16_f32_inspect_w"]
    assert "maps_only_bf16_f32_kernels.cuh" in proof_files and "maps_only_bf16_f32_kernels.cuh" not in files
    assert proof_files["maps_only_bf16_f32.cuh"] == files["maps_only_bf16_f32.cuh"]  # the same layouts
    copy = parse_spec(json.loads((REPO / "specs" / "copy_f32_3d.json").read_text()))
    copy_files = render(resolve(copy), "specs/copy_f32_3d.json")
    copy_plan = resolve(copy)
    assert verify.proof(copy_plan, copy_files, "specs/copy_f32_3d.json") == (copy_plan, copy_files)


def test_the_inspect_kernels_that_verify_runs_for_a_kernel_less_spec_load_with_tma(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    tc = _toolchain_or_skip()
    monkeypatch.setenv("TMAGEN_CACHE", str(tmp_path / "cache"))
    spec = parse_spec(json.loads((REPO / "specs" / "maps_only_bf16_f32.json").read_text()))
    files = render(resolve(spec), "specs/maps_only_bf16_f32.json")
    proved, proof_files = verify.proof(resolve(spec), files, "specs/maps_only_bf16_f32.json")
    result = toolchain.compile_folder(proved, proof_files, tc, cubin_only=True)
    if IN_CI:
        assert result.sass is not None
    if result.sass is not None:
        assert toolchain.sass_violations(proved, result) == []
        assert all("UTMALDG" in result.sass[k.symbol] for k in proved.kernels)
