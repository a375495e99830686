"""The kernel IR: the one definition of a traced NKI kernel.

The NKI tracer produces it, the serialiser turns it into bytes (no pickle), the backend compiler
embeds it, and the emulator's kernel executor runs it. It is deliberately small:

* ``TensorDecl``: every tensor the kernel touches, with its memory space (hbm, shared_hbm, sbuf,
  psum), shape and dtype name. Kernel inputs and outputs are HBM tensors; constants (their bytes
  in ``KernelIR.constants``) are shared HBM tensors.
* ``Access``: an affine window into a tensor. It yields a *tile* of ``shape``; dimension ``d`` of the
  tensor is addressed by ``index[d]``, an ``Affine`` expression over symbols:
  ``p0 p1 p2`` (program ids of the SPMD grid), ``l<N>`` (loop variables) and ``t<j>`` (position along
  axis ``j`` of the tile). Affine accesses are what the executor turns into strided NumPy views.
* ``Instruction``: one whole-tile operation ``dst <- op(srcs)``, optionally masked by affine
  predicates (each ``mask`` expression must be ``>= 0``) and optionally accumulating into ``dst``
  (``acc``). Every instruction keeps the source line that produced it.
* ``Loop``: ``affine`` (independent iterations) or ``sequential`` loops over a body, with a trip
  count known while tracing; or a data-dependent loop (``dynamic``: bounds read from registers
  when the loop starts; ``while``: runs while a register is non-zero), whose operands and run-time
  meaning ``control.py`` defines.

Symbols are plain strings so that the serialised form is plain JSON.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Union

#: (major, minor). A reader accepts any minor of its own major; bump major on breaking changes.
IR_VERSION: tuple[int, int] = (1, 1)  # 1.1: data-dependent loops

INPUT = "input"
OUTPUT = "output"
INTERNAL = "internal"
CONSTANT = "constant"  # data carried by the IR itself (nl.shared_constant)
ROLES = (INPUT, OUTPUT, INTERNAL, CONSTANT)

#: Memory spaces (the emulator's machine model names the same four).
MEMORY_SPACES = ("hbm", "shared_hbm", "sbuf", "psum")

AFFINE_LOOP = "affine"
SEQUENTIAL_LOOP = "sequential"
#: Data-dependent loops (control.py): no trip count while tracing (``extent`` is 0), their
#: operands are registers (one-element on-chip int tensors) or constants.
DYNAMIC_LOOP = "dynamic"
WHILE_LOOP = "while"
DATA_DEPENDENT_LOOPS = (DYNAMIC_LOOP, WHILE_LOOP)
LOOP_KINDS = (AFFINE_LOOP, SEQUENTIAL_LOOP) + DATA_DEPENDENT_LOOPS

#: Tensor initial contents: "uninit" (NaN-filled on chip), or "defined" (fully written by the
#: instruction that creates it, so the executor may bind that instruction's result directly).
UNINIT = "uninit"
DEFINED = "defined"


def program_symbol(axis: int) -> str:
    return f"p{axis}"


def tile_symbol(axis: int) -> str:
    return f"t{axis}"


def is_tile_symbol(sym: str) -> bool:
    return sym.startswith("t")


@dataclass(frozen=True)
class SourceLoc:
    """Where in the user's kernel an instruction, loop or tensor came from."""

    file: str
    line: int

    def __str__(self) -> str:
        return f"{self.file}:{self.line}"


@dataclass(frozen=True)
class Affine:
    """``const + sum(coef * sym)``; ``terms`` are sorted by symbol and have non-zero coefficients."""

    const: int = 0
    terms: tuple[tuple[str, int], ...] = ()

    @staticmethod
    def make(const: int, terms: dict[str, int]) -> "Affine":
        return Affine(int(const), tuple(sorted((s, int(c)) for s, c in terms.items() if c != 0)))

    def coef(self, sym: str) -> int:
        for s, c in self.terms:
            if s == sym:
                return c
        return 0

    def symbols(self) -> frozenset[str]:
        return frozenset(s for s, _ in self.terms)

    def __str__(self) -> str:
        out = ""
        from .divmod import pretty  # derived symbols: "(l1 // 2)"
        for s, c in self.terms:
            s = pretty(s)
            mag = s if abs(c) == 1 else f"{abs(c)}*{s}"
            out += (f" - {mag}" if c < 0 else f" + {mag}") if out else (f"-{mag}" if c < 0 else mag)
        if self.const or not out:
            c = self.const
            out += (f" - {-c}" if c < 0 else f" + {c}") if out else str(c)
        return out


