"""The ``nki.isa`` enums of both generations, and the target's NeuronCore version.

The two generations number some members differently (``dge_mode.none`` is 0 in beta 1 and 3 in
beta 2), so each has its own classes with the reference's values: beta 1 (``neuronxcc.nki.isa``)
``IntEnum``s, beta 2 (``nki.isa``) ``Enum``s. The emitters (``core.py``) only look at member
*names* (``name_of``), so a kernel may pass either generation's member, or the name itself.
"""

from __future__ import annotations

from enum import Enum, IntEnum

import numpy as np

from emulator import machine

# --- beta 2 (nki.isa) ------------------------------------------------------------------------------


def _enum(name: str, doc: str, members: dict) -> type[Enum]:
    cls = Enum(name, members)
    cls.__doc__ = doc
    return cls


engine = _enum("engine", "The engine an instruction runs on (``engine=`` arguments).",
               {"unknown": 0, "tensor": 1, "scalar": 2, "gpsimd": 3, "dma": 4, "vector": 5,
                "sync": 6})
reduce_cmd = _enum("reduce_cmd", "What an accumulating instruction does with its engine's reduce "
                   "registers.", {"idle": 0, "reset": 1, "reduce": 2, "reset_reduce": 3,
                                  "load_reduce": 4})
dge_mode = _enum("dge_mode", "DMA descriptor generation mode (no effect on results).",
                 {"unknown": 0, "swdge": 1, "hwdge": 2, "none": 3})
oob_mode = _enum("oob_mode", "Out-of-bounds indirect DMA indices: an error, or skipped.",
                 {"error": 0, "skip": 1})
matmul_perf_mode = _enum("matmul_perf_mode", "TensorE performance mode (``double_row``: FP8 "
                         "pairs along the first free axis).",
                         {"none": "none", "double_row": "double_row"})
nc_version = _enum("nc_version", "NeuronCore generation: gen2 Trn1/Inf2, gen3 Trn2, gen4 Trn3.",
                   {"gen2": 2, "gen3": 3, "gen4": 4})
dma_engine = _enum("dma_engine", "Which DMA engine a ``sendrecv`` uses.",
                   {"dma": 1, "gpsimd_dma": 2})

# Deprecated module-level engine constants (still in the beta-2 reference).
tensor_engine = engine.tensor
vector_engine = engine.vector
scalar_engine = engine.scalar
gpsimd_engine = engine.gpsimd
unknown_engine = engine.unknown

# --- beta 1 (neuronxcc.nki.isa) --------------------------------------------------------------------


# The beta-1 reference's values (IntEnums; dge_mode numbers its members differently).
engine_v1 = IntEnum("engine", {"unknown": 0, "tensor": 1, "scalar": 2, "gpsimd": 3, "vector": 5,
                               "sync": 6})
reduce_cmd_v1 = IntEnum("reduce_cmd", {"idle": 0, "reset": 1, "reduce": 2, "reset_reduce": 3,
                                       "load_reduce": 4})
dge_mode_v1 = IntEnum("dge_mode", {"none": 0, "swdge": 1, "hwdge": 2, "unknown": 3})
oob_mode_v1 = IntEnum("oob_mode", {"error": 0, "skip": 1})
nc_version_v1 = IntEnum("nc_version", {"gen2": 2, "gen3": 3})


class fp32:  # noqa: N801
    """FP32 constants of beta 1 (``nki.isa.fp32.min``: the most negative finite float32,
    bit pattern 0xff7fffff)."""

    min = float(np.finfo(np.float32).min)


# The emulated target: a NeuronCore-v2, whose numbers emulator/machine.py holds.
TARGET_VERSION = machine.NC_GENERATION
TARGET_SUB_VERSION = 0


def get_nc_version(generation=nc_version):
    """The ``nc_version`` of the core that executes the kernel: gen2, the NeuronCore-v2 of
    emulator/machine.py, also when NEURON_PLATFORM_TARGET_OVERRIDE selects trn2. Why not gen3
    there: a kernel that branches on the version would take trn2-only paths (instructions,
    parameters, sizes) whose semantics the emulator does not execute; the trn2 option changes
    the devices' topology and the collectives' costs (emulator/platforms.py), not the core."""
    return generation(TARGET_VERSION)


def get_nc_sub_version() -> int:
    """The silicon revision within the generation: 0, the first."""
    return TARGET_SUB_VERSION


def name_of(value, kind: str, allowed) -> str:
    """The member name of an enum value of either generation, or a name given as a string;
    ``None`` means ``unknown``/the default. Anything else is a validation error (raised by the
    caller, who knows the kernel)."""
    if value is None:
        return "unknown" if "unknown" in allowed else next(iter(allowed))
    name = value.name if isinstance(value, Enum) else value
    if isinstance(name, str) and name in allowed:
        return name
    raise ValueError(f"{value!r} is not a {kind} ({', '.join(sorted(allowed))})")


ENGINE_NAMES = frozenset(e.name for e in engine)
REDUCE_CMD_NAMES = frozenset(e.name for e in reduce_cmd)
DGE_MODE_NAMES = frozenset(e.name for e in dge_mode)
OOB_MODE_NAMES = frozenset(e.name for e in oob_mode)
PERF_MODE_NAMES = frozenset(e.name for e in matmul_perf_mode)
