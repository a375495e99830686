"""The plugin's MLIR-to-HLO conversion (neuron_customcall/pjrt/mlir.py) never takes the host down:
jaxlib's converter aborts the process on an rng inside a while condition (XLA:CPU too), so modules
holding an rng are converted in a child process, and a crash there is a clear compile error."""
from __future__ import annotations

import subprocess

import pytest

import hlo
from neuron_customcall.pjrt import mlir

_RNG = """%lo = stablehlo.constant dense<0.0> : tensor<f32>
      %hi = stablehlo.constant dense<1.0> : tensor<f32>
      %s = stablehlo.constant dense<> : tensor<0xi64>
      %r = stablehlo.rng %lo, %hi, %s, distribution = UNIFORM : (tensor<f32>, tensor<f32>, tensor<0xi64>) -> tensor<f32>
      %l = stablehlo.constant dense<0.3> : tensor<f32>
      %t = stablehlo.compare GE, %r, %l : (tensor<f32>, tensor<f32>) -> tensor<i1>"""

# jaxlib 0.10.2 aborts converting this ("Check failed: builder_ != nullptr")
RNG_IN_CONDITION = """module @m { func.func @main() -> tensor<i32> {
    %c0 = stablehlo.constant dense<0> : tensor<i32>
    %w = stablehlo.while(%a = %c0) : tensor<i32> cond { """ + _RNG + """
      stablehlo.return %t : tensor<i1> } do { stablehlo.return %a : tensor<i32> }
    return %w : tensor<i32> } }"""

# converts fine: the rng is in the entry computation
RNG_IN_ENTRY = """module @m { func.func @main(%x: tensor<f32>) -> tensor<f32> { """ + _RNG + """
    %z = stablehlo.constant dense<0.0> : tensor<f32>
    %y = stablehlo.select %t, %x, %z : tensor<i1>, tensor<f32>
    return %y : tensor<f32> } }"""

NO_RNG = """module @m { func.func @main(%x: tensor<f32>) -> tensor<f32> {
    %y = stablehlo.add %x, %x : tensor<f32>
    return %y : tensor<f32> } }"""


def test_a_module_that_crashes_jaxlibs_converter_is_a_clear_error_and_the_process_lives() -> None:
    with pytest.raises(mlir.MlirConversionError) as e:
        mlir.to_hlo_proto(RNG_IN_CONDITION.encode())
    message = str(e.value)
    assert "converter crashed" in message and "SIGABRT" in message, message
    assert "Check failed: builder_ != nullptr" in message, message
    assert "rng operation inside a while loop's condition" in message, message


def test_a_module_with_an_rng_is_converted_in_a_child_with_the_same_result(monkeypatch: pytest.MonkeyPatch) -> None:
    code = RNG_IN_ENTRY.encode()
    runs: list[list[str]] = []
    real_run = subprocess.run

    def counting_run(args: list[str], **kw: object) -> subprocess.CompletedProcess:
        runs.append(args)
        return real_run(args, **kw)

    monkeypatch.setattr(subprocess, "run", counting_run)
    out = mlir.to_hlo_proto(code)
    assert len(runs) == 1
    child, here = hlo.load(out), hlo.load(mlir.convert(code))
    assert child.to_text() == here.to_text()
    assert "rng(" in child.to_text()


def test_a_module_without_an_rng_is_converted_in_process(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_child(*args: object, **kw: object) -> None:
        raise AssertionError("no child process for a module without an rng")

    monkeypatch.setattr(subprocess, "run", no_child)
    text = hlo.load(mlir.to_hlo_proto(NO_RNG.encode())).to_text()
    assert "add(" in text


def test_a_conversion_error_in_the_child_is_reported_with_its_message() -> None:
    with pytest.raises(mlir.MlirConversionError) as e:
        mlir.to_hlo_proto(b"module @m { func.func @main() { %r = stablehlo.rng } }")
    assert "could not convert the MLIR program to HLO" in str(e.value), str(e.value)
    assert "crashed" not in str(e.value)


def test_through_the_plugin_jax_gets_the_error_and_the_process_goes_on() -> None:
    from tests.neuron_customcall.pjrt._proc import run_json

    got = run_json(f"""
        from jax._src import xla_bridge
        from jax._src.lib import xla_client as xc
        backend = xla_bridge.get_backend("neuron")
        try:
            backend.compile_and_load({RNG_IN_CONDITION!r}.encode(), xc.DeviceList((NEURON[0],)), xc.CompileOptions())
            message = None
        except Exception as e:
            message = str(e)
        x = jnp.arange(4.0)
        report(message=message, after=np.asarray(jax.jit(lambda v: v * 2)(jax.device_put(x, NEURON[0]))).tolist())
    """)
    assert got["message"] and "converter crashed" in got["message"], got["message"]
    assert got["after"] == [0.0, 2.0, 4.0, 6.0]
