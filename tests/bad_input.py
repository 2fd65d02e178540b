"""Random bad input for the `tmagen` command, each case with what the answer must name.

`cases(seed, count)` yields `BadCase`s: a valid random spec (`lab.fuzz`) mutated one way
(a value of the wrong type, out of range or breaking a rule, a key unknown, missing or given twice,
a hostile name, a bad swizzle shorthand, more tensors than the limit, broken JSON, comments or YAML,
a hostile path to read or to write, a build over a user's folder or of two specs of one name), or
valid `tmagen diagnose` arguments mutated one way (flags and JSON). Each mutation is chosen so that
the input is certainly bad: the command must exit 2, name one of ``fields`` in its message, speak
in tmagen's voice (never pydantic's or Python's: FOREIGN_VOICE), print no traceback and write
nothing. `run` checks one case in-process through `tmagen.cli.main`.
"""

from __future__ import annotations

import contextlib
import copy
import io
import json
import math
import os
import random
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lab.fuzz import draw_case
from tmagen.cli import main

SPEC_FILE = "spec.json"  # every case's input, written afresh in the case's folder
# Spec fields whose value may be null: any other null is bad (tests check this against the schema).
NULLABLE = {"strides", "element_strides", "coords", "tiles_per_stage", "tiles_per_block", "unit_bytes", "kernel",
            "element_type", "mma", "reduce", "promote_every", "cluster"}


@dataclass
class BadCase:
    category: str  # type, value, structure, json, read-path, write-path, diagnose-flags, diagnose-json, diagnose-dump
    what: str  # the mutation, for failure messages
    argv: list[str]
    fields: tuple[str, ...]  # the answer names at least one of these
    files: dict[str, bytes] = field(default_factory=dict)  # written into the case's folder first
    stdin: str | None = None


# Words that are never tmagen's: pydantic's and Python's voice.
FOREIGN_VOICE = ("Input should", "Field required", "Value error,", "set_int_max_str_digits")


@dataclass
class Answer:
    code: int
    out: str
    err: str
    written: list[str]  # paths in the case folder that the command created


def prepare(folder: Path) -> None:
    """The case folder: a directory and a symbolic link that points at itself, to be read as specs."""
    (folder / "dir").mkdir(exist_ok=True)
    if not (folder / "loop.json").is_symlink():
        (folder / "loop.json").symlink_to("loop.json")


def listing(folder: Path) -> set[str]:
    """Every path under ``folder``, relative to it."""
    top = str(folder)
    return {os.path.join(root[len(top) + 1:], name) for root, dirs, files in os.walk(top) for name in dirs + files}


def run(case: BadCase, folder: Path) -> Answer:
    """Runs ``case`` in ``folder`` (its working directory) and returns the exit status and output."""
    for name, data in case.files.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_bytes(data)
    before = listing(folder)
    out, err = io.StringIO(), io.StringIO()
    cwd = os.getcwd()
    os.chdir(folder)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            if case.stdin is not None:
                import sys

                saved, sys.stdin = sys.stdin, io.StringIO(case.stdin)
                try:
                    code = main(case.argv)
                finally:
                    sys.stdin = saved
            else:
                code = main(case.argv)
    finally:
        os.chdir(cwd)
    return Answer(code, out.getvalue(), err.getvalue(), sorted(listing(folder) - before))


def problems(case: BadCase, answer: Answer, folder: Path) -> list[str]:
    """What is wrong with the answer to a bad input: empty when it is right."""
    text = answer.out + answer.err
    found = []
    if answer.code != 2:
        found.append(f"exit status {answer.code}, not 2")
    if "Traceback" in text:
        found.append("a traceback")
    if not any(f in text for f in case.fields):
        found.append(f"no mention of any of {list(case.fields)}")
    foreign = [w for w in FOREIGN_VOICE if w in text]
    if foreign:
        found.append(f"not in tmagen's voice: {foreign}")
    if answer.written:
        found.append(f"wrote {answer.written}")
    return found


