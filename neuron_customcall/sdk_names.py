"""The Neuron SDK's import names (``nki``, ``neuronxcc.nki``) as aliases of our packages.

Code written for the real SDK imports ``neuronxcc.nki.language as nl`` or ``nki.isa``; the
distribution in ``sdk/`` maps those names onto ``neuron_customcall.nki`` through
``alias_package``. An alias must be the *same* module object as its target, not a copy: a second
import of ``language.py`` under another name would create a second set of dtypes, buffers and
tracer state, and a kernel mixing ``nl.float32`` from one with tiles of the other would fail in
confusing ways. So every module of the target package is entered in ``sys.modules`` under the
alias name too, and Python's import system then finds it there without loading anything again.

One difference between the SDK's names is real: ``nki.isa`` is NKI beta 2 (instructions write
into ``dst``) while ``neuronxcc.nki.isa`` is beta 1 (they return tiles). ``overrides`` maps such
a submodule to another of our modules (``{"isa": "neuron_customcall.nki.isa.beta2"}``); the
alias's top-level module is then a facade of its own whose other attributes are the target's.
"""
from __future__ import annotations

import importlib
import pkgutil
import sys
from types import ModuleType

__all__ = ["alias_package"]


def alias_package(alias: str, target: str, overrides: dict[str, str] | None = None) -> ModuleType:
    """Makes ``alias`` and every ``alias.<sub>`` import as ``target`` and ``target.<sub>``, except
    that ``alias.<name>`` for a name in ``overrides`` is the module named there.

    Called from the alias package's own ``__init__``: it replaces itself in ``sys.modules``, and
    the import statement that ran it then binds the target (Python re-reads ``sys.modules`` after
    running a module). Submodules are imported now, so that ``import alias.sub`` needs no finder."""
    package = importlib.import_module(target)
    for info in pkgutil.walk_packages(package.__path__, f"{target}."):
        importlib.import_module(info.name)
    overrides = overrides or {}
    replaced = {f"{target}.{sub}" for sub in overrides}
    prefix = f"{target}."
    for name, module in list(sys.modules.items()):
        if (name == target or name.startswith(prefix)) and not any(
                name == r or name.startswith(r + ".") for r in replaced):
            sys.modules[alias + name[len(target):]] = module
    if not overrides:
        return package
    top = _facade(alias, package)
    for sub, other in overrides.items():
        module = importlib.import_module(other)
        setattr(top, sub, module)
        sys.modules[f"{alias}.{sub}"] = module
    sys.modules[alias] = top
    return top


def _facade(alias: str, package: ModuleType) -> ModuleType:
    """A module named ``alias`` whose attributes are ``package``'s unless set on it."""
    top = ModuleType(alias, package.__doc__)
    top.__path__ = []  # a package (its submodules are all in sys.modules already)
    top.__getattr__ = lambda name: getattr(package, name)
    top.__dir__ = lambda: sorted(set(dir(package)) | set(vars(top)))
    top.__all__ = list(getattr(package, "__all__", ()))
    return top
