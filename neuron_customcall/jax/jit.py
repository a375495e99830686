"""`neuron_customcall.jax.jit`: jax.jit's calling convention, our compiler and emulator underneath.

One execution path: when JAX has the neuron PJRT device (the plugin is installed and
`JAX_PLATFORMS` allows it), `jit(f)` IS `jax.jit(f)` run on that device (`jax.default_device` of
its first NeuronCore, so NumPy and other uncommitted arguments go there): JAX dispatches, the
plugin compiles with our backend and runs on the emulator, results are JAX arrays on the
NeuronCore. Per-call compile `flags` or a `cache` setting, which jax.jit has no way to carry,
keep the direct path below, as does a process without the device (`JAX_PLATFORMS=cpu`, where
plain jax.jit would run kernels through host callbacks on XLA:CPU instead).

The direct path: JAX only has to *lower* the function
(jax.jit(...).lower gives the HLO module and the pytree structure of inputs and outputs), and the
executable comes from neuron_customcall.backend. Each distinct call signature (shapes, dtypes,
weak types, pytree structure, static argument values) is traced once; later calls with that
signature go straight from the flattened leaves to the executable.

The per-call path is kept short because small graphs are all fixed cost: the signature key is
built from the leaves' shapes, dtypes and weak types (no lowering, no hashing of the HLO); inputs
are NumPy views of the JAX arrays; the executable copies no output for the sake of mutability
(`Executable.run(owned=False)`: outputs shared with each other or read-only stay so, as JAX
arrays are never written; only those sharing memory with a writeable NumPy input are copied);
and the outputs become JAX arrays through one precomputed aval and sharding per output
(`_OutputPut`): what `jax.device_put` does for a NumPy array, without its per-call dispatch
(about 20 us per output). jaxlib's CPU client takes a 64-byte aligned array over without a copy
(read-only ones too, every dtype but the packed sub-byte ones) and copies anything else; DLPack
(`jax.dlpack.from_dlpack`) has the same rule and refuses read-only arrays. The emulator's arrays
come from malloc (16-byte aligned), so outputs of 128 KB or more are copied once by us into
aligned memory (recycled blocks when large), which jaxlib takes over: jaxlib's own copy is
slower (64 MB: 32 ms against 9 ms). Nothing can write memory a result shares: JAX arrays are
immutable, the emulator copies outputs that share memory with writeable inputs, and outputs
sharing memory with read-only NumPy arguments (whose owner may still write them) are copied.

Input order: the lowered module's entry parameters are JAX's hoisted constants (`const_args`)
followed by the flattened dynamic arguments, with unused arguments dropped (`kept_var_idx` counts
over both). Donation (`donate_argnums`) is accepted and passed to JAX's lowering; the emulator
always returns fresh arrays, so donated inputs stay readable.
"""
from __future__ import annotations

import functools
import inspect
import logging
import math
from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import jax
import numpy as np

from jax._src.config import default_device as _default_device

from neuron_customcall import backend
from neuron_customcall.jax.primitive import neuron_lowering

log = logging.getLogger(__name__)

try:
    from jax._src.array import ArrayImpl as _ArrayImpl  # the type of concrete JAX arrays
except ImportError:  # another jax: every read-only input is checked for sharing (slower, as safe)
    _ArrayImpl = None


#: jaxlib's CPU client takes a host array over without a copy (a zero-copy buffer that keeps the
#: NumPy array referenced until the JAX array is freed) only when its data is this aligned;
#: anything else it copies, on a worker thread. DLPack (`jax.dlpack.from_dlpack`) needs the same
#: alignment and refuses read-only arrays, which `Executable.run(owned=False)` returns.
_XLA_CPU_ALIGN = 64
#: Outputs of at least this size that are not aligned are copied by us into aligned memory that
#: jaxlib then takes over: faster than jaxlib's own copy from 128 KB up (measured with
#: block_until_ready: 256 KB 18 -> 14 us, 4 MB 385 -> 333 us, 64 MB 32 -> 9 ms on a recycled
#: block), slower below (64 KB: 7 -> 10 us).
_OWN_COPY_MIN_BYTES = 128 * 1024


def _aligned_copy(a: np.ndarray) -> np.ndarray:
    """A C-contiguous copy of `a` in 64-byte aligned memory that nothing else refers to.

    Big copies go to a block of the emulator's recycling pool (emulator.kernel_exec.buffers): a
    fresh 64 MB array costs 8 ms of page faults. The pool hands a block out again only when
    `sys.getrefcount` shows nobody refers to it, and the JAX array made of the copy keeps the
    copy, whose base is the block, referenced until it is freed."""
    from emulator.kernel_exec import buffers

    out = buffers.aligned_empty(a.shape, a.dtype, _XLA_CPU_ALIGN)
    np.copyto(out, a)
    return out