# ----------------------------------------------------------------------------- spec mutations
def _paths(value: Any, path: str = "") -> Iterator[tuple[str, list[Any], Any]]:
    """(spec path, key path, value) of every node below the top."""
    if isinstance(value, dict):
        for k, v in value.items():
            p = f"{path}.{k}" if path else k
            yield p, [k], v
            for sub, keys, leaf in _paths(v, p):
                yield sub, [k, *keys], leaf
    elif isinstance(value, list):
        for i, v in enumerate(value):
            p = f"{path}[{i}]"
            yield p, [i], v
            for sub, keys, leaf in _paths(v, p):
                yield sub, [i, *keys], leaf


def _set(data: Any, keys: list[Any], value: Any) -> None:
    for k in keys[:-1]:
        data = data[k]
    data[keys[-1]] = value


def _wrong_types(value: Any, nullable: bool) -> list[Any]:
    """Values of another JSON type than ``value``'s (strict: no "7" for 7, no 7.0, no true)."""
    options: list[Any] = ["7", 7.5, True, [], {}, float("nan"), float("inf")]
    if isinstance(value, bool):
        options = [1, "true", 0.0, []]
    elif isinstance(value, int):
        options = ["7", 7.5, True, [], {}, float("nan")]
    elif isinstance(value, str):
        options = [5, True, [], {}, 2.5]
    elif isinstance(value, list):
        options = ["x", 5, {}, True]
    elif isinstance(value, dict):
        options = [[], "x", 5, True]
    if not nullable:
        options.append(None)
    return options


def _container_path(path: str) -> str:
    """``tensors[0].shape[1]`` -> ``tensors[0].shape``: rule messages index from the end ([-1])."""
    return path[: path.rfind("[")] if path.endswith("]") else path


def _type_mutation(rng: random.Random, spec: dict[str, Any]) -> tuple[dict[str, Any], str, tuple[str, ...]]:
    nodes = [(p, keys, v) for p, keys, v in _paths(spec) if p != "kernel.kind"]
    path, keys, value = rng.choice(nodes)
    nullable = keys[-1] in NULLABLE
    bad = rng.choice(_wrong_types(value, nullable))
    data = copy.deepcopy(spec)
    _set(data, keys, bad)
    return data, f"{path} = {bad!r} (was {type(value).__name__})", (path, _container_path(path))


# (field of a tensor, kinds it applies to, bad values): each value is refused by the form or a rule
TENSOR_VALUES: list[tuple[str, tuple[str, ...], list[Any]]] = [
    ("dtype", (), ["float8", "FLOAT32", "int8", "", "u4x16_align8", "u6x16_align16"]),
    ("alignment", (), [0, -16, 1, 8, 12, 24, 2**63]),
    ("smem_offset", (), [-128, 1, 64, 1000, 1024, 4096, 2**40]),
    ("interleave", (), ["8B", "64B", "NONE", ""]),
    ("l2_promotion", (), ["512B", "32B", ""]),
    ("oob_fill", (), ["inf", "NaN", "zeros", ""]),
    ("l2_hint", (), ["evict_all", "first", "NORMAL", ""]),
    ("reduce", (), ["sum", "mul", "bit_and", ""]),
    ("swizzle", (), [{"mode": "96B"}, {"mode": "128B", "atomicity": "8B"}, {"mode": "64B", "atomicity": "32B"},
                     {"mode": "none", "atomicity": "64B"}, {"mode": "128B", "atom": "16B"}]),
]
KERNEL_VALUES: dict[str, list[tuple[str, list[Any]]]] = {
    "copy": [("stages", [0, 1, 17, -1, 2**31]), ("blocks_per_sm", [0, 33, -4]), ("boxes_per_stage", [0, 33]),
             ("tiles_per_block", [0, 1025, -1])],
    "transpose": [("stages", [0, 9, -1]), ("tiles_per_stage", [0, 9, -2]), ("unit_bytes", [0, 3, 5, 32, -16]),
                  ("blocks_per_sm", [0, 33]), ("raster_group", [0, 1025]), ("tiles_per_block", [0, 1025])],
    "inspect": [],
    "matmul": [("stages", [0, 1, 9]), ("consumers", [0, 5]), ("raster_group", [0, 65]), ("b_major", ["x", "K"]),
               ("tile", [[0, 256, 64], [128, 256], [96, 256, 64], [128, 264, 64], [128, 256, 40]]),
               ("a", ["nope", "c"])],
}


