"""The package's modules depend on each other one way, in declared layers: from the pure core (errors,
limits, the swizzle model) up to the edges (the CLI). Every import counts, wherever it is in the file:
at module level, under `if TYPE_CHECKING:` (a circle of type-only imports is still a circle for whoever
reads or moves the code) and inside functions (a lazy import delays the dependency, it does not remove
it). Nothing in the package imports the lab, which the wheel does not ship."""

from __future__ import annotations

import ast
import graphlib
from pathlib import Path

from conftest import REPO

PACKAGE = REPO / "tmagen"

# Bottom to top. A module may import modules of its own layer or of a lower one, never of a higher one.
LAYERS: list[tuple[str, set[str]]] = [
    ("foundations: exceptions, limits, enums, element types", {"errors", "limits", "enums", "dtypes",
                                                               "strides"}),
    ("models: where TMA puts each byte, tensor-core descriptors, bank conflicts, fp8 values",
     {"swizzle", "mma", "banks", "fp8"}),
    ("rules, and the toolbox's facts and cluster rules", {"rules", "toolbox"}),
    ("the form of a spec and the kinds' sections, reading JSON and pasted dumps",
     {"form", "sections", "jsonio", "schema_errors", "pasted"}),
    ("the spec", {"spec"}),
    ("the plan's vocabulary and the rules' view of a spec", {"planning", "map_args"}),
    ("the kinds: rules, planning, launchers", {"kinds"}),
    ("the resolved plan", {"plan"}),
    ("rendered text and predictions", {"render", "conflicts"}),
    ("the machine: driver, compilers, framework arrays", {"runtime", "toolchain", "nvrtc", "arrays"}),
    ("running kernels", {"launch", "tensor_maps", "kernels", "strided", "quantize", "verify", "bench"}),
    ("ready-made operations", {"ops", "ops_matmul", "ops_matmul_fp8", "ops_quant", "torch_ops"}),
    ("outputs: folders, documents, explanations", {"build", "docs", "explain"}),
    ("the edges", {"cli", "__main__", "__init__"}),
]
KINDS = PACKAGE / "kinds"
# The kinds' spec sections (and what they share) sit below the spec, which is made of them; the rest of
# each kind's folder (rules, planning, launchers) reads the spec and sits above it.
SECTION_FILES = {*KINDS.glob("*/section.py"), KINDS / "sections.py", KINDS / "tiled.py"}

# Upward reaches allowed on purpose: none since the redesign (issue 17) gave banks' kernel prediction a
# resolved plan (tmagen.conflicts). The test fails on an entry that no longer exists, so the set only shrinks.
EXPECTED_UNTIL_REDESIGN: set[tuple[str, str]] = set()


def _modules() -> set[str]:
    return {p.stem for p in PACKAGE.glob("*.py")} | {"kinds", "sections"}


def _files(module: str) -> list[Path]:
    if module == "sections":
        return sorted(SECTION_FILES)
    if module == "kinds":
        return sorted(set(KINDS.rglob("*.py")) - SECTION_FILES)
    return [PACKAGE / f"{module}.py"]


def _node(dotted: str) -> str:
    """The graph node of module ``tmagen.X...``: a top-level module, or the kinds' sections or the kinds."""
    parts = dotted.split(".")
    if parts[1] != "kinds":
        return parts[1]
    sections = (len(parts) > 3 and parts[3] == "section") or parts[2:] in (["tiled"], ["sections"])
    return "sections" if sections else "kinds"


def _imports(path: Path, modules: set[str]) -> dict[str, set[str]]:
    """Every top-level package and tmagen module that ``path`` imports anywhere in the file, each with
    the lines that import it: tmagen modules by name, other packages as their top-level name."""
    found: dict[str, set[str]] = {}

    def add(name: str, line: int) -> None:
        found.setdefault(name, set()).add(f"{path.name}:{line}")

    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module == "tmagen":
                for a in node.names:
                    add(a.name if a.name in modules else "tmagen", node.lineno)
            elif node.module.startswith("tmagen."):
                add(_node(node.module), node.lineno)
            else:
                add(node.module.split(".")[0], node.lineno)
        elif isinstance(node, ast.ImportFrom):  # a relative import
            add(node.module.split(".")[0] if node.module else ".", node.lineno)
        elif isinstance(node, ast.Import):
            for a in node.names:
                parts = a.name.split(".")
                add(_node(a.name) if parts[0] == "tmagen" and len(parts) > 1 else parts[0], node.lineno)
    return found


