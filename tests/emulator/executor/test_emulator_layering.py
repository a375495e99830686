"""The layering rules (docs/design.md): loading and running artifacts imports neither `hlo`,
`neuron_customcall`, torch nor jax; `import emulator` alone stays light; `hlo` and `emulator`
import nothing else of ours; within neuron_customcall no module imports a higher layer; and no
two modules import each other (directly or round a circle) unless a reason is written down."""
from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

_CHECK = """
import sys
import emulator
assert "numpy" not in sys.modules, "import emulator must stay light"
import emulator.artifact, emulator.program, emulator.executor, emulator.ops
from emulator import load_artifact, Executable, ArtifactError
bad = sorted(m for m in sys.modules if m.split(".")[0] in ("hlo", "neuron_customcall", "torch", "jax", "jaxlib",
                                                          "torch_xla"))
assert not bad, bad
"""


def test_emulator_imports_nothing_above_it():
    subprocess.run([sys.executable, "-c", _CHECK], check=True, cwd=".", timeout=120)


# -- the import graph of the three packages: no circles between modules, no upward imports --------
_ROOT = Path(__file__).resolve().parents[3]
_PACKAGES = ("hlo", "emulator", "neuron_customcall")

#: Import circles between modules that are allowed, each with the reason. A circle found in the
#: code must lie inside one of these; anything else fails.
_ALLOWED_CIRCLES: dict[frozenset[str], str] = {
    frozenset({"hlo.ir.convert", "hlo.ir.module"}):
        "HloModule.to_proto/to_bytes (hlo's documented convenience API) call the converter lazily, "
        "and the converter builds HloModules",
    frozenset({"neuron_customcall.cli", "neuron_customcall.commands", "neuron_customcall.commands.cache_cmd",
               "neuron_customcall.commands.compile_cmd", "neuron_customcall.commands.hlo_cmd",
               "neuron_customcall.commands.inspect_cmd", "neuron_customcall.commands.profile_cmd",
               "neuron_customcall.commands.run_cmd"}):
        "commands register with cli's @command decorator and cli imports the commands package to "
        "collect them: one registry split over two modules",
}

#: Layers of neuron_customcall, lowest first: a module may import its own layer and those below.
_LAYERS: list[set[str]] = [
    {"torch_dtypes", "sdk_names", "sizes", "progress"},  # tables, aliases, size parsing, progress lines: nothing of ours
    {"nki", "cpp"},                      # kernel front ends
    {"kernels"},                         # the kernel descriptor both front ends produce
    {"compiler"},                        # HLO -> artifact
    {"cache", "debug_dump"},
    {"backend"},                         # compile (cached) and run
    {"profile", "jax", "torch_xla", "custom_op", "pjrt", "distributed"},  # user APIs, framework adapters, the PJRT plugin
    {"cli", "commands", "__main__"},     # the command line
]
#: Upward imports that are allowed, each with the reason.
_ALLOWED_UPWARD: dict[tuple[str, str], str] = {}


def _modules() -> dict[str, Path]:
    mods = {}
    for pkg in _PACKAGES:
        for f in (_ROOT / pkg).rglob("*.py"):
            parts = list(f.relative_to(_ROOT).with_suffix("").parts)
            mods[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = f
    return mods


def _runtime_imports(tree: ast.AST) -> list[ast.AST]:
    """Import statements anywhere (also inside functions) but under `if TYPE_CHECKING:`."""
    found = []

    def walk(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
                for sub in child.orelse:
                    walk(sub)
                continue
            if isinstance(child, (ast.Import, ast.ImportFrom)):
                found.append(child)
            walk(child)
    walk(tree)
    return found


def _import_graph() -> dict[str, set[str]]:
    """module -> the modules of the three packages it imports (`from pkg import submodule` points
    at the submodule; `from pkg import name` at the package)."""
    mods = _modules()
    graph: dict[str, set[str]] = {m: set() for m in mods}
    for m, f in mods.items():
        is_pkg = f.name == "__init__.py"
        for node in _runtime_imports(ast.parse(f.read_text())):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            else:
                base = node.module or ""
                if node.level:
                    here = m.split(".") if is_pkg else m.split(".")[:-1]
                    base = ".".join(here[: len(here) - node.level + 1] + ([node.module] if node.module else []))
                subs = [f"{base}.{a.name}" for a in node.names]
                targets = [s for s in subs if s in mods] + ([base] if any(s not in mods for s in subs) else [])
            for t in targets:
                parts = t.split(".")
                while parts and ".".join(parts) not in mods:
                    parts.pop()
                if parts and ".".join(parts) != m:
                    graph[m].add(".".join(parts))
    return graph


def _circles(graph: dict[str, set[str]]) -> list[set[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(graph[w]))))
                elif w in on_stack:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = set()
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    comp.add(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    found.append(comp)
    return found


def test_no_import_circles_between_modules_but_the_explained_ones():
    unexplained = [sorted(c) for c in _circles(_import_graph())
                   if not any(c <= allowed for allowed in _ALLOWED_CIRCLES)]
    assert not unexplained, f"import circles without a reason in _ALLOWED_CIRCLES: {unexplained}"


def test_the_circle_finder_finds_circles():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set()}
    assert _circles(graph) == [{"a", "b", "c"}]


def _layer(module: str) -> int | None:
    parts = module.split(".")
    if parts[0] != "neuron_customcall" or len(parts) < 2:
        return None
    return next((k for k, names in enumerate(_LAYERS) if parts[1] in names), None)


def test_no_upward_imports():
    graph = _import_graph()
    unplaced = sorted({m.split(".")[1] for m in graph if m.startswith("neuron_customcall.") and _layer(m) is None})
    assert not unplaced, f"neuron_customcall modules in no layer of _LAYERS: {unplaced}"
    upward = []
    for m, targets in graph.items():
        top = m.split(".")[0]
        for t in targets:
            if t.split(".")[0] != top and top != "neuron_customcall":
                upward.append((m, t))  # hlo and emulator import nothing else of ours
            elif _layer(m) is not None and _layer(t) is not None and _layer(t) > _layer(m):
                upward.append((m, t))
    unexplained = sorted(e for e in upward if e not in _ALLOWED_UPWARD)
    assert not unexplained, f"upward imports: {unexplained}"
