"""Runs a program: each op's handler factory (registered with the op, emulator.program.ops) turns
an instruction, at load time, into a callable over NumPy arrays; execution is then one tight
loop per computation.

Why factories: everything that depends only on the instruction (attribute tuples, permutations,
output dtypes, iota values, sub-program callables) is computed once when the artifact is loaded,
so the per-instruction cost at run time is a call and a list store. Slots listed in an
instruction's `free` are dropped right after it, so temporaries die at their last use.
"""
from __future__ import annotations

import itertools
import logging
import math
import operator
import os
import threading
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from emulator.artifact import Artifact, ArtifactError, read_artifact, read_bytes
from emulator.blas import blas_threads_for_run
from emulator.codegen import Step, make_loop_runner, make_runner
from emulator.fpenv import flushed_denormals
from emulator.native.policy import runs_before_build
from emulator.program.context import HandlerContext
from emulator.program.dtypes import DTYPES, TUPLE
from emulator.program.model import Computation, Program, ValueType
from emulator.program.ops import OPS
from emulator.errors import EmulatorError

log = logging.getLogger(__name__)


#: Numbers for run-start hooks (HandlerContext.run_start): one per loaded program, one per run.
_GRAPHS = itertools.count(1)
_RUNS = itertools.count(1)


class LoadedProgram:
    """A program with every instruction bound to its handler; computations built on first use."""

    def __init__(self, program: Program, constants: list[np.ndarray], kernels: list[Any],
                 recorder: Any = None) -> None:
        import emulator.ops  # noqa: F401 - registers every op's handler

        # Debug mode: check every instruction's result against its declared type (slow).
        self.check_types = os.environ.get("NEURON_EMULATOR_CHECK", "") not in ("", "0")

        self.program = program
        self.constants = constants
        self.kernels = kernels
        self.shared: dict[Any, Any] = {}  # state the handlers of this program share (HandlerContext)
        # Profiling (emulator.profile.Recorder): computations run by the profiled loop, except
        # lifted element-wise ones, whose work their calling instruction's cost already covers.
        self.recorder = recorder
        self._lifted = self._lifted_computations() if recorder is not None else set()
        self._runners: dict[int, Callable[..., Any]] = {}
        #: plain computations' bound steps, kept for their fused runner (the same handlers)
        self._plain_steps: dict[int, tuple[list[Step], list[str], list[HandlerContext]]] = {}
        #: computation index -> how many fused native regions its fused runner calls
        self.fused_regions: dict[int, int] = {}
        #: handlers' run-start hooks (HandlerContext.run_start), each once, told (graph, run) by `started`
        self.run_hooks: list[Callable[[int, int], None]] = []
        self.graph = next(_GRAPHS)
        self.runner(program.entry)

    def started(self) -> None:
        """A run of this program begins: its handlers' run-start hooks are told."""
        if self.run_hooks:
            run = next(_RUNS)
            for hook in self.run_hooks:
                hook(self.graph, run)

    def constant(self, index: int) -> np.ndarray:
        if not 0 <= index < len(self.constants):
            raise ArtifactError(f"program refers to constant {index}, the artifact has {len(self.constants)}")
        return self.constants[index]

    def runner(self, index: int) -> Callable[..., Any]:
        """The callable for computation `index` (built once; recursion-safe via a forward cell)."""
        if index in self._runners:
            return self._runners[index]
        cell: list[Callable[..., Any]] = []
        self._runners[index] = lambda *args: cell[0](*args)
        built = self._build(self.program.computations[index])
        cell.append(built)
        self._runners[index] = built
        return built

    def steps(self, comp: Computation) -> tuple[list[Step], list[str], list[HandlerContext]]:
        """Each instruction of `comp` bound to its handler: (steps, names, handler contexts)."""
        types: list[ValueType | None] = [None] * comp.num_slots
        for slot, t in zip(comp.params, comp.param_types):
            types[slot] = t
        steps: list[Step] = []
        names = []
        contexts = []
        for inst in comp.instructions:
            in_types = []
            for s in inst.ins:
                if types[s] is None:
                    raise ArtifactError(f"computation {comp.name}: instruction {inst.name or inst.op} reads "
                                        f"slot {s} before it is written")
                in_types.append(types[s])
            ctx = HandlerContext(inst.op, inst.name, inst.attrs, inst.type, in_types, self, inst.reuse)
            try:
                fn = OPS[inst.op].handler(ctx)
            except ArtifactError:
                raise
            except Exception as e:  # a forged attribute the schema can not rule out
                raise ArtifactError(f"computation {comp.name}: instruction {inst.name or inst.op} ({inst.op}) "
                                    f"can not be built: {type(e).__name__}: {e}") from None
            if ctx.run_start is not None and ctx.run_start not in self.run_hooks:
                self.run_hooks.append(ctx.run_start)
            types[inst.out] = inst.type
            for f in inst.free:
                types[f] = None
            steps.append((fn, tuple(inst.ins), inst.out, tuple(inst.free)))
            contexts.append(ctx)
            names.append(f"{inst.name or '?'} ({self._what(inst)})")
        if types[comp.result] is None:
            raise ArtifactError(f"computation {comp.name}: result slot {comp.result} is never written")
        return steps, names, contexts

    @property
    def plain(self) -> bool:
        """Whether computations run as plain generated code (not profiled, not type-checked):
        then a while loop may be fused into one function (LoadedProgram.loop_runner)."""
        return self.recorder is None and not self.check_types

    def loop_runner(self, cond: int, body: int, size: int, overdue: Callable[[float, int], None],
                    own: Callable[[Any, bool], Any] | None) -> Callable[[Any], Any]:
        """A while loop over a `size`-element tuple state as one generated function
        (emulator.codegen.make_loop_runner): condition and body inlined, invariants hoisted."""
        c, b = self.program.computations[cond], self.program.computations[body]
        cond_steps, cond_names, _ = self.steps(c)
        body_steps, body_names, _ = self.steps(b)
        return make_loop_runner(c, cond_steps, cond_names, b, body_steps, body_names, size=size, overdue=overdue,
                                own=own)

    def _build(self, comp: Computation) -> Callable[..., Any]:
        steps, names, contexts = self.steps(comp)
        if self.check_types:
            lifted = self._lifted_computations()
            checked = self.program.computations.index(comp) not in lifted
            steps = [(_checked(fn, inst.type, checked, name), ins, out, free)
                     for (fn, ins, out, free), inst, name in zip(steps, comp.instructions, names)]
        if self.recorder is not None and self.program.computations.index(comp) not in self._lifted:
            return self._profiled_runner(comp, steps, names, contexts)
        if self.plain:
            self._plain_steps[self.program.computations.index(comp)] = (steps, names, contexts)
        return make_runner(comp, steps, names)

    def fused_runner(self, index: int) -> Callable[..., Any]:
        """Computation `index` (already built plain) as a runner whose element-wise regions are
        fused native code (emulator.native), bound to the plain runner's own handlers. Raises
        when the native module can not be had (no g++, a build or verification failure)."""
        from emulator.native import compile_regions

        if index not in self._plain_steps:
            raise EmulatorError(f"computation {index} has no plain runner to fuse")
        steps, names, contexts = self._plain_steps[index]
        regions: list[Any] = []

        def native(found: list[Any]) -> list[Callable[..., Any]]:
            regions.extend(found)
            return compile_regions(found)
        runner = make_runner(self.program.computations[index], steps, names,
                             in_types=[c.in_types for c in contexts], native=native)
        self.fused_regions[index] = len(regions)
        return runner

    def _kernel_name(self, inst: Any) -> str | None:
        """The name of the kernel a ``kernel`` instruction runs (its payload's: the NKI function,
        ``library::op``), None for other instructions. Why: the instruction is named by the
        framework (``custom-call.17``); the user knows the kernel they wrote."""
        if inst.op != "kernel":
            return None
        index = inst.attrs.get("payload", -1)
        return self.kernels[index].name if 0 <= index < len(self.kernels) else None

    def _what(self, inst: Any) -> str:
        """The op of an instruction, with its kernel's name for a kernel (error messages)."""
        kernel = self._kernel_name(inst)
        return inst.op if kernel is None else f"kernel {kernel}"

    def _label(self, inst: Any) -> str:
        """The instruction as a profile names it: a kernel by its name, then the instruction."""
        kernel = self._kernel_name(inst)
        name = inst.name or inst.op
        return name if kernel is None or kernel == name else f"{kernel} ({name})"

    def _profiled_runner(self, comp: Computation, steps: list[tuple], names: list[str],
                         contexts: list[HandlerContext]) -> Callable[..., Any]:
        """The run loop that records events (emulator.profile.runner); built only for profiling.
        Each instruction's coster reads the context its handler was built with (a GpSimd kernel's
        handler leaves its counters probe there)."""
        from emulator.cost.graph import coster
        from emulator.cost.shapes import describe
        from emulator.profile.runner import make_profiled_runner

        profiled = []
        for (fn, ins, out, free), inst, ctx in zip(steps, comp.instructions, contexts):
            shapes = f"{', '.join(describe(t) for t in ctx.in_types)} -> {describe(inst.type)}"
            profiled.append((_bind(fn, ins), ins, out, free, coster(ctx), self._label(inst), inst.op, shapes,
                             inst.source))

        def on_error(k: int, e: Exception) -> Exception:
            if isinstance(e, EmulatorError):
                return e
            return EmulatorError(f"computation {comp.name}: instruction {names[k]} failed: {type(e).__name__}: {e}")
        return make_profiled_runner(comp.num_slots, tuple(comp.params), comp.result, profiled, self.recorder,
                                    on_error)

    def _lifted_computations(self) -> set[int]:
        """Computations run element-wise on whole arrays (their declared types are scalars)."""
        roots = {i.attrs[k] for c in self.program.computations for i in c.instructions
                 for k in OPS[i.op].lifts if i.attrs.get(k, -1) >= 0}
        todo, seen = list(roots), set(roots)
        while todo:
            for i in self.program.computations[todo.pop()].instructions:
                if i.op == "call" and i.attrs["computation"] not in seen:
                    seen.add(i.attrs["computation"])
                    todo.append(i.attrs["computation"])
        return seen


