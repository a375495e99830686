"""The order instructions run in: a deterministic post-order from the root.

Operands and control predecessors come before their users; instructions nothing reaches (dead
code) are dropped, parameters are always kept (they own the computation's input slots). Iterative,
so deep graphs do not hit Python's recursion limit; linear in the number of edges.
"""
from __future__ import annotations

from typing import Any


def schedule(comp: Any) -> list[Any]:
    order: list[Any] = []
    done: set[int] = set()
    for p in comp.parameters:
        done.add(id(p))
        order.append(p)
    if comp.root is None or id(comp.root) in done:
        return order
    stack: list[tuple[Any, int]] = [(comp.root, 0)]
    on_stack: set[int] = {id(comp.root)}
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
    return order
