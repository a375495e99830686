"""Collectives and device ids: each handler reads the device it runs as at run time
(emulator.collectives.context.current), exchanges whole arrays through that device's
Communicator, and does the rest with NumPy on its own thread.

Semantics are XLA's (operation_semantics.md). Every participant gets the same bits: reductions
run in group order on every device, or are the transport's own (gloo's all_reduce, whose order
is its ring's: the same as group order for two members, within rounding for more; XLA leaves the
order unspecified). Async forms (`-start`) run the collective at once; their
tuple results hold (operands, results, zeros for XLA's context scalars), and the compiler lowers
`-done` to reading element 1.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from emulator.collectives.buffers import RESULTS
from emulator.collectives.comm import CollectiveError
from emulator.collectives.context import DeviceContext, current
from emulator.collectives.groups import CROSS_PARTITION, CROSS_REPLICA, GroupError, flat_pairs, participants
from emulator.ops.common import compute_dtype, lifted, reducer_ufunc
from emulator.program.context import HandlerContext
from emulator.program.dtypes import DTYPES, TUPLE
from emulator.program.ops import handles


@handles("replica-id")
def _replica_id(ctx: HandlerContext) -> Callable:
    dt = ctx.dtype
    return lambda: np.array(current().replica_id, dtype=dt)


@handles("partition-id")
def _partition_id(ctx: HandlerContext) -> Callable:
    dt = ctx.dtype
    return lambda: np.array(current().partition_id, dtype=dt)


def _what(ctx: HandlerContext) -> str:
    """The instruction as errors and mismatch checks name it."""
    return f"{ctx.op} {ctx.name or '?'}"


def _group_finder(ctx: HandlerContext) -> Callable[[DeviceContext], tuple[int, ...]]:
    """dev -> its participants (flat ids, group order), cached per device layout."""
    mode, groups = ctx.attrs["mode"], [list(g) for g in ctx.attrs["groups"]]
    cache: dict[tuple[int, int, int, int], tuple[int, ...]] = {}

    def find(dev: DeviceContext) -> tuple[int, ...]:
        key = (dev.replica_id, dev.partition_id, dev.num_replicas, dev.num_partitions)
        group = cache.get(key)
        if group is None:
            try:
                group = participants(mode, groups, *key)
            except GroupError as e:
                raise CollectiveError(f"{_what(ctx)}: {e}") from None
            cache[key] = group
        return group
    return find


def _leaf_types(t: Any) -> list[tuple[np.dtype, tuple[int, ...]]]:
    if t[0] == TUPLE:
        return [leaf for s in t[1] for leaf in _leaf_types(s)]
    return [(DTYPES[t[0]], tuple(t[1]))]


def _results(ctx: HandlerContext) -> list[tuple[np.dtype, tuple[int, ...]]]:
    """(dtype, shape) of each result leaf: of element 1 of an async start's tuple."""
    t = ctx.type
    if ctx.attrs.get("start") and t[0] == TUPLE:
        t = t[1][1]
    return _leaf_types(t)


def _package(ctx: HandlerContext, operands: Sequence[np.ndarray], results: list[np.ndarray]) -> Any:
    """The instruction's value: the result (a tuple for several), or an async start's tuple
    (operands, results, zero context scalars)."""
    value: Any = tuple(results) if len(results) > 1 or ctx.type[0] == TUPLE and not ctx.attrs.get("start") \
        else results[0]
    if not ctx.attrs.get("start") or ctx.type[0] != TUPLE:
        return value
    parts = ctx.type[1]
    ins: Any = tuple(operands) if parts[0][0] == TUPLE else operands[0]
    extra = [np.zeros(tuple(p[1]), DTYPES[p[0]]) for p in parts[2:]]
    return (ins, value, *extra)


