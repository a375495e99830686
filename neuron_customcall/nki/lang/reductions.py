"""Reductions over free axes, and the composite softmax / rms_norm."""

from __future__ import annotations

import math

import numpy as np

from emulator.kernel_ir import Affine, affine_to_json
from emulator.kernel_ir import divmod as dm

from .. import checks
from .. import dtypes as nkd
from ..errors import NonAffineIndexError
from ..indexing import Pred
from ..tile import Tile
from ..tracer import current
from .elementwise import binary_op, unary_op, exp, square
from .operands import as_partition_column, operand

# --- reductions ------------------------------------------------------------------------------------

def _axes(axis, rank: int) -> tuple[int, ...]:
    """Normalised, sorted reduction axes: ints or a tuple/list of them, negative ones counted
    from the end (NumPy's convention); out of range or repeated axes are trace errors (never
    wrapped silently onto another axis). The partition axis is refused by checks.py."""
    tr = current()
    if axis is None:
        raise tr.error("reduction axes", "reductions need axis= (free axes only)")
    axes = tuple(axis) if isinstance(axis, (tuple, list)) else (axis,)
    if not axes:
        raise tr.error("reduction axes", "axis=() reduces nothing; name at least one free axis")
    out = []
    for a in axes:
        if not isinstance(a, (int, np.integer)) or isinstance(a, bool):
            raise tr.error("reduction axes", f"axis {a!r} is not an integer")
        if not -rank <= int(a) < rank:
            raise tr.error("reduction axes", f"axis {int(a)} is out of range for a rank-{rank} "
                           "tile")
        out.append(int(a) % rank)
    if len(set(out)) != len(out):
        raise tr.error("reduction axes", f"axis {list(axes)} names an axis twice")
    return tuple(sorted(out))


def reduce(op: str, x, axis, dtype=None, mask=None, keepdims=False, negate=False) -> Tile:
    """``op`` over the free ``axis`` of ``x``. A mask is over ``x``'s positions (the kernel's
    index grid of the input): positions it leaves out along reduced axes do not contribute
    (they read as ``op``'s identity), and destination elements whose input row it leaves out
    entirely are not written."""
    tr = current()
    x = as_partition_column(operand(x))
    axes = _axes(axis, x.ndim)
    shape = tuple(1 if i in axes else n for i, n in enumerate(x.shape) if keepdims or i not in axes)
    out_dtype = nkd.name_of(dtype) if dtype is not None else (
        "bool" if op in ("logical_and", "logical_or") else x.dtype_name)
    dst_mask = None
    if mask is not None:
        x, dst_mask = _masked_input(tr, op, x, mask, axes, keepdims)
    return tr.new("tensor_reduce", shape, out_dtype, x, mask=dst_mask, op=op, axes=list(axes),
                  keepdims=bool(keepdims), negate=bool(negate))


def _masked_input(tr, op: str, x: Tile, mask, axes: tuple[int, ...], keepdims: bool):
    """(input with masked-out positions along reduced axes replaced by ``op``'s identity, the
    mask's conditions on kept axes as a destination mask)."""
    if not isinstance(mask, Pred):
        raise tr.error("invalid mask", f"mask must be an affine predicate, got {mask!r}")
    try:
        affs = checks.drop_always_true(tr, mask.to_affines(x.ndim), x.shape)
    except NonAffineIndexError as e:
        raise tr.error("invalid mask", str(e)) from None
    reduced = {f"t{j}" for j in axes}
    on_reduced = [a for a in affs if any(dm.base_of(s) in reduced for s, _ in a.terms)]
    kept = [a for a in affs if a not in on_reduced]
    if on_reduced:
        x = tr.new("affine_select", x.shape, x.dtype_name, x, _identity(op, x.dtype_name),
                   pred=[affine_to_json(a) for a in on_reduced])
    if not kept:
        return x, None
    if keepdims:
        return x, tuple(kept)
    rename = {f"t{j}": f"t{j - len([r for r in axes if r < j])}" for j in range(x.ndim)
              if j not in axes}
    return x, tuple(Affine.make(a.const, {
        (rename[s] if dm.base_of(s) == s else dm.rebase(s, rename[dm.base_of(s)])): c
        for s, c in a.terms}) for a in kept)


