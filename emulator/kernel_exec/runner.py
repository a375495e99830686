"""Runs a kernel IR on NumPy arrays: the SPMD grid and independent affine loops as batch axes.

The runner owns the tensors' storage and the execution context; each instruction is executed by
the handler registered for its op in ``emulator.kernel_exec.handlers.HANDLERS`` (a table, one
handler per instruction). Handlers talk to the runner only through ``read`` and ``write``.
"""

from __future__ import annotations

import contextlib
import copy
import logging
import math
import threading
from typing import Sequence

import numpy as np

from emulator import blas, machine
from emulator.kernel_ir import (Access, Const, Instruction, KernelIR, Loop, Operand,
                                Statement, dtypes)
from emulator.kernel_ir import divmod as divmod_ir
from emulator.kernel_ir.printer import format_operand

from . import alu, buffers, control, lnc, parallel, precision, watch
from .access import (Context, Plan, Storage, UnboundSymbolError, describe_bounds, eval_mask,
                     plan_access)
from .errors import KernelRuntimeError, OutOfBoundsAccessError
from .handlers import HANDLERS
from .program import Program, prepare
from .setup import is_whole

log = logging.getLogger(__name__)

#: Memory the tiles of one batched step (a loop or the grid, vectorised) may take; beyond it the
#: batch axis runs in chunks.
BATCH_BYTES_BUDGET = 512 << 20


def _index_symbols(access: Access) -> tuple[str, ...]:
    """The symbols ``access``'s index mentions, a derived one (``(l1 // 4)``) by its base."""
    out: list[str] = []
    for a in access.index:
        for s, _ in a.terms:
            base = divmod_ir.base_of(s)
            while base != s:  # a derived symbol of a derived one
                s, base = base, divmod_ir.base_of(base)
            if base not in out:
                out.append(base)
    return tuple(out)


def _root(arr: np.ndarray) -> np.ndarray:
    """The array that owns the memory ``arr`` views."""
    while isinstance(arr.base, np.ndarray):
        arr = arr.base
    return arr