class _Combiner:
    """The reducer on whole arrays, with its accumulation dtype: a recognised reducer is a NumPy
    ufunc, accumulating the narrow floats in f32 and rounding once at the end as XLA:CPU does
    (checked against it: rounding each step to bf16 differs), and accumulates in place; any
    other is the lifted computation in the element type."""

    def __init__(self, ctx: HandlerContext, dt: np.dtype) -> None:
        name = ctx.attrs["reducer"]
        self.ufunc = reducer_ufunc(name, dt) if name else None
        self.cdt = compute_dtype(dt) if name else dt
        self._lifted = None if name else lifted(ctx.computation("computation"), 1)

    def fold(self, values: Sequence[np.ndarray], out: np.ndarray | None = None) -> np.ndarray:
        """values[0] op values[1] op ... left to right (the same order, so the same bits, on every
        device), as a new array, or into `out` (of the accumulation dtype) for a ufunc."""
        cdt = self.cdt
        if len(values) == 1:
            return np.array(values[0], dtype=cdt, copy=True)
        if self.ufunc is not None:
            acc = np.asarray(self.ufunc(values[0].astype(cdt, copy=False), values[1].astype(cdt, copy=False),
                                        out=out if out is not None and out.dtype == cdt else None))
            for v in values[2:]:
                self.ufunc(acc, v.astype(cdt, copy=False), out=acc)
            return acc
        acc = values[0]
        for v in values[1:]:
            acc = np.asarray(self._lifted(acc, v)[0])
        return acc


def _check_shapes(what: str, group: tuple[int, ...], results: Sequence[np.ndarray],
                  outs: Sequence[tuple[np.dtype, tuple[int, ...]]]) -> None:
    """Refuse a result whose shape the group size made differ from the declared one (empty
    replica_groups: the group is known only at run time)."""
    for r, (_, shape) in zip(results, outs):
        if r.shape != shape:
            raise CollectiveError(f"{what}: a group of {len(group)} devices {list(group)} gives "
                                  f"{list(r.shape)}, the program declares {list(shape)}")


def _exchange(dev: DeviceContext, group: tuple[int, ...], xs: Sequence[np.ndarray], what: str) -> list[list[np.ndarray]]:
    """Per operand, every group member's value in group order (one exchange per operand)."""
    arrays = [np.asarray(x) for x in xs]
    return [dev.communicator.all_gather(group, a, op=f"{what}[{k}] {a.dtype}{list(a.shape)}")
            for k, a in enumerate(arrays)]


#: Below this many bytes an all-reduce gathers whole values (one exchange); from it on, it
#: reduce-scatters then all-gathers the folded pieces (two exchanges, (n-1)/n of the bytes each).
CHUNKED_ALL_REDUCE_BYTES = 64 * 1024


def _fold_pieces(comm: Any, group: tuple[int, ...], pieces: Sequence[np.ndarray], combiner: _Combiner,
                 op: str) -> np.ndarray:
    """pieces[i] to group member i; the fold, in group order, of the pieces this device gets."""
    return combiner.fold(comm.all_to_all(group, pieces, op=op))


def _all_reduce_chunked(comm: Any, group: tuple[int, ...], x: np.ndarray, combiner: _Combiner,
                        dt: np.dtype, op: str) -> np.ndarray:
    """Reduce-scatter of the flattened value in len(group) chunks (each member folds its chunk
    in group order), then an all-gather of the folded chunks: every member's result has the
    bits of the whole fold, while each moves 2(n-1)/n of the value instead of n-1 times it and
    folds 1/n of it."""
    flat = np.ascontiguousarray(x).reshape(-1)
    pieces = np.array_split(flat, len(group))
    result = RESULTS.take(flat.size, dt)  # this member's chunk is folded into its slice, the others received there
    me = group.index(comm.device)
    start = sum(p.size for p in pieces[:me])
    own = result[start:start + pieces[me].size]
    mine = combiner.fold(comm.all_to_all(group, pieces, op=f"{op} reduce-scatter"), out=own)
    if mine is not own:
        own[...] = mine
    # every member's chunk shape is known here and was checked by the reduce-scatter's exchange
    # (the same instruction, type and whole shape): the all-gather need not announce it again
    comm.all_gather(group, own, op=f"{op} all-gather", out=result, shapes=[p.shape for p in pieces])
    return result.reshape(x.shape)


