"""What a kernel kind is to the rest of tmagen: its spec section, its rules, its planning and its
launcher, gathered in one `Kind` (each kind's folder builds one in its ``kind.py``)."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from tmagen.errors import Violation
from tmagen.planning import KernelPlan, MapPlan, MapSpec
from tmagen.spec import Spec
from tmagen.strides import contiguous


class Plan(Protocol):
    """What a launcher reads of the resolved plan (`tmagen.plan.Plan`), which sits above the kinds."""

    @property
    def name(self) -> str: ...

    @property
    def kernel(self) -> KernelPlan: ...

    def map(self, role: str) -> MapPlan: ...


@dataclass(frozen=True)
class KindRule:
    """One rule of a kind about its spec section and the tensors it names: a stable id, what it
    requires, and where that comes from (the instruction, or the kernel tmagen generates)."""

    id: str
    summary: str
    source: str
    check: Callable[[Spec], Iterator[Violation]] = field(repr=False, compare=False)


class RuleBook:
    """A kind's rules, in order, registered by the `rule` decorator beside each check."""

    def __init__(self) -> None:
        self.rules: list[KindRule] = []

    def rule(self, rule_id: str, summary: str, source: str) -> Callable[[Callable[[Spec], Iterator[Violation]]],
                                                                        Callable[[Spec], Iterator[Violation]]]:
        def register(fn: Callable[[Spec], Iterator[Violation]]) -> Callable[[Spec], Iterator[Violation]]:
            self.rules.append(KindRule(rule_id, summary, source, fn))
            return fn
        return register

    def check(self, spec: Spec) -> list[Violation]:
        """Every violation of every rule: a spec hears all its problems at once."""
        found: list[Violation] = []
        for r in self.rules:
            found.extend(v for v in r.check(spec) if v not in found)
        return found


def unit_element_strides(spec: Spec, rule_id: str, why: str, source: str) -> Iterator[Violation]:
    """Rule ``rule_id`` of a kind whose kernel moves every element of its one tensor's box."""
    t = spec.tensors[0]
    if t.element_strides is not None and any(e != 1 for e in t.element_strides):
        yield Violation(rule_id, "tensors[0].element_strides", str(t.element_strides), why, "make them all 1", source)


class Operand(Protocol):
    """An array as a launch sees it: where it is and how it is laid out (elements, outermost first;
    `tmagen.arrays.ArrayView` is one)."""

    @property
    def ptr(self) -> int: ...

    @property
    def shape(self) -> tuple[int, ...]: ...

    @property
    def strides(self) -> tuple[int, ...]: ...


@dataclass(frozen=True)
class Array:
    """An `Operand` from a raw pointer (``strides`` None: contiguous)."""

    ptr: int
    shape: tuple[int, ...]
    strides: tuple[int, ...]

    @classmethod
    def of(cls, ptr: int, shape: Sequence[int], strides: Sequence[int] | None = None) -> Array:
        shape = tuple(int(n) for n in shape)
        return cls(int(ptr), shape, tuple(int(s) for s in strides) if strides is not None else contiguous(shape))




@dataclass(frozen=True)
class MapBinding:
    """Map ``role`` over an array at ``ptr`` of ``shape`` and element ``strides`` (None: contiguous)."""

    role: str
    ptr: int
    shape: tuple[int, ...]
    strides: tuple[int, ...] | None


@dataclass(frozen=True)
class Call:
    """One launch of a kind's kernel: its maps' arrays in parameter order, the parameters after
    the maps, and the grid. ``clear_output``: nothing to launch, the output is all zeros (an empty
    sum); ``skip``: nothing to launch or write (an empty tensor)."""

    maps: tuple[MapBinding, ...]
    extra: tuple[Any, ...] = ()
    grid: int = 1
    clear_output: bool = False
    skip: bool = False
    kernel: int = 0  # which kernel of the family (`KernelPlan.family`) to launch


class Launcher(Protocol):
    """How a kind's kernel is called on arrays: by `tmagen.load`, `tmagen verify` and `tmagen bench`
    alike. The generated C API does the same arithmetic in C (its template, `templates/<kind>/`)."""

    inputs: tuple[str, ...]  # the input arrays' names, in call order; the output is "out"

    def roles(self, plan: Plan) -> tuple[tuple[str, ...], str | None]:
        """The map over each input, and the map over the output (None: the output is a plain byte
        buffer the kernel writes, no tensor map)."""
        ...

    def output_shape(self, plan: Plan, shapes: Sequence[tuple[int, ...]]) -> tuple[int, ...]:
        """The shape of the output for inputs of ``shapes``."""
        ...

    def problems(self, plan: Plan, inputs: Sequence[Operand], out: Operand | None = None) -> list[Violation]:
        """What the kind needs of its inputs beyond the maps' rules (whole units, agreeing sizes, a
        tensor its kernel can walk), launched into ``out`` (None: a new contiguous output)."""
        ...

    def bind(self, plan: Plan, inputs: Sequence[Operand], out: Operand, multiprocessors: int) -> Call:
        """The maps, parameters and grid of a launch on ``inputs`` into ``out``."""
        ...


@dataclass(frozen=True)
class Kind:
    """A kernel kind. ``maps`` lists the tensor maps its kernels take, in parameter order; ``plan``
    decides its kernels (threads, buffers, stages) from them and may raise ModelError for a box
    that cannot be laid out (the rules then say why); ``sass`` names the instructions its compiled
    kernels must hold. Its templates are ``templates/<name>/``."""

    name: str
    rules: RuleBook
    maps: Callable[[Spec], list[MapSpec]]
    plan: Callable[[Spec, list[MapSpec]], tuple[KernelPlan, ...]]
    launcher: Launcher | None
    sass: tuple[str, ...]
    grid_launch: bool = True  # its C launcher sizes a grid (the host file then has grid_for)
    driver_launch: bool = False  # its C launcher launches through cuLaunchKernel (the host file's driver_launch)
    l2_hints: bool = False  # its kernels pass each map's l2_hint to their copies (rule l2-hint-in-kernel)
    reduces: bool = False  # a tensor's reduce is honoured: its kernels reduce, or only load (rule reduce-in-kernel)

    @property
    def templates(self) -> dict[str, str]:
        """The kind's parts of the generated files: its kernels, its C launchers and their declarations."""
        return {part: f"{self.name}/{part}.j2" for part in ("kernels.cuh", "launch.cu", "api.h")}