def _matches(value: Any, t: ValueType, shapes: bool) -> bool:
    if t[0] == TUPLE:
        return isinstance(value, tuple) and len(value) == len(t[1]) and all(
            _matches(v, s, shapes) for v, s in zip(value, t[1]))
    if t[0] == "token":
        return True
    a = np.asarray(value)
    return a.dtype == DTYPES[t[0]] and (not shapes or a.shape == tuple(t[1]))


def _checked(fn: Callable[..., Any], t: ValueType, shapes: bool, name: str) -> Callable[..., Any]:
    """fn, raising if its result is not of the declared type (debug mode: NEURON_EMULATOR_CHECK=1)."""
    def run(*args: Any) -> Any:
        value = fn(*args)
        if not _matches(value, t, shapes):
            got = np.asarray(value) if not isinstance(value, tuple) else value
            raise EmulatorError(f"instruction {name} produced {getattr(got, 'dtype', 'tuple')}"
                                f"{list(getattr(got, 'shape', ()))}, the program declares {t}")
        return value
    return run


def _bind(fn: Callable[..., Any], ins: tuple[int, ...]) -> Callable[[list[Any]], Any]:
    """fn applied to the given slots of a register list (arity-specialised: the loop's hot path)."""
    if not ins:
        return lambda r: fn()
    if len(ins) == 1:
        (i,) = ins
        return lambda r: fn(r[i])
    if len(ins) == 2:
        i, j = ins
        return lambda r: fn(r[i], r[j])
    get = operator.itemgetter(*ins)
    return lambda r: fn(*get(r))


