"""Runs a kernel IR on NumPy arrays: the SPMD grid and independent affine loops as batch axes.

The runner owns the tensors' storage and the execution context; each instruction is executed by
the handler registered for its op in ``emulator.kernel_exec.handlers.HANDLERS`` (a table, one
handler per instruction). Handlers talk to the runner only through ``read`` and ``write``.
"""

from __future__ import annotations

import logging
from typing import Sequence

import numpy as np

from emulator import machine
from emulator.kernel_ir import (AFFINE_LOOP, Access, Const, Instruction, KernelIR, Loop, Operand,
                                Statement, dtypes, walk_instructions)

from . import alu
from .access import (Context, Plan, Storage, UnboundSymbolError, describe_bounds, eval_mask,
                     plan_access)
from .errors import KernelRuntimeError, OutOfBoundsAccessError
from .vectorise import first_appearance, non_vectorisable_reason

log = logging.getLogger(__name__)


class Runner:
    """Executes one kernel IR once. Create a new runner per call."""

    def __init__(self, kernel: KernelIR, inputs: Sequence[np.ndarray]):
        from .handlers import HANDLERS  # handlers import this module's types

        self.kernel = kernel
        self.handlers = HANDLERS
        if len(inputs) != len(kernel.inputs):
            raise KernelRuntimeError(kernel.name, None, "wrong number of inputs",
                                     f"expected {len(kernel.inputs)}, got {len(inputs)}")
        self.written = {i.dst.tensor for i in walk_instructions(kernel.body) if i.dst is not None}
        self.storage: dict[str, Storage] = {}
        grid = tuple(kernel.grid)
        psyms = tuple(f"p{i}" for i in range(len(grid)))
        self.ctx = Context(psyms, grid, {}, dict(zip(psyms, grid)))
        for name, arr in zip(kernel.inputs, inputs):
            decl = kernel.tensors[name]
            arr = np.asarray(arr)
            want = dtypes.to_numpy(decl.dtype)
            if tuple(arr.shape) != tuple(decl.shape) or arr.dtype != want:
                raise KernelRuntimeError(
                    kernel.name, decl.loc, "input does not match the traced signature",
                    f"input {name!r} is {arr.dtype}{list(arr.shape)}, traced as "
                    f"{decl.dtype}{list(decl.shape)}")
            # Inputs the kernel writes are copied so the caller's arrays are never modified.
            owned = name in self.written
            self.storage[name] = Storage(np.array(arr) if owned else arr, (), owned)
        # HBM tensors live for the whole kernel: allocated here (private HBM once per program).
        for name, decl in kernel.tensors.items():
            if decl.memory in (machine.HBM, machine.SHARED_HBM) and name not in self.storage:
                private = decl.memory == machine.HBM and decl.role != "output"
                shape = (grid if private else ()) + tuple(decl.shape)
                self.storage[name] = Storage(
                    machine.uninitialised(shape, dtypes.to_numpy(decl.dtype)),
                    psyms if private else ())
        self._first = first_appearance(kernel)
        self._loop_start: dict[int, int] = {}
        self._number(kernel.body, 0)
        self._reasons: dict[int, str | None] = {}
        self.instruction: Instruction | None = None

    # --- driving -------------------------------------------------------------------------------

    def run(self) -> list[np.ndarray]:
        self._run_body(self.kernel.body)
        return [self.storage[name].array for name in self.kernel.outputs]

    def _number(self, body: list[Statement], pos: int) -> int:
        for st in body:
            if isinstance(st, Loop):
                self._loop_start[id(st)] = pos
                pos = self._number(st.body, pos)
            else:
                pos += 1
        return pos

    def _run_body(self, body: list[Statement]) -> None:
        for st in body:
            if isinstance(st, Loop):
                self._run_loop(st)
            else:
                self._run_instruction(st)

    def _run_loop(self, loop: Loop) -> None:
        ctx = self.ctx
        ctx.extents[loop.var] = loop.extent
        reason = self._vectorise_reason(loop)
        if reason is None:
            saved = (ctx.batch_syms, ctx.batch_shape)
            ctx.batch_syms = ctx.batch_syms + (loop.var,)
            ctx.batch_shape = ctx.batch_shape + (loop.extent,)
            try:
                self._run_body(loop.body)
            finally:
                ctx.batch_syms, ctx.batch_shape = saved
            return
        if loop.kind == AFFINE_LOOP:
            log.debug("kernel %r: affine_range loop %s at %s runs as a Python loop: %s",
                      self.kernel.name, loop.var, loop.loc, reason)
        for i in range(loop.extent):
            ctx.bound[loop.var] = i
            self._run_body(loop.body)
        del ctx.bound[loop.var]

    def _vectorise_reason(self, loop: Loop) -> str | None:
        key = id(loop)
        if key not in self._reasons:
            if loop.kind != AFFINE_LOOP:
                self._reasons[key] = "sequential_range carries dependencies between iterations"
            else:
                self._reasons[key] = non_vectorisable_reason(
                    loop, self.kernel, self._first, self._loop_start[key])
        return self._reasons[key]

    def _run_instruction(self, ins: Instruction) -> None:
        self.instruction = ins
        try:
            self.handlers[ins.op](self, ins)
        except KernelRuntimeError:
            raise
        except UnboundSymbolError as e:
            raise self.error("unbound index symbol", f"{ins.op} uses {e.args[0]!r}") from e
        except (ValueError, TypeError, IndexError, FloatingPointError) as e:
            raise self.error(f"{ins.op} failed", str(e)) from e

    def error(self, rule: str, detail: str) -> KernelRuntimeError:
        loc = self.instruction.loc if self.instruction is not None else None
        return KernelRuntimeError(self.kernel.name, loc, rule, detail)

    # --- storage -------------------------------------------------------------------------------

    def allocate(self, name: str) -> None:
        """Start an on-chip lifetime: one copy per current batch index (program, iteration)."""
        decl = self.kernel.tensors[name]
        shape = self.ctx.batch_shape + tuple(decl.shape)
        self.storage[name] = Storage(
            machine.uninitialised(shape, dtypes.to_numpy(decl.dtype)), self.ctx.batch_syms)

    def is_immutable(self, name: str) -> bool:
        """True for tensors no instruction writes (read-only inputs): views of them never need
        copying."""
        return name not in self.written

    def _storage(self, name: str) -> Storage:
        try:
            return self.storage[name]
        except KeyError:
            raise self.error("read before allocation", f"tensor {name!r} has no storage") from None

    # --- reading -------------------------------------------------------------------------------

    def read(self, op: Operand, out_tile: tuple[int, ...] | None = None,
             masked: bool = False) -> np.ndarray:
        """The operand's value with shape ``batch_shape + tile`` (``tile`` = ``out_tile`` when
        given: the operand is broadcast against it, right-aligned). With ``masked``, only the
        positions of the instruction's mask must be in bounds."""
        if isinstance(op, Const):
            return np.asarray(op.value)
        st = self._storage(op.tensor)
        plan = plan_access(st, op, self.ctx, out_tile)
        shape = st.array.shape
        if plan.in_bounds(shape):
            return plan.view(st.array)
        ins = self.instruction
        if masked and ins is not None and ins.mask:
            return self._masked_gather(st, op, plan, ins)
        raise self._oob(op, plan, st, "reads")

    def _masked_gather(self, st: Storage, op: Access, plan: Plan, ins: Instruction) -> np.ndarray:
        tile = plan.out_shape[len(self.ctx.batch_shape):]
        mask = np.broadcast_to(eval_mask(ins.mask, self.ctx, tile), plan.out_shape)
        idx = plan.index_arrays()
        for a, (ix, n) in enumerate(zip(idx, st.array.shape)):
            bad = mask & ((ix < 0) | (ix >= n))
            if bad.any():
                raise self._oob(op, plan, st, "reads (inside its mask)")
        clipped = tuple(np.clip(ix, 0, n - 1) for ix, n in zip(idx, st.array.shape))
        return st.array[clipped]

    def _oob(self, op: Access, plan: Plan, st: Storage, verb: str) -> OutOfBoundsAccessError:
        decl = self.kernel.tensors[op.tensor]
        loc = self.instruction.loc if self.instruction is not None else None
        return OutOfBoundsAccessError(
            self.kernel.name, loc,
            f"{self.instruction.op if self.instruction else 'access'} {verb} {decl.memory} "
            f"tensor {op.tensor!r} out of bounds: {describe_bounds(plan, decl.shape, len(st.batch))}"
            f"; access {op}")

    # --- writing -------------------------------------------------------------------------------

    def write(self, ins: Instruction, value: np.ndarray, may_alias: bool = False) -> None:
        """Write ``value`` (broadcastable to ``batch_shape + dst tile``) to ``ins.dst``: converted
        to the destination dtype, restricted to the mask, combined with ``ins.acc``. Batch axes
        the destination does not depend on collapse: reduced with the accumulation operator, else
        the last iteration wins (what sequential execution would leave)."""
        dst = ins.dst
        assert dst is not None
        decl = self.kernel.tensors[dst.tensor]
        ctx = self.ctx
        np_dtype = dtypes.to_numpy(decl.dtype)
        st = self.storage.get(dst.tensor)
        nb = len(ctx.batch_syms)
        full = ctx.batch_shape + tuple(dst.shape)
        value = np.asarray(value)
        if value.shape != full:
            value = np.broadcast_to(value, full)

        if st is None or self._rebindable(ins, decl, st):
            batch = ctx.batch_syms if st is None else st.batch
            keep = [i for i, s in enumerate(ctx.batch_syms) if s in batch]
            value = self._collapse(value, keep, nb, None)
            if value.dtype != np_dtype or may_alias or not value.flags.writeable:
                value = value.astype(np_dtype)
            self.storage[dst.tensor] = Storage(value, tuple(ctx.batch_syms[i] for i in keep))
            return

        plan = plan_access(st, dst, ctx)
        used = set()
        for co in plan.coefs:
            used.update(co)
        keep = [i for i in range(nb) if i in used]
        value = self._collapse(value, keep, nb, ins.acc)
        mask = None
        if ins.mask:
            mask = np.broadcast_to(eval_mask(ins.mask, ctx, dst.shape), full)
            mask = self._collapse_mask(mask, keep, nb)
        drop = [i for i in range(nb) if i not in keep]
        plan = Plan(tuple(n for i, n in enumerate(plan.out_shape) if i not in drop),
                    plan.consts, [_renumber(co, drop) for co in plan.coefs])
        if not st.owned:
            st.array = np.array(st.array)
            st.owned = True
        arr = st.array
        if plan.in_bounds(arr.shape):
            view = plan.view(arr)
            if ins.acc is not None:
                value = alu.binary(_ACC_COMBINE[ins.acc], view, value)
            if mask is None:
                view[...] = value
            else:
                np.copyto(view, value.astype(np_dtype), where=mask, casting="unsafe")
            return
        if mask is None:
            raise self._oob(dst, plan, st, "writes")
        idx = plan.index_arrays()
        for ix, n in zip(idx, arr.shape):
            if (mask & ((ix < 0) | (ix >= n))).any():
                raise self._oob(dst, plan, st, "writes (inside its mask)")
        sel = tuple(ix[mask] for ix in idx)
        vals = np.broadcast_to(value, mask.shape)[mask]
        if ins.acc is not None:
            vals = alu.binary(_ACC_COMBINE[ins.acc], arr[sel], vals)
        arr[sel] = vals

    def _rebindable(self, ins: Instruction, decl, st: Storage) -> bool:
        """A whole, unmasked, non-accumulating write of an on-chip tensor replaces its storage."""
        dst = ins.dst
        if ins.mask or ins.acc is not None or decl.memory == machine.SHARED_HBM:
            return False
        if decl.role != "internal" or tuple(dst.shape) != tuple(decl.shape):
            return False
        if any(s not in self.ctx.batch_syms for s in st.batch):
            return False
        return all(a.const == 0 and a.terms == ((f"t{d}", 1),) for d, a in enumerate(dst.index))

    def _collapse(self, value: np.ndarray, keep: list[int], nb: int, acc: str | None) -> np.ndarray:
        drop = tuple(i for i in range(nb) if i not in keep)
        if not drop:
            return value
        if acc is not None:
            return alu.reduce(_ACC_REDUCE[acc], alu.widen(value), axis=drop)
        return value[tuple(-1 if i in drop else slice(None) for i in range(nb))]

    @staticmethod
    def _collapse_mask(mask: np.ndarray, keep: list[int], nb: int) -> np.ndarray:
        drop = tuple(i for i in range(nb) if i not in keep)
        if not drop:
            return mask
        return mask.any(axis=drop)


#: How an accumulating write folds the iterations of a collapsed batch axis, and then combines the
#: folded value with the destination: ``dst -= x`` over iterations is ``dst - sum(x)``.
_ACC_REDUCE = {"add": "add", "subtract": "add", "multiply": "multiply", "maximum": "maximum",
               "minimum": "minimum"}
_ACC_COMBINE = {"add": "add", "subtract": "subtract", "multiply": "multiply",
                "maximum": "maximum", "minimum": "minimum"}


def _renumber(co: dict[int, int], drop: list[int]) -> dict[int, int]:
    if not drop:
        return co
    return {ax - sum(1 for d in drop if d < ax): k for ax, k in co.items()}


def run_kernel(kernel: KernelIR, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    """Run ``kernel`` on ``inputs`` (in ``kernel.inputs`` order); returns its outputs."""
    return Runner(kernel, inputs).run()
