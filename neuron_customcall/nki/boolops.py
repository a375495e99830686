"""Python's ``and`` / ``or`` between masks in kernel source.

AWS's own NKI examples write a two-sided mask as ``mask=(ix < n // 2 and iy < m // 2)``
(``nki.isa.nc_match_replace8``'s example) and mean both conditions: NKI's front end reads the
kernel's source, so ``and`` there is the conjunction of the two predicates. Plain Python would
call ``bool()`` on the first comparison and keep only the second. The kernel's source is
therefore rewritten before tracing (with the loop rewrite, ``loops.traceable``): every
``a and b`` becomes ``both(a, lambda: b)`` and every ``a or b`` ``either(a, lambda: b)``. For
anything but a mask these keep Python's meaning exactly (short-circuit, the deciding operand is
the result); a mask ``and`` a mask is their ``&``; a mask ``or`` anything is refused, as ``|`` is
(a disjunction is not an affine predicate).
"""

from __future__ import annotations

import ast
from typing import Any, Callable

from .errors import NonAffineIndexError
from .indexing import Pred

#: The name the rewritten source calls the helpers through.
RUNTIME = "_nki_boolops"

#: Operands that must not move into a lambda: they bind names or suspend the function.
_UNMOVABLE = (ast.NamedExpr, ast.Yield, ast.YieldFrom, ast.Await)


def both(first: Any, *rest: Callable[[], Any]) -> Any:
    """``first and rest[0]() and ...``, where a mask followed by masks is their conjunction."""
    value = first
    for thunk in rest:
        if isinstance(value, Pred):
            other = thunk()
            if not isinstance(other, Pred):
                raise NonAffineIndexError(
                    f"'and' of a mask with {type(other).__name__} {other!r}: both sides of a "
                    "mask's 'and' must be comparisons of index expressions")
            value = value & other
            continue
        if not value:
            return value
        value = thunk()
    return value


def either(first: Any, *rest: Callable[[], Any]) -> Any:
    """``first or rest[0]() or ...``; a mask may not take part (no affine disjunction)."""
    value = first
    for thunk in rest:
        if isinstance(value, Pred):
            raise NonAffineIndexError("masks combine with 'and' or '&' only ('or' of two "
                                      "comparisons is not an affine predicate)")
        if value:
            return value
        value = thunk()
    if isinstance(value, Pred) and rest:
        raise NonAffineIndexError("masks combine with 'and' or '&' only ('or' of two "
                                  "comparisons is not an affine predicate)")
    return value


class Helpers:
    """What ``RUNTIME`` names in the rewritten source."""

    both = staticmethod(both)
    either = staticmethod(either)


def rewrite(node: ast.BoolOp) -> ast.expr:
    """The call replacing ``node`` (its operands already rewritten), or ``node`` itself when an
    operand can not move into a lambda."""
    if any(isinstance(n, _UNMOVABLE) for v in node.values[1:] for n in ast.walk(v)):
        return node
    name = "both" if isinstance(node.op, ast.And) else "either"
    fn = ast.Attribute(ast.Name(RUNTIME, ast.Load()), name, ast.Load())
    thunks = [ast.Lambda(ast.arguments(posonlyargs=[], args=[], kwonlyargs=[], kw_defaults=[],
                                       defaults=[]), v) for v in node.values[1:]]
    call = ast.Call(fn, [node.values[0], *thunks], [])
    for n in ast.walk(call):
        if not hasattr(n, "lineno") or isinstance(n, (ast.Call, ast.Attribute, ast.Name,
                                                      ast.Lambda, ast.arguments)):
            ast.copy_location(n, node)
    return call
