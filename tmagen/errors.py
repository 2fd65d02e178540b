"""tmagen's exceptions. The library raises these and never prints or exits; the CLI maps
them to messages and exit statuses."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


class TmagenError(Exception):
    """Base of every error tmagen raises on purpose. ``exit_status`` is what the CLI returns."""

    exit_status = 2


class ModelError(TmagenError, ValueError):
    """Arguments the swizzle model cannot place (a bad box, element size or address)."""


class OutputError(TmagenError):
    """An output (a folder or a file) that cannot be written where the user asked."""


class GpuError(TmagenError):
    """A CUDA driver call failed, or there is no GPU to run on (`tmagen.runtime`)."""

    exit_status = 3


class NoGpu(GpuError):
    """No driver or no device: nothing tmagen runs can run here."""


class ToolchainError(TmagenError):
    """No compiler, or a compile that failed (`tmagen.toolchain`: nvcc)."""


class NvrtcError(TmagenError):
    """No NVRTC that fits the driver, or a compile that failed (`tmagen.nvrtc`)."""


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


@dataclass(frozen=True)
class Violation:
    """One broken rule of `tmagen.rules`: the field, the value found, the limit, the fix, the source.
    It lives here, beside the error that carries it, so that this module imports nothing of tmagen."""

    rule: str
    field: str
    value: str
    why: str  # the limit, said as what the rule requires
    fix: str
    source: str
    # "warning" where the broken rule does not stop cuTensorMapEncodeTiled (tmagen.rules.diagnose_encode_tiled)
    severity: str = "error"

    @property
    def message(self) -> str:
        return f"{self.field} = {self.value}, but {self.why}: {self.fix} [{self.rule}; {self.source}]"

    def __str__(self) -> str:
        return self.message


class RuleError(TmagenError):
    """A spec that is well-formed but breaks hardware or driver rules."""

    def __init__(self, source: str, violations: Sequence[Violation]) -> None:
        self.source = source
        self.violations = list(violations)
        super().__init__(str(self))

    def __str__(self) -> str:
        n = len(self.violations)
        lines = [f"{self.source}: {n} rule violation{'s' if n != 1 else ''}"]
        lines += [f"  {i}. {v}" for i, v in enumerate(self.violations, 1)]
        return "\n".join(lines)


class ArgumentError(RuleError, ValueError):
    """Arrays or arguments of a Python call (tmagen.load, tmagen.ops, tmagen.tensor_map) that tmagen
    cannot run on or encode: each problem names the argument's field, outermost first as numpy
    writes it, the value, the limit and the fix."""

    def __str__(self) -> str:
        n = len(self.violations)
        lines = [f"{self.source}: {n} problem{'s' if n != 1 else ''}"]
        lines += [f"  {i}. {v}" for i, v in enumerate(self.violations, 1)]
        return "\n".join(lines)


class NoWorkspace(RuntimeError):
    """A launch's workspace (a matmul's split of K) cannot be allocated now: the stream is being
    captured into a CUDA graph. The launcher then picks a launch that needs none."""
