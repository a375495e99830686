"""`neuron_customcall.kernels` (descriptors, kernel builds) sits below the compiler: the compiler
imports it, never the other way round (issue 12: `kernels/inline.py` used to import
`compiler.errors`; inlining now lives in `neuron_customcall.compiler.inline`)."""
from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

KERNELS = Path(__file__).resolve().parents[3] / "neuron_customcall" / "kernels"


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), str(path))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


def test_no_kernels_module_imports_the_compiler():
    sources = sorted(KERNELS.rglob("*.py"))
    assert sources
    upward = {str(p.relative_to(KERNELS)): sorted(n for n in _imports(p) if n.startswith("neuron_customcall.compiler"))
              for p in sources}
    assert not {k: v for k, v in upward.items() if v}


def test_importing_kernels_loads_no_compiler_module():
    check = ("import sys, neuron_customcall.kernels, neuron_customcall.kernels.build\n"
             "bad = sorted(m for m in sys.modules if m.startswith('neuron_customcall.compiler'))\n"
             "assert not bad, bad\n")
    subprocess.run([sys.executable, "-c", check], check=True, timeout=120)
