"""Sort (multi-operand, any comparator, stable or not) and top-k.

Fast path: the compiler recognises a comparator that is one LT/GT comparison of operand 0 and
names it in `fast`; that is a stable NumPy argsort on an order-preserving key. Any other
comparator runs as a bitonic sorting network whose every stage evaluates the lifted comparator on
whole arrays; ties are broken by original position, which makes the network stable.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from emulator.ops.common import lifted
from emulator.ops.elementwise import total_order_key
from emulator.program.context import HandlerContext
from emulator.program.ops import handles


def _key(x: np.ndarray, descending: bool) -> np.ndarray:
    k = total_order_key(x)
    if k.dtype == np.bool_:
        k = k.astype(np.int8)
    elif k.dtype.kind == "f":  # (f64 view keys are already ints; plain floats only when not viewed)
        k = total_order_key(k)
    if not descending:
        return k
    return np.invert(k, out=k) if k is not x else ~k


def _argsort_fast(x: np.ndarray, kind: str) -> np.ndarray:
    return np.argsort(_key(x, kind.startswith("gt")), axis=-1, kind="stable")


def _bitonic_argsort(xs: list[np.ndarray], less: Callable[..., Any]) -> np.ndarray:
    """Permutation sorting the last axis by the strict order `less(a..., b...)` (ties by index)."""
    n = xs[0].shape[-1]
    P = 1
    while P < n:
        P *= 2
    batch = xs[0].shape[:-1]
    perm = np.broadcast_to(np.arange(P), batch + (P,)).copy()
    pos = np.arange(P)
    valid_all = pos < n
    k = 2
    while k <= P:
        j = k // 2
        while j >= 1:
            partner = pos ^ j
            lower = pos < partner
            asc = (pos & k) == 0
            want_small = lower == asc
            pa = perm
            pb = perm[..., partner]
            va, vb = pa < n, pb < n
            ca = [np.take_along_axis(x, np.minimum(pa, n - 1), -1) for x in xs]
            cb = [np.take_along_axis(x, np.minimum(pb, n - 1), -1) for x in xs]
            c_ab = np.asarray(less(ca, cb), bool)
            c_ba = np.asarray(less(cb, ca), bool)
            a_lt_b = np.where(va & vb, c_ab | (~c_ba & (pa < pb)), va & ~vb)
            b_lt_a = np.where(va & vb, c_ba | (~c_ab & (pb < pa)), vb & ~va)
            take_b = np.where(want_small, b_lt_a, a_lt_b)
            perm = np.where(take_b, pb, pa)
            j //= 2
        k *= 2
    del valid_all
    return perm[..., :n]


@handles("sort")
def _sort(ctx: HandlerContext) -> Callable:
    dim = ctx.attrs["dim"]
    fast = ctx.attrs["fast"]
    if fast not in ("", "lt", "gt"):
        raise ValueError(f"unknown sort fast path {fast!r}")
    n = len(ctx.in_types)
    cmp = None if fast else lifted(ctx.computation("computation"), 1)
    k = ctx.attrs["key"]
    if k >= len(ctx.program.program.computations):
        raise ValueError(f"no key computation {k}")
    key_fn = lifted(ctx.program.runner(k), 1) if k >= 0 else None

    def less(a: list[np.ndarray], b: list[np.ndarray]) -> Any:
        args = [v for pair in zip(a, b) for v in pair]
        return cmp(*args)[0]

    def sort(*xs: np.ndarray) -> Any:
        moved = [np.moveaxis(np.asarray(x), dim, -1) for x in xs]
        if moved[0].shape[-1] <= 1:
            perm = np.zeros(moved[0].shape, np.int64)
        elif key_fn is not None:
            key = np.broadcast_to(key_fn(*[v for m in moved for v in (m, m)])[0], moved[0].shape)
            perm = _argsort_fast(np.asarray(key), fast)
        elif fast:
            perm = _argsort_fast(moved[0], fast)
        else:
            perm = _bitonic_argsort(moved, less)
        res = [np.moveaxis(np.take_along_axis(m, perm, -1), -1, dim) for m in moved]
        return tuple(res) if n > 1 else res[0]
    return sort


def _first_k_stable(key: np.ndarray, cand: np.ndarray) -> np.ndarray:
    """The candidate positions (last axis) ordered by (key, position)."""
    cand = np.sort(cand, axis=-1)
    order = np.argsort(np.take_along_axis(key, cand, -1), axis=-1, kind="stable")
    return np.take_along_axis(cand, order, -1)


def _top_k_positions(key: np.ndarray, k: int) -> np.ndarray:
    """The positions of the k smallest keys of each row, in order, ties by position (what a stable
    argsort's first k are), in O(n) per row: an argpartition picks k candidates; a row where the
    k-th key also occurs outside them (a tie at the boundary: argpartition may have picked any
    of the equal keys) is redone with a stable argsort. Only the k candidates get sorted."""
    n = key.shape[-1]
    if k == 0 or 4 * k >= n or key.ndim == 0:
        return np.argsort(key, axis=-1, kind="stable")[..., :k]
    cand = np.argpartition(key, k - 1, axis=-1)[..., :k]
    kth = np.take_along_axis(key, cand, -1).max(axis=-1, keepdims=True)
    inside = np.count_nonzero(np.take_along_axis(key, cand, -1) == kth, axis=-1)
    total = np.count_nonzero(key == kth, axis=-1)
    tied = inside != total
    if tied.any():
        cand[tied] = np.argsort(key[tied], axis=-1, kind="stable")[..., :k]
    return _first_k_stable(key, cand)


@handles("topk")
def _top_k(ctx: HandlerContext) -> Callable:
    k, largest = ctx.attrs["k"], ctx.attrs["largest"]

    def top_k(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        perm = _top_k_positions(_key(np.asarray(x), largest), k)
        return np.take_along_axis(x, perm, -1), perm.astype(np.int32)
    return top_k
