"""``nki.jit``, SPMD launch (``kernel[gx, gy](...)``), trace caching and ``simulate_kernel``.

A kernel is traced once per (argument shapes and dtypes, static arguments, grid) into kernel IR;
the trace is cached on the kernel object. NumPy arguments run the IR on the emulator. Framework
adapters (a later issue) plug in through ``register_framework`` and use ``trace_kernel``, which
needs only shapes and dtypes, to get the IR and the output shapes.
"""

from __future__ import annotations

import functools
import importlib
import inspect
import traceback
import weakref
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np

from emulator import machine
from emulator.kernel_exec import Runner, run_kernel
from emulator.kernel_exec.program import Program, covered_outputs, prepare
from emulator.kernel_ir import INPUT, OUTPUT, KernelIR, SourceLoc, walk_instructions
from emulator.kernel_ir.dtypes import UnknownDtypeError

from . import checks
from . import dtypes as nkd
from . import typing as nki_typing
from .errors import KernelTraceError, NKIError, NonAffineIndexError
from .loops import traceable
from .tile import Tile
from .builder import Builder
from .lang.spmd import lnc_of, nc, spmd_dim
from .tracer import activate, any_active, current_or_none, deactivate, in_front_end


@dataclass(frozen=True)
class TensorSpec:
    """Shape and dtype (IR name) of a kernel argument or result: all tracing needs."""

    shape: tuple[int, ...]
    dtype: str

    @staticmethod
    def of(array: Any) -> "TensorSpec":
        return TensorSpec(tuple(int(s) for s in array.shape), nkd.name_of(array.dtype))


@dataclass
class TracedKernel:
    """A traced kernel: its IR, its results' specs, and how the Python function returned them
    ("none" for kernels that only write their arguments, "single" or "tuple")."""

    ir: KernelIR
    outputs: tuple[TensorSpec, ...]
    returns: str
    #: outputs that hold returned SBUF/PSUM tiles (the simulator reads them back)
    chip_results: tuple[str, ...] = ()

    @property
    def program(self) -> Program:
        """The executor's per-kernel analysis (memoised on the IR): done once per trace."""
        return prepare(self.ir)


def _is_tensor_arg(x: Any) -> bool:
    return isinstance(x, TensorSpec) or (hasattr(x, "shape") and hasattr(x, "dtype")
                                         and not isinstance(x, (np.generic, type)))


def trace_kernel(func: Callable, args: Sequence[Any], kwargs: dict[str, Any] | None = None,
                 grid: tuple[int, ...] = (1,)) -> TracedKernel:
    """Trace ``func`` for arguments given as arrays or ``TensorSpec`` (tensors) and anything else
    (static arguments, passed to the function as they are). ``func`` may be the plain function,
    an ``nki.jit`` kernel or a launch ``kernel[grid]`` (whose grid is then the default), so that
    the IR of a kernel as users hold it is one call away (format it with
    ``emulator.kernel_ir.format_kernel``)."""
    if isinstance(func, Launch):
        grid = func.grid if grid == (1,) else grid
        func = func.kernel
    if isinstance(func, Kernel):
        func = func.func
    kwargs = dict(kwargs or {})
    name = getattr(func, "__name__", "kernel")
    source = inspect.getsourcefile(func) or ""
    trace = Builder(name, tuple(int(g) for g in grid), source)
    trace.lnc = lnc_of(grid)
    trace.func = func  # kernel decorators' marks (nki.compiler.force_auto_alloc)
    try:
        bound = inspect.signature(func).bind(*args, **kwargs)
    except TypeError as e:
        raise KernelTraceError(name, _def_loc(func), "wrong arguments", str(e)) from None
    call_args: dict[str, Any] = {}
    for pname, value in bound.arguments.items():
        if _is_tensor_arg(value):
            spec = value if isinstance(value, TensorSpec) else TensorSpec.of(value)
            decl = trace.declare(spec.shape, spec.dtype, machine.HBM, name=pname, role=INPUT)
            why = nki_typing.argument_mismatch(func, pname, decl.shape, decl.dtype)
            if why:
                raise KernelTraceError(name, _def_loc(func), "argument annotation", why)
            decl.loc = _def_loc(func)
            trace.inputs.append(decl.name)
            call_args[pname] = Tile(trace, decl)
        else:
            call_args[pname] = value
    token = activate(trace)
    try:
        result = traceable(func)(**call_args)
        returns, tiles = _results(trace, result)
        tiles, chip_results = _read_back_on_chip_results(trace, func, tiles)
    except NonAffineIndexError as e:
        raise KernelTraceError(name, _tb_loc(e), "non-affine index", str(e)) from None
    finally:
        deactivate(token)
    for t in tiles:
        if t.cast:
            raise KernelTraceError(name, _def_loc(func), "bit-cast view of an HBM tensor",
                                   f"a kernel returns whole HBM tensors in their own dtype, not "
                                   f"a view of {t.decl.name!r} as {t.cast}; nl.store through "
                                   "the view into a tensor of that dtype instead")
        if t.on_chip or t.shape != t.decl.shape:
            raise KernelTraceError(name, _def_loc(func), "invalid kernel result",
                                   f"a kernel returns whole HBM tensors, got {t!r}")
        if t.decl.role != INPUT:
            t.decl.role = OUTPUT
    out_names = [t.decl.name for t in tiles]
    if returns == "none":
        written = {i.dst.tensor for i in walk_instructions(trace.body) if i.dst is not None}
        out_names = [n for n in trace.inputs if n in written]
    ir = trace.finish(out_names)
    checks.warn_unwritten_outputs(ir, covered_outputs(ir))
    specs = tuple(TensorSpec(ir.tensors[n].shape, ir.tensors[n].dtype) for n in out_names)
    return TracedKernel(ir, specs, returns, chip_results)