def _reducing(ctx: HandlerContext, scatter: bool) -> Callable:
    """all-reduce, or reduce-scatter (`scatter`: this device keeps its piece along `dim`). An
    all-reduce by a recognised reducer goes to the transport's own reduction when it has one
    (Communicator.reduce: gloo's all_reduce), else, from CHUNKED_ALL_REDUCE_BYTES, through
    _all_reduce_chunked; a reduce-scatter sends each member only its piece."""
    find = _group_finder(ctx)
    outs = _results(ctx)
    combiners = [_Combiner(ctx, dt) for dt, _ in outs]
    dim = ctx.attrs["dim"] if scatter else 0
    what = _what(ctx)
    reducer = ctx.attrs["reducer"]
    ops: dict[tuple[int, np.dtype, tuple[int, ...]], str] = {}  # the texts below, made once (str(dtype) is slow)

    def one(dev: DeviceContext, group: tuple[int, ...], k: int, x: np.ndarray, dt: np.dtype,
            shape: tuple[int, ...], combiner: _Combiner) -> np.ndarray:
        x = np.asarray(x)
        op = ops.get((k, x.dtype, x.shape))
        if op is None:
            op = ops[k, x.dtype, x.shape] = f"{what}[{k}] {x.dtype}{list(x.shape)}"
        comm = dev.communicator
        if scatter:
            if x.shape[dim] != shape[dim] * len(group):
                raise CollectiveError(f"{what}: dimension {dim} of {list(x.shape)} does not scatter over a group "
                                      f"of {len(group)} devices {list(group)} into {list(shape)}")
            acc = _fold_pieces(comm, group, np.split(x, len(group), axis=dim), combiner, op)
        elif len(group) > 1 and combiner.ufunc is not None and (native := comm.reduce(group, x, reducer, op=op)) \
                is not None:
            acc = native
        elif len(group) > 1 and combiner.ufunc is not None and x.nbytes >= CHUNKED_ALL_REDUCE_BYTES:
            acc = _all_reduce_chunked(comm, group, x, combiner, dt, op)
        else:
            acc = combiner.fold(comm.all_gather(group, x, op=op))
        if acc.dtype == dt and acc.shape == shape and acc.flags.writeable and acc.flags.c_contiguous:
            return acc
        return np.array(np.broadcast_to(acc.astype(dt, copy=False), shape), dtype=dt, copy=True)

    def run(*xs: np.ndarray) -> Any:
        dev = current()
        group = find(dev)
        results = [one(dev, group, k, x, dt, shape, combiner)
                   for k, (x, (dt, shape), combiner) in enumerate(zip(xs, outs, combiners))]
        return _package(ctx, xs, results)
    return run


@handles("all-reduce")
def _all_reduce(ctx: HandlerContext) -> Callable:
    return _reducing(ctx, scatter=False)


@handles("reduce-scatter")
def _reduce_scatter(ctx: HandlerContext) -> Callable:
    return _reducing(ctx, scatter=True)


@handles("all-gather")
def _all_gather(ctx: HandlerContext) -> Callable:
    find = _group_finder(ctx)
    dim = ctx.attrs["dim"]
    outs = _results(ctx)
    what = _what(ctx)

    def all_gather(*xs: np.ndarray) -> Any:
        dev = current()
        group = find(dev)
        results = [np.concatenate(values, axis=dim) for values in _exchange(dev, group, xs, what)]
        _check_shapes(what, group, results, outs)
        return _package(ctx, xs, results)
    return all_gather


@handles("all-to-all")
def _all_to_all(ctx: HandlerContext) -> Callable:
    """Array form (split_dim >= 0): chunk i of the operand along split_dim goes to participant i,
    chunks received are concatenated along it in group order. Tuple form: operand i goes to
    participant i; result j is what participant j sent to this device."""
    find = _group_finder(ctx)
    split = ctx.attrs["split_dim"]
    what = _what(ctx)

    def all_to_all(*xs: np.ndarray) -> Any:
        dev = current()
        group = find(dev)
        n = len(group)
        if split >= 0:
            (x,) = xs
            x = np.asarray(x)
            if x.shape[split] % n:
                raise CollectiveError(f"{what}: dimension {split} of {list(x.shape)} does not split in {n}")
            values = dev.communicator.all_to_all(group, np.split(x, n, axis=split),
                                                 op=f"{what} {x.dtype}{list(x.shape)}")
            return np.concatenate(values, axis=split)
        if len(xs) != n:
            raise CollectiveError(f"{what}: {len(xs)} operands for a group of {n} devices")
        # one shape for every operand (the verifier's rule, as XLA's)
        received = dev.communicator.all_to_all(group, [np.asarray(x) for x in xs], op=what)
        return tuple(np.array(v, copy=True) for v in received)
    return all_to_all


