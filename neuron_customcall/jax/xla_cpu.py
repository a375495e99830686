"""Runs an HLO module on a jaxlib PJRT backend: XLA:CPU, the reference the emulator is measured
against, or the neuron device (our PJRT plugin), for tests that run one module both ways.

Why here: parity tests and the benchmark must run the *same* HLO (from JAX or torch_xla) on both
XLA:CPU and our emulator; jaxlib is the one XLA:CPU in the stack that accepts an arbitrary
HloModuleProto (through its HLO -> StableHLO converter), so this lives in the JAX adapter, the only
place allowed to import jax. Graphs holding our custom-call target can not run on XLA:CPU (it does
not know the target); that is what the emulator is for.
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np


class PjrtHloExecutable:
    """One HLO module compiled by a jaxlib backend (`platform`: "cpu", "neuron", ...); `run` has
    the emulator's calling convention. The module reaches the backend as StableHLO, as every
    jax.jit program does (the neuron plugin converts it back with jaxlib's own converter)."""

    def __init__(self, hlo_proto: bytes, platform: str = "cpu") -> None:
        import jax
        from jax._src import xla_bridge
        from jax._src.lib import _jax
        from jax._src.lib import xla_client as xc

        self._jax = jax
        backend = xla_bridge.get_backend(platform)
        self._device = backend.devices()[0]
        mlir_module = _jax.mlir.hlo_to_stablehlo(bytes(hlo_proto))
        self._exe = backend.compile_and_load(mlir_module, xc.DeviceList((self._device,)), xc.CompileOptions())

    def put(self, inputs: Sequence[np.ndarray]) -> list:
        """Inputs as device buffers (so a benchmark can time execution alone).

        With 64-bit types enabled for the transfer: the module's parameter types are fixed, and
        JAX's default would narrow an s64 input (torch_xla's integer tensors) to s32.
        """
        with self._jax.enable_x64(True):
            return [self._jax.device_put(np.asarray(x), self._device) for x in inputs]

    def execute(self, buffers: Sequence) -> list:
        """Runs on device buffers; returns device arrays (outputs = leaves of the root shape)."""
        results = self._exe.execute_sharded(list(buffers))
        return [shards[0] for shards in results.disassemble_into_single_device_arrays()]

    def run(self, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
        """Entry parameters in parameter-number order in, root leaves out, as NumPy arrays."""
        return [np.asarray(a) for a in self.execute(self.put(inputs))]


class XlaCpuExecutable(PjrtHloExecutable):
    """One HLO module compiled by XLA:CPU (jaxlib's CPU backend)."""

    def __init__(self, hlo_proto: bytes) -> None:
        super().__init__(hlo_proto, "cpu")
