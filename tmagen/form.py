"""The form every section of a spec shares: a strict, frozen pydantic model, C identifiers, and
form errors that name a field by its path.

Form is what pydantic checks (types, ranges, field names); the hardware and the kinds' own rules
are checked later, all at once, by `tmagen.check`.
"""

from __future__ import annotations

import re

from pydantic import BaseModel, ConfigDict
from pydantic_core import PydanticCustomError

CPP_KEYWORDS = frozenset("""
alignas alignof and and_eq asm auto bitand bitor bool break case catch char char8_t char16_t
char32_t class compl concept const consteval constexpr constinit const_cast continue co_await
co_return co_yield decltype default delete do double dynamic_cast else enum explicit export
extern false float for friend goto if inline int long mutable namespace new noexcept not not_eq
nullptr operator or or_eq private protected public register reinterpret_cast requires return
short signed sizeof static static_assert static_cast struct switch template this thread_local
throw true try typedef typeid typename union unsigned using virtual void volatile wchar_t while
xor xor_eq main
""".split())
IDENTIFIER = re.compile(r"[A-Za-z][A-Za-z0-9_]{0,62}")


def identifier(value: str, what: str) -> str:
    """``value`` if it can name generated files, functions and types; a ValueError otherwise."""
    if not IDENTIFIER.fullmatch(value) or value in CPP_KEYWORDS or value.startswith("__"):
        raise ValueError(
            f"a {what} must be a C identifier of up to 63 letters, digits and underscores, starting "
            "with a letter and not a C++ keyword, since it names files, functions and types")
    return value


class Section(BaseModel):
    """A part of a spec. strict: JSON true is no extent, "32" and 32.0 are no integers."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


def form_error(field: str, message: str) -> PydanticCustomError:
    """An error about ``field``, a path relative to the object whose validator raises it."""
    return PydanticCustomError("tmagen_form", "{field} {message}", {"field": field, "message": message})
