"""The performance tutorial's three ReLU implementations, each built as its own library.

Why one library per variant: a library's name comes from its NEURON_LIBRARY, and the op names are
the tutorial's (``relu_forward``) in all three, so side by side in one process they need three
library names: torch.ops.relu_elementwise, torch.ops.relu_tcm, torch.ops.relu_multicore.
"""
from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch

from neuron_customcall import custom_op

HERE = Path(__file__).resolve().parent


@dataclass(frozen=True)
class Variant:
    name: str          # also the suffix of the library and its shape source
    title: str
    multicore: bool
    compute_src: Path

    @property
    def library(self) -> str:
        return f"relu_{self.name}"

    def build(self, build_root: Path | None = None) -> Path:
        """Builds lib<library>.so (cached objects reused) and registers its op."""
        root = build_root or Path(tempfile.gettempdir()) / f"neuron_customcall_examples_{os.getuid()}"
        return custom_op.load(name=self.library, compute_srcs=[self.compute_src],
                              shape_srcs=[HERE / f"shape_{self.name}.cpp"], build_directory=root / self.library,
                              multicore=self.multicore)

    def op(self) -> Callable[[torch.Tensor], torch.Tensor]:
        return getattr(torch.ops, self.library).relu_forward


VARIANTS = (
    # The training example's ReLU, as the tutorial starts from it (its relu_backward is compiled
    # too, and unused: only functions NEURON_LIBRARY names are ops).
    Variant("elementwise", "element-wise accessor", False, HERE.parent / "mlp_training" / "relu.cpp"),
    Variant("tcm", "TCM accessor", False, HERE / "relu_tcm.cpp"),
    Variant("multicore", "TCM accessor on 8 cores (multicore=True)", True, HERE / "relu_multicore.cpp"),
)
