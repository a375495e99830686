"""What the executor works out once per kernel IR, before any run (``prepare``), and reuses for
every call: which tensors are written, which affine loops may run as batch axes (and why not),
which producer/consumer pairs can skip their intermediate tile, and which outputs every run
writes completely (so they need no NaN fill).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from emulator.kernel_ir import (DEFINED, Access, Const, Instruction, KernelIR, Loop, Statement,
                                dtypes, walk_instructions, walk_loops)

from . import lnc, precision
from .parallel import parallel_reason
from .setup import LaunchSetup, build, is_whole
from .vectorise import first_appearance, grid_reason, non_vectorisable_reason


@dataclass
class Program:
    kernel: KernelIR
    written: frozenset[str]
    #: None when the grid runs as batch axes, else why the programs run one after another.
    grid_reason: str | None = None
    #: An LNC=2 launch that can not run faithfully: a race between its two cores, or a
    #: core_barrier / sendrecv outside one program per core (lnc.py). Raised by every run.
    lnc_error: str | None = None
    #: None when ranges of grid axis 0 may run on separate host threads, else why not
    #: (parallel.py).
    parallel_reason: str | None = "not analysed"
    #: The kernel has TensorE matmuls: its host threads then ask OpenBLAS for one thread each.
    has_matmul: bool = False
    #: Bytes of the on-chip tiles of one program (all of them) and of one iteration of each loop
    #: (the tiles first written inside it): what one more batch index costs in memory.
    program_bytes: int = 0
    loop_bytes: dict[int, int] = field(default_factory=dict)
    #: id(Loop) -> None (runs as a batch axis) or why it must run as a Python loop.
    reasons: dict[int, str | None] = field(default_factory=dict)
    #: id(producer) -> consumer: the producer's result tile is only read by the consumer that
    #: immediately follows it, so the producer's value goes straight to the consumer's destination.
    forward: dict[int, Instruction] = field(default_factory=dict)
    #: Outputs some unmasked store writes completely on every run.
    covered: frozenset[str] = frozenset()
    #: Tiles written only by their defining whole, unmasked, non-accumulating write: each write
    #: binds a new array, so the memory behind a value never changes.
    frozen: frozenset[str] = frozenset()
    #: id(instruction) -> tiles it reads for the last time (see _dead_after).
    dead_after: dict[int, frozenset[str]] = field(default_factory=dict)
    #: The NKI_PRECISE_FP setting the storage dtypes were chosen for (precision.py).
    precise: bool = True
    #: Memoised access plans (see Runner._plan).
    plans: dict = field(default_factory=dict)
    #: id(Access) -> the symbols its index mentions (derived ``//``/``%`` ones by their base):
    #: which Python-loop values a plan of it depends on (Runner._plan).
    access_syms: dict[int, tuple[str, ...]] = field(default_factory=dict)
    #: What each launch needs, decided once (see setup.py).
    setup: LaunchSetup | None = None
    #: ((batch budget, parallel threshold), the grid runs as one batch on one thread): decided
    #: on the first run (Runner._run_grid), again if the limits change.
    one_batch: tuple | None = None
    #: No loops: a grid run as one batch then keeps one context for the whole run, so access
    #: plans and forwarding decisions can be memoised by less (Runner: ``flat``).
    flat: bool = False
    flat_plans: dict = field(default_factory=dict)
    flat_out: dict = field(default_factory=dict)
    #: id(statement list) -> its statements with what running each looks up (Runner._steps).
    steps: dict[int, list[tuple]] = field(default_factory=dict)
    #: id(data-dependent ``dynamic`` loop) -> the ``memset`` of its index register the executor
    #: runs at each iteration's start (emulator/kernel_exec/control.py); absent when nothing
    #: reads that register.
    loop_index: dict[int, Instruction] = field(default_factory=dict)


def prepare(kernel: KernelIR) -> Program:
    """The analysis of ``kernel``, memoised on the IR object (traced IR is never modified), so
    callers that keep an IR and run it repeatedly pay for it once; one per NKI_PRECISE_FP
    setting (precision.py), read at each launch as the SDK's simulator reads it."""
    precise = precision.precise_fp()
    cached = kernel.__dict__.get("_exec_program")
    if cached is not None and cached.kernel is kernel and cached.precise == precise:
        return cached
    prog = _analyse(kernel, precise)
    kernel.__dict__["_exec_program"] = prog
    return prog