def permute_pairs(ctx: HandlerContext, pairs: Sequence[tuple[int, int]],
                  point_to_point: bool = False) -> Callable[[DeviceContext], list]:
    """dev -> `pairs` as flat device ids of its replica or partition (the instruction's mode;
    for `point_to_point` send/recv, replica ids when the program has several replicas, else
    partition ids: all executions of one send/recv form its group, as in XLA), cached per
    device layout."""
    what = _what(ctx)
    cache: dict[tuple[int, int, int, int], list[tuple[int, int]]] = {}

    def find(dev: DeviceContext) -> list[tuple[int, int]]:
        key = (dev.replica_id, dev.partition_id, dev.num_replicas, dev.num_partitions)
        flat = cache.get(key)
        if flat is None:
            mode = (CROSS_REPLICA if dev.num_replicas > 1 else CROSS_PARTITION) if point_to_point else ctx.attrs["mode"]
            try:
                flat = cache[key] = flat_pairs(mode, pairs, *key)
            except GroupError as e:
                raise CollectiveError(f"{what}: {e}") from None
        return flat
    return find


@handles("collective-permute")
def _collective_permute(ctx: HandlerContext) -> Callable:
    """The source's operand at each target; devices that no pair targets get zeros."""
    (dt, shape), = _results(ctx)
    what = _what(ctx)
    find = permute_pairs(ctx, [tuple(p) for p in ctx.attrs["pairs"]])

    def collective_permute(x: np.ndarray) -> Any:
        dev = current()
        got = dev.communicator.permute(find(dev), np.asarray(x), op=what)
        result = np.zeros(shape, dt) if got is None else got
        return _package(ctx, (x,), [result])
    return collective_permute


def _start_indices(value: Any, rank: int, what: str) -> tuple[int, ...]:
    """A start index: a tuple of integer scalars (XLA's form) or one integer vector."""
    parts = value if isinstance(value, tuple) else np.asarray(value).reshape(-1)
    if len(parts) != rank:
        raise CollectiveError(f"{what}: {len(parts)} start indices for a slice of rank {rank}")
    return tuple(int(np.asarray(p)) for p in parts)


@handles("collective_permute_in_place")
def _in_place_permute(ctx: HandlerContext) -> Callable:
    """XLA's in-place collective-permute(input, output, input_starts, output_starts): the pairs
    are len(slice lists) / leaves consecutive groups; in group k, each source sends the slice of
    each input leaf e at its input_starts[e][k] (of slice_sizes[e*G+k]) and each target writes
    it into its copy of output leaf e at its own output_starts[e][k]; everything else of the
    output is kept (a device no pair targets returns the output unchanged). The starts are
    each device's own values; a slice outside its array is an error, not a clamped copy."""
    pairs = [tuple(p) for p in ctx.attrs["pairs"]]
    lists = [tuple(int(v) for v in sizes) for sizes in ctx.attrs["slice_sizes"]]
    tuple_input = ctx.in_types[0][0] == TUPLE
    leaves = len(ctx.in_types[0][1]) if tuple_input else 1
    groups = len(lists) // leaves
    per = len(pairs) // groups
    finders = [permute_pairs(ctx, pairs[k * per:(k + 1) * per]) for k in range(groups)]
    what = _what(ctx)

    def starts(value: Any, e: int, k: int, rank: int, which: str) -> tuple[int, ...]:
        v = value[e] if tuple_input else value
        v = v[k] if groups > 1 else v
        return _start_indices(v, rank, f"{what} {which} start of input {e}, group {k}")

    def window(array: np.ndarray, at: tuple[int, ...], sizes: tuple[int, ...], which: str, dev: int) -> tuple:
        if any(a < 0 or a + z > n for a, z, n in zip(at, sizes, array.shape)):
            raise CollectiveError(f"{what}: device {dev}'s {which} slice at {list(at)} of sizes {list(sizes)} is "
                                  f"outside its {list(array.shape)}")
        return tuple(slice(a, a + z) for a, z in zip(at, sizes))

    def in_place_permute(x: Any, output: Any, in_starts: Any, out_starts: Any) -> Any:
        dev = current()
        xs = list(x) if tuple_input else [x]
        results = [np.array(o, copy=True) for o in (output if tuple_input else [output])]
        for e, (src, result) in enumerate(zip(xs, results)):
            src = np.asarray(src)
            for k, find in enumerate(finders):
                sizes = lists[e * groups + k]
                flat = find(dev)
                piece = src[window(src, starts(in_starts, e, k, src.ndim, "input"), sizes, "input", dev.device)] \
                    if any(s == dev.device for s, _ in flat) else src[(slice(0, 0),) * src.ndim]
                got = dev.communicator.permute(flat, piece, op=f"{what} input {e} group {k}")
                if got is not None:
                    at = starts(out_starts, e, k, result.ndim, "output")
                    result[window(result, at, sizes, "output", dev.device)] = got
        value: Any = tuple(results) if tuple_input else results[0]
        if not ctx.attrs.get("start") or ctx.type[0] != TUPLE:
            return value
        extra = [np.zeros(tuple(p[1]), DTYPES[p[0]]) for p in ctx.type[1][2:]]
        return (x, value, *extra)
    return in_place_permute