def _settled(a: np.ndarray, own_copy: bool, foreign: Sequence[np.ndarray]) -> np.ndarray:
    """`a` as it may be handed to jaxlib, which takes 64-byte aligned arrays over without a copy.

    An output of the emulator run with owned=False is immutable to everyone but may be a view
    of a read-only input; a NumPy input is not a JAX array, so whoever owns its memory may still
    write to it (a read-only view of a bytearray): an output sharing memory with one of those
    (`foreign`) is copied. Large unaligned outputs (`own_copy`) are copied into aligned memory
    here, faster than jaxlib's copy; aligned ones and small ones go as they are."""
    if foreign and any(np.may_share_memory(a, f) for f in foreign):
        return _aligned_copy(a)
    if own_copy and (a.ctypes.data % _XLA_CPU_ALIGN or not a.flags.c_contiguous):
        return _aligned_copy(a)
    return a


class _OutputPut:
    """NumPy outputs to uncommitted JAX arrays on the default device, as `jax.device_put(outputs)`
    makes them: the same avals, sharding and host-buffer semantics (jaxlib's batched_device_put,
    which takes a 64-byte aligned array over without a copy, as jax.device_put does), with the
    avals built once per signature. Large unaligned outputs are copied into aligned memory
    first (`_settled`). 64-bit and complex outputs (jax.device_put canonicalises their dtype by
    the x64 setting of the moment), calls under `jax.default_device`, and jax versions without
    these internals go through jax.device_put."""

    def __init__(self, out_shapes: Sequence[tuple[tuple[int, ...], np.dtype]]) -> None:
        self._plan: list[Any] | None = None  # per output: its aval, or None for jax.device_put
        # Per output: whether it is big enough for our own aligned copy; not for 64-bit outputs
        # (jax.device_put may convert them anyway) nor sub-byte types (jaxlib repacks them).
        self._own_copy = [math.prod(shape) * dtype.itemsize >= _OWN_COPY_MIN_BYTES and dtype.itemsize < 8
                          and dtype.kind != "c" and dtype.name not in _PACKED_DTYPES for shape, dtype in out_shapes]
        self._any_own_copy = any(self._own_copy)
        try:
            from jax._src import config, core
            from jax._src.lib import xla_client

            device = jax.local_devices()[0]
            self._sharding = jax.sharding.SingleDeviceSharding(device)
            self._devices = [device]
            self._batched_put = xla_client.batched_device_put
            self._default_device = config.default_device
            self._plan = [None if dtype.itemsize == 8 or dtype.kind == "c" else core.ShapedArray(shape, dtype)
                          for shape, dtype in out_shapes]
        except (ImportError, AttributeError, TypeError) as e:
            log.debug("outputs go through jax.device_put (%s: %s)", type(e).__name__, e)

    def __call__(self, outputs: Sequence[np.ndarray], foreign: Sequence[np.ndarray] = ()) -> list[Any]:
        """JAX arrays of `outputs`; `foreign`: read-only NumPy inputs of the call (see _settled)."""
        if foreign or self._any_own_copy:  # else nothing to settle (small graphs: 1 us saved)
            outputs = [_settled(x, own, foreign) for x, own in zip(outputs, self._own_copy)]
        plan = self._plan
        if plan is None or self._default_device.value is not None:
            return jax.device_put(outputs)
        put, sharding, devices = self._batched_put, self._sharding, self._devices
        return [jax.device_put(x) if aval is None else put(aval, sharding, [x], devices, False)
                for x, aval in zip(outputs, plan)]


#: ml_dtypes' sub-byte types: jaxlib packs them, so an aligned copy would only be copied again.
_PACKED_DTYPES = frozenset({"int2", "uint2", "int4", "uint4", "float4_e2m1fn"})


@dataclass(frozen=True)
class _Trace:
    """What one signature's lowering tells a call: how to build inputs, how to shape outputs."""

    in_tree: Any          # PyTreeDef of (dynamic args, dynamic kwargs)
    out_tree: Any         # PyTreeDef of the result
    const_args: tuple[np.ndarray, ...]
    kept: tuple[int, ...]  # indices into const_args + leaves, in parameter order
    dtypes: tuple[np.dtype, ...]  # per entry parameter
    executable: Any
    put: _OutputPut       # the outputs' conversion to JAX arrays


def _as_tuple(value: int | str | Iterable | None) -> tuple:
    if value is None:
        return ()
    if isinstance(value, (int, str)):
        return (value,)
    return tuple(value)