def _identity(op: str, dtype: str):
    """The value that leaves ``op``'s reduction unchanged, in ``dtype``."""
    if op in ("add", "subtract", "logical_or", "bitwise_or", "bitwise_xor"):
        return 0 if op != "logical_or" else False
    if op == "multiply":
        return 1
    if op == "logical_and":
        return True
    if op == "bitwise_and":
        return -1
    if op in ("maximum", "minimum"):
        big = math.inf if nkd.is_float(dtype) else int(np.iinfo(nkd.numpy_dtype(dtype)).max)
        small = -math.inf if nkd.is_float(dtype) else int(np.iinfo(nkd.numpy_dtype(dtype)).min)
        return small if op == "maximum" else big
    raise current().error("masked reduction", f"no identity known for a masked {op} reduction")


def sum(x, axis, dtype=None, keepdims=False, *, mask=None) -> Tile:  # noqa: A001
    return reduce("add", x, axis, dtype, mask, keepdims)


def max(x, axis, dtype=None, keepdims=False, *, mask=None) -> Tile:  # noqa: A001
    return reduce("maximum", x, axis, dtype, mask, keepdims)


def min(x, axis, dtype=None, keepdims=False, *, mask=None) -> Tile:  # noqa: A001
    return reduce("minimum", x, axis, dtype, mask, keepdims)


def prod(x, axis, dtype=None, keepdims=False, *, mask=None) -> Tile:
    return reduce("multiply", x, axis, dtype, mask, keepdims)


def all(x, axis, dtype=None, keepdims=False, *, mask=None) -> Tile:  # noqa: A001
    return reduce("logical_and", x, axis, dtype, mask, keepdims)


def mean(x, axis, dtype=None, keepdims=False, *, mask=None) -> Tile:
    x = as_partition_column(operand(x))
    axes = _axes(axis, x.ndim)
    n = math.prod(x.shape[a] for a in axes)
    fdt = dtype if dtype is not None else (x.dtype_name if nkd.is_float(x.dtype_name)
                                           else "float32")
    s = reduce("add", x, axes, "float32", mask, keepdims)
    return binary_op("multiply", s, 1.0 / n, fdt, mask)


def var(x, axis, dtype=None, keepdims=False, *, mask=None) -> Tile:
    x = as_partition_column(operand(x))
    m = mean(x, axis, dtype="float32", keepdims=True)
    d = binary_op("subtract", x, m, "float32")
    return mean(square(d), axis, dtype=dtype, mask=mask, keepdims=keepdims)


def softmax(x, axis=-1, dtype=None, *, compute_dtype=None, mask=None) -> Tile:
    """``exp(x - max) / sum(exp(x - max))`` along free ``axis``; the intermediates in
    ``compute_dtype`` (float32 unless given)."""
    x = operand(x)
    m = max(x, axis, keepdims=True)
    e = exp(binary_op("subtract", x, m, "float32"),
            dtype=compute_dtype if compute_dtype is not None else "float32")
    s = sum(e, axis, keepdims=True)
    return binary_op("divide", e, s, dtype if dtype is not None else x.dtype_name, mask)


def rms_norm(x, w, axis, n, epsilon=1e-6, dtype=None, compute_dtype=None, *, mask=None) -> Tile:
    """``x * rsqrt(sum(x^2, axis) / n + epsilon) * w``; the squares in ``compute_dtype``
    (float32 unless given)."""
    x = operand(x)
    ss = sum(square(x, dtype=compute_dtype if compute_dtype is not None else "float32"), axis,
             keepdims=True)
    r = unary_op("rsqrt", ss, scale=1.0 / n, bias=float(epsilon))
    y = binary_op("multiply", x, r, "float32")
    return binary_op("multiply", y, w, dtype if dtype is not None else x.dtype_name, mask)
