"""The builder: the kernel IR under construction, and the only emitter of it.

``Builder`` holds what a trace has built so far (tensor declarations, a stack of statement lists,
one per open loop, name counters, the kernel's identity for error messages) and is the one place
that creates IR statements: ``nl.*``, ``nisa.*``, tiles and loops all compose ``emit``/``new``
(as Triton's interpreter composes its one builder). Every instruction is checked against its spec
(emulator/kernel_ir/instructions.py) and the hardware rules (``checks``) as it is emitted, and
records the user's source line.
"""

from __future__ import annotations

from typing import Iterator

from emulator import machine
from emulator.kernel_ir import (DEFINED, INTERNAL, UNINIT, Access, Const, Instruction, KernelIR,
                                Loop, SourceLoc, Statement, TensorDecl)
from emulator.kernel_ir import control
from emulator.kernel_ir.instructions import UnknownInstructionError, spec
from emulator.kernel_ir.validate import operand_kinds

from . import checks
from .errors import KernelTraceError
from .indexing import Idx, Pred, symbol
from .tile import Tile
from .tracer import user_location
from .views import identity_index

def mask_fits(mask_shape: tuple[int, ...], tile: tuple[int, ...]) -> bool:
    """Whether a mask of ``mask_shape`` (its index expressions broadcast together) selects
    elements of a ``tile``: right-aligned, every axis 1 or the tile's. (A mask of higher rank
    is left to ``Idx.to_affine``, which drops extent-1 axes or refuses.) A mask written over a
    source larger than the result (``max8(src=t[ix, iy], mask=iy < k)``) must not be read as a
    condition on the result's positions: that would silently change its meaning."""
    if len(mask_shape) > len(tile):
        return True
    return all(m in (1, d) for m, d in zip(reversed(mask_shape), reversed(tile)))


