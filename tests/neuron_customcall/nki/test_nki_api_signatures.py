"""Every nki.language function takes its arguments as both generations' stubs write them
(nki_api_spec.SIGNATURES): each positional parameter in its place, each parameter by name
(beta 1 and beta 2 sometimes name the same argument differently: ``copy(src)`` / ``copy(x)``,
``device_print(prefix, x)`` / ``device_print(print_prefix, tensor)``; both names work)."""
from __future__ import annotations

import ast
import inspect

import pytest

from neuron_customcall.nki import language as nl
from tests.neuron_customcall.nki.nki_api_spec import SIGNATURES


def _stubs():
    for gen, text in SIGNATURES.items():
        for line in text.split("\n"):
            line = line.strip()
            if line:
                fn = ast.parse(f"def {line}: pass").body[0]
                yield pytest.param(gen, fn.name, fn.args, id=f"{gen}-{fn.name}")


def _aliases(f) -> dict[str, str]:
    return getattr(f, "nki_aliases", {})


@pytest.mark.parametrize("gen, name, args", list(_stubs()))
def test_stub_signature_binds(gen, name, args):
    f = getattr(nl, name)
    if getattr(f, "unsupported", None):
        pytest.skip(f"nl.{name} is refused by name")
    sig = inspect.signature(f)
    aliases = _aliases(f)
    positional = [a.arg for a in args.posonlyargs + args.args]
    if args.vararg is None:
        # every stub parameter passed positionally, in order (keyword-only ones by name)
        keywords = {aliases.get(k.arg, k.arg): 0 for k in args.kwonlyargs
                    if aliases.get(k.arg, k.arg) in sig.parameters}
        try:
            sig.bind(*range(len(positional)), **keywords)
        except TypeError as e:
            pytest.fail(f"nl.{name}: the stub's {len(positional)} positional parameters "
                        f"{positional} do not bind to {sig}: {e}")
    params = sig.parameters
    takes_kwargs = any(p.kind is p.VAR_KEYWORD for p in params.values())
    ours = [p for p in params if params[p].kind in (inspect.Parameter.POSITIONAL_OR_KEYWORD,
                                                    inspect.Parameter.KEYWORD_ONLY)]
    for i, pname in enumerate(positional + [a.arg for a in args.kwonlyargs]):
        if pname in params or aliases.get(pname) in params or takes_kwargs:
            continue
        pytest.fail(f"nl.{name} has no parameter {pname!r} (the {gen} stub's); ours: {ours}")
    for i, pname in enumerate(positional):
        if args.vararg is None and i < len(ours) and ours[i] != pname and \
                aliases.get(pname) != ours[i]:
            pytest.fail(f"nl.{name}: positional parameter {i} is {pname!r} in the {gen} stub "
                        f"but {ours[i]!r} here")