def _leaves(value: Any) -> list[Any]:
    if isinstance(value, tuple):
        return [leaf for v in value for leaf in _leaves(v)]
    return [value]


def _owner(a: np.ndarray) -> np.ndarray | None:
    """The array that owns `a`'s memory (`a` itself or its base), or None when that is not an
    array owning its data (a buffer of another library, a chain of views NumPy kept)."""
    base = a.base
    if base is None:
        return a if a.flags.owndata else None
    if type(base) is np.ndarray and base.base is None and base.flags.owndata:
        return base
    return None


class _Overlaps:
    """Arrays an output must not share memory with, grouped by the array that owns their memory:
    two distinct owners hold disjoint memory, so an output with an owner is compared (by
    np.may_share_memory, a bounds test) only with arrays of the same owner and those without one.

    Why grouped: a training step returns ~20 outputs beside ~13 inputs, and testing every pair
    in Python was ~25 us of each run of the main job's step (most of the run's fixed cost)."""

    __slots__ = ("unowned", "owned")

    def __init__(self) -> None:
        self.unowned: list[np.ndarray] = []
        self.owned: dict[int, tuple[np.ndarray, list[np.ndarray]]] = {}  # id(owner) -> (owner, arrays)

    def add(self, a: np.ndarray, owner: np.ndarray | None) -> None:
        if owner is None:
            self.unowned.append(a)
        else:
            self.owned.setdefault(id(owner), (owner, []))[1].append(a)

    def may_share(self, a: np.ndarray, owner: np.ndarray | None) -> bool:
        """Whether `a` (owned by `owner`, None: unknown) may share memory with an array added."""
        if owner is not None and not self.unowned and id(owner) not in self.owned:
            return False  # the usual case, answered without a loop: a fresh result
        for b in self.unowned:
            if np.may_share_memory(a, b):
                return True
        if owner is None:
            groups = [arrays for _, arrays in self.owned.values()]
        else:
            group = self.owned.get(id(owner))
            groups = [group[1]] if group is not None else []
        return any(np.may_share_memory(a, b) for arrays in groups for b in arrays)


