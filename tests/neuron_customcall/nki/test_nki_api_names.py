"""Every public name of NKI's reference (both generations; the list is nki_api_spec.py) exists in
our ``nki`` / ``neuronxcc.nki`` packages, and a name we refuse says so by name when called,
never with an ``AttributeError``."""
from __future__ import annotations

import importlib

import numpy as np
import pytest

import neuron_customcall.nki as ours
from neuron_customcall.nki import language as nl
from neuron_customcall.nki.errors import UnsupportedAPIError
from neuron_customcall.nki.reference_names import BY_GENERATION, our_module
from tests.neuron_customcall.nki.nki_api_spec import EXPECTED_MISSING, MODULES, SPEC, names
from tests.sdk.subproc import check, run_python

def _cases():
    for module in MODULES:
        gens = sorted({g for m, g in SPEC if m == module}) if module in {
            m for m, _ in BY_GENERATION} else [None]
        for gen in gens:
            listed = SPEC[module, gen].split() if gen else names(module)
            for name in sorted(listed):
                why = EXPECTED_MISSING.get((module, name))
                marks = [pytest.mark.xfail(strict=True, reason=f"expected missing: {why}")] \
                    if why else []
                ident = f"{module}.{name}" + (f"[{gen}]" if gen else "")
                yield pytest.param(module, gen, name, marks=marks, id=ident)


@pytest.mark.parametrize("module,generation,name", list(_cases()))
def test_spec_name_exists(module, generation, name):
    mod = our_module(module, generation)
    assert mod is not None, f"no module {module}"
    assert hasattr(mod, name), f"{module}.{name} is missing (if another change owns it, list it " \
                               "in tests/neuron_customcall/nki/nki_api_spec.py EXPECTED_MISSING)"


def test_the_expected_missing_list_only_names_spec_names():
    listed = {(m, n) for m in MODULES for n in names(m)}
    assert set(EXPECTED_MISSING) <= listed, sorted(set(EXPECTED_MISSING) - listed)


def test_the_spec_lists_are_whole_generations():
    # Spot checks that the lists were copied whole: a first and a last name of each stub.
    assert {"abs", "zeros_like", "static_cast", "spmd_dim"} <= set(SPEC["nki.language", "beta1"].split())
    assert {"MemoryRegion", "while_loop", "float8_e8m0fnu"} <= set(SPEC["nki.language", "beta2"].split())
    assert len(SPEC["nki.language", "beta1"].split()) == 125
    assert len(SPEC["nki.language", "beta2"].split()) == 133
    assert len(SPEC["nki.isa", "beta1"].split()) == 46
    assert len(SPEC["nki.isa", "beta2"].split()) == 67


_ALIASES = """
import importlib
for alias in ("nki", "neuronxcc.nki"):
    for sub in ("language", "isa", "compiler", "compiler.sbuf", "compiler.psum", "typing"):
        ours = "isa.beta2" if (alias, sub) == ("nki", "isa") else sub  # beta 2's own ISA
        assert importlib.import_module(f"{alias}.{sub}") is importlib.import_module(
            f"neuron_customcall.nki.{ours}"), (alias, sub)
print("ok")
"""


def test_sdk_import_names_reach_the_new_modules():
    # A fresh interpreter: in pytest's, tests/neuron_customcall/nki may be importable as `nki`.
    assert check(run_python(["-c", _ALIASES])).strip() == "ok"


REFUSED = sorted(n for n in dir(nl) if getattr(getattr(nl, n), "unsupported", None))


def test_refused_names_are_few_and_known():
    assert REFUSED == ["all_reduce", "gemm_grid", "gemm_stationary_grid"]


@pytest.mark.parametrize("name", REFUSED)
def test_a_refused_name_raises_naming_the_api(name):
    with pytest.raises(UnsupportedAPIError, match=rf"nki\.language\.{name} is not supported"):
        getattr(nl, name)(1, 2, 3)
    assert issubclass(UnsupportedAPIError, NotImplementedError)


def test_a_refused_call_in_a_kernel_names_the_kernel_and_line():
    @ours.jit
    def uses_all_reduce(a):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        t = nl.load(a)
        nl.store(out, nl.all_reduce(t, op=nl.add, program_axes=[0]))
        return out

    with pytest.raises(UnsupportedAPIError,
                       match=r"kernel 'uses_all_reduce' at .*test_nki_api_names.py:\d+: "
                             r"nki\.language\.all_reduce is not supported"):
        uses_all_reduce(np.zeros((4, 4), np.float32))


def test_framework_kernel_is_refused_by_name():
    with pytest.raises(UnsupportedAPIError, match="nki.FrameworkKernel"):
        ours.FrameworkKernel(func_name="k", func=lambda: None, grid=(1,))
