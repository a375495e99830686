"""XLA's own QR custom-calls (`Qr`: geqrf's compact form and taus; `ProductOfElementaryHouseholderReflectors`:
Q from them), which appear in HLO that XLA's builders emitted before its QrExpander ran (XLA's
matmul_test inverts matrices through them); against XLA:CPU, compact form and taus included."""
from __future__ import annotations

import numpy as np
import pytest

import hlo
from neuron_customcall.compiler import CompileError, compile_module
from neuron_customcall.jax.xla_cpu import XlaCpuExecutable
from tests.hlo.text.oracle import xla_parse
from tests.neuron_customcall.compiler.ours import assert_close, compile_proto


def _module(t: str, batch: tuple, m: int, n: int) -> str:
    b = ",".join(map(str, batch + (m, n)))
    taus = ",".join(map(str, batch + (min(m, n),)))
    pehr = "" if m < n else f"""
  q = {t}[{b}] custom-call(a, tau), custom_call_target="ProductOfElementaryHouseholderReflectors\""""
    root = "(a, tau, q)" if pehr else "(a, tau)"
    types = f"{t}[{b}], {t}[{taus}]" + (f", {t}[{b}]" if pehr else "")
    return f"""
HloModule qr
ENTRY e {{
  x = {t}[{b}] parameter(0)
  qr = ({t}[{b}], {t}[{taus}]) custom-call(x), custom_call_target="Qr"
  a = {t}[{b}] get-tuple-element(qr), index=0
  tau = {t}[{taus}] get-tuple-element(qr), index=1{pehr}
  ROOT r = ({types}) tuple{root}
}}
"""


@pytest.mark.parametrize("t, dtype", [("f32", np.float32), ("f64", np.float64), ("c64", np.complex64)])
@pytest.mark.parametrize("batch, m, n", [((), 4, 4), ((2,), 5, 3), ((2, 3), 3, 5)])
def test_xla_qr_targets_match_xla_cpu(t, dtype, batch, m, n):
    rng = np.random.default_rng(m * 10 + n)
    x = rng.normal(size=batch + (m, n))
    if np.issubdtype(dtype, np.complexfloating):
        x = x + 1j * rng.normal(size=x.shape)
    x = x.astype(dtype)
    text = _module(t, batch, m, n)
    ours = compile_proto(hlo.load(text).to_bytes()).run([x])
    assert_close(ours, XlaCpuExecutable(xla_parse(text).SerializeToString()).run([x]), rtol=1e-4, atol=1e-4)


def test_qr_of_another_element_type_is_refused_by_name():
    text = _module("f16", (), 3, 3)
    with pytest.raises(CompileError, match="custom-call Qr takes 1 operand"):
        compile_module(hlo.load(text))
