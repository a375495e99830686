"""What every launch of a prepared kernel needs, worked out once per program.

A small kernel (the seed's tensor add on a 256x1024 array) spends a good part of a call setting
up, not computing: validating inputs against the traced signature, decoding constants, deciding
which HBM tensors need a NaN fill, converting dtype names to NumPy dtypes. None of that depends
on the data, so ``build`` does it once (``prepare`` stores the result on the ``Program``) and the
runner only checks shapes and dtypes and allocates.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from emulator import machine
from emulator.kernel_ir import Access, KernelIR, dtypes, walk_instructions
from emulator.kernel_exec import precision
from emulator.kernel_exec.errors import KernelRuntimeError
from emulator.limits import GridLimitError, check_grid


@dataclass(frozen=True)
class InputSlot:
    """One kernel input: what a caller's array must look like, and whether the kernel writes it
    (then the runner copies it, so the caller's array is never modified)."""

    name: str
    shape: tuple[int, ...]
    dtype: np.dtype
    written: bool


@dataclass(frozen=True)
class HbmSlot:
    """An HBM tensor the runner allocates per launch: private HBM has one copy per program (the
    grid's batch axes); ``covered`` outputs are fully stored by every run and skip the NaN fill."""

    name: str
    shape: tuple[int, ...]
    dtype: np.dtype
    private: bool
    covered: bool


@dataclass
class LaunchSetup:
    #: The grid, its program-id symbols and their extents (the runner's initial context).
    grid: tuple[int, ...]
    psyms: tuple[str, ...]
    extents: dict[str, int]
    inputs: tuple[InputSlot, ...]
    #: Constant tensors decoded once (read-only) and whether the kernel writes them.
    constants: tuple[tuple[str, np.ndarray, bool], ...]
    hbm: tuple[HbmSlot, ...]
    #: Tensor name -> NumPy storage dtype.
    np_dtypes: dict[str, np.dtype]
    #: id(Access) of instruction destinations -> the access is the whole tensor, identity-indexed.
    whole: dict[int, bool] = field(default_factory=dict)
    #: id(Instruction) -> NumPy dtype of its destination, for instructions whose result replaces
    #: the storage of an internal on-chip tile (whole, unmasked, not accumulating): the common
    #: write, which the runner then does without re-deciding it.
    rebinds: dict[int, np.dtype] = field(default_factory=dict)


def is_whole(a: Access, shape: tuple[int, ...]) -> bool:
    """The access covers its tensor exactly, element for element."""
    return tuple(a.shape) == tuple(shape) and all(
        x.const == 0 and x.terms == ((f"t{d}", 1),) for d, x in enumerate(a.index))


def build(kernel: KernelIR, written: frozenset[str], covered: frozenset[str],
          precise: bool = True) -> LaunchSetup:
    """``precise``: NKI_PRECISE_FP's setting (precision.py), which decides the storage dtype of
    low-precision on-chip tiles."""
    np_dtypes = precision.storage_dtypes(kernel, precise)
    inputs = tuple(InputSlot(n, tuple(kernel.tensors[n].shape), np_dtypes[n], n in written)
                   for n in kernel.inputs)
    constants = []
    for name, data in kernel.constants.items():
        decl = kernel.tensors[name]
        arr = np.frombuffer(data, dtype=np_dtypes[name]).reshape(decl.shape)
        constants.append((name, arr, name in written))
    hbm = tuple(
        HbmSlot(name, tuple(decl.shape), np_dtypes[name],
                decl.memory == machine.HBM and decl.role != "output", name in covered)
        for name, decl in kernel.tensors.items()
        if decl.memory in (machine.HBM, machine.SHARED_HBM) and name not in kernel.inputs
        and name not in kernel.constants)
    whole: dict[int, bool] = {}
    rebinds: dict[int, np.dtype] = {}
    for ins in walk_instructions(kernel.body):
        if ins.dst is None:
            continue
        decl = kernel.tensors[ins.dst.tensor]
        whole[id(ins.dst)] = w = is_whole(ins.dst, decl.shape)
        if (w and not ins.mask and ins.acc is None and decl.role == "internal"
                and decl.memory in machine.ON_CHIP):
            rebinds[id(ins)] = np_dtypes[decl.name]
    grid = tuple(int(g) for g in kernel.grid)
    try:
        check_grid(grid)
    except GridLimitError as e:  # a grid of 2^31 programs would run for days
        raise KernelRuntimeError(kernel.name, None, "grid too large", str(e)) from None
    psyms = tuple(f"p{i}" for i in range(len(grid)))
    return LaunchSetup(grid, psyms, dict(zip(psyms, grid)), inputs, tuple(constants), hbm,
                       np_dtypes, whole, rebinds)
