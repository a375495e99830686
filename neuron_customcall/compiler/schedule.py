"""The order instructions run in: a deterministic post-order from the root.

Operands and control predecessors come before their users; instructions nothing reaches (dead
code) are dropped, parameters are always kept (they own the computation's input slots), and so
are sends, placed as early as their operands allow (EARLY). Iterative,
so deep graphs do not hit Python's recursion limit; linear in the number of edges.
"""
from __future__ import annotations

from typing import Any


#: Instructions that run even when the root does not reach them, and as early as their operands
#: allow: a `send` is where every device exchanges with its peers (compiler/lowering/send_recv.py),
#: so it must come before any recv-done that does not depend on it, on every device alike.
EARLY = frozenset({"send"})


def schedule(comp: Any) -> list[Any]:
    order: list[Any] = []
    done: set[int] = set()
    for p in comp.parameters:
        done.add(id(p))
        order.append(p)
    for start in [i for i in comp.instructions if i.opcode in EARLY] + [comp.root]:
        if start is not None and id(start) not in done:
            _post_order(start, order, done)
    return order


def _post_order(start: Any, order: list[Any], done: set[int]) -> None:
    """Append `start` and what it needs (not yet in `done`) to `order`, operands first."""
    stack: list[tuple[Any, int]] = [(start, 0)]
    on_stack: set[int] = {id(start)}
    while stack:
        inst, k = stack[-1]
        preds = inst.operands + inst.control_predecessors
        if k < len(preds):
            stack[-1] = (inst, k + 1)
            nxt = preds[k]
            if id(nxt) not in done and id(nxt) not in on_stack:
                on_stack.add(id(nxt))
                stack.append((nxt, 0))
            continue
        stack.pop()
        done.add(id(inst))
        order.append(inst)