def _value_mutation(rng: random.Random, spec: dict[str, Any]) -> tuple[dict[str, Any], str, tuple[str, ...]] | None:
    data = copy.deepcopy(spec)
    kind = data["kernel"]["kind"]
    i = rng.randrange(len(data["tensors"]))
    t = data["tensors"][i]
    rank = len(t["shape"])
    where = f"tensors[{i}]"
    r = rng.random()
    if r < 0.3:
        fld, _, values = rng.choice(TENSOR_VALUES)
        t[fld] = rng.choice(values)
        if (fld == "swizzle" and t[fld].get("mode") == "128B"
                and t[fld].get("atomicity") in ("32B", "32B_flip_8B", "64B")):
            return None
        return data, f"{where}.{fld} = {t[fld]!r}", (f"{where}.{fld}",)
    if r < 0.55:
        fld = rng.choice(["shape", "box"] + (["strides"] if t.get("strides") else []))
        d = rng.randrange(rank)
        bad = rng.choice([0, -1, -(2**31)] + ([2**32 + 1, 2**62] if fld == "shape" else [257, 1000]
                                                if fld == "box" else [2**50]))
        if fld == "strides" and d == rank - 1:
            bad = rng.choice([0, 2, -1])
        t[fld][d] = bad
        return data, f"{where}.{fld}[{d}] = {bad}", (f"{where}.{fld}",)
    if r < 0.65:
        d = rng.randrange(rank)
        t["element_strides"] = [1] * rank
        t["element_strides"][d] = rng.choice([0, 9, -1, 100])
        return data, f"{where}.element_strides[{d}] = {t['element_strides'][d]}", (f"{where}.element_strides",)
    if r < 0.75:
        fld = rng.choice(["shape", "box", "element_strides", "strides"])
        n = rng.choice([0, rank + 1, 6] if rank > 1 else [0, 2, 6])
        t[fld] = [1] * n
        if fld == "strides" and n == 0:
            t[fld] = []
        # which list is wrong is ambiguous: the answer may name any of those that must agree
        return data, f"{where}.{fld} with {n} entries for rank {rank}", tuple(
            f"{where}.{f}" for f in ("shape", "box", "strides", "element_strides")) + ("kernel.coords",)
    knobs = KERNEL_VALUES[kind]
    if kind == "inspect":
        coords = [0] * (rank + rng.choice([1, -1]) if rank > 1 else 2)
        if len(data["tensors"]) == 1 and rng.random() < 0.5:
            coords = [0] * rank
            coords[-1] = 16 // _elem_bytes(t) * 3 + 1 if _elem_bytes(t) < 16 else 1  # not a 16-byte step
            if _elem_bytes(t) == 1 or (coords[-1] * _elem_bytes(t)) % 16 == 0:
                coords[-1] = 1 if _elem_bytes(t) > 1 else 3
            if (coords[-1] * _elem_bytes(t)) % 16 == 0:
                return None
        data["kernel"]["coords"] = coords
        return data, f"kernel.coords = {coords}", ("kernel.coords",)
    fld, values = rng.choice(knobs)
    data["kernel"][fld] = rng.choice(values)
    return data, f"kernel.{fld} = {data['kernel'][fld]}", (f"kernel.{fld}",)


def _elem_bytes(t: dict[str, Any]) -> int:
    from tmagen.dtypes import DTYPES

    return DTYPES[t["dtype"]].nbytes


HOSTILE_NAMES = ["", "../../etc/passwd", "a/b", "a b", "x" * 64, "class", "int", "main", "__x", "_x", "9lives",
                 "ok\n", "nul\x00l", "é", "a-b", "a.b", "$(rm -rf ~)", "'; DROP", "\u202eevil", "a\\b", "CON:"]