class Runner:
    """Executes a prepared kernel once. Create a new runner per call."""

    def __init__(self, program: Program, inputs: Sequence[np.ndarray]):
        if program.precise != precision.precise_fp():
            # NKI_PRECISE_FP changed since the program was prepared (callers keep programs
            # across launches): storage dtypes follow the setting of this launch.
            program = prepare(program.kernel)
        kernel = program.kernel
        self.program = program
        self.kernel = kernel
        self.handlers = HANDLERS
        if len(inputs) != len(kernel.inputs):
            raise KernelRuntimeError(kernel.name, None, "wrong number of inputs",
                                     f"expected {len(kernel.inputs)}, got {len(inputs)}")
        self.written = program.written
        self.setup = setup = program.setup
        self.storage: dict[str, Storage] = {}
        grid, psyms = setup.grid, setup.psyms
        self.ctx = Context(psyms, grid, {}, dict(setup.extents))
        for slot, arr in zip(setup.inputs, inputs):
            if type(arr) is not np.ndarray:
                arr = np.asarray(arr)
            if arr.shape != slot.shape or arr.dtype != slot.dtype:
                decl = kernel.tensors[slot.name]
                raise KernelRuntimeError(
                    kernel.name, decl.loc, "input does not match the traced signature",
                    f"input {slot.name!r} is {arr.dtype}{list(arr.shape)}, traced as "
                    f"{decl.dtype}{list(decl.shape)}")
            # Inputs the kernel writes are copied so the caller's arrays are never modified.
            self.storage[slot.name] = Storage(np.array(arr) if slot.written else arr, (),
                                              slot.written)
        for name, arr, owned in setup.constants:
            self.storage[name] = Storage(np.array(arr) if owned else arr, (), owned)
        # HBM tensors live for the whole kernel: allocated here (private HBM once per program).
        # Outputs a store always writes completely skip the NaN fill.
        for slot in setup.hbm:
            shape = (grid + slot.shape) if slot.private else slot.shape
            arr = buffers.empty(shape, slot.dtype)
            if not slot.covered:
                arr[...] = machine.uninitialised_value(slot.dtype)
            self.storage[slot.name] = Storage(arr, psyms if slot.private else ())
        self.instruction: Instruction | None = None
        #: The consumer the current instruction forwards its result to (see Program.forward).
        self.forward: Instruction | None = None
        self._out: np.ndarray | None = None
        self._skip: set[int] = set()
        #: id() of arrays some tile's storage is a view of (bound without a copy): the tile that
        #: owns such an array must not be changed in place while the view may still be read.
        self._lent: set[int] = set()
        #: The recycled array ``fresh`` handed out for the current instruction's result.
        self._fresh: np.ndarray | None = None
        #: id() of storage arrays handed out as they are by the current instruction's reads.
        self._whole_reads: set[int] = set()
        #: Set when another range of the grid failed (a worker's, see parallel.py).
        self._stop: threading.Event | None = None
        #: The program while it runs as one batch without loops: the context never changes, so
        #: plans and forwarding decisions are memoised by access and storage batch alone.
        self._flat: Program | None = None
        #: Debugging hooks that want this kernel's instructions (watch.py); empty, and free,
        #: when nobody watches.
        self._watches = watch.for_kernel(kernel.name)

    # --- driving -------------------------------------------------------------------------------

    def run(self) -> list[np.ndarray]:
        platform_error = lnc.platform_reason(self.kernel)
        if platform_error is not None:
            raise KernelRuntimeError(self.kernel.name, None, "two NeuronCores", platform_error)
        if self.program.lnc_error is not None:
            rule = "core race" if "undefined on hardware" in self.program.lnc_error \
                else "two NeuronCores"
            raise KernelRuntimeError(self.kernel.name, None, rule, self.program.lnc_error)
        # Engines do not trap on overflow, 0/0 or log(-1): they produce inf/NaN, and so do we.
        # GEMMs get the BLAS thread policy of a graph run (emulator/blas.py) also when the kernel
        # is launched on NumPy arrays: two spinning OpenBLAS threads on a busy host made a
        # flash-attention forward's batched 128^3 GEMMs 50x more CPU than one thread.
        with np.errstate(all="ignore"), (blas.blas_threads_for_run() if self.program.has_matmul
                                         else contextlib.nullcontext()):
            self._run_grid()
        return [self.storage[name].array for name in self.kernel.outputs]

    def _run_grid(self) -> None:
        program = self.program
        limits = (BATCH_BYTES_BUDGET, parallel.MIN_PARALLEL_BYTES)
        one = program.one_batch
        if one is None or one[0] != limits:
            # Decided once per program (and limits): the grid runs vectorised, in one batch (its
            # tiles fit the budget) and on one thread (too small to split, or it may not split).
            n = program.program_bytes * math.prod(self.kernel.grid)
            one = program.one_batch = (limits, program.grid_reason is None and n <= limits[0]
                                       and (program.parallel_reason is not None or n < limits[1]))
        if one[1]:
            if program.flat:
                self._flat = program  # one context for the whole run (see _plan, out_view)
            try:
                self._run_body(self.kernel.body)  # the context is the whole grid already
            finally:
                self._flat = None
            return
        reason = program.grid_reason
        if reason is None:
            grid = self.ctx.batch_shape
            # A watched run stays on one thread: its callback is never called concurrently.
            threads = parallel.threads_for(self.program) if grid and not self._watches else 1
            if threads > 1:
                try:
                    parallel.run_split(self, threads)
                    return
                except KernelRuntimeError as e:
                    first = e
                log.debug("kernel %r failed on %d host threads (%s); running it on one for the "
                          "error a sequential run gives", self.kernel.name, threads, first)
                self.run_grid_range(0, grid[0])
                raise first  # the one-thread run fails too (same programs); if not, this stands
            if grid:
                self.run_grid_range(0, grid[0])
            else:
                self._run_body(self.kernel.body)
        else:
            log.debug("kernel %r: grid %s runs one program at a time: %s", self.kernel.name,
                      list(self.kernel.grid), reason)
            ctx = self.ctx
            syms, ctx.batch_syms, ctx.batch_shape = ctx.batch_syms, (), ()
            for ids in np.ndindex(*self.kernel.grid):
                ctx.bound.update(zip(syms, ids))
                self._run_body(self.kernel.body)

    def run_grid_range(self, first: int, stop: int, share: int = 1) -> None:
        """Programs ``first <= program_id(0) < stop`` of the vectorised grid, in chunks of axis 0
        that keep their tiles within this range's ``share`` of ``BATCH_BYTES_BUDGET``."""
        ctx = self.ctx
        grid = tuple(self.kernel.grid)
        rest = math.prod(grid[1:])
        n = stop - first
        chunk = self._chunk(n, self.program.program_bytes * rest * share)
        if chunk < n:
            log.debug("kernel %r: grid %s runs in chunks of %d along axis 0 (memory)",
                      self.kernel.name, list(grid), chunk)
        whole = chunk >= grid[0]
        for start in range(first, stop, chunk):
            ctx.batch_shape = (min(chunk, stop - start),) + grid[1:]
            if not whole:
                ctx.offsets["p0"] = start
            self._run_body(self.kernel.body)

    def worker(self, stop: threading.Event) -> "Runner":
        """A runner for one range of programs on a host thread: its own context and on-chip
        tiles, the same HBM tensors (programs of a range write only their own part of them, see
        parallel.py). It gives up when ``stop`` is set (another range failed)."""
        w = copy.copy(self)
        ctx = self.ctx
        w.ctx = Context(ctx.batch_syms, ctx.batch_shape, dict(ctx.bound), dict(ctx.extents),
                        dict(ctx.offsets))
        w.storage = dict(self.storage)
        w._skip = set()
        w.instruction = w.forward = w._out = w._fresh = None
        w._whole_reads = set()
        w._stop = stop
        return w

    def _run_body(self, body: list[Statement]) -> None:
        if self._stop is not None and self._stop.is_set():
            raise parallel.Cancelled()
        steps = self.program.steps.get(id(body))
        if steps is None:
            steps = self.program.steps[id(body)] = self._steps(body)
        skip = self._skip
        watches = self._watches
        for loop, ins, handler, forward, dead in steps:
            if loop is not None:
                self._run_loop(loop)
                continue
            if skip and id(ins) in skip:  # its work was done by the producer forwarding to it
                skip.discard(id(ins))
                continue
            self.instruction = ins
            self.forward = forward
            self._out = self._fresh = None
            if self._whole_reads:
                self._whole_reads.clear()
            seen = None
            if watches:
                self.forward = None  # a watched result lands in its own tile, to be shown
                seen = self._watch_inputs(ins)
            try:
                handler(self, ins)
            except KernelRuntimeError:
                raise
            except UnboundSymbolError as e:
                raise self.error("unbound index symbol", f"{ins.op} uses {e.args[0]!r}") from e
            except (ValueError, TypeError, IndexError, FloatingPointError) as e:
                raise self.error(f"{ins.op} failed", str(e)) from e
            finally:
                self.forward = None
            if seen is not None:  # outside the try: the user's callback's errors stay theirs
                self._watch_result(ins, *seen)
            if dead:
                for name in dead:
                    self.storage.pop(name, None)  # read for the last time: free its memory now

    def _split(self, value: np.ndarray, tile_ndim: int) -> tuple:
        ctx = self.ctx
        return watch.split(value, ctx.batch_syms, ctx.batch_shape, ctx.offsets, ctx.bound,
                           tile_ndim)

    def _watch_inputs(self, ins: Instruction) -> tuple[list[watch.Watch], tuple] | None:
        """The watches that want ``ins`` and its tensor operands' values before it runs (copies:
        the instruction may compute into a source it reads for the last time)."""
        wanted = list(watch.matching(self._watches, ins))
        if not wanted:
            return None
        inputs = []
        for src in ins.srcs:
            if isinstance(src, Access):
                try:
                    value = self.read(src, masked=True)
                except KernelRuntimeError:
                    continue  # the instruction itself reports the bad read
                inputs.append((format_operand(src), self._split(value, len(src.shape))))
        return wanted, tuple(inputs)

    def _watch_result(self, ins: Instruction, wanted: list[watch.Watch], inputs: tuple) -> None:
        values: tuple = ()
        if ins.dst is not None and ins.dst.tensor in self.storage:
            values = self._split(self.read(ins.dst, masked=True), len(ins.dst.shape))
        where, line, text = watch.describe(ins)
        watch.deliver(wanted, watch.Step(self.kernel.name, ins.op, where, line, text,
                                         None if ins.dst is None else ins.dst.tensor, values,
                                         inputs))

    def _steps(self, body: list[Statement]) -> list[tuple]:
        """The body as (loop, instruction, handler, forwarded consumer, tiles read for the last
        time) rows: what running a statement looks up, looked up once per program."""
        prog = self.program
        return [(st, None, None, None, ()) if isinstance(st, Loop) else
                (None, st, self.handlers[st.op], prog.forward.get(id(st)),
                 prog.dead_after.get(id(st), ()))
                for st in body]

    def run_body(self, body: list[Statement]) -> None:
        """Run a statement list in the current context (control.py runs loop bodies with it)."""
        self._run_body(body)

    def write_register(self, ins: Instruction, value: int) -> None:
        """Write ``value`` into ``ins.dst``, a register the running loop sets (``ins`` is the
        loop's ``memset`` of it, made once by the analysis: plans stay memoised by it)."""
        self.instruction = ins
        self.forward = None
        self._out = self._fresh = None
        self.write(ins, np.asarray(value))

    def _run_loop(self, loop: Loop) -> None:
        if loop.data_dependent:
            control.RUNNERS[loop.kind](self, loop)
            return
        ctx = self.ctx
        ctx.extents[loop.var] = loop.extent
        reason = self.program.reasons[id(loop)]
        if reason is None:
            per_iter = self.program.loop_bytes.get(id(loop), 0) * math.prod(ctx.batch_shape)
            chunk = self._chunk(loop.extent, per_iter)
            if chunk < loop.extent:
                log.debug("kernel %r: %s_range loop %s at %s runs in chunks of %d iterations "
                          "(memory)", self.kernel.name, loop.kind, loop.var, loop.loc, chunk)
            saved = (ctx.batch_syms, ctx.batch_shape)
            try:
                for start in range(0, loop.extent, chunk):
                    ctx.batch_syms = saved[0] + (loop.var,)
                    ctx.batch_shape = saved[1] + (min(chunk, loop.extent - start),)
                    if chunk < loop.extent:
                        ctx.offsets[loop.var] = start
                    self._run_body(loop.body)
            finally:
                ctx.batch_syms, ctx.batch_shape = saved
                ctx.offsets.pop(loop.var, None)
            return
        log.debug("kernel %r: %s_range loop %s at %s runs as a Python loop: %s",
                  self.kernel.name, loop.kind, loop.var, loop.loc, reason)
        for i in range(loop.extent):
            ctx.bound[loop.var] = i
            self._run_body(loop.body)
        del ctx.bound[loop.var]

    @staticmethod
    def _chunk(extent: int, bytes_per_index: int) -> int:
        """How many indices of a batch axis to run at once so that the tiles they create stay
        within ``BATCH_BYTES_BUDGET`` (all of them, usually)."""
        if bytes_per_index <= 0 or bytes_per_index * extent <= BATCH_BYTES_BUDGET:
            return max(extent, 1)
        return max(1, BATCH_BYTES_BUDGET // bytes_per_index)

    def error(self, rule: str, detail: str) -> KernelRuntimeError:
        loc = self.instruction.loc if self.instruction is not None else None
        return KernelRuntimeError(self.kernel.name, loc, rule, detail)

    # --- storage -------------------------------------------------------------------------------

    def allocate(self, name: str, fill: float | int | bool | None = None) -> None:
        """Start an on-chip lifetime: one copy per current batch index (program, iteration),
        uninitialised (NaN) or filled with ``fill``."""
        decl = self.kernel.tensors[name]
        shape = self.ctx.batch_shape + tuple(decl.shape)
        np_dtype = self.setup.np_dtypes[name]
        arr = buffers.empty(shape, np_dtype)
        # Zeros are filled lazily: an accumulator's first whole '+=' can replace them (write()).
        zero = fill is not None and fill == 0
        if not zero:
            arr[...] = machine.uninitialised_value(np_dtype) if fill is None else fill
        self.storage[name] = Storage(arr, self.ctx.batch_syms,
                                     base=self.ctx.base_of(self.ctx.batch_syms), zero=zero)

    @staticmethod
    def _fill_zeros(st: Storage) -> None:
        """Make a lazily zeroed tile's zeros real (before anything reads or partly writes it)."""
        if st.zero:
            st.array[...] = 0
            st.zero = False

    def is_immutable(self, name: str) -> bool:
        """True when the memory behind the tensor's current value never changes: read-only inputs,
        and tiles whose only writer replaces their storage (see Program.frozen). Views of them
        never need copying."""
        return name not in self.written or name in self.program.frozen

    def _storage(self, name: str) -> Storage:
        try:
            st = self.storage[name]
        except KeyError:
            raise self.error("read before allocation", f"tensor {name!r} has no storage") from None
        self._fill_zeros(st)
        return st

    def _plan(self, st: Storage, access: Access, out_tile: tuple[int, ...] | None = None) -> Plan:
        """``plan_access``, memoised per program: a plan depends only on the access, the
        storage's batch axes and the context, which repeat on every run and iteration."""
        ctx = self.ctx
        flat = self._flat
        if flat is not None:
            key = (id(access), out_tile, st.batch)
            plan = flat.flat_plans.get(key)
            if plan is None:
                plan = flat.flat_plans[key] = plan_access(st, access, ctx, out_tile)
            return plan
        loop_values: tuple = ()
        if ctx.bound:
            # Only the values of the Python-loop variables (and program ids run one at a time)
            # that this access or the storage's copies depend on: a tile the body reads whole
            # keeps one plan for every iteration instead of one per iteration.
            syms = self.program.access_syms.get(id(access))
            if syms is None:
                syms = self.program.access_syms[id(access)] = _index_symbols(access)
            get = ctx.bound.get
            loop_values = (tuple(map(get, syms)), tuple(map(get, st.batch)) if st.batch else ())
        key = (id(access), out_tile, st.batch, st.base, ctx.batch_syms, ctx.batch_shape,
               loop_values, tuple(ctx.offsets.items()) if ctx.offsets else ())
        cache = self.program.plans
        plan = cache.get(key)
        if plan is None:
            plan = cache[key] = plan_access(st, access, ctx, out_tile)
        return plan

    # --- reading -------------------------------------------------------------------------------

    def read(self, op: Operand, out_tile: tuple[int, ...] | None = None,
             masked: bool = False) -> np.ndarray:
        """The operand's value with shape ``batch_shape + tile`` (``tile`` = ``out_tile`` when
        given: the operand is broadcast against it, aligned at the partition axis). With ``masked``, only the
        positions of the instruction's mask must be in bounds."""
        if isinstance(op, Const):
            return np.asarray(op.value)
        st = self.storage.get(op.tensor)
        if st is None or st.zero:
            st = self._storage(op.tensor)
        plan = self._plan(st, op, out_tile)
        arr = st.array
        if plan.in_bounds(arr.shape):
            value = plan.view(arr)
            if value is arr:  # a whole read hands out the storage's own array: never "owned"
                self._whole_reads.add(id(arr))
            return value
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

    def write(self, ins: Instruction, value: np.ndarray, may_alias: bool = False,
              reduced: tuple[str, ...] = ()) -> None:
        """Write ``value`` (broadcastable to ``batch_shape + dst tile``) to ``ins.dst``: converted
        to the destination dtype, restricted to the mask, combined with ``ins.acc``. Batch axes
        the destination does not depend on collapse: reduced with the accumulation operator, else
        the last iteration wins (what sequential execution would leave). ``reduced`` names batch
        axes the value has already folded (kept with extent 1)."""
        if self.forward is not None and ins is self.instruction:
            cons, self.forward = self.forward, None
            self._skip.add(id(cons))
            if value is not self._out:
                self.instruction = cons
                try:
                    self.write(cons, value, may_alias, reduced)
                finally:
                    self.instruction = ins
            return
        if value is self._out and value is not None:
            return  # computed into the destination itself (dst_view)
        dst = ins.dst
        assert dst is not None
        ctx = self.ctx
        st = self.storage.get(dst.tensor)
        np_dtype = self.setup.rebinds.get(id(ins))
        if np_dtype is not None and not reduced and (st is None or st.batch == ctx.batch_syms):
            # The common write: the value becomes the tile's storage (what the general path
            # below decides for it, without deciding again).
            value = np.asarray(value)
            full = ctx.batch_shape + tuple(dst.shape)
            if value.shape != full:
                value = np.broadcast_to(value, full)
            if value.dtype != np_dtype or may_alias:
                value = value.astype(np_dtype)
            owned = self._owns(value)
            if not owned:
                self._lend(value)
            syms = ctx.batch_syms
            self.storage[dst.tensor] = Storage(value, syms, owned,
                                               ctx.base_of(syms) if ctx.offsets else ())
            return
        decl = self.kernel.tensors[dst.tensor]
        np_dtype = self.setup.np_dtypes[dst.tensor]
        if st is None and (ins.mask or ins.acc is not None or not self._whole(dst, decl)):
            # A partial first write: the rest of the tile is uninitialised memory.
            self.allocate(dst.tensor)
            st = self.storage[dst.tensor]
        nb = len(ctx.batch_syms)
        full = ctx.batch_shape + tuple(dst.shape)
        value = np.asarray(value)
        if value.shape != full:
            value = np.broadcast_to(value, full if not reduced else tuple(
                1 if s in reduced else n for s, n in zip(ctx.batch_syms, ctx.batch_shape))
                + tuple(dst.shape))

        if st is None or self._rebindable(ins, decl, st):
            batch = ctx.batch_syms if st is None else st.batch
            keep = [i for i, s in enumerate(ctx.batch_syms) if s in batch]
            value = self._collapse(value, keep, nb, None)
            if value.dtype != np_dtype or may_alias:
                value = value.astype(np_dtype)
            # Views (zero-copy loads, broadcasts) are bound as they are; a later partial write
            # copies them first (Storage.owned).
            owned = self._owns(value)
            if not owned:
                self._lend(value)
            syms = tuple(ctx.batch_syms[i] for i in keep)
            self.storage[dst.tensor] = Storage(value, syms, owned, ctx.base_of(syms))
            return

        plan = self._plan(st, dst)
        used = plan.used_axes()
        keep = [i for i in range(nb) if i in used]
        if ins.mask and len(keep) < nb and not reduced:
            value = self._mask_iterations(ins, value, full, keep, nb)
        value = self._collapse(value, keep, nb, ins.acc, reduced)
        mask = None
        if ins.mask:
            mask = np.broadcast_to(eval_mask(ins.mask, ctx, dst.shape), full)
            mask = self._collapse_mask(mask, keep, nb)
        drop = [i for i in range(nb) if i not in keep]
        if drop:
            plan = plan.without_axes(tuple(drop))
        if st.zero:
            if self._first_sum(ins, st, plan, value, mask):
                return
            self._fill_zeros(st)
        if not self.exclusive(st):
            st.array = np.array(st.array)
            st.owned = True
        arr = st.array
        if plan.in_bounds(arr.shape):
            split = plan.split() if plan.divs is not None else None
            if plan.divs is None or split is not None:
                view = plan.view(arr) if split is None else split.view(arr)
                if split is not None:  # '//' and '%' by a divisor of the axis: split it
                    value = np.broadcast_to(value, plan.out_shape).reshape(split.out_shape)
                    if mask is not None:
                        mask = np.broadcast_to(mask, plan.out_shape).reshape(split.out_shape)
                if ins.acc is not None:  # in place when nothing is masked (fp32 PSUM, usually)
                    value = alu.binary(_ACC_COMBINE[ins.acc], view, value,
                                       out=view if mask is None else None)
                if value is view:
                    pass
                elif mask is None:
                    view[...] = value
                else:
                    np.copyto(view, value.astype(np_dtype), where=mask, casting="unsafe")
                return
            if mask is None:  # other '//' and '%' indices: a scatter
                mask = np.ones(plan.out_shape, dtype=bool)
        elif mask is None:
            raise self._oob(dst, plan, st, "writes")
        idx = plan.index_arrays()
        for ix, n in zip(idx, arr.shape):
            if (mask & ((ix < 0) | (ix >= n))).any():
                raise self._oob(dst, plan, st, "writes (inside its mask)")
        sel = tuple(ix[mask] for ix in idx)
        vals = np.broadcast_to(value, mask.shape)[mask]
        if ins.acc is not None:
            sel, vals = _fold_repeated_targets(sel, vals, arr.shape, ins.acc)
            vals = alu.binary(_ACC_COMBINE[ins.acc], arr[sel], vals)
        arr[sel] = vals

    @staticmethod
    def _first_sum(ins: Instruction, st: Storage, plan: Plan, value: np.ndarray,
                   mask: np.ndarray | None) -> bool:
        """``acc += value`` into a lazily zeroed fp32 tile that it covers exactly: the result is
        ``value + 0`` (bit for bit ``0 + value``: IEEE addition commutes, -0.0 becomes +0.0), so
        the zeros need not be written and read first. False when the write is anything else."""
        arr = st.array
        if (ins.acc != "add" or mask is not None or plan.divs is not None or arr.dtype != np.float32
                or value.dtype != np.float32 or not plan.in_bounds(arr.shape)):
            return False
        view = plan.view(arr)
        if view.shape != arr.shape or view.strides != arr.strides or \
                view.__array_interface__["data"][0] != arr.__array_interface__["data"][0]:
            return False
        np.add(value, np.float32(0.0), out=view)
        st.zero = False
        return True

    def _owns(self, value: np.ndarray) -> bool:
        """Whether a value being bound as a tile's storage is memory nobody else holds: the
        recycled array of this instruction, or a new array, but never an array that a whole
        read handed out as it is (another tile's storage, or the caller's input: binding that
        as owned let a later in-place write change the caller's array)."""
        if value is self._fresh:
            return value.flags.writeable
        return value.flags.owndata and value.flags.writeable and id(value) not in self._whole_reads

    def _lend(self, view: np.ndarray) -> None:
        """``view`` becomes a tile's storage without a copy: remember the array it views."""
        self._lent.add(id(_root(view)))

    def exclusive(self, st: Storage) -> bool:
        """Whether ``st``'s array may be changed in place: it owns it, and no other tile's
        storage was bound as a view of it (a ``tensor_copy`` of a slice, a zero-copy load).
        Compared by the memory's root array: a pooled tile is itself a view of its block."""
        return st.owned and id(_root(st.array)) not in self._lent

    def out_view(self, dtype) -> np.ndarray | None:
        """A writable view a handler may compute into (``out=``): the destination of the consumer
        the current instruction forwards to, when that is a plain in-bounds write of ``dtype``
        covering every batch axis. ``write`` then recognises the view and does nothing."""
        cons = self.forward
        if cons is None or cons.acc is not None or cons.mask:
            return None
        st = self.storage.get(cons.dst.tensor)
        if st is None or not self.exclusive(st):
            return None
        flat = self._flat
        if flat is not None:
            # What follows depends on the storage's batch axes besides (fixed for the run).
            key = (id(cons), dtype, st.batch)
            if key not in flat.flat_out:
                flat.flat_out[key] = self._out_plan(cons, st, dtype)
            plan = flat.flat_out[key]
        else:
            plan = self._out_plan(cons, st, dtype)
        if plan is None:
            return None
        self._fill_zeros(st)  # the consumer may write only part of it
        self._out = plan.view(st.array)
        return self._out

    def dst_view(self, dtype) -> np.ndarray | None:
        """A writable view of the current instruction's own destination that its handler may
        compute into (``out=``), for an unmasked, non-accumulating write of ``dtype`` into an
        existing tile nothing else views, covering every batch axis: a loop body updating a
        tile (``t = f(t)``) then works in place on the same memory every iteration instead of
        rebinding the tile to a new array each time (a smaller cache footprint; figures in
        benchmarks/nki_kernel_speed.md). ``write`` recognises the view and does nothing.
        NumPy's ufuncs handle operands overlapping ``out``."""
        ins = self.instruction
        if ins is None or self.forward is not None or ins.acc is not None or ins.mask \
                or self._watches:
            return None
        dst = ins.dst
        st = self.storage.get(dst.tensor)
        if st is None or st.array.dtype != dtype or not self.exclusive(st):
            return None
        plan = self._view_plan(st, dst)
        if plan is None:
            return None
        self._fill_zeros(st)  # the write may cover only part of it
        self._out = plan.view(st.array)
        return self._out

    def _out_plan(self, cons: Instruction, st: Storage, dtype) -> Plan | None:
        """The plan of ``cons``' destination when the producer may compute into it (out_view)."""
        decl = self.kernel.tensors[cons.dst.tensor]
        if self.setup.np_dtypes[decl.name] != dtype:
            return None
        if self._rebindable(cons, decl, st):
            return None  # binding the result as the new storage is cheaper still
        return self._view_plan(st, cons.dst)

    def _view_plan(self, st: Storage, dst: Access) -> Plan | None:
        """The plan of ``dst`` when a handler may compute straight into its view of ``st``: a
        strided view (no ``//``/``%``), in bounds, covering every batch axis (nothing to
        collapse). Shared by out_view (a forwarded consumer's destination) and dst_view."""
        plan = self._plan(st, dst)
        if plan.divs is not None or not plan.uses_all(self.ctx.batch_shape) \
                or not plan.in_bounds(st.array.shape):
            return None
        return plan

    def scratch(self, op: Operand, tile: tuple[int, ...]) -> np.ndarray | None:
        """The array of a float32 tile this instruction reads for the last time, when it has
        exactly the result's shape: the handler may compute into it (``out=``) instead of
        allocating. Used only when ``out_view`` has nothing better."""
        ins = self.instruction
        if not isinstance(op, Access) or op.tensor not in self.program.dead_after.get(id(ins), ()):
            return None
        st = self.storage.get(op.tensor)
        decl = self.kernel.tensors[op.tensor]
        if st is None or not self.exclusive(st) or tuple(op.shape) != tuple(tile) \
                or not self._whole(op, decl) or st.batch != self.ctx.batch_syms:
            return None
        arr = st.array
        if arr.dtype != np.float32 or not arr.flags.c_contiguous:
            return None
        return arr

    def fresh(self, tile: tuple[int, ...], dtype=np.float32) -> np.ndarray | None:
        """A recycled array of ``batch_shape + tile`` for the handler's result (``out=``) when
        neither ``out_view`` nor ``scratch`` has one and the result is big (see buffers.py);
        ``write`` binds it as the destination's own storage."""
        self._fresh = buffers.take(self.ctx.batch_shape + tuple(tile), dtype)
        return self._fresh

    def result_array(self, tile: tuple[int, ...], last_reads: Sequence[Operand] = ()
                     ) -> np.ndarray | None:
        """Where a float32 element-wise result of shape ``batch_shape + tile`` is best computed
        (``out=``): the forwarded consumer's destination, the instruction's own destination, a
        source of ``last_reads`` read for the last time, or a recycled array (None: allocate)."""
        out = self.out_view(np.float32)
        if out is None:
            out = self.dst_view(np.float32)
        for op in last_reads:
            if out is not None:
                break
            out = self.scratch(op, tile)
        return out if out is not None else self.fresh(tile)

    @property
    def fresh_array(self) -> np.ndarray | None:
        """The array ``fresh`` handed out for the current instruction (no tile's storage yet)."""
        return self._fresh

    def accumulated_axes(self) -> tuple[int, ...]:
        """Batch axes the current instruction's result will be summed over: those its forwarded
        consumer accumulates (``acc == "add"``) into a destination that does not depend on them.
        A handler may fold them itself and pass them as ``reduced`` to ``write``."""
        cons = self.forward
        if cons is None or cons.acc != "add" or cons.mask:
            return ()
        st = self.storage.get(cons.dst.tensor)
        if st is None:
            return ()
        plan = self._plan(st, cons.dst)
        used = plan.used_axes()
        return tuple(i for i in range(len(self.ctx.batch_syms)) if i not in used)

    def _rebindable(self, ins: Instruction, decl, st: Storage) -> bool:
        """A whole, unmasked, non-accumulating write of an on-chip tensor replaces its storage."""
        dst = ins.dst
        if ins.mask or ins.acc is not None or decl.memory == machine.SHARED_HBM:
            return False
        if decl.role != "internal" or any(s not in self.ctx.batch_syms for s in st.batch):
            return False
        return self._whole(dst, decl)

    def _whole(self, dst: Access, decl) -> bool:
        """The access covers its tensor exactly (decided once per destination, see setup.py)."""
        hit = self.setup.whole.get(id(dst))
        return is_whole(dst, decl.shape) if hit is None else hit

    def _collapse(self, value: np.ndarray, keep: list[int], nb: int, acc: str | None,
                  reduced: tuple[str, ...] = ()) -> np.ndarray:
        drop = tuple(i for i in range(nb) if i not in keep)
        if not drop:
            return value
        if reduced:
            done = tuple(i for i in drop if self.ctx.batch_syms[i] in reduced)
            value = value[tuple(0 if i in done else slice(None) for i in range(nb))]
            keep = [k - sum(1 for d in done if d < k) for k in keep]
            nb -= len(done)
            drop = tuple(i for i in range(nb) if i not in keep)
            if not drop:
                return value
        if acc is not None:
            return alu.reduce(_ACC_REDUCE[acc], alu.widen(value), axis=drop)
        return value[tuple(-1 if i in drop else slice(None) for i in range(nb))]

    def _mask_iterations(self, ins: Instruction, value: np.ndarray, full: tuple[int, ...],
                         keep: list[int], nb: int) -> np.ndarray:
        """A masked write collapsing batch axes its mask depends on (``acc += x`` with
        ``mask=(k > 0)`` in a vectorised loop over ``k``): only the iterations whose mask holds
        may contribute. Accumulations see the others as the operator's identity; plain writes
        keep, per element, the last iteration whose mask holds (what sequential execution
        leaves), as a value of extent 1 along the collapsed axes."""
        mask = np.broadcast_to(eval_mask(ins.mask, self.ctx, ins.dst.shape), full)
        drop = tuple(i for i in range(nb) if i not in keep)
        if mask.all(axis=drop, keepdims=True).all() or not mask.any():
            return value
        value = np.broadcast_to(value, full)
        if ins.acc is not None:
            return np.where(mask, alu.widen(value), _ACC_IDENTITY[ins.acc])
        front = [i for i in drop] + [i for i in range(len(full)) if i not in drop]
        m = mask.transpose(front).reshape((-1,) + tuple(full[i] for i in front[len(drop):]))
        v = value.transpose(front).reshape(m.shape)
        last = m.shape[0] - 1 - np.argmax(m[::-1], axis=0)
        picked = np.take_along_axis(v, last[None], axis=0)[0]
        return np.expand_dims(picked, drop)

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
#: What an accumulation's masked-out iterations contribute (``_mask_iterations``).
_ACC_IDENTITY = {"add": 0, "subtract": 0, "multiply": 1, "maximum": -np.inf, "minimum": np.inf}
_ACC_COMBINE = {"add": "add", "subtract": "subtract", "multiply": "multiply",
                "maximum": "maximum", "minimum": "minimum"}
# How several contributions to one element fold before meeting it: a -= x1; a -= x2 is a -= (x1 + x2).
_ACC_FOLD = {"add": np.add, "subtract": np.add, "multiply": np.multiply, "maximum": np.maximum,
             "minimum": np.minimum}


def _fold_repeated_targets(sel: tuple[np.ndarray, ...], vals: np.ndarray, shape: tuple[int, ...],
                           acc: str) -> tuple[tuple[np.ndarray, ...], np.ndarray]:
    """An accumulating scatter whose index arrays name one element several times (``acc[j // 3]
    += x[j]`` when 3 does not divide the axis): fold the contributions per element first, at the
    engine's width, so that none is lost to NumPy's last-write-wins fancy assignment."""
    if not sel or sel[0].size < 2:
        return sel, vals
    flat = np.ravel_multi_index(sel, shape)
    targets, group = np.unique(flat, return_inverse=True)
    if targets.size == flat.size:
        return sel, vals
    order = np.argsort(group, kind="stable")
    starts = np.searchsorted(group[order], np.arange(targets.size))
    folded = _ACC_FOLD[acc].reduceat(alu.widen(vals)[order], starts)
    return np.unravel_index(targets, shape), folded


def run_kernel(kernel: KernelIR | Program, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    """Run ``kernel`` (IR, or a ``prepare``d program to skip the analysis) on ``inputs`` (in
    ``kernel.inputs`` order); returns its outputs."""
    program = kernel if isinstance(kernel, Program) else prepare(kernel)
    return Runner(program, inputs).run()
