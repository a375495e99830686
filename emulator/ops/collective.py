"""Collectives and device ids: each handler reads the device it runs as at run time
(emulator.collectives.context.current), exchanges whole arrays through that device's
Communicator, and does the rest with NumPy on its own thread.

Semantics are XLA's (operation_semantics.md). Reductions run in group order on every device,
so every participant gets the same bits. Async forms (`-start`) run the collective at once; their
tuple results hold (operands, results, zeros for XLA's context scalars), and the compiler lowers
`-done` to reading element 1.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from emulator.collectives.comm import CollectiveError
from emulator.collectives.context import DeviceContext, current
from emulator.collectives.groups import GroupError, flat_pairs, participants
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

    def fold(self, values: Sequence[np.ndarray]) -> np.ndarray:
        """values[0] op values[1] op ... left to right (the same order, so the same bits, on every
        device), as a new array."""
        cdt = self.cdt
        if len(values) == 1:
            return np.array(values[0], dtype=cdt, copy=True)
        if self.ufunc is not None:
            acc = np.asarray(self.ufunc(values[0].astype(cdt, copy=False), values[1].astype(cdt, copy=False)))
            for v in values[2:]:
                self.ufunc(acc, v.astype(cdt, copy=False), out=acc)
            return acc
        acc = values[0]
        for v in values[1:]:
            acc = np.asarray(self._lifted(acc, v)[0])
        return acc


def _reduce_in_order(values: Sequence[np.ndarray], combiner: _Combiner, dt: np.dtype,
                     shape: tuple[int, ...]) -> np.ndarray:
    """The fold of `values`, of the declared dtype and shape, the caller's own."""
    acc = combiner.fold(values)
    if acc.dtype == dt and acc.shape == shape and acc.flags.writeable and acc.flags.c_contiguous:
        return acc
    return np.array(np.broadcast_to(acc.astype(dt, copy=False), shape), dtype=dt, copy=True)


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


def _reducing(ctx: HandlerContext, scatter: bool) -> Callable:
    """all-reduce, or reduce-scatter (`scatter`: this device keeps its piece along `dim`)."""
    find = _group_finder(ctx)
    outs = _results(ctx)
    combiners = [_Combiner(ctx, dt) for dt, _ in outs]
    dim = ctx.attrs["dim"] if scatter else 0
    what = _what(ctx)

    def run(*xs: np.ndarray) -> Any:
        dev = current()
        group = find(dev)
        piece: tuple = ()
        if scatter:
            for x, (_, shape) in zip(xs, outs):
                if x.shape[dim] != shape[dim] * len(group):
                    raise CollectiveError(f"{what}: dimension {dim} of {list(x.shape)} does not scatter over a group "
                                          f"of {len(group)} devices {list(group)} into {list(shape)}")
            me, n = group.index(dev.device), outs[0][1][dim]
            piece = (slice(None),) * dim + (slice(me * n, (me + 1) * n),)
        results = [_reduce_in_order([v[piece] for v in values] if scatter else values, combiner, dt, shape)
                   for values, (dt, shape), combiner in zip(_exchange(dev, group, xs, what), outs, combiners)]
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
        me = group.index(dev.device)
        n = len(group)
        if split >= 0:
            (x,) = xs
            x = np.asarray(x)
            if x.shape[split] % n:
                raise CollectiveError(f"{what}: dimension {split} of {list(x.shape)} does not split in {n}")
            values = dev.communicator.all_gather(group, x, op=what)
            c = x.shape[split] // n
            idx = (slice(None),) * split + (slice(me * c, (me + 1) * c),)
            return np.concatenate([v[idx] for v in values], axis=split)
        if len(xs) != n:
            raise CollectiveError(f"{what}: {len(xs)} operands for a group of {n} devices")
        received = _exchange(dev, group, xs, what)
        return tuple(np.array(received[me][j], copy=True) for j in range(n))
    return all_to_all


@handles("collective-permute")
def _collective_permute(ctx: HandlerContext) -> Callable:
    """The source's operand at each target; devices that no pair targets get zeros."""
    mode, pairs = ctx.attrs["mode"], [tuple(p) for p in ctx.attrs["pairs"]]
    (dt, shape), = _results(ctx)
    what = _what(ctx)
    cache: dict[tuple[int, int, int, int], list[tuple[int, int]]] = {}

    if len(ctx.in_types) != 1:
        raise ValueError(f"{what}: {len(ctx.in_types)} operands; only the one-operand form runs")

    def collective_permute(x: np.ndarray) -> Any:
        dev = current()
        key = (dev.replica_id, dev.partition_id, dev.num_replicas, dev.num_partitions)
        flat = cache.get(key)
        if flat is None:
            try:
                flat = cache[key] = flat_pairs(mode, pairs, *key)
            except GroupError as e:
                raise CollectiveError(f"{what}: {e}") from None
        got = dev.communicator.permute(flat, np.asarray(x), op=what)
        result = np.zeros(shape, dt) if got is None else got
        return _package(ctx, (x,), [result])
    return collective_permute


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
