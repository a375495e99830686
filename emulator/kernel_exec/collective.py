"""``nki.collectives`` inside a kernel: the ``collective`` and ``rank_id`` instructions.

A kernel is one custom-call of a program that may run on several emulated NeuronCores
(``emulator.collectives.run_devices``, the PJRT device with several cores). Every core runs the
same kernel IR; the instruction asks the core it runs as (the DeviceContext of the thread,
``emulator.collectives.context.current``) for its rank and exchanges whole arrays through that
core's Communicator, then does the rest with NumPy. A kernel's rank is the flat device id
(replica * num_partitions + partition), the ids XLA's flattened-id mode and ``replica_groups``
use; a kernel run outside a multi-core program is rank 0 of a world of one.

Why whole (batched) values: a grid or an affine loop may run as batch axes, and each program /
iteration then makes its own collective with the same program / iteration of the other ranks.
Every rank runs the same IR with the same batching (a kernel that exchanges data never splits
its grid over host threads, parallel.py), so the k-th exchange of every rank belongs together;
the communicator also checks the instruction description (kind, dtype, shape) on every rank.

Reductions run in group order on every rank (the same bits everywhere), narrow floats
accumulated in float32 and rounded once when written, as the HLO all-reduce does.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from emulator.collectives.comm import CollectiveError
from emulator.collectives.context import current
from emulator.kernel_ir import Instruction, affine_from_json

from . import alu
from .access import eval_affine

if TYPE_CHECKING:
    from .runner import Runner

_REDUCE = {"add": np.add, "minimum": np.minimum, "maximum": np.maximum}


def _groups(ins: Instruction) -> list[tuple[int, ...]]:
    flat, n = ins.attrs.get("groups", []), ins.attrs.get("group_size", 1)
    return [tuple(flat[i:i + n]) for i in range(0, len(flat), n)]


def _my_group(r: Runner, ins: Instruction, rank: int) -> tuple[int, ...]:
    found = [g for g in _groups(ins) if rank in g]
    if len(found) != 1:
        raise r.error("rank outside the replica groups",
                      f"rank {rank} is in none of the replica groups "
                      f"{[list(g) for g in _groups(ins)]}")
    return found[0]


def _exchange_error(r: Runner, ins: Instruction, e: CollectiveError) -> Exception:
    """A world of one core asked to exchange with others: name the kernel and line; failures of
    peers stay CollectiveErrors (they end every core of the run)."""
    if current().communicator.world_size == 1:
        return r.error("collective across NeuronCores",
                       f"{ins.attrs['kind']} with ranks other than 0, but the kernel runs on one "
                       f"NeuronCore (run the program on several cores: run_devices, or the "
                       f"neuron PJRT device with NEURON_RT_NUM_CORES): {e}")
    return e


def _fold(values: list[np.ndarray], op: str) -> np.ndarray:
    """values[0] op values[1] op ... in group order, narrow floats in float32."""
    ufunc = _REDUCE[op]
    acc = np.array(alu.widen(values[0]), copy=True)
    for v in values[1:]:
        ufunc(acc, alu.widen(v), out=acc)
    return acc


def run_collective(r: Runner, ins: Instruction) -> None:
    """One exchange (see the module docstring); ``kind`` chooses the semantics."""
    dev = current()
    comm = dev.communicator
    rank = dev.device
    kind = ins.attrs["kind"]
    src = ins.srcs[0]
    value = np.ascontiguousarray(r.read(src, src.shape))
    nb = value.ndim - len(src.shape)  # batch axes: programs and iterations run at once
    what = f"nki.collectives.{kind} {value.dtype}{list(value.shape)}"
    try:
        if kind in ("ring", "ring_reduce", "permute"):
            if kind == "ring_reduce":
                value = _fold([value, r.read(ins.srcs[1], src.shape)], ins.attrs["op"])
            if kind == "permute":
                flat = ins.attrs["pairs"]
                pairs = [(flat[i], flat[i + 1]) for i in range(0, len(flat), 2)]
            else:
                group = _my_group(r, ins, rank)
                pairs = [(g, group[(i + 1) % len(group)]) for i, g in enumerate(group)]
            got = comm.permute(pairs, value, op=what)
            if got is not None:  # a rank no pair targets keeps its destination
                r.write(ins, got)
            return
        group = _my_group(r, ins, rank)
        if kind in _VARIABLE:
            _variable(r, ins, comm, group, value, nb, what)
            return
        values = comm.all_gather(group, value, op=f"{what} in {list(group)}")
    except CollectiveError as e:
        raise _exchange_error(r, ins, e) from e
    me, n = group.index(rank), len(group)
    dim = nb + ins.attrs.get("dim", 0)
    if kind == "all_reduce":
        result = _fold(values, ins.attrs["op"])
    elif kind == "all_gather":
        result = np.concatenate(values, axis=dim)
    elif kind == "reduce_scatter":
        size = value.shape[dim] // n
        result = np.take(_fold(values, ins.attrs["op"]), range(me * size, (me + 1) * size),
                         axis=dim)
    elif kind == "all_to_all":
        size = value.shape[dim] // n
        result = np.concatenate([np.take(v, range(me * size, (me + 1) * size), axis=dim)
                                 for v in values], axis=dim)
    else:
        raise r.error("unknown collective", f"kind {kind!r}")
    r.write(ins, result)


_VARIABLE = frozenset({"all_gather_v", "all_to_all_v", "recv_counts_all_gather_v",
                       "recv_counts_all_to_all_v"})


def _variable(r: Runner, ins: Instruction, comm, group: tuple[int, ...], value: np.ndarray,
              nb: int, what: str) -> None:
    """The variable-size forms on flat element buffers, sizes from the uint32 metadata (rows:
    send counts, send displacements, received counts, received displacements). all_gather_v
    sends one chunk (column 0 of rows 0 and 1) to every rank; all_to_all_v sends column j's
    chunk to group rank j. Rank s's chunk lands at ``dst[recv_displs[s]:]`` with ``rdispls``,
    else at ``s * dst.size / n``; the rest of dst keeps its values. ``recv_counts_*`` (the
    metadata's row 2 as destination) writes the counts received from each rank instead."""
    kind = ins.attrs["kind"]
    gather = kind.endswith("all_gather_v")
    counts_only = kind.startswith("recv_counts_")
    me, n = group.index(current().device), len(group)
    lead = value.shape[:nb]
    meta_src = ins.srcs[0] if counts_only else ins.srcs[1]
    meta = np.asarray(r.read(meta_src, meta_src.shape)).astype(np.int64)
    meta = meta.reshape(lead + meta.shape[-2:])
    metas = comm.all_gather(group, np.ascontiguousarray(meta), op=f"{what} metadata in {list(group)}")
    col = (lambda s_idx: 0) if gather else (lambda s_idx: me)
    if counts_only:
        got = np.stack([metas[s][..., 0, col(s)] for s in range(n)], axis=-1)
        r.write(ins, got.reshape(lead + tuple(ins.dst.shape)).astype(np.uint32))
        return
    flat = value.reshape(lead + (-1,))
    values = comm.all_gather(group, np.ascontiguousarray(flat), op=f"{what} in {list(group)}")
    dst = ins.dst
    out = np.array(r.read(dst, dst.shape), copy=True).reshape(lead + (-1,))
    size = out.shape[-1]
    slot = size // n
    for pos in np.ndindex(*lead):
        for s in range(n):
            count = int(metas[s][pos][0, col(s)])
            disp = int(metas[s][pos][1, col(s)])
            at = int(meta[pos][3, s]) if ins.attrs.get("rdispls") else s * slot
            room = size - at if ins.attrs.get("rdispls") else slot
            if disp + count > values[s][pos].shape[-1] or count > room or at < 0:
                raise r.error(f"{kind} sizes", f"rank {group[s]} sends {count} elements from "
                              f"offset {disp} of {values[s][pos].shape[-1]}, to offset {at} "
                              f"with room for {room} of {size}")
            out[pos][at:at + count] = values[s][pos][disp:disp + count]
    r.write(ins, out.reshape(lead + tuple(dst.shape)))


def run_rank_id(r: Runner, ins: Instruction) -> None:
    """The rank as an int32 register; with a ring (``groups``, ``step``), the rank whose data
    the ring brings after ``step`` steps: the group member ``step`` places before this one."""
    rank = current().device
    if "step" not in ins.attrs:
        r.write(ins, np.full((1,) * len(ins.dst.shape), rank, dtype=np.int32))
        return
    group = np.asarray(_my_group(r, ins, rank))
    me = int(np.flatnonzero(group == rank)[0])
    step = eval_affine(affine_from_json(ins.attrs["step"]), r.ctx, ins.dst.shape)
    r.write(ins, group[(me - np.asarray(step, dtype=np.int64)) % len(group)].astype(np.int32))