def _analyse(kernel: KernelIR, precise: bool = True) -> Program:
    instrs = list(walk_instructions(kernel.body))
    dynamic = [lp for lp in walk_loops(kernel.body) if lp.data_dependent]
    # A dynamic loop's index register is written each iteration only if something reads it.
    read = {s.tensor for i in instrs for s in i.srcs if isinstance(s, Access)}
    read |= {o.tensor for lp in dynamic for o in lp.operands[1:] if isinstance(o, Access)}
    loop_index = {id(lp): Instruction("memset", lp.operands[0], (Const(0),), loc=lp.loc)
                  for lp in dynamic if lp.kind == "dynamic" and lp.operands[0].tensor in read}
    written = frozenset([i.dst.tensor for i in instrs if i.dst is not None]
                        + [i.dst.tensor for i in loop_index.values()])
    prog = Program(kernel, written, loop_index=loop_index)
    if dynamic:
        # A register holds one value per program: data-dependent loops run program by program.
        prog.grid_reason = (f"its {dynamic[0].kind} loop at {dynamic[0].loc} has a data-dependent "
                            "trip count")
    else:
        prog.grid_reason = grid_reason(kernel) if any(g > 1 for g in kernel.grid) else None
    prog.lnc_error = lnc.lockstep_reason(kernel)
    if kernel.lnc is not None and prog.lnc_error is None:
        prog.lnc_error = lnc.core_race(kernel)
        if any(i.op in lnc.LOCKSTEP for i in instrs):
            if dynamic:  # registers have one value per program: no lockstep
                prog.lnc_error = (f"core_barrier/sendrecv with a data-dependent {dynamic[0].kind} "
                                  f"loop (at {dynamic[0].loc}) is not supported")
            else:
                prog.grid_reason = None  # the two cores in lockstep: what a barrier means (lnc.py)
    prog.parallel_reason = parallel_reason(kernel, prog.grid_reason)
    prog.has_matmul = any(i.op == "matmul" for i in instrs)
    prog.flat = not any(isinstance(st, Loop) for st in kernel.body)
    first = first_appearance(kernel)
    sizes = {name: _nbytes(t) for name, t in kernel.tensors.items() if t.memory in ("sbuf", "psum")}
    prog.program_bytes = sum(sizes.values())
    _loops(kernel, kernel.body, 0, first, prog, sizes)
    uses: dict[str, int] = {}
    for ins in instrs:
        for s in ins.srcs:
            if isinstance(s, Access):
                uses[s.tensor] = uses.get(s.tensor, 0) + 1
    _forwarding(kernel, kernel.body, uses, prog)
    prog.covered = frozenset(covered_outputs(kernel))
    writers: dict[str, list[Instruction]] = {}
    for ins in instrs:
        if ins.dst is not None:
            writers.setdefault(ins.dst.tensor, []).append(ins)
    prog.frozen = frozenset(
        name for name, ws in writers.items()
        if len(ws) == 1 and kernel.tensors[name].init == DEFINED
        and kernel.tensors[name].role == "internal" and not ws[0].mask and ws[0].acc is None
        and kernel.tensors[name].memory in ("sbuf", "psum")
        and is_whole(ws[0].dst, kernel.tensors[name].shape))
    # A data-dependent loop reads its registers again before each iteration: never free them.
    operands = {o.tensor for lp in dynamic for o in lp.operands if isinstance(o, Access)}
    prog.dead_after = {k: v - operands for k, v in
                       _dead_after(kernel.body, prog.frozen).items() if v - operands}
    prog.precise = precise
    prog.setup = build(kernel, written, prog.covered, precise)
    return prog


def _dead_after(body: list[Statement], frozen: frozenset[str]) -> dict[int, frozenset[str]]:
    """id(instruction) -> frozen tiles it reads for the last time, defined in the same loop body
    (so no later iteration reads them either): their arrays are free for its result."""
    defined_in: dict[str, int] = {}
    last: dict[str, tuple[int, int]] = {}

    def visit(stmts: list[Statement]) -> None:
        for st in stmts:
            if isinstance(st, Loop):
                visit(st.body)
                continue
            for src in st.srcs:
                if isinstance(src, Access):
                    last[src.tensor] = (id(st), id(stmts))
            if st.dst is not None and st.dst.tensor in frozen:
                defined_in[st.dst.tensor] = id(stmts)

    visit(body)
    dead: dict[int, set[str]] = {}
    for name, (ins_id, body_id) in last.items():
        if name in frozen and defined_in.get(name) == body_id:
            dead.setdefault(ins_id, set()).add(name)
    return {k: frozenset(v) for k, v in dead.items()}


