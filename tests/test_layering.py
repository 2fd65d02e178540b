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
    ("foundations: exceptions, limits, enums, element types", {"errors", "limits", "enums", "dtypes"}),
    ("models: where TMA puts each byte, tensor-core descriptors", {"swizzle", "mma"}),
    ("rules and plans", {"rules", "plan"}),
    ("the spec", {"spec"}),
    ("predictors", {"banks"}),
    ("rendered text", {"render"}),
    ("the machine: driver, compilers, framework arrays", {"runtime", "toolchain", "nvrtc", "arrays"}),
    ("running kernels", {"launch", "tensor_maps", "kernels", "verify", "bench"}),
    ("ready-made operations", {"ops", "torch_ops"}),
    ("outputs: folders, documents, explanations", {"build", "docs", "explain"}),
    ("the edges", {"cli", "__main__", "__init__"}),
]

# Upward reaches that exist today only in modules the core redesign (issue 17) rewrites: banks, a pure
# predictor, renders and verifies a spec inside its functions to find the kernel's own offsets. The
# redesign gives banks a resolved plan instead; delete each entry when its import is gone (the test
# fails on an entry that no longer exists, so the set only shrinks).
EXPECTED_UNTIL_REDESIGN: set[tuple[str, str]] = {
    ("banks", "render"),
    ("banks", "verify"),
}


def _modules() -> set[str]:
    return {p.stem for p in PACKAGE.glob("*.py")}


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
                add(node.module.split(".")[1], node.lineno)
            else:
                add(node.module.split(".")[0], node.lineno)
        elif isinstance(node, ast.ImportFrom):  # a relative import
            add(node.module.split(".")[0] if node.module else ".", node.lineno)
        elif isinstance(node, ast.Import):
            for a in node.names:
                parts = a.name.split(".")
                add(parts[1] if parts[0] == "tmagen" and len(parts) > 1 else parts[0], node.lineno)
    return found


def _graph() -> dict[str, dict[str, set[str]]]:
    modules = _modules()
    return {m: {k: v for k, v in _imports(PACKAGE / f"{m}.py", modules).items() if k in modules and k != m}
            for m in modules}


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
    assert order.index("errors") < order.index("swizzle") < order.index("rules") < order.index("spec")


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