def _resolve_static(fun: Callable, argnums: tuple[int, ...], argnames: tuple[str, ...]) -> tuple[tuple[int, ...], tuple[str, ...]]:
    """Static positions and names as jax.jit infers them from each other and the signature."""
    try:
        sig = inspect.signature(fun)
    except (TypeError, ValueError):
        return argnums, argnames
    params = list(sig.parameters.values())
    names = set(argnames)
    nums = set(argnums)
    for i, p in enumerate(params):
        if p.kind not in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
            continue
        if i in nums and p.kind == p.POSITIONAL_OR_KEYWORD:
            names.add(p.name)
        if p.name in names:
            nums.add(i)
    return tuple(sorted(nums)), tuple(sorted(names))


def _leaf_signature(x: Any) -> Hashable:
    dtype = getattr(x, "dtype", None)
    if dtype is not None:  # dtype objects hash fast; str(dtype) costs more than the rest of a call
        return (x.shape, dtype, getattr(x, "weak_type", False))
    return (type(x).__name__,)  # Python scalars: weakly typed, their value is not part of the graph


_NO_STATIC = ((), ())  # _split's static part when the function has no static arguments

_UNKNOWN = object()
_plugin: Any = _UNKNOWN  # the neuron PJRT device's first NeuronCore, or None; looked up once


def plugin_device() -> Any:
    """The first NeuronCore of the neuron PJRT device when JAX has it, else None. JAX's backends
    are fixed once initialised, so this is looked up once per process."""
    global _plugin
    if _plugin is _UNKNOWN:
        try:
            devices = jax.devices("neuron")
        except RuntimeError:  # no such backend: the plugin is not installed or JAX_PLATFORMS excludes it
            devices = []
        _plugin = devices[0] if devices else None
    return _plugin