@dataclass(frozen=True)
class Access:
    """An affine tile-shaped window into ``tensor`` (see the module docstring)."""

    tensor: str
    shape: tuple[int, ...]
    index: tuple[Affine, ...]

    def symbols(self) -> frozenset[str]:
        out: frozenset[str] = frozenset()
        for a in self.index:
            out |= a.symbols()
        return out

    def __str__(self) -> str:
        return f"{self.tensor}[{', '.join(str(a) for a in self.index)}] (tile {list(self.shape)})"


@dataclass(frozen=True)
class Const:
    """A scalar immediate operand."""

    value: Union[int, float, bool]


Operand = Union[Access, Const]


@dataclass
class Instruction:
    """One whole-tile operation. ``attrs`` holds JSON-able parameters (ALU op names, axes...)."""

    op: str
    dst: Access | None
    srcs: tuple[Operand, ...] = ()
    attrs: dict = field(default_factory=dict)
    mask: tuple[Affine, ...] = ()
    acc: str | None = None
    loc: SourceLoc | None = None


@dataclass
class Loop:
    """A loop over ``var`` in ``range(extent)``; ``kind`` is "affine" or "sequential". A
    data-dependent loop (``kind`` in ``DATA_DEPENDENT_LOOPS``) has ``extent`` 0, binds no
    symbol (``var`` only names it) and reads its ``operands`` at run time; ``step`` is the
    ``dynamic`` loop's constant stride (see control.py)."""

    var: str
    extent: int
    kind: str
    body: list["Statement"] = field(default_factory=list)
    loc: SourceLoc | None = None
    operands: tuple["Operand", ...] = ()
    step: int = 1

    @property
    def data_dependent(self) -> bool:
        return self.kind in DATA_DEPENDENT_LOOPS


Statement = Union[Instruction, Loop]


@dataclass
class TensorDecl:
    name: str
    shape: tuple[int, ...]
    dtype: str
    memory: str
    role: str = INTERNAL
    init: str = UNINIT
    loc: SourceLoc | None = None

    @property
    def is_on_chip(self) -> bool:
        return self.memory in ("sbuf", "psum")


@dataclass
class KernelIR:
    """A kernel traced for one set of argument shapes/dtypes, one grid and static arguments."""

    name: str
    grid: tuple[int, ...]
    tensors: dict[str, TensorDecl]
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    body: list[Statement]
    source: str = ""
    version: tuple[int, int] = IR_VERSION
    #: Constant tensors' contents: C-order raw bytes in the tensor's dtype, by tensor name.
    constants: dict[str, bytes] = field(default_factory=dict)
    #: A logical NeuronCore of several physical ones (``nl.nc(2)`` in the grid, LNC=2):
    #: ``(axis, stride, cores)``, program ``p``'s core is ``(p[axis] // stride) % cores``
    #: (emulator/kernel_exec/lnc.py). None: every program on one core.
    lnc: tuple[int, int, int] | None = None

    def instructions(self) -> list[Instruction]:
        """Every instruction, in program order, loops flattened."""
        return list(walk_instructions(self.body))


def affine_to_json(a: Affine) -> list:
    """``[const, [[sym, coef], ...]]``: the JSON form of an affine expression."""
    return [a.const, [[s, c] for s, c in a.terms]]


def affine_from_json(d: list) -> Affine:
    return Affine(int(d[0]), tuple((str(s), int(c)) for s, c in d[1]))


def walk_instructions(body: list[Statement]):
    """Yields the instructions of ``body`` in program order, descending into loops."""
    for st in body:
        if isinstance(st, Loop):
            yield from walk_instructions(st.body)
        else:
            yield st


def walk_loops(body: list[Statement]):
    for st in body:
        if isinstance(st, Loop):
            yield st
            yield from walk_loops(st.body)