def _read_back_on_chip_results(trace: Builder, func: Callable, tiles: list[Tile]
                               ) -> tuple[list[Tile], tuple[str, ...]]:
    """Returned SBUF/PSUM tiles become HBM outputs holding their values at the return, stored
    by the kernel's last instructions: the NKI simulator's rule ("on return, NkiTensor results
    are converted back to NumPy arrays"). Only a single program has one such value; a framework
    graph refuses them (``TracedKernel.chip_results``: its outputs must be HBM tensors)."""
    out: list[Tile] = []
    names: list[str] = []
    for t in tiles:
        if not t.on_chip:
            out.append(t)
            continue
        programs = int(np.prod(trace.grid))
        if programs > 1:
            raise KernelTraceError(
                trace.name, _def_loc(func), "invalid kernel result",
                f"kernel returns on-chip tile {t.decl.name!r} ({t.buffer}) from a grid of "
                f"{programs} programs, each with its own; return an HBM tensor the programs "
                "store into")
        decl = trace.declare(t.shape, t.dtype_name, machine.HBM, name=f"{t.decl.name}_result")
        hbm = Tile(trace, decl)
        if t.buffer == machine.PSUM:  # PSUM does not reach HBM directly: through SBUF
            t = trace.new("tensor_copy", t.shape, t.dtype_name, t)
        trace.emit("store", hbm, t)
        out.append(hbm)
        names.append(decl.name)
    return out, tuple(names)


def _results(trace: Builder, result: Any) -> tuple[str, list[Tile]]:
    if result is None:
        return "none", []
    if isinstance(result, Tile):
        return "single", [result]
    if isinstance(result, (tuple, list)) and all(isinstance(r, Tile) for r in result):
        return "tuple", list(result)
    raise KernelTraceError(trace.name, None, "invalid kernel result",
                           f"a kernel returns HBM tensors (or nothing), got {type(result).__name__}")


def _def_loc(func: Callable) -> SourceLoc | None:
    code = getattr(func, "__code__", None)
    return SourceLoc(code.co_filename, code.co_firstlineno) if code is not None else None


def _tb_loc(exc: BaseException) -> SourceLoc | None:
    """The innermost traceback frame outside this package: the user's line."""
    loc = None
    for fs in traceback.extract_tb(exc.__traceback__):
        if not in_front_end(fs.filename):
            loc = SourceLoc(fs.filename, fs.lineno or 0)
    return loc


# --- frameworks ----------------------------------------------------------------------------------

#: (predicate on the call's arguments, runner(kernel, grid, args, kwargs)). Adapters for torch and
#: JAX register here; NumPy is the built-in fallback.
_FRAMEWORKS: list[tuple[Callable[[Sequence[Any]], bool], Callable[..., Any]]] = []


