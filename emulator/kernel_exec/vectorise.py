"""Can a loop, or the SPMD grid, run as a batch axis instead of a Python loop?

Executing a loop as a batch axis runs each instruction of its body once for all iterations. That is
the same as running the iterations one after another when no iteration reads what another
iteration writes. A tensor that lives outside the loop and is both written and read inside it is
the only way for that to happen, so:

* accumulations (``acc``) into an outer tensor are fine: the executor reduces over the loop axis;
* plain writes into an outer tensor are fine: the executor keeps the last iteration's value when
  the address does not depend on the loop variable, and each iteration's own slice when it does;
* a read of an outer tensor that is also written in the loop (other than by an indirect store,
  or by an indirect load, whose addresses are data) is fine if every write of that tensor in
  the loop is *iteration-disjoint* (different iterations touch different elements) and either
  the read is of exactly what an earlier plain write of the same iteration wrote (same access,
  unmasked), or every write is this very access (an in-place update ``x[i] = f(x[i])``). A
  write whose address does not depend on the iterations (a tile allocated before the loop and
  rewritten in each iteration) keeps one value for all of them, so a read of it in the loop
  would see the last iteration's: such a loop runs as a Python loop.

The grid is the same question with the programs as iterations and the shared tensors (inputs,
outputs, shared HBM) as the outer ones: the SDK's simulator runs programs one after another, so a
program reading what another wrote (a race on hardware) must too. Anything else makes the loop or
the grid fall back to a Python loop, with the reason logged at debug level.
"""

from __future__ import annotations

from collections.abc import Iterator

from emulator.kernel_ir import Access, Instruction, KernelIR, Loop, walk_instructions, walk_loops
from emulator.kernel_ir import divmod as dm


def first_appearance(kernel: KernelIR) -> dict[str, int]:
    """Tensor -> position (in program order) of the first instruction that writes it."""
    first: dict[str, int] = {}
    for pos, ins in enumerate(walk_instructions(kernel.body)):
        if ins.dst is not None:
            first.setdefault(ins.dst.tensor, pos)
    return first


def iteration_disjoint(access: Access, iter_syms: set[str], ext: dict[str, int]) -> bool:
    """True when two different iterations (values of ``iter_syms``) never touch a common element:
    every iteration symbol that varies owns a dimension where its stride exceeds the span of
    everything else that varies there (``ext``: extents of varying symbols; tile axes from the
    access)."""
    ext = {**ext, **{f"t{j}": n for j, n in enumerate(access.shape)}}
    for s in iter_syms:
        if ext.get(s, 1) <= 1:
            continue
        owned = False
        for a in access.index:
            k = a.coef(s)
            if k == 0 or any(a.coef(o) for o in iter_syms if o != s) or any(
                    dm.is_derived(sym) and dm.base_of(sym) in iter_syms for sym, _ in a.terms):
                continue
            span = 0
            for sym, c in a.terms:
                if sym != s:
                    lo, hi = dm.term_range(sym, ext)
                    span += abs(c) * (hi - lo)
            if span < abs(k):
                owned = True
                break
        if not owned:
            return False
    return True


def dependency_reason(body: list[Instruction], local: set[str], iter_syms: set[str],
                      ext: dict[str, int]) -> str | None:
    """None if the iterations of ``body`` are independent (see module docstring) given the
    tensors ``local`` to one iteration; else a description of the dependency. ``iter_syms`` are
    the symbols that number the iterations and ``ext`` the extents of every symbol that varies
    within the body."""
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
    # Indirect stores write where their data says: no read of the tensor is known to be safe.
    unknown = {ins.dst.tensor for ins in body
               if ins.dst is not None and ins.dst.tensor not in local and "indirect" in ins.attrs}
    for i, ins in enumerate(body):
        for src in ins.srcs:
            if not isinstance(src, Access) or src.tensor not in written:
                continue
            writes = plain_writes.get(src.tensor, [])
            ok = src.tensor not in acc_written and src.tensor not in unknown and not (
                "indirect" in ins.attrs and src is ins.srcs[0]) and all(
                iteration_disjoint(w, iter_syms, ext) for _, w, _ in writes) and (
                any(j < i and w == src and not wins.mask for j, w, wins in writes)
                or all(w == src and not wins.mask for _, w, wins in writes))
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
    ext = {loop.var: loop.extent, **{lp.var: lp.extent for lp in walk_loops(loop.body)}}
    reason = dependency_reason(body, local, {loop.var}, ext)
    return None if reason is None else f"iterations may depend on each other through {reason}"


def shared_tensors(kernel: KernelIR) -> set[str]:
    """Tensors all programs of the grid see: inputs, outputs, shared HBM (not on-chip tiles, not
    private HBM, of which each program has its own copy)."""
    return {name for name, t in kernel.tensors.items()
            if not (t.memory in ("sbuf", "psum") or (t.memory == "hbm" and t.role == "internal"))}


def shared_writes(kernel: KernelIR) -> Iterator[tuple[Instruction, dict[str, int]]]:
    """Each instruction that writes a shared tensor, with the extents of the grid's program ids
    and of the loops around it: what the programs-meet tests (host threads in parallel.py, the
    race warning in neuron_customcall/nki/checks.py) ask ``iteration_disjoint`` about."""
    shared = shared_tensors(kernel)

    def visit(body: list, ext: dict[str, int]) -> Iterator[tuple[Instruction, dict[str, int]]]:
        for st in body:
            if isinstance(st, Loop):
                yield from visit(st.body, {**ext, st.var: st.extent})
            elif st.dst is not None and st.dst.tensor in shared:
                yield st, ext

    yield from visit(kernel.body, {f"p{i}": g for i, g in enumerate(kernel.grid)})


def grid_reason(kernel: KernelIR) -> str | None:
    """None if the programs of the grid may run as batch axes, else why not."""
    local = set(kernel.tensors) - shared_tensors(kernel)
    ext = {f"p{i}": g for i, g in enumerate(kernel.grid)}
    ext.update({lp.var: lp.extent for lp in walk_loops(kernel.body)})
    reason = dependency_reason(list(walk_instructions(kernel.body)), local,
                               {f"p{i}" for i in range(len(kernel.grid))}, ext)
    return None if reason is None else f"programs may depend on each other through {reason}"