def _structure_mutation(rng: random.Random, spec: dict[str, Any]) -> tuple[dict[str, Any], str, tuple[str, ...]] | None:
    data = copy.deepcopy(spec)
    r = rng.random()
    if r < 0.3:  # an unknown key somewhere
        targets = [("", data), ("kernel", data["kernel"])]
        targets += [(f"tensors[{i}]", t) for i, t in enumerate(data["tensors"])]
        targets += [(f"tensors[{i}].swizzle", t["swizzle"]) for i, t in enumerate(data["tensors"]) if "swizzle" in t]
        where, obj = rng.choice(targets)
        key = rng.choice(["bogus", "Shape", "boxDim", "tensor", "__proto__", "shape ", "kind2"])
        if key in obj:
            return None
        obj[key] = rng.choice([1, "x", None, [], {}])
        return data, f"unknown key {key!r} in {where or 'the spec'}", (f"{where}.{key}" if where else key,)
    if r < 0.55:  # a required key missing
        # (a spec without "kernel" is valid: maps only)
        options = [("name", data, "name"), ("tensors", data, "tensors"), ("kind", data["kernel"], "kernel.kind")]
        for i, t in enumerate(data["tensors"]):
            options += [(k, t, f"tensors[{i}].{k}") for k in ("name", "dtype", "shape", "box")]
        key, obj, path = rng.choice(options)
        del obj[key]
        return data, f"{path} missing", (path,)
    if r < 0.8:  # a hostile name
        name = rng.choice(HOSTILE_NAMES)
        if rng.random() < 0.5:
            data["name"] = name
            return data, f"name = {name!r}", ("name",)
        i = rng.randrange(len(data["tensors"]))
        data["tensors"][i]["name"] = name
        return data, f"tensors[{i}].name = {name!r}", (f"tensors[{i}].name",)
    kind = data["kernel"]["kind"]
    if r < 0.83:
        i = rng.randrange(len(data["tensors"]))
        data["tensors"][i]["swizzle"] = rng.choice(["96B", "16B", "128", "64 B"])
        return data, f"tensors[{i}].swizzle = {data['tensors'][i]['swizzle']!r} (the mode alone)", \
            (f"tensors[{i}].swizzle.mode",)
    if r < 0.85:
        from tmagen.limits import MAX_TENSORS_PER_SPEC

        data["tensors"] = [dict(data["tensors"][0], name=f"t{k}") for k in range(MAX_TENSORS_PER_SPEC + 1)]
        return data, "more tensors than MAX_TENSORS_PER_SPEC", ("MAX_TENSORS_PER_SPEC",)
    if r < 0.87:
        data["tensors"] = []
        return data, "no tensors", ("tensors",)
    if r < 0.94 and len(data["tensors"]) > 1:
        data["tensors"][1]["name"] = data["tensors"][0]["name"]
        return data, "two tensors of one name", ("tensors[1].name",)
    if kind in ("copy", "transpose"):
        data["tensors"].append({**copy.deepcopy(data["tensors"][0]), "name": "second"})
        return data, f"a {kind} of two tensors", ("tensors",)
    data["kernel"] = {"kind": rng.choice(["gemm", "Copy", "", 3])}
    return data, f"kernel.kind = {data['kernel']['kind']!r}", ("kernel.kind", "kernel")


def _broken_json(rng: random.Random, text: str) -> tuple[bytes, str, tuple[str, ...]] | None:
    r = rng.random()
    if r < 0.35:
        cut = rng.randrange(len(text))
        return text[:cut].encode(), f"the JSON cut after {cut} characters", ("not valid JSON",)
    if r < 0.6:
        pos = rng.randrange(len(text))
        junk = rng.choice(["{", "}", "[", "]", ",", ":", '"', "\\", "/", "'", "\x00", "tru", "01", "- "])
        broken = text[:pos] + junk + text[pos:]
        try:
            json.loads(broken)
            return None  # still JSON: not this case's kind of bad
        except ValueError:
            return broken.encode(), f"{junk!r} inserted at {pos}", ("not valid JSON",)
    if r < 0.7:
        pos = rng.randrange(len(text))
        raw = text.encode()
        return raw[:pos] + rng.choice([b"\xff", b"\xc3\x28", b"\xed\xa0\x80", b"\x80"]) + raw[pos:], \
            "invalid UTF-8", ("utf-8", "UTF-8", "cannot read")
    if r < 0.74:  # a byte-order mark is read; what follows it must still be JSON
        cut = rng.randrange(len(text))
        return b"\xef\xbb\xbf" + text[:cut].encode(), f"a byte-order mark, then JSON cut after {cut}", \
            ("not valid JSON",)
    if r < 0.78:  # a key given twice, anywhere: the last one used to win
        data = json.loads(text)
        key = rng.choice(sorted(data))
        twice = text.replace(f'"{key}":', f'"{key}": {json.dumps(data[key])}, "{key}":', 1)
        return twice.encode(), f"{key} given twice", (f"{key} is given twice",)
    if r < 0.80:  # a comment, or YAML: specs are JSON
        note = rng.choice(["// my tile\n", "/* tile */", "# tile\n"])
        if rng.random() < 0.5:
            return (note + text).encode(), f"a comment {note.strip()!r}", ("which has no comments",)
        return b"name: tile\ntensors:\n  - name: t\n", "YAML", ("looks like YAML",)
    if r < 0.86:
        depth = rng.choice([1000, 50_000])
        return ("[" * depth + "]" * depth).encode(), f"lists nested {depth} deep", ("nested too deeply", "(spec)")
    if r < 0.93:
        return rng.choice([b"", b"   ", b"null", b"42", b'"spec"', b"[]", b"true"]), "not an object", \
            ("not valid JSON", "(top level)")
    digits = rng.choice([400, 5000, 100_000])
    return text.replace('"name"', f'"x": {"9" * digits}, "name"', 1).encode(), f"an integer of {digits} digits", \
        (f"x = an integer of {digits} digits",)