def register_framework(accepts: Callable[[Sequence[Any]], bool], run: Callable[..., Any]) -> None:
    """Let a framework adapter run kernels called with its tensors."""
    _FRAMEWORKS.append((accepts, run))


#: Top-level module of a tensor type -> the adapter that registers itself for it when imported,
#: so that ``kernel[grid](xla_tensor)`` works without importing the adapter first.
_ADAPTERS = {"torch": "neuron_customcall.torch_xla", "jax": "neuron_customcall.jax",
             "jaxlib": "neuron_customcall.jax"}


def _import_adapters(modules: Sequence[str]) -> bool:
    """Imports the adapters of these modules' frameworks; True if one registered itself."""
    before = len(_FRAMEWORKS)
    for root in {m.split(".")[0] for m in modules}:
        adapter = _ADAPTERS.get(root)
        if adapter is not None:
            importlib.import_module(adapter)
    return len(_FRAMEWORKS) > before


# --- kernels -------------------------------------------------------------------------------------

#: Every live kernel by id(): a graph tracer that sees a kernel only as a constant id (torch
#: dynamo) finds it again here.
_LIVE_KERNELS: "weakref.WeakValueDictionary[int, Kernel]" = weakref.WeakValueDictionary()


#: ``nki.jit(mode=...)`` values either generation documents: beta 1's "jax", "torchxla",
#: "baremetal", "benchmark", "simulation" and "auto" (neuronxcc.nki.jit), beta 2's "jax",
#: "torchxla" and "auto", and "trace", which NKI 0.1.0 put on sub-kernels (the beta-2 migration
#: guide). Every mode runs the same way here: the framework of the arguments decides, and the
#: emulator runs the kernel; the check exists so that a misspelt mode is not accepted silently.
JIT_MODES = frozenset({"auto", "jax", "torchxla", "baremetal", "benchmark", "simulation", "trace"})


def check_mode(mode: Any) -> str:
    """`mode` if it is a documented ``nki.jit`` mode; else a ValueError naming the near ones, or all."""
    if isinstance(mode, str) and mode in JIT_MODES:
        return mode
    import difflib

    near = difflib.get_close_matches(mode, JIT_MODES, n=2, cutoff=0.6) if isinstance(mode, str) else []
    hint = f"did you mean {' or '.join(map(repr, near))}? " if near else ""
    raise ValueError(f"nki.jit: unknown mode {mode!r}: {hint}the documented modes are "
                     f"{', '.join(map(repr, sorted(JIT_MODES)))}")


def kernel_by_id(ident: int) -> "Kernel":
    """The live kernel whose ``id()`` is ``ident`` (KeyError if there is none)."""
    return _LIVE_KERNELS[ident]


