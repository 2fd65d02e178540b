"""Specs: the examples load and pass; bad forms raise SpecError and bad values break rules,
each message naming the field by its spec path (outermost-first indices, innermost [-1])."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from tmagen.errors import SpecError
from tmagen.map_args import SpecFieldNames, tensor_map_args
from tmagen.plan import check, resolve
from tmagen.rules import RULES
from tmagen.schema_errors import shown
from tmagen.spec import load_spec, parse_spec, schema

REPO = Path(__file__).resolve().parents[1]
EXAMPLES = sorted((REPO / "specs").glob("*.json"))

BASE = {
    "name": "spec_case",
    "tensors": [{"name": "t", "dtype": "float32", "shape": [64, 64], "box": [8, 32],
                 "swizzle": {"mode": "128B"}}],
    "kernel": {"kind": "inspect"},
}


def make(**changes) -> dict:
    """BASE with top-level keys replaced and ``t_<key>`` replacing keys of tensors[0]."""
    data = copy.deepcopy(BASE)
    for k, v in changes.items():
        if k.startswith("t_"):
            data["tensors"][0][k[2:]] = v
        else:
            data[k] = v
    return data


def form_problems(data: object) -> list[str]:
    with pytest.raises(SpecError) as info:
        parse_spec(data)
    assert info.value.problems, "a SpecError must carry at least one problem"
    return info.value.problems


# ----------------------------------------------------------------------------- the examples
def test_there_are_example_specs() -> None:
    assert len(EXAMPLES) >= 6, EXAMPLES


@pytest.mark.parametrize("path", EXAMPLES, ids=[p.stem for p in EXAMPLES])
def test_example_spec_loads_and_passes_every_rule(path: Path) -> None:
    spec = load_spec(path)
    assert spec.name == path.stem  # the file is named after the spec
    assert check(spec) == []


def test_base_spec_is_valid() -> None:
    assert check(parse_spec(make())) == []


# ----------------------------------------------------------------------------- form errors
FORM_ERRORS = [
    pytest.param(make(t_bogus=1), ["tensors[0].bogus = 1, but 'bogus' is not a field of tensors[0]"],
                 id="unknown-tensor-key"),
    pytest.param(make(bogus=1), ["bogus = 1, but 'bogus' is not a field of a spec"], id="unknown-top-key"),
    pytest.param(make(kernel={"kind": "gemm"}), ["kernel.kind = 'gemm'", "'inspect', 'copy', 'transpose'"],
                 id="unknown-kernel-kind"),
    pytest.param(make(kernel={"stages": 2}), ["kernel.kind is missing", "'inspect', 'copy', 'transpose'"],
                 id="missing-kernel-kind"),
    pytest.param(make(kernel={"kind": "copy", "stages": 0}),
                 ["kernel.stages = 0, but it must be at least 2: use 2 or more"],
                 id="copy-stages-0"),
    pytest.param(make(t_dtype="float8"), ["tensors[0].dtype = 'float8'", "'bfloat16'"], id="dtype"),
    pytest.param(make(t_swizzle={"mode": "96B"}), ["tensors[0].swizzle.mode = '96B'", "'128B'"], id="swizzle-mode"),
    pytest.param(make(t_swizzle={"mode": "128B", "atomicity": "8B"}), ["tensors[0].swizzle.atomicity = '8B'"],
                 id="swizzle-atomicity"),
    pytest.param(make(t_swizzle=128), ["tensors[0].swizzle = 128, but it must be a JSON object"],
                 id="swizzle-not-object"),
    pytest.param(make(t_interleave="64B"), ["tensors[0].interleave = '64B'"], id="interleave"),
    pytest.param(make(t_oob_fill="inf"), ["tensors[0].oob_fill = 'inf'"], id="oob-fill"),
    pytest.param(make(t_shape=[64, 0]), ["tensors[0].shape[1] = 0, but it must be at least 1: use 1 or more"],
                 id="shape-0"),
    pytest.param(make(t_shape=[]), ["tensors[0].shape has 0 dimensions, but TMA takes 1 to 5 dimensions (MAX_RANK)"],
                 id="shape-empty"),
    pytest.param(make(t_shape=[1] * 6, t_box=[1] * 6),
                 ["tensors[0].shape has 6 dimensions, but TMA takes 1 to 5 dimensions (MAX_RANK): merge"],
                 id="rank-6"),
    pytest.param(make(t_box=[8, -32]), ["tensors[0].box[1] = -32"], id="box-negative"),
    pytest.param(make(t_shape=[64, "many"]), ["tensors[0].shape[1] = 'many'"], id="shape-str"),
    pytest.param(make(t_alignment=0), ["tensors[0].alignment = 0"], id="alignment-0"),
    pytest.param(make(target="sm_80"), ["target = 'sm_80'", "'sm_90a' or 'sm_100a'"], id="target"),
    pytest.param(make(tensors=[]), ["tensors has 0 tensors, but a spec holds 1 to 1024 tensors (MAX_TENSORS_PER_SPEC)"],
                 id="no-tensors"),
    pytest.param({k: v for k, v in BASE.items() if k != "name"},
                 ["name is missing, but it is required: give a C identifier"],
                 id="missing-name"),
    pytest.param(make(t_element_type="fp8_e4m3"), ["tensors[0].element_type = 'fp8_e4m3'", "only uint8",
                                                    "float32 tensor's elements are float"], id="element-type-float"),
    pytest.param(make(t_dtype="uint8", t_element_type="fp4"), ["tensors[0].element_type = 'fp4'", "'fp8_e5m2'"],
                 id="element-type-unknown"),
    pytest.param([BASE], ["(spec) = [{", "but it must be a JSON object"], id="not-an-object"),
    pytest.param(make(t_name=7), ["tensors[0].name = 7"], id="name-not-str"),
]


@pytest.mark.parametrize("data, fragments", FORM_ERRORS)
def test_form_errors_name_the_field(data, fragments) -> None:
    problems = form_problems(data)
    text = "\n".join(problems)
    for fragment in fragments:
        assert fragment in text, f"{fragment!r} not in {problems}"


def test_spec_error_lists_every_problem() -> None:
    problems = form_problems(make(t_bogus=1, t_dtype="float8", target="sm_80"))
    assert len(problems) == 3
    err = SpecError("my.json", problems)
    assert str(err).splitlines()[0] == "my.json: 3 problems"
    assert str(err).splitlines()[1].startswith("  1. ")


# ----------------------------------------------------------------------------- names
HOSTILE = [
    'x; system("rm -rf /")', "../../etc", "a/b", "a.b", "a-b", "x y", "a\n", "", "_x", "__x", "1abc", "caf\u00e9",
    "int", "class", "return", "main", "namespace", "a" * 64, "a" * 200,
]


@pytest.mark.parametrize("name", HOSTILE, ids=[repr(n)[:24] for n in HOSTILE])
def test_hostile_tensor_names_are_rejected(name: str) -> None:
    problems = form_problems(make(t_name=name))
    assert len(problems) == 1
    assert problems[0].startswith(f"tensors[0].name = {shown(name)}, but a tensor name must be a C identifier")
    assert "up to 63" in problems[0]


@pytest.mark.parametrize("name", HOSTILE, ids=[repr(n)[:24] for n in HOSTILE])
def test_hostile_spec_names_are_rejected(name: str) -> None:
    problems = form_problems(make(name=name))
    assert len(problems) == 1
    assert problems[0].startswith(f"name = {shown(name)}, but a spec name must be a C identifier")


@pytest.mark.parametrize("name", ["a" * 63, "x", "X9", "a_b", "snake_case_1", "Int", "mainly"])
def test_identifier_boundaries_are_accepted(name: str) -> None:
    spec = parse_spec(make(name=name, t_name=name))
    assert spec.name == name and spec.tensors[0].name == name


def test_duplicate_tensor_names_are_rejected() -> None:
    second = dict(BASE["tensors"][0])
    problems = form_problems(make(tensors=[BASE["tensors"][0], second]))
    assert len(problems) == 1
    assert problems[0].startswith("tensors[1].name = 't'") and "unique" in problems[0]
    # the same tensors under different names are fine
    spec = parse_spec(make(tensors=[BASE["tensors"][0], {**second, "name": "u"}]))
    assert [t.name for t in spec.tensors] == ["t", "u"]


# ----------------------------------------------------------------------------- strides and lengths
def test_innermost_stride_must_be_1() -> None:
    problems = form_problems(make(t_strides=[64, 2]))
    assert len(problems) == 1
    p = problems[0]
    assert p.startswith("tensors[0]")
    assert "strides[-1] = 2" in p and "innermost stride must be 1" in p


def test_strides_with_innermost_1_are_accepted_and_converted_to_bytes() -> None:
    spec = parse_spec(make(t_strides=[80, 1]))  # rows padded to 80 floats = 320 bytes
    assert spec.tensors[0].driver_strides() == (320,)
    assert check(spec) == []


def test_innermost_stride_error_uses_dotted_path() -> None:
    assert form_problems(make(t_strides=[64, 2]))[0].startswith("tensors[0].strides[-1] = 2")


@pytest.mark.parametrize("key, value, entries", [
    ("strides", [1], 1), ("strides", [4096, 64, 1], 3), ("box", [32], 1), ("box", [1, 8, 32], 3),
    ("element_strides", [1], 1), ("element_strides", [1, 1, 1], 3),
])
def test_length_mismatch_with_shape_is_rejected(key, value, entries) -> None:
    problems = form_problems(make(**{f"t_{key}": value}))
    assert len(problems) == 1
    assert problems[0].startswith("tensors[0]")
    assert f"{key} has {entries} entries but shape has 2" in problems[0]


def test_boolean_shape_entry_is_rejected() -> None:
    form_problems(make(t_shape=[64, True], t_box=[8, 1], t_swizzle={"mode": "none"}))


# ----------------------------------------------------------------------------- rules name spec paths
def _violations(data: dict) -> dict[str, list]:
    out: dict[str, list] = {}
    for v in check(parse_spec(data)):
        out.setdefault(v.rule, []).append(v)
    return out


def test_rule_message_names_spec_path_of_innermost_box() -> None:
    found = _violations(make(t_dtype="bfloat16", t_box=[8, 96]))
    assert set(found) == {"box-inner-within-swizzle-span"}
    v, = found["box-inner-within-swizzle-span"]
    assert v.field == "tensors[0].box[-1]"
    assert v.message.startswith("tensors[0].box[-1] = 96 bfloat16 = 192 bytes")
    assert "use tensors[0].box[-1] <= 64" in v.message


RANK3 = dict(t_shape=[4, 8, 32], t_box=[2, 8, 32], t_swizzle={"mode": "128B"})


def test_rank3_spec_is_valid() -> None:
    assert check(parse_spec(make(**RANK3))) == []


@pytest.mark.parametrize("box, path, value", [
    ([2, 257, 32], "tensors[0].box[1]", 257),  # driver boxDim[1]
    ([300, 1, 32], "tensors[0].box[0]", 300),  # driver boxDim[2]
])
def test_rank3_box_indices_map_outermost_first(box, path, value) -> None:
    found = _violations(make(**{**RANK3, "t_box": box}))
    assert set(found) == {"box-dim-range"}
    v, = found["box-dim-range"]
    assert v.field == path
    assert v.message.startswith(f"{path} = {value}, ")
    assert f"use {path} <= 256" in v.message


def test_rank3_innermost_box_is_minus_1() -> None:
    found = _violations(make(**{**RANK3, "t_box": [2, 8, 6]}))  # 6 floats = 24 bytes
    assert set(found) == {"box-inner-bytes-multiple-of-16"}
    v, = found["box-inner-bytes-multiple-of-16"]
    assert v.field == "tensors[0].box[-1]"
    assert v.message.startswith("tensors[0].box[-1] = 6 float32 = 24 bytes")
    assert "use tensors[0].box[-1] a multiple of 4" in v.message


@pytest.mark.parametrize("strides, path, value", [
    ([34 * 8, 34, 1], "tensors[0].strides[1]", "136 bytes"),  # driver globalStrides[0] (dimension 1)
    ([34 * 8 + 2, 40, 1], "tensors[0].strides[0]", "1096 bytes"),  # driver globalStrides[1] (dimension 2)
])
def test_rank3_stride_indices_map_outermost_first(strides, path, value) -> None:
    found = _violations(make(**{**RANK3, "t_strides": strides}))
    assert set(found) == {"global-stride-multiple"}
    v, = found["global-stride-multiple"]
    assert v.field == path
    assert v.message.startswith(f"{path} = {value}, ")


@pytest.mark.parametrize("estrides, path", [
    ([9, 1, 1], "tensors[0].element_strides[0]"),
    ([1, 9, 1], "tensors[0].element_strides[1]"),
    ([1, 1, 9], "tensors[0].element_strides[-1]"),
])
def test_rank3_element_stride_indices(estrides, path) -> None:
    found = _violations(make(**{**RANK3, "t_element_strides": estrides}))
    assert set(found) == {"element-stride-range"}
    assert [v.field for v in found["element-stride-range"]] == [path]


@pytest.mark.parametrize("shape, path", [
    ([2 ** 32 + 1, 8, 32], "tensors[0].shape[0]"),
    ([4, 2 ** 32 + 1, 32], "tensors[0].shape[1]"),
    ([4, 8, 2 ** 32 + 1], "tensors[0].shape[-1]"),
])
def test_rank3_shape_indices(shape, path) -> None:
    found = _violations(make(**{**RANK3, "t_shape": shape, "t_strides": [1 << 20, 1 << 10, 1]}))
    assert set(found) == {"global-dim-range"}
    assert [v.field for v in found["global-dim-range"]] == [path]
    assert "4294967297" in found["global-dim-range"][0].message


def test_spec_field_names_map_driver_indices() -> None:
    n = SpecFieldNames(0, 3)
    assert [n.box(i) for i in range(3)] == ["tensors[0].box[-1]", "tensors[0].box[1]", "tensors[0].box[0]"]
    assert [n.dim(i) for i in range(3)] == ["tensors[0].shape[-1]", "tensors[0].shape[1]", "tensors[0].shape[0]"]
    assert [n.stride(i) for i in range(2)] == ["tensors[0].strides[1]", "tensors[0].strides[0]"]
    assert [n.estride(i) for i in range(3)] == ["tensors[0].element_strides[-1]", "tensors[0].element_strides[1]",
                                                "tensors[0].element_strides[0]"]
    assert SpecFieldNames(2, 1).box(0) == "tensors[2].box[-1]"


def test_second_tensor_is_named_by_its_index() -> None:
    good = BASE["tensors"][0]
    bad = {**good, "name": "u", "box": [8, 64]}  # 256-byte rows under 128B
    found = check(parse_spec(make(tensors=[good, bad])))
    assert [(v.rule, v.field) for v in found] == [("box-inner-within-swizzle-span", "tensors[1].box[-1]")]


@pytest.mark.parametrize("changes, rule, path", [
    (dict(t_alignment=8), "global-address-alignment", "tensors[0].alignment"),
    (dict(t_oob_fill="nan", t_dtype="int32"), "oob-nan-float-only", "tensors[0].oob_fill"),
    (dict(t_smem_offset=64), "smem-offset-alignment", "tensors[0].smem_offset"),
    (dict(t_swizzle={"mode": "128B", "atomicity": "64B"}), "target-atom-swizzle", "tensors[0].swizzle"),
    (dict(t_smem_offset=1024), "smem-offset-in-pattern", "tensors[0].smem_offset"),
    (dict(kernel={"kind": "inspect", "coords": [0, 1]}), "start-coordinate-16-bytes", "kernel.coords[-1]"),
])
def test_rule_fields_are_spec_paths(changes, rule, path) -> None:
    found = check(parse_spec(make(**changes)))
    assert [(v.rule, v.field) for v in found] == [(rule, path)]
    assert found[0].message.startswith(f"{path} = ")
    assert rule in RULES


def test_spec_values_are_spec_spellings() -> None:
    v, = check(parse_spec(make(t_oob_fill="nan", t_dtype="int32")))
    assert v.value == "nan" and "use zero" in v.message
    v, = check(parse_spec(make(t_swizzle={"mode": "128B", "atomicity": "32B"})))
    assert v.value == '{"mode": "128B", "atomicity": "32B"}'


def test_packed_types_get_no_kernels_yet() -> None:
    problems = form_problems(make(t_dtype="u4x16_align8", t_box=[8, 64]))
    assert problems == ["tensors[0].dtype = 'u4x16_align8': tmagen checks tensor maps of the packed sub-byte types "
                        "(tmagen diagnose) but generates no kernels for them yet"]


# ----------------------------------------------------------------------------- the schema
def test_schema_is_a_json_schema_with_tensors_and_kernel() -> None:
    s = schema()
    assert isinstance(s, dict)
    assert {"tensors", "kernel", "name", "target"} <= set(s["properties"])
    assert set(s["required"]) == {"name", "tensors"}  # no kernel: maps only
    json.loads(json.dumps(s))  # serialisable


def test_schema_descriptions_say_outermost_first() -> None:
    found = set()

    def walk(node, path):
        if isinstance(node, dict):
            for k, v in node.items():
                if k == "description" and isinstance(v, str) and "outermost first" in v:
                    found.add(path[-1])
                walk(v, path + (k,))
        elif isinstance(node, list):
            for v in node:
                walk(v, path)

    walk(schema(), ("",))
    assert {"shape", "strides", "box", "element_strides", "coords"} <= found


def test_schema_forbids_unknown_keys() -> None:
    s = schema()
    assert s["additionalProperties"] is False
    assert s["$defs"]["TensorSpec"]["additionalProperties"] is False


def test_transpose_output_rules_name_the_users_dimensions() -> None:
    """The output tile of a transpose is the input tile turned: its rows are the input's box[0] (of a 2-D box)."""
    spec = make(t_shape=[256, 256], t_box=[64, 8], t_swizzle={"mode": "128B"}, kernel={"kind": "transpose"})
    found = check(parse_spec(spec))
    assert [v.rule for v in found] == ["box-inner-within-swizzle-span"]
    assert found[0].field == "tensors[0] (transposed, as the kernel's dst map).box[0]"
    assert "= 64 float32 = 256 bytes" in found[0].message and "<= 32" in found[0].message


