"""pydantic's validation errors of a spec, said in tmagen's voice: ``field = value, but <limit>:
<fix>``, the field named by its spec path (``tensors[0].box[0]``), never pydantic's own words."""

from __future__ import annotations

import difflib
import re
from typing import Any

from pydantic import ValidationError

from tmagen import limits
from tmagen.jsonio import shown
from tmagen.kinds.sections import NAMES as KINDS


def _nearest(given: Any, ctx: dict[str, Any]) -> str:
    """The fix for a value that is not one of a field's choices: the choice it is a slip of (PyTorch's
    "float8_e4m3fn" for "float8_e4m3", "Float32"), where one is that close, else any of them."""
    choices = re.findall(r"'([^']*)'", str(ctx.get("expected", "")))
    close = difflib.get_close_matches(str(given), choices, n=1, cutoff=0.8) if isinstance(given, str) else []
    return f"use {close[0]!r}" if close else "use one of them"


# What to write where a required field is missing, by the field's last name.
_REQUIRED = {
    "name": "a C identifier, which names the generated folder and its symbols",
    "tensors": "a list of tensors, each with its name, dtype, shape and box",
    "dtype": "the element type, e.g. \"float32\" or \"bfloat16\" (`tmagen schema` lists them)",
    "shape": "the tensor's extents, outermost first, e.g. [1024, 1024]",
    "box": "the TMA box, outermost first, e.g. [64, 64]",
    "operand": "\"a\" or \"b\"",
}
_TYPES = {  # pydantic error type -> (what the field must be, an example of it)
    "int_type": ("an integer", "7"), "string_type": ("a string", "\"...\""), "bool_type": ("true or false", "true"),
    "list_type": ("a list", "[...]"), "dict_type": ("a JSON object", "{...}"),
    "model_type": ("a JSON object", "{...}"), "model_attributes_type": ("a JSON object", "{...}"),
}
_LISTS = {  # list field -> (what one entry is, the named limit of its length and why)
    "shape": ("dimension", f"TMA takes 1 to {limits.MAX_RANK} dimensions (MAX_RANK)",
              "merge dimensions that are contiguous into one, or take a slice"),
    "box": ("dimension", f"TMA takes 1 to {limits.MAX_RANK} dimensions (MAX_RANK)", "give one extent per dimension"),
    "strides": ("dimension", f"TMA takes 1 to {limits.MAX_RANK} dimensions (MAX_RANK)",
                "give one stride per dimension"),
    "element_strides": ("dimension", f"TMA takes 1 to {limits.MAX_RANK} dimensions (MAX_RANK)",
                        "give one step per dimension"),
    "tensors": ("tensor", f"a spec holds 1 to {limits.MAX_TENSORS_PER_SPEC} tensors (MAX_TENSORS_PER_SPEC)",
                "describe at least one tensor (start from specs/maps_only_bf16_f32.json), or split the spec"),
}


def loc(parts: tuple[Any, ...]) -> str:
    """pydantic's location as a spec path: ``tensors[0].box[1]``; the kernel's kind step dropped."""
    out = ""
    for part in parts:
        if isinstance(part, int):
            out += f"[{part}]"
        elif part in KINDS and out.endswith("kernel"):
            continue  # pydantic's discriminator step
        else:
            out += ("." if out else "") + str(part)
    return out or "(spec)"


def _last_name(where: str) -> str:
    return where.rsplit(".", 1)[-1].split("[", 1)[0]


def _one(err: Any) -> str:  # a pydantic ErrorDetails
    where = loc(err["loc"])
    kind = err["type"]
    ctx = err.get("ctx") or {}
    value = shown(err.get("input"))
    field = _last_name(where)
    if kind == "tmagen_form":  # a validator of tmagen.spec: already field, value, limit and fix
        return f"{ctx['field'] if where == '(spec)' else where + '.' + ctx['field']} {ctx['message']}"
    if kind == "union_tag_not_found":
        return f"{where}.kind is missing, but a kernel is chosen by its kind: give one of {', '.join(map(repr, KINDS))}"
    if kind == "union_tag_invalid":
        tags = ctx.get("expected_tags", "")
        return f"{where}.kind = {shown(ctx.get('tag'))}, but the kinds are {tags}: use one of them"
    if kind == "missing":
        what = _REQUIRED.get(field, "it (`tmagen schema` describes it)")
        return f"{where} is missing, but it is required: give {what}"
    if kind == "extra_forbidden":
        return (f"{where} = {value}, but {field!r} is not a field of "
                f"{where.rsplit('.', 1)[0] if '.' in where else 'a spec'}: check its spelling against `tmagen schema`, "
                "or remove it")
    if kind == "literal_error":
        return f"{where} = {value}, but the choices are {ctx.get('expected', '')}: {_nearest(err.get('input'), ctx)}"
    if kind in _TYPES:
        must, example = _TYPES[kind]
        fix = f"write {example}"
        if kind == "int_type" and isinstance(err.get("input"), str) and err["input"].strip().lstrip("-").isdigit():
            fix = f"write {err['input'].strip()} without quotes"
        elif kind == "int_type" and isinstance(err.get("input"), float) and float(err["input"]).is_integer():
            fix = f"write {int(err['input'])}"
        elif err.get("input") is None:
            fix = (f"write {example}, or leave {field} out for its default" if kind != "list_type"
                   else f"write {example}")
        return f"{where} = {value}, but it must be {must}: {fix}"
    if kind in ("greater_than_equal", "greater_than", "less_than_equal", "less_than"):
        bound = next(ctx[k] for k in ("ge", "gt", "le", "lt") if k in ctx)
        word = {"greater_than_equal": "at least", "greater_than": "more than", "less_than_equal": "at most",
                "less_than": "less than"}[kind]
        fix = f"use {bound} or more" if word == "at least" else f"use {bound} or less" if word == "at most" else \
            f"use a value {word} {bound}"
        return f"{where} = {value}, but it must be {word} {bound}: {fix}"
    if kind in ("too_short", "too_long"):
        entry, limit, fix = _LISTS.get(field, ("entry", f"it takes {ctx.get('min_length', 0)} to "
                                               f"{ctx.get('max_length', 'any number of')} entries",
                                               "give that many"))
        n = ctx.get("actual_length", "?")
        return f"{where} has {n} {entry}{'s' if n != 1 else ''}, but {limit}: {fix}"
    if kind == "value_error":
        msg = err["msg"].removeprefix("Value error, ")
        return f"{where} = {value}, but {msg}: rename it"
    msg = err["msg"]
    return f"{where} = {value}, but {msg[0].lower()}{msg[1:]}: see `tmagen schema`"


def problems(exc: ValidationError) -> list[str]:
    """One message per error, in tmagen's voice."""
    return [_one(err) for err in exc.errors(include_url=False)]


__all__ = ["loc", "problems", "shown"]