class NeuronJit:
    """A function compiled for the emulator; call it like the function (see `jit`)."""

    def __init__(self, fun: Callable, *, static_argnums: Any = None, static_argnames: Any = None,
                 donate_argnums: Any = None, flags: Any = None, cache: backend.CacheSetting = None) -> None:
        self._fun = fun
        nums, names = _resolve_static(fun, _as_tuple(static_argnums), _as_tuple(static_argnames))
        self._static_argnums = frozenset(nums)
        self._static_argnames = frozenset(names)
        self._plugin_traces = 0  # traces of `fun` by jax.jit on the neuron device (trace_count)
        self._jitted = jax.jit(self._counting(fun), static_argnums=nums or None, static_argnames=names or None,
                               donate_argnums=_as_tuple(donate_argnums) or None)
        self._flags = flags
        self._cache = cache
        self._traces: dict[Hashable, _Trace] = {}
        functools.update_wrapper(self, fun)

    def _counting(self, fun: Callable) -> Callable:
        """`fun`, counting the calls of jax's tracing on the neuron device (its body runs only
        then: jax.jit caches traces per signature)."""
        @functools.wraps(fun)
        def traced(*args: Any, **kwargs: Any) -> Any:
            if plugin_device() is not None:
                self._plugin_traces += 1
            return fun(*args, **kwargs)
        return traced

    @property
    def trace_count(self) -> int:
        """How many signatures have been lowered and compiled (tests check that calls reuse them);
        on the neuron device, how many times jax.jit traced the function."""
        if self._on_device() is not None:
            return self._plugin_traces
        return len(self._traces)

    def _on_device(self) -> Any:
        """The NeuronCore the call runs on through the plugin, or None for the direct path."""
        if self._flags is not None or self._cache is not None:
            return None
        return plugin_device()

    def _split(self, args: Sequence[Any], kwargs: dict[str, Any]) -> tuple[tuple, dict, Hashable]:
        if not self._static_argnums and not self._static_argnames:
            return args, kwargs, _NO_STATIC
        nums = {n + len(args) if n < 0 else n for n in self._static_argnums}  # negative: from the end
        dyn_args = tuple(a for i, a in enumerate(args) if i not in nums)
        dyn_kwargs = {k: v for k, v in kwargs.items() if k not in self._static_argnames}
        static = (tuple((i, a) for i, a in enumerate(args) if i in nums),
                  tuple(sorted((k, v) for k, v in kwargs.items() if k in self._static_argnames)))
        return dyn_args, dyn_kwargs, static

    def lower(self, *args: Any, **kwargs: Any) -> Any:
        """jax.jit's Lowered for these arguments (the HLO is `.compiler_ir('hlo')`), with kernel
        calls as Neuron custom-calls (not XLA:CPU's host callbacks)."""
        with neuron_lowering():
            return self._jitted.lower(*args, **kwargs)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        device = self._on_device()
        if device is not None:  # one execution path: jax.jit on the neuron device
            if _default_device.value is not None:  # the caller chose one (jax.default_device)
                return self._jitted(*args, **kwargs)
            with jax.default_device(device):
                return self._jitted(*args, **kwargs)
        dyn_args, dyn_kwargs, static = self._split(args, kwargs)
        leaves, treedef = jax.tree_util.tree_flatten((dyn_args, dyn_kwargs))
        key = (treedef, tuple(_leaf_signature(x) for x in leaves), static)
        trace = self._traces.get(key)
        if trace is None:
            trace = self._trace(args, kwargs, treedef)
            self._traces[key] = trace
        return self._run(trace, leaves)

    def _trace(self, args: Sequence[Any], kwargs: dict[str, Any], treedef: Any) -> _Trace:
        lowered = self.lower(*args, **kwargs)
        if lowered.in_tree != treedef:
            raise TypeError(f"unexpected input structure: JAX lowered {lowered.in_tree}, the call has {treedef}")
        lowering = lowered._lowering
        compile_args = lowering.compile_args
        const_args = tuple(np.asarray(c) for c in getattr(lowering, "const_args", ()) or ())
        n_all = len(const_args) + treedef.num_leaves
        kept = tuple(sorted(compile_args.get("kept_var_idx", range(n_all))))
        dtypes = tuple(np.dtype(a.dtype) for a in compile_args["global_in_avals"])
        if len(dtypes) != len(kept):
            raise RuntimeError(f"lowered module has {len(dtypes)} parameters but {len(kept)} kept inputs")
        proto = lowered.compiler_ir("hlo").as_serialized_hlo_module_proto()
        compiled = backend.compile_cached(proto, self._flags, cache=self._cache)
        log.debug("traced %s: %d parameters, %d outputs", getattr(self._fun, "__name__", self._fun),
                  len(kept), lowered.out_tree.num_leaves)
        executable = compiled.executable
        put = _OutputPut([(shape, dtype) for _, dtype, shape in executable.output_types])
        return _Trace(lowered.in_tree, lowered.out_tree, const_args, kept, dtypes, executable, put)

    @staticmethod
    def _run(trace: _Trace, leaves: list[Any]) -> Any:
        everything = (*trace.const_args, *leaves)
        inputs = [np.asarray(everything[i], dtype=dt) for i, dt in zip(trace.kept, trace.dtypes)]
        outputs = trace.executable.run(inputs, owned=False)  # JAX arrays are immutable: no copies for that
        if len(outputs) != trace.out_tree.num_leaves:
            raise RuntimeError(f"executable returned {len(outputs)} outputs, expected {trace.out_tree.num_leaves}")
        # Read-only NumPy arguments may be views of memory their owner can still write (the
        # emulator copies outputs that share memory with writeable inputs only): see _settled.
        # JAX arrays, hoisted constants included, are immutable (their exact type is tested:
        # isinstance(x, jax.Array) costs 1 us over a small graph's inputs).
        n_const = len(trace.const_args)
        foreign = [a for a, i in zip(inputs, trace.kept)
                   if i >= n_const and type(leaves[i - n_const]) is not _ArrayImpl and not a.flags.writeable]
        return jax.tree_util.tree_unflatten(trace.out_tree, trace.put(outputs, foreign))


def jit(fun: Callable | None = None, *, static_argnums: int | Sequence[int] | None = None,
        static_argnames: str | Iterable[str] | None = None, donate_argnums: int | Sequence[int] | None = None,
        flags: Any = None, cache: backend.CacheSetting = None) -> Any:
    """Like `jax.jit`, but compiled by neuron-customcall and run on the emulated NeuronCore.

    With the neuron PJRT device present this is `jax.jit` on its first NeuronCore (module
    docstring); otherwise our own dispatch. Pytrees in and out, static arguments (hashable, by
    position or name) and donation behave as in jax.jit; results are JAX arrays. `flags` are
    CompileFlags for our compiler; `cache` selects the compile cache (None: as the environment
    says, False: off, or a directory); either one takes the direct path. Usable as a decorator
    with or without arguments.
    """
    if fun is None:
        return functools.partial(jit, static_argnums=static_argnums, static_argnames=static_argnames,
                                 donate_argnums=donate_argnums, flags=flags, cache=cache)
    return NeuronJit(fun, static_argnums=static_argnums, static_argnames=static_argnames,
                     donate_argnums=donate_argnums, flags=flags, cache=cache)
