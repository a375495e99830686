"""Can a loop, or the SPMD grid, run as a batch axis instead of a Python loop?

Executing a loop as a batch axis runs each instruction of its body once for all iterations. That is
the same as running the iterations one after another when no iteration reads what another
iteration writes. A tensor that lives outside the loop and is both written and read inside it is
the only way for that to happen, so:

* accumulations (``acc``) into an outer tensor are fine: the executor reduces over the loop axis;
* plain writes into an outer tensor are fine: the executor keeps the last iteration's value when
  the address does not depend on the loop variable, and each iteration's own slice when it does;
* a read of an outer tensor that is also written in the loop is fine only if it reads exactly what
  an earlier plain write of the same iteration wrote (same access, unmasked).

The grid is the same question with the programs as iterations and the shared tensors (inputs,
outputs, shared HBM) as the outer ones: the SDK's simulator runs programs one after another, so a
program reading what another wrote (a race on hardware) must too. Anything else makes the loop or
the grid fall back to a Python loop, with the reason logged at debug level.
"""

from __future__ import annotations

from emulator.kernel_ir import (Access, Instruction, KernelIR, Loop, walk_instructions)


def first_appearance(kernel: KernelIR) -> dict[str, int]:
    """Tensor -> position (in program order) of the first instruction that writes it."""
    first: dict[str, int] = {}
    for pos, ins in enumerate(walk_instructions(kernel.body)):
        if ins.dst is not None:
            first.setdefault(ins.dst.tensor, pos)
    return first


def dependency_reason(body: list[Instruction], local: set[str]) -> str | None:
    """None if the iterations of ``body`` are independent (see module docstring) given the
    tensors ``local`` to one iteration; else a description of the dependency."""
    plain_writes: dict[str, list[tuple[int, Access, Instruction]]] = {}
    acc_written: set[str] = set()
    for i, ins in enumerate(body):
        if ins.dst is None or ins.dst.tensor in local:
            continue
        if ins.acc is not None:
            acc_written.add(ins.dst.tensor)
        else:
            plain_writes.setdefault(ins.dst.tensor, []).append((i, ins.dst, ins))
    written = acc_written | set(plain_writes)
    for i, ins in enumerate(body):
        for src in ins.srcs:
            if not isinstance(src, Access) or src.tensor not in written:
                continue
            ok = src.tensor not in acc_written and any(
                j < i and w == src and not wins.mask
                for j, w, wins in plain_writes.get(src.tensor, []))
            if not ok:
                return (f"tensor {src.tensor!r}: {ins.op} at {ins.loc} reads it and other "
                        "iterations write it")
    return None


def non_vectorisable_reason(loop: Loop, kernel: KernelIR, first: dict[str, int],
                            start: int) -> str | None:
    """None if ``loop`` may run as a batch axis, else why not. ``start`` is the program-order
    position of the loop's first instruction (as numbered by ``first_appearance``)."""
    body = list(walk_instructions(loop.body))
    local = {t for t, pos in first.items() if start <= pos < start + len(body)}
    reason = dependency_reason(body, local)
    return None if reason is None else f"iterations may depend on each other through {reason}"


def grid_reason(kernel: KernelIR) -> str | None:
    """None if the programs of the grid may run as batch axes, else why not."""
    local = {name for name, t in kernel.tensors.items()
             if t.memory in ("sbuf", "psum") or (t.memory == "hbm" and t.role == "internal")}
    reason = dependency_reason(list(walk_instructions(kernel.body)), local)
    return None if reason is None else f"programs may depend on each other through {reason}"
