"""Reading JSON as every tmagen input is read (specs, `tmagen diagnose` arguments, benchmark runs):
strictly, and with each problem said in tmagen's voice, where it is and how to fix it.

Beyond `json.loads`: a key given twice in one object is refused (readers disagree on which one
counts), a UTF-8 byte-order mark is skipped, comments and YAML are recognised and answered with
"tmagen reads JSON", integers longer than any TMA value are refused by their path (Python's own
answer is to call sys.set_int_max_str_digits), and the top level must be an object.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

from tmagen.errors import SpecError
from tmagen.limits import MAX_JSON_DEPTH, MAX_JSON_INPUT_CHARS, MAX_JSON_INTEGER_DIGITS

BOM = "\ufeff"


class _Pairs(dict[str, Any]):
    """An object in which a key was given twice: the values of each such key, in order."""

    twice: dict[str, list[Any]]


class _HugeInt:
    def __init__(self, text: str) -> None:
        self.digits = len(text.lstrip("-"))


def _object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    twice: dict[str, list[Any]] = {}
    for key, value in pairs:
        if key in out:
            twice.setdefault(key, [out[key]]).append(value)
        out[key] = value
    if not twice:
        return out
    marked = _Pairs(out)
    marked.twice = twice
    return marked


def _int(text: str) -> int | _HugeInt:
    return _HugeInt(text) if len(text.lstrip("-")) > MAX_JSON_INTEGER_DIGITS else int(text)


def _walk(value: Any) -> Iterator[tuple[str, Any, int]]:
    """(path, node, depth) of every node, depth first; a loop, not recursion: the input may nest deeply."""
    stack: list[tuple[str, Any, int]] = [("", value, 0)]
    while stack:
        path, node, depth = stack.pop()
        yield path, node, depth
        if isinstance(node, dict):
            stack.extend((f"{path}.{k}" if path else str(k), v, depth + 1) for k, v in reversed(node.items()))
        elif isinstance(node, list):
            stack.extend((f"{path}[{i}]", v, depth + 1) for i, v in reversed(list(enumerate(node))))


def _too_deep(levels: str) -> str:
    return (f"the JSON is nested too deeply ({levels}), but tmagen reads at most {MAX_JSON_DEPTH} levels "
            "(MAX_JSON_DEPTH; no spec nests more than 4): give a spec")


def shown(value: Any) -> str:
    """A value for a message, shortened: JSON's null, true and false, Python's repr otherwise."""
    if isinstance(value, _HugeInt):
        return f"an integer of {value.digits} digits"
    text = json.dumps(value) if value is None or isinstance(value, bool) else repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _syntax_hint(text: str, exc: json.JSONDecodeError) -> str:
    """What the text is, where that explains the error: comments, or YAML."""
    at = text[exc.pos:exc.pos + 2]
    if at in ("//", "/*") or at[:1] == "#":
        return ("; tmagen reads JSON, which has no comments: remove them (a spec's notes go in its "
                "\"description\")")
    if re.match(r"\s*(---|%YAML|[A-Za-z_][\w .-]*:(\s|$))", text):
        return "; this looks like YAML, but tmagen reads JSON: convert it (e.g. yq -o=json)"
    return ""


def read_json(text: str, source: str) -> dict[str, Any]:
    """The JSON object in ``text`` (read from ``source``, named in messages), or a SpecError that
    says where it went wrong and what to do."""
    if len(text) > MAX_JSON_INPUT_CHARS:
        raise SpecError(source, [f"the file holds {len(text):,} characters, but tmagen reads JSON of up to "
                                 f"{MAX_JSON_INPUT_CHARS:,} (MAX_JSON_INPUT_CHARS; a spec of 1024 tensors is about "
                                 "330,000): give a spec, or split one into several"])
    text = text.removeprefix(BOM)
    try:
        value = json.loads(text, object_pairs_hook=_object, parse_int=_int)
    except json.JSONDecodeError as exc:
        raise SpecError(source, [f"not valid JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}"
                                 + _syntax_hint(text, exc)]) from None
    except RecursionError:  # deeper than this Python reads
        raise SpecError(source, [_too_deep("more levels than Python reads")]) from None
    deepest = max(depth for _, _, depth in _walk(value))
    if deepest > MAX_JSON_DEPTH:  # the same answer whatever this Python's own recursion limit
        raise SpecError(source, [_too_deep(f"{deepest} levels")])
    problems = []
    for path, node, _ in _walk(value):
        where = path or "(top level)"
        if isinstance(node, _Pairs):
            for key, values in node.twice.items():
                inner = f"{path}.{key}" if path else key
                problems.append(f"{inner} is given twice ({' and then '.join(shown(v) for v in values)}), but "
                                "a key may appear once in an object (readers disagree on which one counts): keep one")
        elif isinstance(node, _HugeInt):
            problems.append(f"{where} = {shown(node)}, but tmagen reads integers of up to "
                            f"{MAX_JSON_INTEGER_DIGITS} digits (no TMA value needs more than 20): write the value "
                            "you mean")
    if problems:
        raise SpecError(source, problems)
    if not isinstance(value, dict):
        raise SpecError(source, [f"(top level) = {shown(value)}, but tmagen reads a JSON object of named fields: "
                                 "write {\"name\": ..., \"tensors\": [...]} for a spec (see specs/ and `tmagen "
                                 "schema`), or the arguments by name for `tmagen diagnose`"])
    return value


__all__ = ["read_json", "shown"]
