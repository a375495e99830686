"""A kernel called with torch or JAX tensors finds its framework adapter without the user
importing it (a fresh process: nothing else imported it first)."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]


def test_kernel_launch_imports_the_adapter_of_its_arguments():
    script = textwrap.dedent("""
        import sys
        import jax, jax.numpy as jnp, torch, torch_xla
        from tests.neuron_customcall.kernels.seed_kernels import nki_tensor_add
        assert not any(m.startswith(("neuron_customcall.torch_xla", "neuron_customcall.jax"))
                       for m in sys.modules)
        a = torch.ones(256, 1024).to(torch_xla.device())
        text = torch_xla._XLAC._get_xla_tensors_hlo([nki_tensor_add(a, a)])
        assert 'custom_call_target="AwsNeuronCustomNativeKernel"' in text
        x = jnp.ones((256, 1024))
        assert float(jax.jit(nki_tensor_add)(x, x)[3, 700]) == 2.0  # XLA:CPU: through a host callback
        print("ok")
    """)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PJRT_DEVICE": "CPU", "JAX_PLATFORMS": "cpu"}
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, env=env)
    assert done.stdout.strip() == "ok", done.stderr[-3000:]
