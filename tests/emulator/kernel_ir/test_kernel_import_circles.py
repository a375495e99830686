"""No import circles inside the kernel packages (the IR, its executor, the NKI front end): each
module can be read knowing only what is below it. Imports inside functions count (a deferred
import is a circle all the same); imports under ``if TYPE_CHECKING:`` only name types and do
not. Static: the source is parsed, nothing is imported."""
from __future__ import annotations

import ast
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[3]
PACKAGES = ("emulator/kernel_ir", "emulator/kernel_exec", "neuron_customcall/nki")


def _modules(package: str) -> dict[str, pathlib.Path]:
    out = {}
    for path in (ROOT / package).rglob("*.py"):
        rel = path.relative_to(ROOT).with_suffix("")
        parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
        out[".".join(parts)] = path
    return out


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _imports(name: str, path: pathlib.Path, known: set[str]) -> set[str]:
    """The modules of ``known`` that module ``name`` imports."""
    is_pkg = path.name == "__init__.py"
    here = name.split(".") if is_pkg else name.split(".")[:-1]
    found: set[str] = set()

    def target(base: str, names: list[str]) -> None:
        for n in names:
            if f"{base}.{n}" in known:
                found.add(f"{base}.{n}")
            elif base in known:
                found.add(base)

    def visit(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _is_type_checking(child):
                for other in child.orelse:
                    visit(other)
                continue
            if isinstance(child, ast.Import):
                for alias in child.names:
                    parts = alias.name.split(".")
                    for i in range(len(parts), 0, -1):
                        if ".".join(parts[:i]) in known:
                            found.add(".".join(parts[:i]))
                            break
            elif isinstance(child, ast.ImportFrom):
                if child.level:
                    base = ".".join(here[:len(here) - child.level + 1])
                    base = f"{base}.{child.module}" if child.module else base
                else:
                    base = child.module or ""
                target(base, [a.name for a in child.names])
            visit(child)

    visit(ast.parse(path.read_text(), str(path)))
    found.discard(name)
    return found


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def connect(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in graph:
        if v not in index:
            connect(v)
    return out


def _graph() -> dict[str, set[str]]:
    modules: dict[str, pathlib.Path] = {}
    for package in PACKAGES:
        modules.update(_modules(package))
    known = set(modules)
    graph = {name: _imports(name, path, known) for name, path in modules.items()}
    # A package's __init__ runs before any of its modules; a module importing its own package
    # (``from . import x`` of a sibling) reaches the sibling, not a circle through __init__.
    for name in graph:
        graph[name] = {m for m in graph[name] if not (m in known and name.startswith(m + "."))}
    return graph


def test_the_kernel_packages_have_no_import_circles():
    assert _circles(_graph()) == []


def test_the_checker_finds_a_circle():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert _circles(graph) == [["a", "b", "c"]]


@pytest.mark.parametrize("module, imported", [
    ("neuron_customcall.nki.tile", "neuron_customcall.nki.language"),
    ("neuron_customcall.nki.lang.tensor_ops", "neuron_customcall.nki.isa"),
    ("neuron_customcall.nki.tracer", "neuron_customcall.nki.indexing"),
])
def test_the_old_circles_are_gone(module, imported):
    assert imported not in _graph()[module]