#: OpenBLAS runs a GEMM of fewer multiply-adds (m * n * k) than this on one thread whatever its
#: thread setting (interface/gemm.c: SMP_THRESHOLD_MIN 65536 x GEMM_MULTITHREAD_THRESHOLD 4)
SINGLE_THREAD_GEMM = 65536 * 4


def _multiply_adds(inst: Any, operand_types: list[ValueType]) -> int | None:
    """An upper bound of the multiply-adds of one GEMM a dot or convolution makes (all of its
    batches, groups and windows counted together), None for other ops and for types that do not
    fit the op (the loader refuses those later, by name)."""
    try:
        out = math.prod(inst.type[1])
        if inst.op == "dot":
            lhs = operand_types[0][1]
            return out * math.prod(lhs[d] for d in inst.attrs["lhs_contracting"])
        if inst.op == "convolution":
            kernel = operand_types[1][1]
            return out * math.prod(kernel) // max(1, kernel[inst.attrs["kernel_output_feature"]])
    except (IndexError, KeyError, TypeError):
        return None
    return None


def _uses_blas(program: Program) -> bool:
    """Whether an instruction of `program` (any computation) may call BLAS with threads. A
    program without one runs without the BLAS thread policy (emulator/blas.py), whose system
    calls and thread settings cost 4 us of every run on a quiet machine and 30 us under load:
    most of a small graph's time. Dots and convolutions too small for OpenBLAS to thread (the
    5x5 and 4x4 ones of XLA's tests, a loop's matrix-vector products) do not count."""
    for comp in program.computations:
        types: dict[int, ValueType] = dict(zip(comp.params, comp.param_types))
        for inst in comp.instructions:
            if OPS[inst.op].blas:
                operands = [types.get(i) for i in inst.ins]
                work = None if None in operands else _multiply_adds(inst, operands)  # type: ignore[arg-type]
                if work is None or work >= SINGLE_THREAD_GEMM:
                    return True
            types[inst.out] = inst.type
    return False


def _type_leaves(t: ValueType) -> list[ValueType]:
    if t[0] == TUPLE:
        return [leaf for s in t[1] for leaf in _type_leaves(s)]
    return [t]


