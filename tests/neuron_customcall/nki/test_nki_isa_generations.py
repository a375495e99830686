"""The two generations of ``nki.isa``: beta 1 (``neuronxcc.nki.isa``, ``neuron_customcall.nki.isa``:
instructions return tiles) and beta 2 (``nki.isa``: ``dst`` first). Every public name of each
generation's API reference exists (the lists below are the references' function and enum
names); the enums have the references' values; what is not implemented refuses by name with a
``NotImplementedError`` (never an ``AttributeError``); the SDK import names pick the right one."""
from __future__ import annotations


import numpy as np
import pytest

from neuron_customcall import nki
from neuron_customcall.nki import isa as beta1
from neuron_customcall.nki import language as nl
from neuron_customcall.nki.errors import HardwareRuleError
from neuron_customcall.nki.isa import beta2
from tests.sdk.subproc import check, run_python

#: neuronxcc.nki.isa (beta 1): functions, enums and constants of its API reference.
BETA1 = """activation activation_reduce affine_select bn_aggr bn_stats builtin_custom_op dge_mode
dma_engine dma_copy dma_transpose dropout engine fp32 get_nc_version gpsimd_engine iota local_gather max8
memset nc_find_index8 nc_match_replace8 nc_matmul nc_stream_shuffle nc_transpose nc_version
oob_mode range_select reciprocal reduce_cmd scalar_engine scalar_tensor_tensor select_reduce
sequence_bounds tensor_copy tensor_copy_dynamic_dst tensor_copy_dynamic_src tensor_copy_predicated
tensor_engine tensor_partition_reduce tensor_reduce tensor_scalar tensor_scalar_reduce
tensor_tensor tensor_tensor_scan unknown_engine vector_engine constants""".split()

#: nki.isa (beta 2): functions, enums and classes of its API reference.
BETA2 = """engine reduce_cmd dge_mode oob_mode matmul_perf_mode nc_version dma_engine NkiInstruction
NkiValidationError get_nc_sub_version get_nc_version dma_copy tensor_copy memset
tensor_copy_predicated nc_matmul nc_matmul_mx nc_transpose dma_transpose tensor_tensor
tensor_scalar tensor_reduce tensor_partition_reduce tensor_scalar_cumulative activation
activation_reduce activate2 iota affine_select local_gather nc_n_gather bn_stats bn_aggr
tensor_tensor_scan nc_stream_shuffle rng dropout set_rng_seed rand_set_state rand_get_state rand2
exponential reciprocal max8 sequence_bounds scalar_tensor_tensor tensor_scalar_reduce
core_barrier dma_compute quantize_mx range_select select_reduce sendrecv register_alloc
register_move register_load register_store nc_find_index8 nc_match_replace8 nonzero_with_count
topk tensor_engine vector_engine scalar_engine gpsimd_engine unknown_engine""".split()


@pytest.mark.parametrize("module, names", [(beta1, BETA1), (beta2, BETA2)])
def test_every_reference_name_exists(module, names):
    missing = [n for n in names if not hasattr(module, n)]
    assert not missing


def test_enum_values_are_each_generations_own():
    assert beta2.dge_mode.none.value == 3 and beta1.dge_mode.none == 0
    assert beta2.dge_mode.unknown.value == 0 and beta1.dge_mode.unknown == 3
    assert {e.name: e.value for e in beta2.engine} == {
        "unknown": 0, "tensor": 1, "scalar": 2, "gpsimd": 3, "dma": 4, "vector": 5, "sync": 6}
    # neuronxcc's later releases (AWS's 2.31 examples) have load_reduce with beta 2's value
    assert beta2.reduce_cmd.load_reduce.value == 4 and beta1.reduce_cmd.load_reduce == 4
    assert beta2.matmul_perf_mode.double_row.value == "double_row"
    assert [e.value for e in beta2.nc_version] == [2, 3, 4]
    assert isinstance(beta1.engine.vector, int) and not isinstance(beta2.engine.vector, int)
    assert beta2.dma_engine.gpsimd_dma.value == 2 and beta2.oob_mode.skip.value == 1
    assert beta1.constants.engine is beta1.engine and beta1.fp32.min == np.finfo(np.float32).min
    assert beta2.vector_engine is beta2.engine.vector


