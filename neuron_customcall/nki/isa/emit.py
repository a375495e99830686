"""What every ``nki.isa`` emitter shares: operands, validation errors, and the destination.

Each instruction has one emitter (``compute.py``, ``movement.py``, ``matmul.py``,
``accumulate.py``) taking ``dst`` first: ``None`` for beta 1 (a new tile is returned) or the
tile a beta-2 kernel passes (the instruction writes into that view: no new tile, no copy).
``result`` is that one decision.
"""

from __future__ import annotations

import math

from emulator import machine
from emulator.kernel_ir import Affine
from emulator.kernel_ir import divmod as dm

from .. import dtypes as nkd
from ..errors import NkiValidationError
from ..lang.operands import alu_op_name, as_partition_column, operand
from ..tile import Tile
from ..tracer import current
from . import enums

#: NumPy reductions and other spellings kernels pass as ALU operators (``reduce_op=np.amax``).
_ALU_ALIASES = {"amax": "maximum", "amin": "minimum", "max": "maximum", "min": "minimum",
                "sum": "add", "true_divide": "divide"}


def fail(rule: str, detail: str) -> NkiValidationError:
    """A rule of the ISA reference broken by the kernel at its current line."""
    return current().error(rule, detail, NkiValidationError)


def alu(op, api: str) -> str:
    """The IR name of an ALU operator given as ``nl.add``, ``np.add``, ``np.amax`` or a name."""
    name = getattr(op, "_nki_alu", None) or getattr(op, "__name__", op)
    name = _ALU_ALIASES.get(name, name) if isinstance(name, str) else name
    try:
        return alu_op_name(name)
    except Exception:  # noqa: BLE001 - re-raised with the API's name
        raise fail("unknown operator", f"{api}: {op!r} is not an ALU operator") from None


def tile(x, what: str, api: str) -> Tile:
    """An operand that must be a tile (index expressions and masks are materialised); a
    partition-only ``[P]`` tile is its ``[P, 1]`` view, as NKI reads it."""
    t = operand(x)
    if not isinstance(t, Tile):
        raise fail("tile operand", f"{api}: {what} must be a tile, got {type(x).__name__}")
    return as_partition_column(t)


def tile_or_scalar(x, what: str, api: str):
    t = operand(x)
    if not isinstance(t, (Tile, bool, int, float)):
        raise fail("operand", f"{api}: {what} must be a tile or a scalar")
    return t


def enum_name(value, kind: str, allowed, api: str) -> str:
    try:
        return enums.name_of(value, kind, allowed)
    except ValueError as e:
        raise fail(f"invalid {kind}", f"{api}: {e}") from None


def dtype_name(dtype, default: str) -> str:
    return nkd.name_of(dtype) if dtype is not None else default


def free_size(shape: tuple[int, ...]) -> int:
    return math.prod(shape[1:])


def fit(dst: Tile, shape: tuple[int, ...], api: str) -> Tile:
    """``dst`` as a view of ``shape``: the same shape, or the same after adding or removing axes of
    size 1 (a ``[P]`` destination for a ``[P, 1]`` result). Anything else is the reference's
    rule that ``dst`` holds the result's partitions and elements per partition, in its layout."""
    if not isinstance(dst, Tile):
        raise fail("dst", f"{api}: dst must be a tensor (nl.ndarray, a kernel argument or a view "
                   f"of one), got {type(dst).__name__}")
    shape = tuple(int(s) for s in shape)
    if dst.shape == shape:
        return dst
    old = [i for i, n in enumerate(dst.shape) if n != 1]
    new = [i for i, n in enumerate(shape) if n != 1]
    if [dst.shape[i] for i in old] != [shape[i] for i in new]:
        raise fail("dst shape", f"{api}: dst has shape {list(dst.shape)}, the result "
                   f"{list(shape)}: they must match (partitions and elements per partition)")
    ren = {f"t{o}": f"t{n}" for o, n in zip(old, new)}
    gone = {f"t{i}" for i, n in enumerate(dst.shape) if n == 1}
    index = []
    for a in dst.index:
        terms: dict[str, int] = {}
        for s, c in a.terms:
            base = dm.base_of(s)
            if base in gone:
                if base != s:
                    raise fail("dst shape", f"{api}: dst's index divides an axis of size 1")
                continue
            terms[ren.get(s, s) if base == s else dm.rebase(s, ren.get(base, base))] = c
        index.append(Affine.make(a.const, terms))
    return Tile(dst.trace, dst.decl, shape, tuple(index), dst.cast, dst.vshape)


def on_chip(t: Tile, what: str, api: str) -> None:
    if t.buffer not in machine.ON_CHIP:
        raise fail("memory", f"{api}: {what} must be in SBUF or PSUM, got {t.buffer} "
                   f"tensor {t.name!r}")


def result(dst: Tile | None, op: str, shape, dtype: str, /, *srcs, api: str,
           memory: str = machine.SBUF, mask=None, acc: str | None = None, **attrs) -> Tile:
    """Emit ``op`` into ``dst`` (beta 2: the kernel's view, reshaped only by size-1 axes) or
    into a new tile of ``shape``/``dtype`` in ``memory`` (beta 1); returns the tile written."""
    tr = current()
    if dst is None:
        if acc is not None:
            raise fail("accumulate", f"{api}: accumulation needs a destination")
        return tr.new(op, tuple(shape), dtype, *srcs, memory=memory, mask=mask, **attrs)
    view = fit(dst, tuple(shape), api)
    tr.emit(op, view, *srcs, mask=mask, acc=acc, **attrs)
    return view
