"""The package's layers, as ``docs/architecture.md`` states them, hold in the code.

The page's table (folder | layer | may import) is the rule: this test reads it, builds
windowguard's import graph from the source (every ``import`` and ``from ... import``,
function-level ones included), and fails on

* an import from a folder into one its row does not name (upward or sideways);
* an import circle between modules (imports under ``if TYPE_CHECKING:`` never run, so
  they may close a circle, but they must still respect the layers);
* a folder of the package the table does not list, or a row naming no folder;
* a module over the size limit.

So the picture a maintainer reads first cannot drift from the code.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "src" / "windowguard"
ARCHITECTURE = ROOT / "docs" / "architecture.md"
FACADE = "__init__.py"
MAX_LINES = 700


@dataclass(frozen=True, slots=True)
class Import:
    source: str  # the importing module, dotted
    target: str  # the imported module (the longest prefix that is a module)
    line: int
    type_only: bool  # under ``if TYPE_CHECKING:``


def _modules() -> dict[str, Path]:
    found = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


MODULES = _modules()


def _module_of(name: str) -> str | None:
    """The module ``name`` refers to: itself, or the longest prefix that is a module
    (``pkg.mod.Name`` -> ``pkg.mod``)."""
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def _type_checking_nodes(tree: ast.Module) -> set[int]:
    inside: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            inside.update(id(child) for stmt in node.body for child in ast.walk(stmt))
    return inside


def _imports() -> Iterator[Import]:
    for module, path in MODULES.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        package = module if path.name == FACADE else module.rpartition(".")[0]
        type_only = _type_checking_nodes(tree)
        for node in ast.walk(tree):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                    stem = ".".join(base + ([node.module] if node.module else []))
                else:
                    stem = node.module or ""
                # ``from pkg import sub`` imports the submodule; ``from mod import Name``
                # the module.
                targets = [
                    f"{stem}.{alias.name}" if f"{stem}.{alias.name}" in MODULES else stem
                    for alias in node.names
                ]
            for name in targets:
                if name != "windowguard" and not name.startswith("windowguard."):
                    continue
                target = _module_of(name)
                if target is not None and target != module:
                    yield Import(module, target, node.lineno, id(node) in type_only)


IMPORTS = list(_imports())


def _folder(module: str) -> str:
    """The table's row for ``module``: its top folder under windowguard/, or the facade."""
    parts = module.split(".")
    if len(parts) == 1:
        return FACADE
    path = MODULES[module]
    if len(parts) == 2 and path.name != FACADE:
        return path.name  # a module directly under windowguard/: it needs a row of its own
    return parts[1] + "/"


def _rules() -> dict[str, set[str]]:
    """``docs/architecture.md``'s table: folder -> the folders it may import."""
    text = ARCHITECTURE.read_text(encoding="utf-8")
    rows = re.findall(r"^\|\s*(`[^|]+`)\s*\|[^|]*\|([^|]*)\|\s*$", text, flags=re.MULTILINE)
    rules: dict[str, set[str]] = {}
    for folders, allowed in rows:
        names = re.findall(r"`([^`]+)`", folders)
        may = set(re.findall(r"`([^`]+)`", allowed))
        for name in names:
            rules[name] = may
    assert rules, f"no layer table (| folder | layer | may import |) in {ARCHITECTURE}"
    return rules


RULES = _rules()


def test_every_folder_of_the_package_has_a_row_and_every_row_a_folder() -> None:
    folders = {_folder(module) for module in MODULES}
    assert folders - set(RULES) == set(), "folders with no row in docs/architecture.md"
    data_only = {
        f"{path.name}/"
        for path in PACKAGE.iterdir()
        if path.is_dir() and not path.name.startswith("__") and not any(path.rglob("*.py"))
    }
    assert set(RULES) - folders - data_only == set(), "rows naming no folder of code"
    for folder, allowed in RULES.items():
        assert allowed <= set(RULES), f"{folder} may import unknown folders {allowed}"


def test_no_module_imports_upward_or_sideways() -> None:
    wrong = [
        f"{found.source} (line {found.line}) imports {found.target}: "
        f"{_folder(found.source)} may import only {sorted(RULES[_folder(found.source)])}"
        for found in IMPORTS
        if _folder(found.target) != _folder(found.source)
        and _folder(found.target) not in RULES[_folder(found.source)]
    ]
    assert wrong == []


def _circles() -> list[list[str]]:
    """Strongly connected components (more than one module) of the run-time graph."""
    graph: dict[str, set[str]] = {module: set() for module in MODULES}
    for found in IMPORTS:
        if not found.type_only:
            graph[found.source].add(found.target)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    circles: list[list[str]] = []
    counter = 0

    def visit(node: str) -> None:
        nonlocal counter
        index[node] = low[node] = counter
        counter += 1
        stack.append(node)
        on_stack.add(node)
        for nxt in graph[node]:
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                circles.append(sorted(component))

    for node in graph:
        if node not in index:
            visit(node)
    return circles


def test_no_import_circles() -> None:
    assert _circles() == []


def test_the_graph_is_what_the_rules_are_checked_on() -> None:
    # The checks above prove nothing if the graph missed imports: known edges of each kind
    # (relative, absolute, function-level, type-only) are in it.
    edges = {(found.source, found.target): found for found in IMPORTS}
    assert ("windowguard.pipeline.manager", "windowguard.accounting.ledger") in edges
    assert ("windowguard.core.exceptions", "windowguard.core.redact") in edges
    assert ("windowguard.run._conversation", "windowguard.pipeline.manager") in edges
    assert edges[("windowguard.pipeline._edit_stage", "windowguard.pipeline.manager")].type_only
    # and a wrong import would be caught
    assert "pipeline/" not in RULES["core/"] and "run/" not in RULES["accounting/"]


def test_no_module_over_the_size_limit() -> None:
    sizes = {
        module: len(path.read_text(encoding="utf-8").splitlines())
        for module, path in MODULES.items()
    }
    assert {module: n for module, n in sizes.items() if n > MAX_LINES} == {}
    assert max(sizes.values()) > 100  # the sizes were read