def _spec_argv(rng: random.Random) -> list[str]:
    command = rng.choice(["check", "build", "explain", "explain-svg"])
    if command == "build":
        return ["build", SPEC_FILE, "--out", "out"]
    if command == "explain-svg":
        return ["explain", SPEC_FILE, "--svg", "drawing.svg"]
    return [command, SPEC_FILE]


def spec_cases(rng: random.Random, bases: list[dict[str, Any]]) -> Iterator[BadCase]:
    """Endless mutated specs."""
    while True:
        spec = rng.choice(bases)
        r = rng.random()
        category = "type" if r < 0.3 else "value" if r < 0.6 else "structure" if r < 0.85 else "json"
        mutated: tuple[Any, str, tuple[str, ...]] | None
        if category == "json":
            broken = _broken_json(rng, json.dumps(spec, indent=rng.choice([None, 1])))
            if broken is None:
                continue
            raw, what, fields = broken
            yield BadCase(category, what, _spec_argv(rng), fields, {SPEC_FILE: raw})
            continue
        mutate = {"type": _type_mutation, "value": _value_mutation, "structure": _structure_mutation}[category]
        mutated = mutate(rng, spec)
        if mutated is None:
            continue
        data, what, fields = mutated
        yield BadCase(category, what, _spec_argv(rng), fields, {SPEC_FILE: json.dumps(data).encode()})


# ----------------------------------------------------------------------------- paths
def path_cases(rng: random.Random, good: bytes) -> Iterator[BadCase]:
    """Hostile paths to read a spec from and to write outputs to."""
    reads = [("missing.json", "missing.json"), (".", "."), ("nul\x00l.json", "nul"), ("x" * 5000, "x" * 100),
             ("/dev/null", "/dev/null"), ("loop.json", "loop.json"), ("dir/", "dir")]
    while True:
        r = rng.random()
        if r < 0.5:
            path, named = rng.choice(reads)
            command = rng.choice([["check", path], ["build", path, "--out", "out"], ["explain", path],
                                  ["diagnose", path], ["verify", path], ["bench", path]])
            yield BadCase("read-path", f"{command[0]} reads {path[:40]!r}", command, (named,))
            continue
        if r < 0.6:
            name = json.loads(good)["name"]
            r2 = rng.random()
            if r2 < 0.4:  # a folder of the user's where the spec's folder goes: never replaced
                mine = rng.choice([f"owned/{name}/mine.cu", f"owned/{name}/main.cpp", f"owned/{name}"])
                yield BadCase("write-path", f"build over {mine}", ["build", SPEC_FILE, "--out", "owned"],
                              (mine.split("/")[-1],), {SPEC_FILE: good, mine: b"// mine\n"})
            elif r2 < 0.7:  # two specs of one name in one build
                yield BadCase("write-path", "two specs of one name", ["build", SPEC_FILE, "same.json", "--out", "out"],
                              ("same.json",), {SPEC_FILE: good, "same.json": good})
            else:
                yield BadCase("write-path", "--out ''", ["build", SPEC_FILE, "--out", ""], ("--out",),
                              {SPEC_FILE: good})
            continue
        file_target = rng.choice(["spec.json/x.out", "nul\x00l.out", "/proc/no/such.out", "dir"])
        folder_target = rng.choice(["spec.json", "spec.json/out", "nul\x00l", "/proc/no/such"])
        named = (file_target.split("\x00")[0], folder_target.split("\x00")[0])
        argv = rng.choices([
            ["build", SPEC_FILE, "--out", folder_target],
            ["explain", SPEC_FILE, "--svg", file_target],
            ["explain", SPEC_FILE, "--png", file_target],  # rare: matplotlib draws for 50 ms before it writes
            ["schema", "-o", file_target],
            ["docs", "--out", folder_target],
        ], weights=[1, 1, 0.05, 0.3, 0.3])[0]  # schema and docs: 10 ms to make what they cannot write
        fields = named
        yield BadCase("write-path", f"{argv[0]} writes to {argv[-1][:40]!r}", argv, fields, {SPEC_FILE: good})