# ----------------------------------------------------------------------------- specs without a kernel
MAPS_ONLY = {"name": "maps", "tensors": [
    {"name": "x", "dtype": "bfloat16", "shape": [100, 200], "box": [16, 64], "swizzle": {"mode": "128B"}},
    {"name": "q", "dtype": "uint8", "element_type": "fp8_e5m2", "shape": [7, 100, 96], "box": [1, 8, 64],
     "swizzle": {"mode": "64B"}, "smem_offset": 256}]}


def test_a_spec_without_a_kernel_has_a_map_per_tensor_and_no_kernel_plans() -> None:
    for data in (MAPS_ONLY, {**MAPS_ONLY, "kernel": None}):
        spec = parse_spec(data)
        assert spec.kernel is None
        assert [(m.role, m.tensor.name, m.stores) for m in resolve(spec).maps] == [("x", "x", False), ("q", "q", False)]
        assert resolve(spec).kernels == ()
        assert check(spec) == []
        assert [m.tensor.cpp_type for m in resolve(spec).maps] == ["__nv_bfloat16", "__nv_fp8_e5m2"]


def test_a_spec_without_a_kernel_takes_tensors_of_any_ranks() -> None:
    """With an inspect kernel the coordinates must fit every tensor; without one there are none to fit."""
    spec = parse_spec(MAPS_ONLY)
    assert sorted(t.rank for t in spec.tensors) == [2, 3]
    found = check(parse_spec({**MAPS_ONLY, "kernel": {"kind": "inspect", "coords": [0, 0]}}))
    assert [(v.rule, v.field) for v in found] == [("inspect-coords-rank", "kernel.coords")]
    assert "tensor 'q' has 3 dimensions" in str(found[0])


