"""Structural checks of a kernel IR, run on every deserialised kernel.

IR read from bytes (an HLO backend_config, an artifact) may come from another version or be
corrupt; these checks turn what would be an obscure executor failure into a
``KernelIRFormatError`` naming the problem: unknown names, dtypes and memory spaces, index arity,
symbols out of scope, negative shapes.
"""

from __future__ import annotations

from ..limits import GridLimitError, check_grid
from . import control
from . import divmod as divmod_symbols
from .instructions import AFFINE_KINDS, SPECS
from .dtypes import DTYPES
from .ir import (CONSTANT, INPUT, MEMORY_SPACES, OUTPUT, Access, Const, Instruction,
                 KernelIR, Loop, Statement)


class KernelIRValidationError(ValueError):
    """A kernel IR that is well-formed JSON but not a valid kernel."""


def validate(kernel: KernelIR) -> None:
    """Raise ``KernelIRValidationError`` if ``kernel`` is not executable as described."""
    if not 1 <= len(kernel.grid) <= 3 or any(g < 1 for g in kernel.grid):
        raise KernelIRValidationError(f"grid {list(kernel.grid)} must be 1 to 3 positive sizes")
    try:
        check_grid(kernel.grid)
    except GridLimitError as e:
        raise KernelIRValidationError(f"kernel {kernel.name!r}: {e}") from None
    for name, t in kernel.tensors.items():
        if t.name != name:
            raise KernelIRValidationError(f"tensor {name!r} is declared as {t.name!r}")
        if t.dtype not in DTYPES:
            raise KernelIRValidationError(f"tensor {name!r} has unknown dtype {t.dtype!r}")
        if t.memory not in MEMORY_SPACES:
            raise KernelIRValidationError(f"tensor {name!r} has unknown memory {t.memory!r}")
        if any(d < 0 for d in t.shape):
            raise KernelIRValidationError(f"tensor {name!r} has a negative dimension")
    for role, names in ((INPUT, kernel.inputs), (OUTPUT, kernel.outputs)):
        for n in names:
            if n not in kernel.tensors:
                raise KernelIRValidationError(f"{role} {n!r} is not a declared tensor")
    for name, t in kernel.tensors.items():
        if t.role == CONSTANT and name not in kernel.constants:
            raise KernelIRValidationError(f"constant {name!r} has no data")
    if kernel.lnc is not None:
        axis, stride, cores = tuple(kernel.lnc) if len(kernel.lnc) == 3 else (-1, 0, 0)
        if not (0 <= axis < len(kernel.grid) and stride >= 1 and cores == 2
                and kernel.grid[axis] % (stride * cores) == 0):
            raise KernelIRValidationError(f"lnc {list(kernel.lnc)}: (axis, stride, 2 cores) "
                                          f"that splits grid {list(kernel.grid)}")
    scope = {f"p{i}" for i in range(len(kernel.grid))}
    _body(kernel, kernel.body, scope)


def _body(kernel: KernelIR, body: list[Statement], scope: set[str]) -> None:
    for st in body:
        if isinstance(st, Loop):
            _loop(kernel, st, scope)
            _body(kernel, st.body, scope if st.data_dependent else scope | {st.var})
        else:
            _instruction(kernel, st, scope)


def _loop(kernel: KernelIR, loop: Loop, scope: set[str]) -> None:
    """The loop's form (control.py) and its operands' accesses, in the enclosing scope."""
    where = f"loop {loop.var} at {loop.loc}"
    lf = control.form(loop.kind)
    if lf is None:
        raise KernelIRValidationError(f"{where}: unknown loop kind {loop.kind!r}")
    problems = lf.problems(loop, kernel.tensors)
    if problems:
        raise KernelIRValidationError(f"{where} ({loop.kind}): {'; '.join(problems)}")
    for op in loop.operands:
        if isinstance(op, Access):
            _access(kernel, op, scope, where)


def _access(kernel: KernelIR, a: Access, scope: set[str], where: str) -> None:
    t = kernel.tensors.get(a.tensor)
    if t is None:
        raise KernelIRValidationError(f"{where}: unknown tensor {a.tensor!r}")
    if len(a.index) != len(t.shape):
        raise KernelIRValidationError(
            f"{where}: {len(a.index)} indices for tensor {a.tensor!r} of rank {len(t.shape)}")
    tiles = {f"t{j}" for j in range(len(a.shape))}
    for expr in a.index:
        for sym, _ in expr.terms:
            if _base(sym, where) not in scope and _base(sym, where) not in tiles:
                raise KernelIRValidationError(f"{where}: symbol {sym!r} is out of scope")


def _instruction(kernel: KernelIR, ins: Instruction, scope: set[str]) -> None:
    spec = SPECS.get(ins.op)
    if spec is None:
        raise KernelIRValidationError(f"unknown instruction {ins.op!r}")
    where = f"{ins.op} at {ins.loc}"
    for s in ins.srcs:
        if not isinstance(s, (Access, Const)):
            raise KernelIRValidationError(f"{where}: operand {s!r}")
    if ins.dst is None:
        raise KernelIRValidationError(f"{where}: no destination")
    problems = spec.problems(operand_kinds(ins.srcs), ins.attrs, ins.acc)
    if problems:
        raise KernelIRValidationError(f"{where}: {'; '.join(problems)}")
    accesses = [ins.dst] + [s for s in ins.srcs if isinstance(s, Access)]
    for a in accesses:
        _access(kernel, a, scope, where)
    # Masks and affine attributes (iota's expression, affine_select's predicates) range over
    # the destination tile's axes.
    dst_tiles = {f"t{j}" for j in range(len(ins.dst.shape))}
    exprs = [list(m.terms) for m in ins.mask]
    for a in spec.attrs:
        if a.kind in AFFINE_KINDS and a.name in ins.attrs:
            value = ins.attrs[a.name]
            exprs += [e[1] for e in (value if a.kind == "affines" else [value])]
    for terms in exprs:
        for sym, _ in terms:
            if _base(sym, where) not in scope and _base(sym, where) not in dst_tiles:
                raise KernelIRValidationError(f"{where}: mask symbol {sym!r} is out of scope")


def operand_kinds(srcs) -> tuple[str, ...]:
    """"access" or "const" per source, as ``InstructionSpec.problems`` takes them."""
    return tuple("access" if isinstance(s, Access) else "const" for s in srcs)


def _base(sym: str, where: str) -> str:
    """The plain symbol behind ``sym`` (itself, or the base of a ``//``/``%`` derived symbol)."""
    try:
        d = divmod_symbols.parse(sym)
    except ValueError as e:
        raise KernelIRValidationError(f"{where}: {e}") from None
    if d is not None and (d.k < 1 or not 0 < d.coef < d.k or not 0 <= d.offset < d.k):
        raise KernelIRValidationError(f"{where}: derived symbol {sym!r} is not canonical")
    return sym if d is None else d.base
