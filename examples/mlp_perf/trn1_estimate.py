"""What a trn1 NeuronCore would take for one inference, from the emulator's cost model.

Two views: the whole graph through the emulator's per-engine profile (neuron_customcall.profile:
TensorE matmuls, VectorE/ScalarE element-wise work, DMA and GpSimd on their own timelines; see
docs/cost-model.md), and the GpSimd cost model alone (``custom_op.last_run(...).cost``), which
isolates the custom ReLUs the tutorial optimises; the report then says the dense layers are left
out.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import torch


@dataclass(frozen=True)
class Estimate:
    seconds: float
    whole_graph: bool            # False: only the GpSimd custom ops are counted
    engines: dict[str, float] = field(default_factory=dict)  # busy seconds per engine (whole graph)

    @property
    def throughput(self) -> float:
        return 1.0 / self.seconds if self.seconds > 0 else float("inf")

    @property
    def scope(self) -> str:
        return "whole graph, per-engine profile" if self.whole_graph else "GpSimd ReLUs only, dense layers NOT included"


def whole_graph(outputs: Sequence[torch.Tensor]) -> Estimate:
    """The profiled makespan of one execution of the graph computing `outputs` (pending XLA
    tensors) on its current inputs. Leaves the tensors pending."""
    from neuron_customcall.profile import profile as profile_graph
    from neuron_customcall.torch_xla import compile_graph

    compiled, inputs = compile_graph(list(outputs))
    profile = profile_graph(compiled, inputs, warmup=0)
    engines = {name: cycles / profile.clock_hz for name, cycles in profile.busy_cycles().items() if cycles}
    return Estimate(profile.total_seconds, True, engines)


def gpsimd_only(library: str, op: torch.ops.OpOverloadPacket, activations: Sequence[torch.Size]) -> Estimate:
    """The GpSimd cost model's time for the ReLU on each activation shape (run eagerly on CPU
    tensors, which executes the same library on the emulated GpSimd engine)."""
    from neuron_customcall import custom_op

    seconds = 0.0
    for shape in activations:
        op(torch.randn(shape))
        seconds += custom_op.last_run(library, "relu_forward").cost.seconds
    return Estimate(seconds, False)
