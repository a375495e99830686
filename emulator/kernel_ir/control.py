"""The kernel IR's loop forms: one ``LoopForm`` per ``Loop.kind``, the only list of them.

Static loops (``affine``, ``sequential``) have a trip count known while tracing and bind their
variable as an index symbol. Data-dependent loops (NKI beta 2's ``nl.dynamic_range`` /
``nl.fori_loop`` with register bounds, ``nl.while_loop`` and ``while reg:``) are the hardware
loop instructions the engine sequencers branch on: their trip count is known only when they run,
so they bind no symbol (``extent`` is 0), take *registers* (one-element on-chip int32 tensors,
``nisa.register_alloc``) or integer constants as operands, and the executor runs their body once
per iteration (``emulator/kernel_exec/control.py``, which registers a runner per form):

* ``dynamic`` — operands ``(index, start, stop)``, attribute ``step`` (a positive constant): reads
  ``start`` and ``stop`` once when the loop starts, then for ``i`` in ``range(start, stop, step)``
  writes ``i`` into the register ``index`` and runs the body. Writing ``index`` inside the body
  does not change the iteration (the reference: "writing to ``i`` has no effect on the loop").
* ``while`` — operand ``(cond,)``: before each iteration reads the register ``cond`` and stops
  when it is 0 (a true ``while``: with ``cond`` 0 at the start the body never runs); the body
  updates ``cond``.

How many iterations one run of such a loop may make is the emulator's limit
``NEURON_EMULATOR_MAX_KERNEL_LOOP_ITERATIONS`` (emulator/limits.py).
"""

from __future__ import annotations

from dataclasses import dataclass

from .ir import (AFFINE_LOOP, DYNAMIC_LOOP, SEQUENTIAL_LOOP, WHILE_LOOP, Access, Const, Loop,
                 TensorDecl)

#: Memories a register operand may live in (registers are on-chip tensors here).
REGISTER_MEMORIES = ("sbuf", "psum")
#: Dtypes a register operand may have (the engines' 32-bit scalar registers).
REGISTER_DTYPES = ("int32", "uint32")


@dataclass(frozen=True)
class LoopForm:
    """What one loop kind is: its operands (names, in order; which one the loop writes) and
    whether its trip count is static."""

    kind: str
    operands: tuple[str, ...] = ()
    #: Operand the loop itself writes (``dynamic``'s index register), or None.
    writes: str | None = None
    static: bool = True
    doc: str = ""

    def problems(self, loop: Loop, tensors: dict[str, TensorDecl]) -> list[str]:
        """What is wrong with ``loop`` as an instance of this form (empty: nothing)."""
        out = []
        if self.static:
            if loop.extent < 0:
                out.append(f"extent {loop.extent} is negative")
            if loop.operands or loop.step != 1:
                out.append("a static loop has no operands or step")
            return out
        if loop.extent != 0:
            out.append(f"a data-dependent loop has extent 0, got {loop.extent}")
        if len(loop.operands) != len(self.operands):
            out.append(f"takes {len(self.operands)} operands ({', '.join(self.operands)}), got "
                       f"{len(loop.operands)}")
        if not isinstance(loop.step, int) or isinstance(loop.step, bool) or loop.step < 1:
            out.append(f"step must be a positive integer, got {loop.step!r}")
        for name, op in zip(self.operands, loop.operands):
            if isinstance(op, Const):
                if name == self.writes:
                    out.append(f"operand {name!r} is written by the loop: it must be a register")
                elif not isinstance(op.value, int) or isinstance(op.value, bool):
                    out.append(f"operand {name!r} must be an integer, got {op.value!r}")
                continue
            if not isinstance(op, Access):
                out.append(f"operand {name!r} is {op!r}")
                continue
            t = tensors.get(op.tensor)
            if t is None:
                out.append(f"operand {name!r}: unknown tensor {op.tensor!r}")
            elif (t.memory not in REGISTER_MEMORIES or t.dtype not in REGISTER_DTYPES
                  or _elements(op.shape) != 1):
                out.append(f"operand {name!r} must be a register (one {'/'.join(REGISTER_DTYPES)}"
                           f" element on chip), got {t.memory} {t.dtype}{list(op.shape)}")
        return out


def _elements(shape: tuple[int, ...]) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


def _forms(*forms: LoopForm) -> dict[str, LoopForm]:
    return {f.kind: f for f in forms}


#: Every loop form, by ``Loop.kind``.
FORMS: dict[str, LoopForm] = _forms(
    LoopForm(AFFINE_LOOP, doc="independent iterations over range(extent)"),
    LoopForm(SEQUENTIAL_LOOP, doc="iterations in order over range(extent)"),
    LoopForm(DYNAMIC_LOOP, ("index", "start", "stop"), writes="index", static=False,
             doc="for index in range(start, stop, step), bounds read when the loop starts"),
    LoopForm(WHILE_LOOP, ("cond",), static=False,
             doc="while cond != 0, cond read before each iteration"),
)


def form(kind: str) -> LoopForm | None:
    return FORMS.get(kind)


def describe(loop: Loop) -> str:
    """The loop's header as the printer shows it: ``for l1 in affine_range(4)``,
    ``for t3 in dynamic_range(t1, 512, 128)``, ``while t5``."""
    ops = [str(o.value) if isinstance(o, Const) else o.tensor for o in loop.operands]
    if loop.kind == DYNAMIC_LOOP and len(ops) == 3:
        step = f", {loop.step}" if loop.step != 1 else ""
        return f"for {ops[0]} in dynamic_range({ops[1]}, {ops[2]}{step})"
    if loop.kind == WHILE_LOOP and len(ops) == 1:
        return f"while {ops[0]}"
    return f"for {loop.var} in {loop.kind}_range({loop.extent})"


__all__ = ["LoopForm", "FORMS", "form", "describe", "REGISTER_MEMORIES", "REGISTER_DTYPES"]