@handles("collective-broadcast")
def _collective_broadcast(ctx: HandlerContext) -> Callable:
    """Every participant gets the operand of the first device of its group."""
    find = _group_finder(ctx)
    what = _what(ctx)

    def collective_broadcast(*xs: np.ndarray) -> Any:
        dev = current()
        group = find(dev)
        results = [np.array(values[0], copy=True) for values in _exchange(dev, group, xs, what)]
        return tuple(results) if ctx.type[0] == TUPLE else results[0]
    return collective_broadcast


@handles("ragged-all-to-all")
def _ragged_all_to_all(ctx: HandlerContext) -> Callable:
    """XLA's RaggedAllToAll: for group member j (and update k when the offsets are [n, updates]),
    rows input[input_offsets[j,k] : +send_sizes[j,k]] go to member j, which writes them at
    output_offsets[j,k] of its output (the offsets are in the target's output); everything else
    of `output` is kept. Each member first sends each other member its (output offset, rows)
    list, then the rows, in one all_to_all each. recv_sizes is what the senders' send_sizes
    say (XLA does not read it either). A range outside input or output is an error, not a
    clipped copy."""
    find = _group_finder(ctx)
    what = _what(ctx)

    def ragged_all_to_all(data: np.ndarray, output: np.ndarray, in_off: np.ndarray, sizes: np.ndarray,
                          out_off: np.ndarray, recv_sizes: np.ndarray) -> np.ndarray:
        dev = current()
        group = find(dev)
        n = len(group)
        data = np.asarray(data)
        in_off, sizes, out_off = (np.asarray(a, np.int64).reshape(n, -1) for a in (in_off, sizes, out_off))
        if in_off.shape[0] != n:
            raise CollectiveError(f"{what}: offsets for {in_off.shape[0]} devices in a group of {n} {list(group)}")
        rows = data.shape[0]
        bad = (in_off < 0) | (sizes < 0) | (in_off + sizes > rows)
        if bad.any():
            j, k = map(int, np.argwhere(bad)[0])
            raise CollectiveError(f"{what}: device {dev.device} sends rows {int(in_off[j, k])}:"
                                  f"{int(in_off[j, k] + sizes[j, k])} of an input of {rows} rows")
        metas = [np.stack([out_off[j], sizes[j]], axis=1) for j in range(n)]
        pieces = [np.concatenate([data[o:o + s] for o, s in zip(in_off[j], sizes[j])]) for j in range(n)]
        got_meta = dev.communicator.all_to_all(group, metas, op=f"{what} offsets")
        got = dev.communicator.all_to_all(group, pieces, op=f"{what} {data.dtype}{list(data.shape[1:])}")
        result = np.array(output, copy=True)
        limit = result.shape[0]
        for i, (meta, block) in enumerate(zip(got_meta, got)):
            start = 0
            for o, s in np.asarray(meta, np.int64).reshape(-1, 2):
                if o < 0 or o + s > limit:
                    raise CollectiveError(f"{what}: device {group[i]} writes rows {int(o)}:{int(o + s)} of device "
                                          f"{dev.device}'s output of {limit} rows")
                result[o:o + s] = block[start:start + s]
                start += s
        return result
    return ragged_all_to_all
