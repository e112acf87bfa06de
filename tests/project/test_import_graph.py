"""The static import graph of `latentcode` and `probes`: no circles, and no library module imports the command line.

Read from the source with `ast`, so imports inside functions count as much as those at the top (a function-local
import hides a circle from an import-time check, not from this one). Imports under `if TYPE_CHECKING:` are left
out: they never run.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("latentcode", "probes")
CLI_MODULES = {"latentcode.cli", "latentcode.__main__"}


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _is_cli(module: str) -> bool:
    return module in CLI_MODULES or module.startswith("latentcode.cli.")


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for package in PACKAGES for p in sorted((ROOT / package).rglob("*.py"))}


def _type_checking_nodes(tree: ast.AST) -> set[int]:
    skipped = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If):
            test = node.test
            name = test.id if isinstance(test, ast.Name) else test.attr if isinstance(test, ast.Attribute) else ""
            if name == "TYPE_CHECKING":
                skipped.update(id(n) for child in node.body for n in ast.walk(child))
    return skipped


def _resolve(module: str, is_package: bool, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    base = module.split(".") if is_package else module.split(".")[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def import_graph() -> dict[str, set[str]]:
    """module -> the project modules it imports, anywhere in its source (TYPE_CHECKING blocks left out)."""
    modules = _modules()
    graph: dict[str, set[str]] = {}
    for module, path in modules.items():
        tree = ast.parse(path.read_text(), filename=str(path))
        skipped = _type_checking_nodes(tree)
        targets: set[str] = set()
        for node in ast.walk(tree):
            if id(node) in skipped:
                continue
            if isinstance(node, ast.Import):
                targets.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                base = _resolve(module, path.name == "__init__.py", node)
                targets.add(base)
                targets.update(f"{base}.{alias.name}" for alias in node.names)  # `from pkg import module`
        # a target names a module (or a name inside one): keep the project modules
        graph[module] = {t for t in targets if t in modules and t != module}
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_the_graph_reader_sees_function_local_imports_and_skips_type_checking(tmp_path):
    source = "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import a\ndef f():\n    import b\n"
    tree = ast.parse(source)
    skipped = _type_checking_nodes(tree)
    seen = {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) and id(node) not in skipped
            for alias in node.names}
    assert seen == {"b"}
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_no_module_imports_itself_back_through_others():
    """0 circles at file level: every module, a package's `__init__` included, with every import it makes
    anywhere in its source (function-local ones too), only those under `if TYPE_CHECKING:` left out."""
    cycles = _cycles(import_graph())
    assert not cycles, f"import circles between files (function-local imports included): {cycles}"


def test_no_library_module_imports_the_command_line():
    graph = import_graph()
    offenders = {m: sorted(t for t in targets if _is_cli(t)) for m, targets in graph.items() if not _is_cli(m)}
    offenders = {m: t for m, t in offenders.items() if t}
    assert not offenders, f"library modules importing the command line: {offenders}"


def _room(module: str) -> str:
    """`latentcode.training.train` -> `latentcode.training`; a top-level module is its own room."""
    return ".".join(module.split(".")[:2])


def test_the_rooms_of_latentcode_import_one_way():
    """The subpackages follow the data path: no two rooms import each other, even through a third (top-level
    modules such as `constants.py` count as rooms of their own)."""
    rooms: dict[str, set[str]] = {}
    for module, targets in import_graph().items():
        if not module.startswith("latentcode."):
            continue
        room = _room(module)
        rooms.setdefault(room, set()).update(
            _room(t) for t in targets if t.startswith("latentcode.") and _room(t) != room
        )
    assert not _cycles(rooms), f"rooms importing each other: {_cycles(rooms)}"