class Executable:
    """A loaded artifact: its manifest and a `run` over NumPy arrays."""

    def __init__(self, artifact: Artifact) -> None:
        self.artifact = artifact
        self.manifest: dict[str, Any] = artifact.manifest
        self._loaded = LoadedProgram(artifact.program, artifact.constants, artifact.kernels)
        entry = artifact.program.computations[artifact.program.entry]
        self._entry = self._loaded.runner(artifact.program.entry)
        self._plain_entry = self._entry
        self._entry_name = entry.name
        self._profiling: tuple[LoadedProgram, Any] | None = None  # built on the first profiled run
        self.last_profile: Any = None  # emulator.profile.Profile of the latest profiled run
        self._inputs = [(e["name"], DTYPES[e["dtype"]], tuple(e["shape"])) for e in self.manifest["inputs"]]
        self._outputs = [(e["name"], DTYPES[e["dtype"]], tuple(e["shape"])) for e in self.manifest["outputs"]]
        # The entry computation takes one value per leaf input (the compiler packs tuples inside).
        if len(entry.params) != len(self._inputs):
            raise ArtifactError(f"manifest lists {len(self._inputs)} inputs, the entry computation takes "
                                f"{len(entry.params)}")
        for (name, dt, shape), t in zip(self._inputs, entry.param_types):
            if t[0] == TUPLE or DTYPES[t[0]] != dt or tuple(t[1]) != shape:
                raise ArtifactError(f"manifest input {name} does not match the entry computation's parameter")
        out_types = _type_leaves(entry.result_type)
        self._tuple_result = entry.result_type[0] == TUPLE
        # A tuple of arrays (the usual entry result) is its own list of leaves.
        self._flat_result = self._tuple_result and all(t[0] != TUPLE for t in entry.result_type[1])
        self._uses_blas = _uses_blas(artifact.program)
        # Fused native code (emulator.native): built once the program is hot, then swapped in.
        self._runs = 0
        self._native_after = runs_before_build() if self._loaded.plain else None
        self._native_started = False
        if self._native_after == 0:
            self._go_native()
        if [(DTYPES[t[0]], tuple(t[1])) for t in out_types] != [(dt, s) for _, dt, s in self._outputs]:
            raise ArtifactError("manifest outputs do not match the entry computation's result")

    @property
    def output_types(self) -> list[tuple[str, np.dtype, tuple[int, ...]]]:
        """(name, dtype, shape) of each output, in the order `run` returns them."""
        return list(self._outputs)

    def run(self, inputs: Sequence[Any], profile: bool = False, *, owned: bool = True) -> list[np.ndarray]:
        """Run on `inputs` (entry parameters in order, tuple parameters flattened into leaves).
        With `profile=True` the run is recorded; `last_profile` then holds its Profile.

        The outputs are the caller's own: writeable, sharing memory with no input and no other
        output. `owned=False` is for a caller that never writes to them (the JAX adapter makes
        immutable arrays of them): they may then be read-only and share memory with each other,
        with the program's constants and with inputs that are read-only views of memory that no
        array owns (JAX's arrays seen from NumPy), which saves copying them; they still never
        share memory with an input the caller can write to."""
        if profile:
            return self.profile(inputs)[0]
        self._runs += 1
        if self._runs == self._native_after and not self._native_started:
            self._native_started = True
            threading.Thread(target=self._go_native, name="ncc-native-build", daemon=True).start()
        return self._run(inputs, self._entry, owned)

    @property
    def native(self) -> bool:
        """Whether the entry computation now runs its fused runner (emulator.native)."""
        return self._entry is not self._plain_entry

    @property
    def native_regions(self) -> int:
        """How many fused native regions the entry computation's runner calls (0 before the swap)."""
        return self._loaded.fused_regions.get(self.artifact.program.entry, 0) if self.native else 0

    def _go_native(self) -> None:
        """Builds (or finds) the entry computation's fused native code and swaps it in; any
        failure leaves the program on NumPy, with the reason logged."""
        self._native_started = True
        try:
            fused = self._loaded.fused_runner(self.artifact.program.entry)
        except Exception as e:  # noqa: BLE001 - every failure means "stay on NumPy"
            log.warning("fused native code not used for %s: %s: %s (the program runs on NumPy)",
                        self._entry_name, type(e).__name__, e)
            return
        self._entry = fused
        log.info("fused native code in use for %s after %d runs", self._entry_name, self._runs)

    def profile(self, inputs: Sequence[Any]) -> tuple[list[np.ndarray], Any]:
        """Run on `inputs`, recording every executed instruction: (outputs, emulator.profile.Profile).

        The profiled program is loaded once (a second binding of every instruction, with costers);
        the plain `run` never pays for it."""
        import time

        from emulator.profile import Profile, Recorder

        if self._profiling is None:
            recorder = Recorder()
            loaded = LoadedProgram(self.artifact.program, self.artifact.constants, self.artifact.kernels, recorder)
            self._profiling = (loaded, recorder)
        loaded, recorder = self._profiling
        recorder.reset(time.perf_counter())  # a fresh timeline (the runners hold this object)
        outputs = self._run(inputs, loaded.runner(self.artifact.program.entry), loaded=loaded)
        self.last_profile = Profile(recorder.events, recorder.host)
        return outputs, self.last_profile

    def _run(self, inputs: Sequence[Any], entry: Callable[..., Any], owned: bool = True,
             loaded: LoadedProgram | None = None) -> list[np.ndarray]:
        if len(inputs) != len(self._inputs):
            raise EmulatorError(f"expected {len(self._inputs)} inputs ({', '.join(n for n, _, _ in self._inputs)}), "
                                f"got {len(inputs)}")
        args = [x if type(x) is np.ndarray else np.asarray(x) for x in inputs]
        for k, (a, (name, dt, shape)) in enumerate(zip(args, self._inputs)):
            if a.dtype != dt or a.shape != shape:
                what, want, got = ("dtype", dt, a.dtype) if a.dtype != dt else ("shape", shape, a.shape)
                raise EmulatorError(f"input {k} ({name}): expected {what} {want}, got {got}")
        (loaded or self._loaded).started()
        with np.errstate(all="ignore"), flushed_denormals():  # XLA:CPU's FTZ/DAZ (fpenv.py)
            if self._uses_blas:
                with blas_threads_for_run():
                    result = entry(*args)
            else:
                result = entry(*args)
        # Outputs must be the caller's own (see run): copy read-only values (constants,
        # broadcasts) and anything that may share memory with an input or an earlier output; a
        # view of an internal temporary is returned as is (copying 32 MB weights costs
        # milliseconds). Only writeable inputs are compared (a writeable output can not reach
        # memory that is read-only to the caller, e.g. JAX's inputs: NumPy makes no writeable view
        # of a read-only array), and arrays with different owners of their memory never overlap,
        # so np.may_share_memory (a bounds test) runs only for pairs it can tell something about.
        # Not owned, an output may share memory with read-only inputs, but not with one that
        # NumPy lets its owner make writeable again (a caller's array set read-only).
        others = _Overlaps()
        for x in args:
            o = _owner(x)
            if x.flags.writeable or (not owned and o is not None):
                others.add(x, o)
        if not self._tuple_result:
            values: Sequence[Any] = (result,)
        else:
            values = result if self._flat_result else _leaves(result)
        outs: list[np.ndarray] = []
        for k, (v, (name, dt, shape)) in enumerate(zip(values, self._outputs)):
            a = v if type(v) is np.ndarray else np.asarray(v)
            if a.dtype != dt or a.shape != shape:
                raise EmulatorError(f"output {k} ({name}) came out as {a.dtype}{list(a.shape)}, the program "
                                    f"declares {dt}{list(shape)}")
            if not owned:
                if others.may_share(a, _owner(a)):
                    a = np.array(a, copy=True)
            elif not a.flags.writeable or others.may_share(a, owner := _owner(a)):
                a = np.array(a, copy=True)
                others.add(a, a)
            else:
                others.add(a, owner)
            outs.append(a)
        return outs


def load_artifact(source: str | os.PathLike | bytes | bytearray | memoryview, *,
                  allow_native: bool | None = None) -> Executable:
    """Load an artifact from a path or bytes; a bad artifact raises ArtifactError.

    `allow_native=False` refuses an artifact that carries native code (GpSimd C++ kernels) with an
    ArtifactError before anything of it is loaded; None follows NEURON_CUSTOMCALL_NO_NATIVE_CODE
    (emulator.native_policy)."""
    from emulator.native_policy import check_native

    artifact = read_artifact(read_bytes(source))
    check_native(artifact.kernels, allow_native)
    return Executable(artifact)