# ----------------------------------------------------------------------------- diagnose
FLAGS = {  # argument -> (flag, names the answer may use)
    "dtype": ("--dtype", ("tensorDataType", "--dtype", "dtype")),
    "rank": ("--rank", ("tensorRank", "--rank", "rank", "globalDim", "globalStrides", "boxDim", "elementStrides")),
    "global_address": ("--global-address", ("globalAddress", "--global-address", "global_address")),
    "global_dim": ("--global-dim", ("globalDim", "--global-dim", "global_dim")),
    "global_strides": ("--global-strides", ("globalStrides", "--global-strides", "global_strides")),
    "box_dim": ("--box-dim", ("boxDim", "--box-dim", "box_dim")),
    "element_strides": ("--element-strides", ("elementStrides", "--element-strides", "element_strides")),
    "interleave": ("--interleave", ("interleave", "--interleave")),
    "swizzle": ("--swizzle", ("swizzle", "--swizzle")),
    "l2_promotion": ("--l2-promotion", ("l2Promotion", "--l2-promotion", "l2_promotion")),
    "oob_fill": ("--oob-fill", ("oobFill", "--oob-fill", "oob_fill")),
    "arch": ("--arch", ("arch", "--arch")),
}


def _valid_arguments(rng: random.Random) -> dict[str, Any]:
    """A valid argument set: float32 rank 1 to 5, 32 floats (128 bytes) a row, 128B swizzle."""
    rank = rng.randint(1, 5)
    dims = [rng.randint(32, 300)] + [rng.randint(1, 40) for _ in range(rank - 1)]
    dims[0] = -(-dims[0] // 4) * 4
    strides, run = [], dims[0] * 4
    for n in dims[1:]:
        strides.append(run)
        run *= n
    return {"dtype": 7, "rank": rank, "global_address": 0x7F0000000000 + 256 * rng.randint(0, 99),
            "global_dim": dims, "global_strides": strides, "box_dim": [32] + [rng.randint(1, 8) for _ in dims[1:]],
            "element_strides": [1] * rank, "interleave": 0, "swizzle": "128B", "l2_promotion": 0, "oob_fill": 0,
            "arch": "sm_90a"}


def _bad_argument(rng: random.Random, args: dict[str, Any], as_json: bool) -> tuple[str, Any] | None:
    """A key and a value for it that certainly breaks the set (a rule, or the form)."""
    key = rng.choice(list(FLAGS))
    rank = args["rank"]
    lists = {"global_dim": rank, "global_strides": rank - 1, "box_dim": rank, "element_strides": rank}
    if key in lists:
        n = lists[key]
        values = [[1] * (n + 1), [-1] * max(n, 1)]
        if key != "global_strides" or n == 0:  # the driver encodes zero strides (a warning of diagnose, measured)
            values.append([0] * max(n, 1))
        if key == "box_dim":
            values += [[257] + args["box_dim"][1:], [64] + args["box_dim"][1:], [3] + args["box_dim"][1:]]
        if key == "element_strides":
            values += [[9] * rank, [0] * rank]
        if key == "global_strides" and n:
            values += [[100] + args["global_strides"][1:], [2**40] + args["global_strides"][1:]]
        if key == "global_dim":
            values += [[2**32 + 1] + args["global_dim"][1:]]
        if as_json:
            values += ["64", [1.5] * max(n, 1), [[1]] * max(n, 1), [True] * max(n, 1), {"a": 1}]
        return key, rng.choice(values)
    values = {
        "dtype": [16, -1, 99, "FLOAT99", "", "u4"] + ([7.0, True, [7], None] if as_json else []),
        "rank": [0, 6, -1, 2**70] + ([2.0, "2", True] if as_json else []),
        "global_address": [8, 0x7F0000000004, -16] + (["0x18", "0xZZ", 16.0, True] if as_json else []),
        "interleave": [3, -1, "64B", "x"], "swizzle": [7, -1, "96B", "x"], "l2_promotion": [4, "512B", "x"],
        "oob_fill": [2, "inf", "x"], "arch": ["sm_80", "", "sm90a"] + ([90, None, ["sm_90a"]] if as_json else []),
    }[key]
    value = rng.choice(values)
    if value is None:
        return None  # null is "missing": another case covers it
    return key, value


def _flag_text(value: Any) -> str:
    return ",".join(map(str, value)) if isinstance(value, list) else str(value)


_DUMP_NAMES = {  # argument -> its line in a CuTe dump, in a flashinfer dump (None: not printed there)
    "dtype": ("format", "tmaFormat:"), "rank": ("dim", "dim:"), "global_address": ("gmem_address", "gmem:"),
    "global_dim": ("globalDim", "Shape:"), "global_strides": ("globalStrides", "Stride:"),
    "box_dim": ("boxDim", "tileShapes:"), "element_strides": ("elementStrides", "tileStrides:"),
    "interleave": ("interleave", None), "swizzle": ("swizzle", "swizzleType:"), "l2_promotion": ("l2Promotion", None),
    "oob_fill": ("oobFill", None), "arch": ("arch", "arch:"),
}
_ENUMS = {"swizzle": {"none": 0, "32B": 1, "64B": 2, "128B": 3}}


def _dump(args: dict[str, Any], flashinfer: bool) -> str:
    """``args`` as CuTe's make_tma_copy_desc or flashinfer's buildNdTmaDescriptor prints them on failure."""
    def text(key: str, v: Any) -> str:
        v = _ENUMS.get(key, {}).get(v, v) if isinstance(v, str) else v
        if isinstance(v, list):
            return " ".join(map(str, v)) if flashinfer else "(" + ",".join(map(str, v)) + ")"
        return hex(v) if key == "global_address" and isinstance(v, int) and v > 0 else str(v)

    if flashinfer:
        lines = ["Error: Failed to initialize the TMA descriptor 1",
                 " ".join(f"{_DUMP_NAMES[k][1]} {text(k, args[k])}" for k in ("dtype", "rank", "global_address")
                          if k in args)]
        lines += [f"{_DUMP_NAMES[k][1]} {text(k, v)}" for k, v in args.items()
                  if k not in ("dtype", "rank", "global_address") and _DUMP_NAMES[k][1]
                  and (k != "arch" or v != "sm_90a")]
        return "\n".join(lines) + "\n(in KernelParams.h:210)\n"
    lines = ["TMA Desc Addr:   0x7ffd5a2c1e80"]
    lines += [f"{_DUMP_NAMES[k][0]:<15}{text(k, v)}" for k, v in args.items() if k != "arch" or v != "sm_90a"]
    return "\n".join(lines) + "\nError: Failed to initialize the TMA descriptor 1\n"


def _dump_case(rng: random.Random) -> BadCase | None:
    """A failed encode's dump, as CuTe or flashinfer print it, with one argument broken or missing."""
    args = _valid_arguments(rng)
    if rng.random() < 0.1:
        key = rng.choice(["global_address", "global_dim", "box_dim", "element_strides"])
        del args[key]
        what = f"{key} missing"
    else:
        bad = _bad_argument(rng, args, False)
        if bad is None:
            return None
        key, value = bad
        ones = isinstance(value, list) and len(value) == args["rank"] + 1 and set(value) == {1}
        if ones or (isinstance(value, str) and key in ("interleave", "l2_promotion", "oob_fill")):
            return None  # CuTe pads with 1s (a valid read); enum names are printed as numbers
        args[key] = value
        what = f"{key} = {value!r}"
    flashinfer = rng.random() < 0.5 and not ({"interleave", "l2_promotion", "oob_fill"} & {key}) and "rank" in args
    fields = FLAGS[key][1] + ((_DUMP_NAMES[key][1].rstrip(":"),) if flashinfer and _DUMP_NAMES[key][1] else ())
    argv = ["diagnose", "-"] + (["--format", "json"] if rng.random() < 0.2 else [])
    return BadCase("diagnose-dump", f"diagnose {'flashinfer' if flashinfer else 'CuTe'} dump: {what}", argv, fields,
                   stdin=_dump(args, flashinfer))


def diagnose_cases(rng: random.Random) -> Iterator[BadCase]:
    """Endless mutated `tmagen diagnose` arguments, as flags, a JSON file or a pasted dump, now and
    then with a --result no encode returns, or --format json."""
    while True:
        if rng.random() < 0.25:
            dump = _dump_case(rng)
            if dump is not None:
                yield dump
            continue
        args = _valid_arguments(rng)
        as_json = rng.random() < 0.4
        r = rng.random()
        if r < 0.12:  # an argument missing (rank 1 needs no strides)
            key = rng.choice(["dtype", "rank", "global_address", "global_dim", "box_dim", "element_strides"])
            del args[key]
            what, fields = f"{key} missing", FLAGS[key][1]
        elif r < 0.2 and as_json:
            key = rng.choice(["boxDim", "box_size", "stride", "Rank"])
            args[key] = [1]
            what, fields = f"unknown key {key}", (key,)
        else:
            bad = _bad_argument(rng, args, as_json)
            if bad is None:
                continue
            key, value = bad
            args[key] = value
            what, fields = f"{key} = {value!r}", FLAGS[key][1]
        if as_json:
            text = json.dumps(args)
            if rng.random() < 0.1:  # a key given twice, the valid value last
                key = rng.choice(sorted(args))
                text = text.replace(f'"{key}":', f'"{key}": {json.dumps(args[key])}, "{key}":', 1)
                fields = (f"{key} is given twice",)
            if rng.random() < 0.2:  # from standard input
                yield BadCase("diagnose-json", f"diagnose JSON on stdin: {what}", ["diagnose", "-"], fields, stdin=text)
            else:
                yield BadCase("diagnose-json", f"diagnose JSON: {what}", ["diagnose", "args.json"], fields,
                              {"args.json": text.encode()})
            continue
        argv = ["diagnose"]
        for k, v in args.items():
            if k in FLAGS:
                text = _flag_text(v)
                argv += [f"{FLAGS[k][0]}={text}"] if text.startswith("-") or text == "" else [FLAGS[k][0], text]
        if rng.random() < 0.1:  # a CUresult no encode call returns
            code = rng.choice(["12345", "-1", "CUDA_ERROR_NOPE", "", "1.5"])
            yield BadCase("diagnose-flags", f"diagnose {what}, --result {code!r}", [*argv, f"--result={code}"],
                          fields + ("result",))
            continue
        if rng.random() < 0.15:
            argv += ["--format", "json"]
        yield BadCase("diagnose-flags", f"diagnose flags: {what}", argv, fields)


# ----------------------------------------------------------------------------- all of them
def base_specs(seed: int, count: int = 60) -> list[dict[str, Any]]:
    return [draw_case(seed, i).spec for i in range(count)]


def cases(seed: int, count: int) -> Iterator[BadCase]:
    """``count`` bad inputs: about 60% mutated specs, 25% diagnose arguments, 15% hostile paths."""
    rng = random.Random(seed)
    bases = base_specs(seed)
    # the path cases' spec is valid and small: explain draws its box before it fails to write
    good = json.dumps(min(bases, key=lambda s: sum(math.prod(t["box"]) for t in s["tensors"]))).encode()
    streams = [(0.6, spec_cases(rng, bases)), (0.25, diagnose_cases(rng)), (0.15, path_cases(rng, good))]
    for _ in range(count):
        r, acc = rng.random(), 0.0
        for weight, stream in streams:
            acc += weight
            if r < acc:
                yield next(stream)
                break
        else:
            yield next(streams[-1][1])