def test_every_rule_applies_to_each_map_of_a_spec_without_a_kernel() -> None:
    data = copy.deepcopy(MAPS_ONLY)
    data["tensors"][1]["box"] = [1, 8, 96]  # 96 bytes: wider than the 64B span
    data["tensors"][0]["smem_offset"] = 100
    found = {(v.rule, v.field) for v in check(parse_spec(data))}
    assert ("box-inner-within-swizzle-span", "tensors[1].box[-1]") in found
    assert ("smem-offset-alignment", "tensors[0].smem_offset") in found


def test_the_shared_memory_budget_of_a_spec_without_a_kernel_is_the_box() -> None:
    """No kernel adds stages or slack: a box that fits a block passes, one that does not is refused by
    box-fits-shared-memory (and no kernel rule is asked)."""
    fits = {"name": "big", "tensors": [{"name": "t", "dtype": "float32", "shape": [4096, 4096], "box": [224, 256]}]}
    spec = parse_spec(fits)
    assert tensor_map_args(spec, resolve(spec).maps[0]).kernel_smem_bytes is None
    assert check(spec) == []  # 229376 bytes: the box alone fits 232448
    with_kernel = parse_spec({**fits, "kernel": {"kind": "inspect"}})  # + 1024 of alignment slack: still fits
    assert check(with_kernel) == []
    too_big = copy.deepcopy(fits)
    too_big["tensors"][0]["box"] = [232, 256]
    assert [v.rule for v in check(parse_spec(too_big))] == ["box-bytes-driver-limit", "box-fits-shared-memory"]