def _graph() -> dict[str, dict[str, set[str]]]:
    modules = _modules()
    graph: dict[str, dict[str, set[str]]] = {}
    for m in modules:
        deps: dict[str, set[str]] = {}
        for f in _files(m):
            for k, v in _imports(f, modules).items():
                if k in modules and k != m:
                    deps.setdefault(k, set()).update(v)
        graph[m] = deps
    return graph


def _layer_of() -> dict[str, int]:
    return {m: i for i, (_, members) in enumerate(LAYERS) for m in members}


def test_every_module_has_one_layer() -> None:
    placed = [m for _, members in LAYERS for m in members]
    assert len(placed) == len(set(placed)), "a module in two layers"
    assert set(placed) == _modules(), (f"modules without a layer: {sorted(_modules() - set(placed))}; "
                                       f"layers naming no module: {sorted(set(placed) - _modules())}")


def test_no_module_imports_a_higher_layer() -> None:
    layer = _layer_of()
    upward = {(m, dep): lines for m, deps in _graph().items() for dep, lines in deps.items()
              if layer[dep] > layer[m]}
    unexpected = {k: sorted(v) for k, v in upward.items() if k not in EXPECTED_UNTIL_REDESIGN}
    assert not unexpected, "imports of a higher layer: " + "; ".join(
        f"{m} ({LAYERS[layer[m]][0]}) imports {dep} ({LAYERS[layer[dep]][0]}) at {', '.join(lines)}"
        for (m, dep), lines in sorted(unexpected.items()))
    gone = EXPECTED_UNTIL_REDESIGN - set(upward)
    assert not gone, f"no longer imported, delete from EXPECTED_UNTIL_REDESIGN: {sorted(gone)}"


def test_module_imports_form_no_circle() -> None:
    graph = {m: set(deps) - {dep for (mod, dep) in EXPECTED_UNTIL_REDESIGN if mod == m}
             for m, deps in _graph().items()}
    try:
        order = list(graphlib.TopologicalSorter(graph).static_order())
    except graphlib.CycleError as exc:
        raise AssertionError(f"an import circle: {' -> '.join(exc.args[1])}") from None
    # the spec no longer reads the rules (the plan checks the spec against them): both lie below the plan
    assert order.index("errors") < order.index("swizzle") < order.index("rules") < order.index("plan")
    assert order.index("form") < order.index("spec") < order.index("planning") < order.index("plan")


def test_the_package_never_imports_the_lab() -> None:
    """lab/ (campaign, fuzz, oracle, peers, reports) lives beside the package and is not in the wheel."""
    modules = _modules()
    reaches = {p.name: sorted(_imports(p, modules)["lab"]) for p in sorted(PACKAGE.rglob("*.py"))
               if "lab" in _imports(p, modules)}
    assert reaches == {}, f"the package imports the lab: {reaches}"


def test_the_checker_sees_imports_inside_functions_and_type_checking(tmp_path: Path) -> None:
    source = tmp_path / "m.py"
    source.write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from tmagen.spec import Spec\n"
                      "def f():\n    import tmagen.render\n    from tmagen import verify, errors\n"
                      "    class A:\n        def g(self):\n            from lab import fuzz\n")
    assert set(_imports(source, {"spec", "render", "verify", "errors"})) == {
        "typing", "spec", "render", "verify", "errors", "lab"}


def test_errors_import_nothing_of_tmagen() -> None:
    modules = _modules()
    assert not set(_imports(PACKAGE / "errors.py", modules)) & (modules | {"tmagen", "lab"})


def test_every_exception_class_is_defined_in_errors() -> None:
    """One exception family in one file; the modules that raise them import them from there."""
    elsewhere = []
    for path in sorted(PACKAGE.glob("*.py")):
        if path.name == "errors.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef) and any(
                    isinstance(b, (ast.Name, ast.Attribute)) and (getattr(b, "id", None) or getattr(b, "attr", ""))
                    .endswith(("Error", "Exception", "NoGpu")) for b in node.bases):
                elsewhere.append(f"{path.name}:{node.lineno} {node.name}")
    assert elsewhere == [], elsewhere


def test_moved_exceptions_keep_their_old_names() -> None:
    from tmagen import errors, nvrtc, runtime, toolchain

    assert runtime.GpuError is errors.GpuError and runtime.NoGpu is errors.NoGpu
    assert toolchain.ToolchainError is errors.ToolchainError and nvrtc.NvrtcError is errors.NvrtcError


def test_violation_is_still_a_public_name_of_rules() -> None:
    from tmagen import errors, rules

    assert rules.Violation is errors.Violation
