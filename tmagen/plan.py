"""One resolved plan per spec: `resolve(spec) -> Plan`, computed once, holding every decision.

A `Plan` has the spec's tensor maps (their driver arguments, box layouts, tensor-core operand
tiles, every number the templates print) and its kernels (threads, shared memory, stages,
grids, the kind's own plan). Everything below it (render, toolchain, launch, `tmagen.load`,
verify, bench) takes the plan and never goes back to the spec to decide again.

Checking comes first: `check(spec)` runs the kind's rules, then every TMA rule on every map
with the kernel's use of it, and returns all the violations at once; `resolve` raises them as
one RuleError.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

from tmagen import kinds
from tmagen.dtypes import DTYPES
from tmagen.errors import ModelError, RuleError, Violation
from tmagen.kinds.base import Kind, Launcher
from tmagen.limits import TARGETS, Target
from tmagen.map_args import SpecFieldNames, tensor_map_args
from tmagen.planning import KernelPlan, MapPlan, MapSpec, WgmmaInstruction, map_plan
from tmagen.rules import TensorMapArgs, run_rules
from tmagen.spec import Spec, load_spec


@dataclass(frozen=True)
class Plan:
    """Every decision about one spec."""

    spec: Spec
    kind: Kind | None  # None: a spec of maps only
    target: Target
    maps: tuple[MapPlan, ...]  # in kernel-parameter order
    kernels: tuple[KernelPlan, ...]
    _by_role: dict[str, MapPlan] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_by_role", {m.name: m for m in self.maps})

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def kind_name(self) -> str | None:
        return self.kind.name if self.kind is not None else None

    @property
    def has_kernel(self) -> bool:
        return self.kind is not None

    def map(self, role: str) -> MapPlan:
        """The map called ``role`` (src, dst, a, b, c, or a tensor's name)."""
        return self._by_role[role]

    @property
    def every_kernel(self) -> tuple[KernelPlan, ...]:
        """Every extern "C" kernel the spec makes: each kernel and the rest of its family."""
        return tuple(k for kernel in self.kernels for k in kernel.family)

    @property
    def kernel(self) -> KernelPlan:
        """The kernel of a kind that has one (copy, transpose, matmul)."""
        if len(self.kernels) != 1:
            raise ValueError(f"{self.name}: {len(self.kernels)} kernels, not one")
        return self.kernels[0]

    @property
    def launcher(self) -> Launcher | None:
        """How the kernel is called on arrays; None for a spec of maps only, or inspect kernels."""
        return self.kind.launcher if self.kind is not None else None

    @property
    def runs_here(self) -> bool:
        """A Hopper GPU can run the target's code."""
        return self.target.runs_here

    @property
    def description(self) -> str:
        """The spec's kernel in words: "copy kernel", or "no kernel" (maps only)."""
        return f"{self.kind.name} kernel" if self.kind is not None else "no kernel"

    @cached_property
    def cuda_headers(self) -> tuple[str, ...]:
        """The CUDA headers that define the element types at() gives."""
        return tuple(sorted({m.cuda_header for m in self.maps if m.cuda_header}))

    @cached_property
    def wgmma(self) -> WgmmaInstruction | None:
        """The wgmma instruction the header offers (N: the B tile's N), None where the spec has no A
        and B operand boxes."""
        by_operand = {m.mma_operand: m for m in self.maps if m.operand}
        if not {"a", "b"} <= by_operand.keys():
            return None
        a, b = by_operand["a"], by_operand["b"]
        a_type, b_type = DTYPES[a.dtype_name].ptx, DTYPES[b.dtype_name].ptx
        assert a_type is not None and b_type is not None, "rules mma-dtype and matmul-types admit tensor-core types"
        return WgmmaInstruction(b.operand.mn if b.operand else 0, a_type, "" if b_type == a_type else b_type)

    @property
    def sass_expected(self) -> tuple[str, ...]:
        """The opcodes each kernel's SASS must hold (`Kind.sass`): the wgmma of 16-bit operands is
        HGMMA, of fp8 ones QGMMA; a matmul whose epilogue stores by stmatrix, STSM."""
        if self.kind is None:
            return ()
        fp8 = self.wgmma is not None and self.wgmma.k == 32
        stmatrix = ("STSM",) if any(getattr(k.detail, "stmatrix", False) for k in self.kernels) else ()
        return tuple("QGMMA" if op == "HGMMA" and fp8 else op for op in self.kind.sass) + stmatrix

    @cached_property
    def wgmma_instructions(self) -> tuple[WgmmaInstruction, ...]:
        """Every wgmma instruction the header offers: the B tile's, and those of the kernels' other
        tile shapes (a matmul family), widest first."""
        first = self.wgmma
        if first is None:
            return ()
        wanted = {first.n} | {n for k in self.kernels for n in k.wgmma_n}
        return tuple(WgmmaInstruction(n, first.ptx_type, first.b_ptx_type) for n in sorted(wanted, reverse=True))


def tensor_maps(spec: Spec) -> list[MapSpec]:
    """The maps of ``spec``: those its kernel uses, in parameter order, or one per tensor, named by
    the tensor, for a spec without a kernel."""
    if spec.kernel is not None:
        return kinds.get(spec.kernel.kind).maps(spec)
    return [MapSpec(role=t.name, tensor=t, index=i, mma=t.mma, stores=t.reduce is not None)
            for i, t in enumerate(spec.tensors)]


def kernels(spec: Spec) -> tuple[KernelPlan, ...]:
    """The kernels the spec's kind would plan, before any rule is checked (a generator of specs
    sizes its candidates by them); ModelError where a box cannot be laid out."""
    if spec.kernel is None:
        return ()
    return kinds.get(spec.kernel.kind).plan(spec, tensor_maps(spec))


def _resolve(spec: Spec) -> tuple[Plan | None, list[Violation]]:
    kind = kinds.get(spec.kernel.kind) if spec.kernel is not None else None
    if kind is not None:
        kind_found = kind.rules.check(spec)
        if kind_found:  # the maps and kernels cannot be planned until the kind's rules pass
            return None, kind_found
    maps = tensor_maps(spec)
    kernels: tuple[KernelPlan, ...] | None = ()
    if kind is not None:
        try:
            kernels = kind.plan(spec, maps)
        except ModelError:  # a box that cannot be laid out: the TMA rules below say why
            kernels = None
    found: list[Violation] = []
    args: list[TensorMapArgs] = []
    for m in maps:
        smem: int | None = None
        threads: int | None = None
        if kind is not None:  # without a kernel the box itself is the budget; the user's kernel adds its own
            mine = [k for kernel in kernels or () for k in kernel.family if m.role in k.maps]
            smem = max((k.total_smem_bytes for k in mine), default=0)
            threads = max((k.threads for k in mine), default=0)
        a = tensor_map_args(spec, m, smem, threads, l2_hints=kind.l2_hints if kind else True,
                            reduces=kind.reduces if kind else True)
        names = SpecFieldNames(m.index, m.tensor.rank, derived=m.role if m.transposed else None,
                               explicit_strides=m.tensor.strides is not None)
        found.extend(v for v in run_rules(a, names) if v not in found)
        args.append(a)
    if found or kernels is None:
        return None, found
    plan = Plan(spec, kind, TARGETS[spec.target], tuple(map_plan(m, a) for m, a in zip(maps, args)), kernels)
    return plan, []


def check(spec: Spec) -> list[Violation]:
    """Every rule violation of ``spec``, fields named by their spec paths: the kind's rules, then
    (once those pass) every TMA rule of every map."""
    return _resolve(spec)[1]


def resolve(spec: Spec, source: str | None = None) -> Plan:
    """The plan of ``spec``; raises RuleError naming ``source`` (default: the spec's name) with
    every violation."""
    plan, found = _resolve(spec)
    if plan is None:
        raise RuleError(source or spec.name, found)
    return plan


def load(path: str | Path) -> Plan:
    """Read a spec file and resolve its plan; raises SpecError or RuleError."""
    return resolve(load_spec(path), str(path))


__all__ = ["Plan", "resolve", "check", "load", "tensor_maps", "kernels"]
