"""The package's modules depend on each other one way: no import circle, type-only imports included,
and the errors every layer raises import nothing of tmagen."""

from __future__ import annotations

import ast
import graphlib
from pathlib import Path

from conftest import REPO

PACKAGE = REPO / "tmagen"


def _module_imports(path: Path, modules: set[str]) -> set[str]:
    """tmagen modules imported at module level by ``path``, inside `if TYPE_CHECKING:` too (a circle of
    type-only imports is still a circle for whoever reads or moves the code); imports inside functions,
    which break circles on purpose, are not counted."""
    found: set[str] = set()
    body = ast.parse(path.read_text()).body
    statements = [n for node in body for n in (node.body if isinstance(node, ast.If) else [node])]
    for node in statements:
        if isinstance(node, ast.ImportFrom) and node.module:
            if node.module == "tmagen":
                found |= {a.name for a in node.names if a.name in modules}
            elif node.module.startswith("tmagen."):
                found.add(node.module.split(".")[1])
        elif isinstance(node, ast.Import):
            found |= {a.name.split(".")[1] for a in node.names if a.name.startswith("tmagen.")}
    return found & modules


def test_module_imports_form_no_circle() -> None:
    modules = {p.stem for p in PACKAGE.glob("*.py")}
    graph = {m: _module_imports(PACKAGE / f"{m}.py", modules) - {m} for m in modules}
    try:
        order = list(graphlib.TopologicalSorter(graph).static_order())
    except graphlib.CycleError as exc:
        raise AssertionError(f"an import circle: {' -> '.join(exc.args[1])}") from None
    assert order.index("errors") < order.index("swizzle") < order.index("rules") < order.index("spec")


def test_errors_import_nothing_of_tmagen() -> None:
    modules = {p.stem for p in PACKAGE.glob("*.py")}
    assert _module_imports(PACKAGE / "errors.py", modules) == set()


def test_violation_is_still_a_public_name_of_rules() -> None:
    from tmagen import errors, rules

    assert rules.Violation is errors.Violation