class Builder:
    """The kernel IR under construction (see the module docstring)."""

    def __init__(self, name: str, grid: tuple[int, ...], source: str):
        self.name = name
        self.grid = grid
        #: Two cores of a logical NeuronCore (KernelIR.lnc), from the grid's nl.nc(2) or set by
        #: the first core_barrier / sendrecv of a kernel[2] launch (isa/cores.py).
        self.lnc: tuple[int, int, int] | None = None
        self.source = source
        self.tensors: dict[str, TensorDecl] = {}
        self.inputs: list[str] = []
        self.constants: dict[str, bytes] = {}
        #: On-chip tensor -> number of block dimensions (``nl.ndarray((4, nl.par_dim(128), 512))``
        #: is declared [128, 4, 512]: axes 1..k are blocks, each block a separate tile for the
        #: PSUM tile rule); absent for plain tiles.
        self.blocks: dict[str, int] = {}
        self.body: list[Statement] = []
        self._stack: list[list[Statement]] = [self.body]
        self._loops = 0
        #: Extent of every symbol: program ids and loop variables (for static bounds checks).
        self.extents: dict[str, int] = {f"p{i}": int(g) for i, g in enumerate(grid)}
        self._counter = 0
        self.finished = False
        #: Engine registers (key -> tensor name, fill): on-chip tensors that live for the whole
        #: kernel, declared on first use and allocated at the kernel's start by ``finish``.
        self._registers: dict[str, tuple[str, object]] = {}
        #: id(while loop) -> the VirtualRegister whose ``while reg:`` opened it (registers.py).
        self.condition_loops: dict[int, object] = {}
        #: The random stream's seed state (lang/rng.py ``_SeedState``), None until seeded.
        self.rng_seed = None

    # --- errors --------------------------------------------------------------------------------

    def error(self, rule: str, detail: str, cls=KernelTraceError) -> KernelTraceError:
        return cls(self.name, user_location(), rule, detail)

    # --- tensors -------------------------------------------------------------------------------

    def declare(self, shape: tuple[int, ...], dtype: str, memory: str, *, name: str = "",
                role: str = INTERNAL, init: str = UNINIT, blocks: int = 0) -> TensorDecl:
        base = name or ("t" if memory in machine.ON_CHIP else "hbm")
        unique = name
        while unique in self.tensors or not unique:
            self._counter += 1
            unique = f"{base}{self._counter}"
        decl = TensorDecl(unique, tuple(int(s) for s in shape), dtype, memory, role, init,
                          user_location())
        if blocks:
            self.blocks[unique] = int(blocks)
        try:
            checks.check_declaration(self, decl)
        except KernelTraceError:
            self.blocks.pop(unique, None)
            raise
        self.tensors[unique] = decl
        return decl

    def register(self, key: str, shape: tuple[int, ...], dtype: str, fill=None) -> TensorDecl:
        """The kernel-wide on-chip tensor ``key`` (an engine's registers, such as the reduce
        registers that ``nki.isa`` accumulating instructions share): declared on first use (again
        after a rollback forgot it), allocated by ``finish`` before the first statement, so that
        its value carries across loops and instructions as the hardware state does."""
        known = self._registers.get(key)
        if known is not None and known[0] in self.tensors:
            return self.tensors[known[0]]
        decl = self.declare(shape, dtype, machine.SBUF, name=key)
        self._registers[key] = (decl.name, fill)
        return decl

    def next_seed(self) -> int:
        """A fresh integer per call (seeds of ``random`` instructions)."""
        self._counter += 1
        return self._counter

    def temp(self, shape: tuple[int, ...], dtype: str, memory: str = machine.SBUF) -> TensorDecl:
        """A tile fully written by the instruction about to be emitted."""
        return self.declare(shape, dtype, memory, init=DEFINED)

    # --- instructions --------------------------------------------------------------------------

    def emit(self, op: str, dst: Tile | Access, /, *srcs, mask: Pred | tuple | None = None,
             acc: str | None = None, **attrs) -> Instruction:
        """Append ``dst <- op(*srcs)``: sources are tiles, accesses or Python scalars (constants),
        keyword arguments the instruction's attributes (``op`` among them: the parameters
        before ``/`` are positional only). ``mask`` is an affine predicate (or its
        affine expressions) over the destination tile."""
        if self.finished:
            raise self.error("tile used outside its kernel",
                             "tiles and index expressions only exist while their kernel traces")
        dst_access = dst.access() if isinstance(dst, Tile) else dst
        operands = tuple(self._operand(s) for s in srcs)
        self._check_spec(op, operands, attrs, acc)
        affs = ()
        if mask is not None:
            if isinstance(mask, tuple):  # already affine (lang/memory.py: bit-cast views)
                affs = mask
            elif not isinstance(mask, Pred):
                raise self.error("invalid mask", f"mask must be an affine predicate, got {mask!r}")
            if isinstance(mask, Pred):
                if not mask_fits(mask.shape, tuple(dst_access.shape)):
                    raise self.error("mask shape", (
                        f"{op}: the mask's index space {list(mask.shape)} is not the "
                        f"destination's {list(dst_access.shape)}; an instruction's mask selects "
                        "elements of what it writes (a mask over a larger source is not "
                        "supported for this instruction)"))
                affs = mask.to_affines(len(dst_access.shape))
            # Conditions that hold everywhere (i * 128 + ix < n on full tiles) cost nothing.
            affs = checks.drop_always_true(self, tuple(affs), dst_access.shape)
            decl = self.tensors[dst_access.tensor]
            if affs and decl.init == DEFINED:
                # A masked result is not written everywhere: the rest stays uninitialised (NaN).
                decl.init = UNINIT
                self._stack[-1].append(Instruction("alloc", Access(
                    decl.name, decl.shape, identity_index(decl.shape)), loc=user_location()))
        ins = Instruction(op, dst_access, operands, attrs, affs, acc, user_location())
        checks.check_instruction(self, ins)
        slot = self._fresh_slot(ins)
        if slot is None:
            self._stack[-1].append(ins)
        else:
            self._stack[-1][slot] = ins
            self.tensors[ins.dst.tensor].init = DEFINED
        return ins

    def _fresh_slot(self, ins: Instruction) -> int | None:
        """Where ``ins`` can stand in for the allocation of the tensor it writes: the statement
        just before it allocates that on-chip tensor (``nl.ndarray``) and ``ins`` writes all of
        it (unmasked, not accumulating, not reading it as a source or, like ``stream_shuffle``,
        keeping part of it: ``reads_dst``), so the NaN fill would be overwritten at
        once. ``ins`` then takes the allocation's place and the tensor becomes a result tile the
        executor binds without filling or copying (beta 2's ``t = nl.ndarray(...);
        nisa.activation(dst=t, ...)`` costs what ``t = nisa.activation(...)`` does). Only the
        adjacent statement: live ranges (the capacity check) and statement counts (checkpoints)
        stay as they were."""
        dst, body = ins.dst, self._stack[-1]
        last = body[-1] if body else None
        if (dst is None or ins.mask or ins.acc is not None or spec(ins.op).reads_dst
                or ins.attrs.get("indirect_dst")  # a scatter writes where its offset says
                or not isinstance(last, Instruction)
                or last.op != "alloc" or last.attrs or last.dst.tensor != dst.tensor):
            return None
        decl = self.tensors[dst.tensor]
        if (decl.memory not in machine.ON_CHIP or tuple(dst.shape) != tuple(decl.shape)
                or dst.index != identity_index(decl.shape)
                or any(isinstance(x, Access) and x.tensor == dst.tensor for x in ins.srcs)):
            return None
        return len(body) - 1

    def new(self, op: str, shape: tuple[int, ...], dtype: str, /, *srcs,
            memory: str = machine.SBUF, mask: Pred | None = None, **attrs) -> Tile:
        """A new tile of ``shape`` and ``dtype`` holding ``op(*srcs)`` (``emit`` into it)."""
        out = Tile(self, self.temp(tuple(int(s) for s in shape), dtype, memory))
        self.emit(op, out, *srcs, mask=mask, **attrs)
        return out

    def _operand(self, x) -> Access | Const:
        """A source as the IR holds it: a tile's access, or a scalar as a constant."""
        if isinstance(x, Tile):
            return x.access()
        if isinstance(x, (Access, Const)):
            return x
        value = x.item() if hasattr(x, "item") else x
        if not isinstance(value, (bool, int, float)):
            raise self.error("invalid operand", f"{type(x).__name__} is not a tile or a scalar")
        return Const(value)

    def _check_spec(self, op: str, operands: tuple, attrs: dict, acc: str | None) -> None:
        """The front end emits only what the instruction set specifies: a mismatch is a bug
        here, reported while tracing rather than found by the executor."""
        try:
            problems = spec(op).problems(operand_kinds(operands), attrs, acc)
        except UnknownInstructionError as e:
            problems = [str(e)]
        if problems:
            raise self.error("invalid instruction", f"{op}: {'; '.join(problems)}")

    # --- rolling back (loops.py traces a body once more, or not at all) ------------------------

    @property
    def loop_count(self) -> int:
        """Loops opened so far (loop variables are ``l1``, ``l2``, ...)."""
        return self._loops

    def checkpoint(self) -> "_Checkpoint":
        return _Checkpoint(self)

    def rollback(self, cp: "_Checkpoint") -> None:
        """Forget everything built since ``cp``."""
        del self._stack[cp.stack_depth:]
        del self._stack[-1][cp.body_len:]
        for n in [n for n in self.tensors if n not in cp.tensors]:
            del self.tensors[n]
            self.blocks.pop(n, None)
        for n, init in cp.inits.items():
            self.tensors[n].init = init
        for n in [n for n in self.constants if n not in cp.constants]:
            del self.constants[n]
        for n in [n for n in self.extents if n not in cp.extents]:
            del self.extents[n]
        self._counter = cp.counter
        self._loops = cp.loops
        self.condition_loops = dict(cp.condition_loops)
        # the random stream (lang/rng.py): a rolled-back draw or seeding never happened
        self.rng_seed, draws = cp.rng
        if self.rng_seed is not None:
            self.rng_seed.draws = draws

    # --- loops ---------------------------------------------------------------------------------

    def loop(self, extent: int, kind: str, start: int = 0, step: int = 1) -> Iterator[Idx]:
        """Open a loop, yield its (symbolic) variable once, close it when the body is done. The
        IR loop counts 0..extent-1; the kernel sees ``start + step * counter``."""
        self._loops += 1
        node = Loop(f"l{self._loops}", int(extent), kind, [], user_location())
        self.extents[node.var] = int(extent)
        self._stack[-1].append(node)
        self._stack.append(node.body)
        depth = len(self._stack)
        try:
            yield symbol(node.var) * step + start
        finally:
            if len(self._stack) == depth:
                self._stack.pop()

    def open_loop(self, kind: str, operands: tuple, step: int = 1) -> Loop:
        """Open a data-dependent loop (emulator/kernel_ir/control.py: ``dynamic`` or ``while``)
        whose operands are registers' tiles or ints: what is emitted next goes into its body,
        until ``close_loop``. It binds no index symbol (its index, if any, is a register)."""
        self._loops += 1
        node = Loop(f"l{self._loops}", 0, kind, [], user_location(),
                    tuple(self._operand(o) for o in operands), int(step))
        problems = control.form(kind).problems(node, self.tensors)
        if problems:
            raise self.error("invalid loop", f"{kind} loop: {'; '.join(problems)}")
        self._stack[-1].append(node)
        self._stack.append(node.body)
        return node

    def close_loop(self, node: Loop) -> None:
        """Close ``node``, the innermost open loop (``open_loop``)."""
        if self._stack[-1] is not node.body:
            raise self.error("unclosed loop", f"{node.kind} loop at {node.loc} closed while an "
                             "inner loop is still open")
        self._stack.pop()

    def open_loops(self) -> list[Loop]:
        """The loops being traced now, outermost first."""
        return [outer[-1] for outer, inner in zip(self._stack, self._stack[1:])
                if outer and isinstance(outer[-1], Loop) and outer[-1].body is inner]

    def innermost_loop(self) -> Loop | None:
        """The open loop whose body is being traced now (None at the kernel's top level)."""
        if len(self._stack) < 2:
            return None
        node = self._stack[-2][-1] if self._stack[-2] else None
        return node if isinstance(node, Loop) and node.body is self._stack[-1] else None

    def hoist_before_loop(self, var: str, ins: Instruction) -> None:
        """Move ``ins`` (just emitted) out of the open loop ``var`` and every loop inside it, to
        right before that loop (``nl.loop_reduce`` initialises its accumulator there)."""
        self._stack[-1].remove(ins)
        for outer, inner in zip(self._stack, self._stack[1:]):
            node = outer[-1] if outer else None
            if isinstance(node, Loop) and node.body is inner and node.var == var:
                outer.insert(len(outer) - 1, ins)
                return
        raise self.error("loop_reduce loop", f"loop {var} is not an open loop around this call")

    def finish(self, outputs: list[str]) -> KernelIR:
        node = self.innermost_loop()
        if node is not None and node.data_dependent:
            raise KernelTraceError(self.name, node.loc, "data-dependent control flow",
                                   "a VirtualRegister is used as a condition here, but only "
                                   "`while reg:` makes a loop of it: `if reg:`, `not reg`, "
                                   "`and`/`or`, or a `while reg:` left with `break`/`return`, "
                                   "need the register's run-time value while tracing")
        self.finished = True
        self.body[:0] = [
            Instruction("alloc", Access(name, self.tensors[name].shape,
                                        identity_index(self.tensors[name].shape)),
                        attrs={} if fill is None else {"fill": fill}, loc=self.tensors[name].loc)
            for name, fill in self._registers.values() if name in self.tensors]
        kernel = KernelIR(self.name, self.grid, self.tensors, tuple(self.inputs), tuple(outputs),
                          self.body, self.source, constants=dict(self.constants), lnc=self.lnc)
        checks.check_kernel(self, kernel)
        checks.warn_store_races(kernel)
        return kernel



class _Checkpoint:
    """What a builder holds at one moment, enough to roll back to it."""

    def __init__(self, b: Builder):
        self.stack_depth = len(b._stack)
        self.body_len = len(b._stack[-1])
        self.tensors = set(b.tensors)
        self.inits = {n: d.init for n, d in b.tensors.items()}
        self.constants = set(b.constants)
        self.extents = set(b.extents)
        self.counter = b._counter
        self.loops = b._loops
        self.condition_loops = dict(b.condition_loops)
        seed = b.rng_seed
        self.rng = (seed, seed.draws if seed is not None else 0)