@pytest.mark.parametrize("target", ["", "trn2", "gen3"])
def test_target_version(monkeypatch, target):
    """gen2 also on trn2: the emulated core executes NeuronCore-v2 semantics whatever topology the
    platform option selects, so a kernel branching on the version takes the path that is run."""
    monkeypatch.setenv("NEURON_PLATFORM_TARGET_OVERRIDE", target)
    assert beta2.get_nc_version() is beta2.nc_version.gen2
    assert beta1.get_nc_version() == beta1.nc_version.gen2
    assert beta2.get_nc_sub_version() == 0


def test_validation_errors_are_hardware_rule_errors():
    assert issubclass(beta2.NkiValidationError, HardwareRuleError)
    assert beta1.NkiValidationError is beta2.NkiValidationError


def test_either_generations_enum_members_are_accepted():
    x = np.random.default_rng(0).standard_normal((16, 16)).astype(np.float32)

    @nki.jit
    def k(x):
        out = nl.ndarray((2, 16, 16), nl.float32, buffer=nl.shared_hbm)
        t = nl.load(x)
        nl.store(out[0], beta1.nc_transpose(t, engine=beta2.engine.vector))
        nl.store(out[1], beta1.nc_transpose(t, engine=beta1.engine.vector))
        return out

    np.testing.assert_array_equal(k(x), np.stack([x.T, x.T]))

    @nki.jit
    def bad(x):
        beta1.nc_transpose(nl.load(x), engine="scalar")
        return x

    with pytest.raises(beta2.NkiValidationError, match="runs on tensor, vector, not scalar"):
        bad(x)


def test_no_beta2_isa_name_is_refused_any_more():
    """topk, quantize_mx/nc_matmul_mx and rand_get/set_state were the last (issue 13)."""
    refused = [n for n in beta2.__all__ if getattr(getattr(beta2, n), "unsupported", None)]
    assert refused == []


@pytest.mark.parametrize("name", ["builtin_custom_op"])
def test_unimplemented_beta1_apis_refuse_by_name(name):
    with pytest.raises(NotImplementedError, match=rf"nki\.isa\.{name}"):
        getattr(beta1, name)()


def test_depends_on_takes_instruction_handles():
    @nki.jit
    def k(x):
        out = nl.ndarray((8, 8), nl.float32, buffer=nl.shared_hbm)
        t = nl.ndarray((8, 8), nl.float32, buffer=nl.sbuf)
        a = beta2.dma_copy(t, x)
        b = beta2.activation(t, nl.exp, t)
        beta2.dma_copy(out, t).depends_on(b, a)
        b.depends_on("a")
        return out

    with pytest.raises(beta2.NkiValidationError, match="depends_on takes NkiInstruction"):
        k(np.zeros((8, 8), np.float32))


SDK_NAMES = """
import numpy as np
import nki, nki.isa as nisa, nki.language as nl
import neuronxcc.nki.isa as nisa1
from neuronxcc.nki.isa.constants import engine
assert nisa.dma_copy.__module__.endswith("beta2") and nisa1.tensor_copy.__module__.endswith("beta1")
assert engine is nisa1.engine

@nki.jit
def k(x):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    nisa.activation(dst=t, op=nl.exp, data=t)
    nisa.dma_copy(dst=out, src=nisa1.tensor_copy(t))
    return out

x = np.arange(12, dtype=np.float32).reshape(3, 4) / 10
np.testing.assert_allclose(k(x), np.exp(x), rtol=1e-6)
print("ok")
"""


def test_sdk_names_give_each_generation_its_isa():
    assert check(run_python(["-c", SDK_NAMES])).strip() == "ok"
