"""On PJRT_DEVICE=NEURON a C++ op's custom-call names its library image by hash in torch_xla's IR
(the per-call copy of the ~140 KB image was the largest tracing cost of a training step), while
every HLO torch_xla hands out stays self-contained: the text, proto and StableHLO getters expand
the references, StableHLO bytecode of a graph holding one is refused with the fix, and inside
``inline_kernels()`` (or with NEURON_CUSTOMCALL_KERNEL_REFS=0) the images are inline. Results
match torch.relu either way. Each case in a fresh process."""
from __future__ import annotations

import json

import pytest

from tests.sdk.subproc import ROOT, check, run_python

SCRIPT = """
import json, sys
sys.path.insert(0, sys.argv[1])
import torch, torch_xla
import torch_xla.core.xla_model as xm
import relu_ops
import hlo
from neuron_customcall.kernels import references
from neuron_customcall.torch_xla import exported

relu_ops.build()
dev = torch_xla.device()
x = torch.randn(8, 16)
y = torch.ops.my_ops.relu_forward(x.to(dev))
getter = torch_xla._XLAC._get_xla_tensors_hlo
raw = getattr(getter, "__wrapped__", getter)([y])  # torch_xla's own lowering of the IR
text = getter([y])
proto, _ = hlo.read_module_proto(torch_xla._XLAC._get_xla_tensors_hlo_proto([y]))
configs = [i.backend_config for c in proto.computations for i in c.instructions if i.custom_call_target]
refs = references.emitted()
try:
    xm.get_stablehlo_bytecode([y])
    bytecode = "ok"
except NotImplementedError as e:
    bytecode = str(e)
with exported.inline_kernels():
    z = torch.ops.my_ops.relu_forward(x.to(dev))
inline_bytecode = len(xm.get_stablehlo_bytecode([z]))
stablehlo = xm.get_stablehlo([y])
print("RESULT " + json.dumps({
    "raw_has_ref": any(r in raw for r in refs),
    "raw_len": len(raw), "text_len": len(text),
    "text_has_ref": any(r in text for r in refs),
    "proto_inline": [references.expand(c.decode() if isinstance(c, bytes) else c) == (c.decode() if isinstance(c, bytes) else c) for c in configs],
    "stablehlo_has_ref": any(r in stablehlo for r in refs),
    "bytecode": bytecode, "inline_bytecode": inline_bytecode,
    "right": bool(torch.equal(y.cpu(), torch.relu(x)) and torch.equal(z.cpu(), torch.relu(x)))}))
"""


def _run(env: dict) -> dict:
    out = check(run_python(["-c", SCRIPT, str(ROOT / "examples" / "mlp_training")],
                           env={"PJRT_DEVICE": "NEURON", **env}))
    return json.loads(next(line for line in out.splitlines() if line.startswith("RESULT "))[7:])


def test_the_ir_holds_a_reference_and_every_getter_gives_self_contained_hlo():
    got = _run({})
    assert got["right"]
    assert got["raw_has_ref"] and got["raw_len"] < 20_000  # the node carries ~1 KB, not the image
    assert not got["text_has_ref"] and got["text_len"] > 100_000
    assert got["proto_inline"] == [True]
    assert not got["stablehlo_has_ref"]
    assert "inline_kernels()" in got["bytecode"] and "NEURON_CUSTOMCALL_KERNEL_REFS=0" in got["bytecode"]
    assert got["inline_bytecode"] > 100_000


@pytest.mark.parametrize("env", [{"NEURON_CUSTOMCALL_KERNEL_REFS": "0"}, {"XLA_SAVE_TENSORS_FILE": "/dev/null"}],
                         ids=["off", "cpp-dumps"])
def test_references_off_when_asked_or_when_torch_xla_dumps_hlo_from_cpp(env):
    got = _run(env)
    assert got["right"]
    assert not got["raw_has_ref"] and got["raw_len"] > 100_000
    assert got["bytecode"] == "ok"