def _nbytes(t) -> int:
    n = 1
    for d in t.shape:
        n *= d
    return n * dtypes.itemsize(t.dtype)


def _loops(kernel: KernelIR, body: list[Statement], pos: int, first: dict[str, int],
           prog: Program, sizes: dict[str, int]) -> int:
    for st in body:
        if isinstance(st, Loop):
            # sequential_range promises nothing, but when no iteration reads what another writes
            # running it as a batch axis gives the same results, so both kinds are analysed.
            inner = next((lp for lp in [st, *walk_loops(st.body)] if lp.data_dependent), None)
            prog.reasons[id(st)] = (
                non_vectorisable_reason(st, kernel, first, pos) if inner is None else
                f"it holds a data-dependent {inner.kind} loop (at {inner.loc}): registers have "
                "one value per iteration")
            end = _loops(kernel, st.body, pos, first, prog, sizes)
            prog.loop_bytes[id(st)] = sum(n for name, n in sizes.items()
                                          if pos <= first.get(name, -1) < end)
            pos = end
        else:
            pos += 1
    return pos


def _forwarding(kernel: KernelIR, body: list[Statement], uses: dict[str, int],
                prog: Program) -> None:
    for st in body:
        if isinstance(st, Loop):
            _forwarding(kernel, st.body, uses, prog)
    for prod, cons in zip(body, body[1:]):
        if isinstance(prod, Loop) or isinstance(cons, Loop) or prod.dst is None:
            continue
        t = kernel.tensors[prod.dst.tensor]
        if (prod.op == "alloc" or prod.mask or prod.acc is not None or t.init != DEFINED
                or t.role != "internal" or not is_whole(prod.dst, t.shape)):
            continue
        if (cons.op not in ("store", "tensor_copy") or cons.mask or not cons.srcs
                or "indirect" in cons.attrs
                or cons.srcs[0] != prod.dst or uses.get(t.name, 0) != 1
                or tuple(cons.dst.shape) != tuple(t.shape)
                or kernel.tensors[cons.dst.tensor].dtype != t.dtype):
            continue
        prog.forward[id(prod)] = cons


def covered_outputs(kernel: KernelIR) -> set[str]:
    """Outputs written by an unmasked, non-accumulating store whose affine index map covers every
    element: each dimension is a mixed-radix combination of its own symbols."""
    extents = {f"p{i}": g for i, g in enumerate(kernel.grid)}
    covered: set[str] = set()

    def visit(body: list[Statement], ext: dict[str, int]) -> None:
        for st in body:
            if isinstance(st, Loop):
                if st.extent > 0:  # an empty loop stores nothing
                    visit(st.body, {**ext, st.var: st.extent})
                continue
            if st.op != "store" or st.mask or st.acc is not None or "indirect" in st.attrs:
                continue
            decl = kernel.tensors[st.dst.tensor]
            if decl.role != "output":
                continue
            tile_ext = {f"t{j}": n for j, n in enumerate(st.dst.shape)}
            if _covers(st.dst, decl.shape, {**ext, **tile_ext}):
                covered.add(decl.name)

    visit(kernel.body, extents)
    return covered


def _covers(a: Access, shape: tuple[int, ...], ext: dict[str, int]) -> bool:
    seen: set[str] = set()
    for expr, n in zip(a.index, shape):
        if expr.const != 0 or any(s.startswith("(") for s, _ in expr.terms):
            return False  # '//' and '%' indices: not proven to cover, so the NaN fill stays
        terms = sorted(((c, s) for s, c in expr.terms if ext.get(s, 1) > 1), key=lambda t: t[0])
        stride = 1
        for c, s in terms:
            if s in seen or c != stride:
                return False
            seen.add(s)
            stride *= ext[s]
        if stride != n:
            return False
    return True