class Kernel:
    """An ``nki.jit`` kernel. ``kernel[grid](*args)`` launches it on an SPMD grid; ``kernel(*args)``
    is a single instance."""

    def __init__(self, func: Callable, mode: str = "auto"):
        self.func = func
        self.mode = check_mode(mode)
        self._cache: dict[Any, TracedKernel] = {}
        self._numpy_plans: dict[Any, NumpyLaunch] = {}
        #: kernel[grid] as written -> its Launch (a launch holds no state of its own).
        self._launches: dict[Any, Launch] = {}
        self.signature = inspect.signature(func)
        self.params = tuple(
            n for n, p in self.signature.parameters.items()
            if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD))
        functools.update_wrapper(self, func)
        _LIVE_KERNELS[id(self)] = self

    def __getitem__(self, grid) -> "Launch":
        # nl.nc(2) equals 2 but launches on two cores: such grids are cached by their repr too.
        key = grid if type(grid) is int or (type(grid) is tuple and all(
            type(g) is int for g in grid)) else (grid, repr(grid))
        try:
            hit = self._launches.get(key)
        except TypeError:  # unhashable (a list): checked and converted below
            hit = None
        if hit is None:
            hit = self._launch(grid)
            try:
                self._launches[key] = hit
            except TypeError:
                pass
        return hit

    def _launch(self, grid) -> "Launch":
        grid = grid if isinstance(grid, tuple) else (grid,)
        if len(grid) == 1 and isinstance(grid[0], (tuple, list)):
            grid = tuple(grid[0])
        if not 1 <= len(grid) <= 3 or any(int(g) < 1 for g in grid):
            raise NKIError(f"kernel {self.func.__name__!r}: grid {grid} must be 1 to 3 positive "
                           "sizes")
        lnc_of(grid)  # an LNC of more than two cores is an error here, at the launch
        return Launch(self, tuple(g if isinstance(g, (nc, spmd_dim)) else int(g) for g in grid))

    def __call__(self, *args, **kwargs):
        return Launch(self, (1,))(*args, **kwargs)

    def trace(self, args: Sequence[Any], kwargs: dict[str, Any] | None = None,
              grid: tuple[int, ...] = (1,)) -> TracedKernel:
        """Traced IR for these arguments (arrays or TensorSpecs, and statics), cached."""
        kwargs = dict(kwargs or {})
        try:
            key = (tuple(_key(a) for a in args),
                   tuple(sorted((k, _key(v)) for k, v in kwargs.items())), tuple(grid),
                   lnc_of(grid))
        except UnknownDtypeError as e:
            raise NKIError(f"kernel {self.func.__name__!r}: an argument has an unsupported dtype: "
                           f"{e}") from None
        try:
            hit = self._cache.get(key)
        except TypeError:
            raise NKIError(f"kernel {self.func.__name__!r}: static arguments must be hashable") \
                from None
        if hit is None:
            hit = self._cache[key] = trace_kernel(self.func, args, kwargs, grid)
        return hit

    @property
    def cache_size(self) -> int:
        return len(self._cache)

    def numpy_plan(self, grid: tuple[int, ...], args: Sequence[Any],
                   grid_key: Any = None) -> "NumpyLaunch | None":
        """The launch plan for positional NumPy arguments (``None`` if any argument is something
        else): found by shapes, dtypes and static values without building a trace key or binding
        the signature, so repeated small launches cost little more than the run itself."""
        try:
            key = (grid_key or grid, tuple([(a.shape, a.dtype) if type(a) is np.ndarray
                                else ("static", type(a), a) for a in args]))
            hit = self._numpy_plans.get(key)
        except TypeError:
            return None  # an unhashable static argument: the general path explains
        if hit is None:
            if not all(type(a) is np.ndarray or not _is_tensor_arg(a) for a in args):
                return None
            traced = self.trace(args, {}, grid)
            names = self.signature.bind(*args).arguments
            position = {n: i for i, n in enumerate(names)}
            hit = self._numpy_plans[key] = NumpyLaunch(
                traced, tuple(position[n] for n in traced.ir.inputs),
                tuple(position[n] for n in traced.ir.outputs) if traced.returns == "none" else (),
                traced.program)
        return hit


def _key(x: Any) -> Any:
    if _is_tensor_arg(x):
        spec = x if isinstance(x, TensorSpec) else TensorSpec.of(x)
        return ("tensor", spec.shape, spec.dtype)
    return ("static", type(x).__name__, x)


class Launch:
    """A kernel bound to a grid; calling it runs the kernel."""

    def __init__(self, kernel: Kernel, grid: tuple[int, ...]):
        self.kernel = kernel
        self.grid = grid
        #: The grid as launch plans are keyed: nl.nc(2) equals 2 but runs on two cores.
        self.grid_key = grid if all(type(g) is int for g in grid) else (grid, repr(grid))

    def _inline(self, caller: Builder, args: tuple, kwargs: dict) -> Any:
        """A kernel called from inside another kernel's trace runs as part of it: its body is
        traced into the caller's IR (same builder, same program ids, its tiles and HBM
        tensors the caller's), and it returns what its function returns. It runs in the
        caller's programs, so it takes no grid of its own (or exactly the caller's)."""
        if self.grid not in ((1,), caller.grid):
            raise caller.error(
                "nested kernel grid",
                f"kernel {self.kernel.func.__name__!r} launched on grid {list(self.grid)} inside "
                f"kernel {caller.name!r} (grid {list(caller.grid)}): a kernel called from another "
                "runs inline in the caller's programs; call it without a grid")
        try:
            self.kernel.signature.bind(*args, **kwargs)
        except TypeError as e:
            raise caller.error("wrong arguments",
                               f"kernel {self.kernel.func.__name__!r}: {e}") from None
        return traceable(self.kernel.func)(*args, **kwargs)

    def __call__(self, *args, **kwargs):
        if any_active():
            caller = current_or_none()
            if caller is not None and not caller.finished:
                return self._inline(caller, args, kwargs)
        if not kwargs:
            # NumPy arguments first: a plan only exists for calls whose tensors are all NumPy
            # arrays, so no framework's tensors can match one.
            plan = self.kernel.numpy_plan(self.grid, args, self.grid_key)
            if plan is not None:
                return plan.run(args)
        values = list(args) + list(kwargs.values())
        for accepts, run in _FRAMEWORKS:
            if accepts(values):
                return run(self.kernel, self.grid, args, kwargs)
        foreign = [type(a).__module__ for a in values
                   if _is_tensor_arg(a) and not isinstance(a, np.ndarray)]
        if foreign and _import_adapters(foreign):
            return self(*args, **kwargs)
        if foreign:
            raise NKIError(f"kernel {self.kernel.func.__name__!r}: no framework adapter for "
                           f"arguments of {sorted(set(foreign))}; pass NumPy arrays")
        return simulate(self, args, kwargs)


