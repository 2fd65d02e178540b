"""tmagen's exceptions. The library raises these and never prints or exits; the CLI maps
them to messages and exit statuses."""

from __future__ import annotations

from typing import TYPE_CHECKING, Sequence

if TYPE_CHECKING:
    from tmagen.rules import Violation


class TmagenError(Exception):
    """Base of every error tmagen raises on purpose. ``exit_status`` is what the CLI returns."""

    exit_status = 2


class ModelError(TmagenError, ValueError):
    """Arguments the swizzle model cannot place (a bad box, element size or address)."""


class OutputError(TmagenError):
    """An output (a folder or a file) that cannot be written where the user asked."""


class SpecError(TmagenError):
    """A spec that cannot be read or does not validate: one message per problem."""

    def __init__(self, source: str, problems: Sequence[str]) -> None:
        self.source = source
        self.problems = list(problems)
        super().__init__(f"{source}: " + "; ".join(self.problems))

    def __str__(self) -> str:
        lines = [f"{self.source}: {len(self.problems)} problem{'s' if len(self.problems) != 1 else ''}"]
        lines += [f"  {i}. {p}" for i, p in enumerate(self.problems, 1)]
        return "\n".join(lines)


class RuleError(TmagenError):
    """A spec that is well-formed but breaks hardware or driver rules."""

    def __init__(self, source: str, violations: Sequence["Violation"]) -> None:
        self.source = source
        self.violations = list(violations)
        super().__init__(str(self))

    def __str__(self) -> str:
        n = len(self.violations)
        lines = [f"{self.source}: {n} rule violation{'s' if n != 1 else ''}"]
        lines += [f"  {i}. {v}" for i, v in enumerate(self.violations, 1)]
        return "\n".join(lines)
