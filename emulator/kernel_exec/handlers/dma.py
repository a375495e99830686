"""Data movement and initialisation: alloc, load, store, tensor_copy, memset, iota, random."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from emulator.kernel_ir import Access, Instruction, affine_from_json, dtypes

from ..access import eval_affine

if TYPE_CHECKING:  # the runner imports this table
    from ..runner import Runner


def alloc(r: Runner, ins: Instruction) -> None:
    """Start a tensor's lifetime: NaN (uninitialised) or ``attrs['fill']`` (``nl.zeros``...)."""
    r.allocate(ins.dst.tensor, ins.attrs.get("fill"))


def copy(r: Runner, ins: Instruction) -> None:
    """load / store / tensor_copy: element-wise copy with dtype conversion and broadcasting. The
    result may alias the source's memory (zero-copy loads of read-only inputs); ``write`` copies
    when the source can still change."""
    src = ins.srcs[0]
    value = r.read(src, ins.dst.shape, masked=True)
    alias = isinstance(src, Access) and not r.is_immutable(src.tensor)
    if ins.attrs.get("bitcast"):  # same width, other dtype: reinterpret the bits
        value = np.ascontiguousarray(value).view(
            dtypes.to_numpy(r.kernel.tensors[ins.dst.tensor].dtype))
    r.write(ins, value, may_alias=alias)


def memset(r: Runner, ins: Instruction) -> None:
    r.write(ins, r.read(ins.srcs[0]))


def iota(r: Runner, ins: Instruction) -> None:
    """Materialise the affine expression ``attrs['expr']`` over the tile (and program ids/loop
    variables) as values: index arithmetic used as data."""
    expr = affine_from_json(ins.attrs["expr"])
    r.write(ins, eval_affine(expr, r.ctx, ins.dst.shape))


def random(r: Runner, ins: Instruction) -> None:
    """Uniform [0, 1) values, different for every program and iteration, reproducible from run to
    run: the generator is seeded by the instruction's seed and the Python-looped loop values."""
    seed = ([int(ins.attrs.get("seed", 0))] + [v for _, v in sorted(r.ctx.bound.items())]
            + [v for _, v in sorted(r.ctx.offsets.items())])
    shape = r.ctx.batch_shape + tuple(ins.dst.shape)
    r.write(ins, np.random.default_rng(seed).random(shape, dtype=np.float32))


HANDLERS = {
    "alloc": alloc,
    "load": copy,
    "store": copy,
    "tensor_copy": copy,
    "memset": memset,
    "iota": iota,
    "random": random,
}