@dataclass
class NumpyLaunch:
    """A kernel traced for one grid and one set of NumPy argument shapes/dtypes, with where its
    inputs (and, for kernels that write their arguments, outputs) sit among the arguments."""

    traced: TracedKernel
    inputs: tuple[int, ...]
    outputs: tuple[int, ...]
    program: Program

    def run(self, args: Sequence[Any]):
        returns = self.traced.returns
        outs = Runner(self.program, [args[i] for i in self.inputs]).run()
        if returns == "single":
            return outs[0]
        if returns == "none":
            for i, out in zip(self.outputs, outs):
                args[i][...] = out
            return None
        return tuple(outs)


def simulate(launch: Launch, args: Sequence[Any], kwargs: dict[str, Any]):
    """Trace (cached) and run on the emulator with NumPy arrays; returns NumPy arrays."""
    traced = launch.kernel.trace(args, kwargs, launch.grid)
    params = launch.kernel.params
    if not kwargs and len(args) == len(params):
        named = dict(zip(params, args))
    else:
        named = launch.kernel.signature.bind(*args, **kwargs).arguments
    arrays = {k: v for k, v in named.items() if _is_tensor_arg(v)}
    inputs = [np.asarray(arrays[name]) for name in traced.ir.inputs]
    outs = run_kernel(traced.program, inputs)
    if traced.returns == "none":
        for name, out in zip(traced.ir.outputs, outs):
            target = arrays[name]
            if isinstance(target, np.ndarray):
                target[...] = out
        return None
    outs = [np.asarray(o) for o in outs]
    return outs[0] if traced.returns == "single" else tuple(outs)


def jit(func: Callable | None = None, *, mode: str = "auto", **_options):
    """Decorator: ``@nki.jit`` or ``@nki.jit(mode="auto")``."""
    if func is None:
        return lambda f: Kernel(f, mode)
    return Kernel(func, mode)


def simulate_kernel(kernel, *args, **kwargs):
    """Run ``kernel[grid]`` (or a kernel, as one instance) on the emulator with NumPy arrays."""
    launch = kernel if isinstance(kernel, Launch) else (
        Launch(kernel, (1,)) if isinstance(kernel, Kernel) else Launch(Kernel(kernel), (1,)))
    args = tuple(np.asarray(a) if _is_tensor_arg(a) else a for a in args)
    return simulate(launch, args, kwargs)


def _hardware_only(api: str) -> Callable:
    """``nki.benchmark``, ``nki.baremetal`` and ``nki.profile`` run on Trainium hardware only; here
    they decorate as on the SDK and explain on the call."""

    def decorator(func: Callable | None = None, **_options):
        def wrap(f: Callable) -> Callable:
            @functools.wraps(f)
            def refuse(*args, **kwargs):
                raise NKIError(f"nki.{api} needs Trainium hardware; run kernel {f.__name__!r} on "
                               "the emulator with nki.simulate_kernel or by calling it with "
                               "NumPy arrays")
            return refuse
        return wrap if func is None else wrap(func)

    decorator.__name__ = api
    return decorator


benchmark = _hardware_only("benchmark")
baremetal = _hardware_only("baremetal")
profile = _hardware_only("profile")
