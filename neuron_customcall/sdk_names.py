"""The Neuron SDK's import names (``nki``, ``neuronxcc.nki``) as aliases of our packages.

Code written for the real SDK imports ``neuronxcc.nki.language as nl`` or ``nki.isa``; the
distribution in ``sdk/`` maps those names onto ``neuron_customcall.nki`` through
``alias_package``. An alias must be the *same* module object as its target, not a copy: a second
import of ``language.py`` under another name would create a second set of dtypes, buffers and
tracer state, and a kernel mixing ``nl.float32`` from one with tiles of the other would fail in
confusing ways. So every module of the target package is entered in ``sys.modules`` under the
alias name too, and Python's import system then finds it there without loading anything again.
"""
from __future__ import annotations

import importlib
import pkgutil
import sys
from types import ModuleType

__all__ = ["alias_package"]


def alias_package(alias: str, target: str) -> ModuleType:
    """Makes ``alias`` and every ``alias.<sub>`` import as ``target`` and ``target.<sub>``.

    Called from the alias package's own ``__init__``: it replaces itself in ``sys.modules``, and
    the import statement that ran it then binds the target (Python re-reads ``sys.modules`` after
    running a module). Submodules are imported now, so that ``import alias.sub`` needs no finder."""
    package = importlib.import_module(target)
    for info in pkgutil.walk_packages(package.__path__, f"{target}."):
        importlib.import_module(info.name)
    prefix = f"{target}."
    for name, module in list(sys.modules.items()):
        if name == target or name.startswith(prefix):
            sys.modules[alias + name[len(target):]] = module
    return package
