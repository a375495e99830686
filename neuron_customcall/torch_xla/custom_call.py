"""NKI kernels and C++ custom ops on torch tensors: on the XLA device each call becomes one HLO
custom-call with target ``AwsNeuronCustomNativeKernel`` and ``api_version=API_VERSION_UNSPECIFIED``
(as torch-neuronx emits), whose backend_config is the kernel descriptor (docs/backend-config.md).

* NKI: ``kernel[grid](xla_a, xla_b)`` goes through the torch op ``neuron::nki_call`` (registered
  here with ``torch.library.custom_op``): its XLA path emits the custom-call, its CPU path runs
  the kernel on the emulator, its fake implementation gives the traced output shapes so that
  ``torch.compile`` (one op in the graph), ``torch.export`` and AOTAutograd trace through. The
  op's argument is the kernel descriptor itself (serialised kernel IR, no pickle), so an exported
  ``.pt2`` holding one loads and runs in a new process.
* C++ ops: ``torch.ops.<lib>.<op>`` gets an ``XLA`` kernel next to its CPU and Meta ones; the
  shape function gives the result, the descriptor carries the library image.

Output shapes and dtypes come from the trace (NKI) or the shape function (C++).
"""
from __future__ import annotations

import logging
import threading
from typing import Any, Sequence

import numpy as np
import torch
import torch_xla

from emulator.kernel_exec import run_kernel
from neuron_customcall.cpp import loader, torch_ops
from neuron_customcall import torch_dtypes
from neuron_customcall.kernels import build, dtypes, references
from neuron_customcall.kernels.descriptor import TARGET, TensorSig, decode
from neuron_customcall.nki.jit import Kernel, kernel_by_id, register_framework
from neuron_customcall.torch_xla import cpu_device, exported
from neuron_customcall.torch_xla.tensors import from_numpy, to_numpy

log = logging.getLogger(__name__)
_X = torch_xla._XLAC

API_VERSION_UNSPECIFIED = 0
#: The custom-call's frontend attributes: none (one mapping for every call; torch_xla copies it).
_NO_ATTRIBUTES: dict[str, str] = {}

_HLO_TO_TORCH = torch_dtypes.BY_HLO


def custom_call(operands: Sequence[torch.Tensor], config: str, outputs: Sequence[Any]) -> list[torch.Tensor]:
    """One Neuron custom-call on XLA tensors; ``outputs`` are TensorSigs."""
    return emit(operands, Prepared(config, outputs))


class Prepared:
    """What emitting calls of one kernel needs, computed once: result shapes and torch dtypes, the
    call as `_record` keys it, and the config to emit (inline, or naming its image by hash)."""

    __slots__ = ("config", "shapes", "types", "call", "by_reference", "noted")

    def __init__(self, config: str, outputs: Sequence[Any], by_reference: str | None = None) -> None:
        self.config = config
        self.noted = False  # cpu_device.note_kernel has seen the config (it keeps every config it sees)
        self.shapes = [list(o.shape) for o in outputs]
        self.types = [_HLO_TO_TORCH[o.dtype] for o in outputs]
        self.call = (config, tuple(tuple(o.shape) for o in outputs), tuple(o.dtype for o in outputs))
        self.by_reference = by_reference


def emit(operands: Sequence[torch.Tensor], prepared: Prepared, signature: tuple | None = None) -> list[torch.Tensor]:
    """One Neuron custom-call on XLA tensors. The call is recorded by its inline config (the
    kernel's identity) and the operands' `signature` (shapes and dtypes: computed when not
    given), and emitted by reference when the prepared call has one and nothing in this process
    dumps torch_xla's HLO from C++ (exported.references_allowed)."""
    config = prepared.config
    if not prepared.noted:
        cpu_device.note_kernel(config)
        prepared.noted = True
    if signature is None:
        signature = tuple((tuple(t.shape), t.dtype) for t in operands)
    rank = _record(signature, prepared.call)
    if rank:
        operands = _distinguished(list(operands), rank, config)
    if prepared.by_reference is not None and exported.references_allowed():
        config = prepared.by_reference
    # torch_xla's binding takes any sequence and returns a fresh list.
    return _X._xla_custom_call(operands, TARGET, prepared.shapes, prepared.types, False, config,
                               API_VERSION_UNSPECIFIED, _NO_ATTRIBUTES)


# --- What torch_xla's graph hash can not see ----------------------------------------------------
# torch_xla hashes a custom-call node by its target and operands only: neither backend_config nor
# the output shapes enter the graph hash, and torch_xla's compile cache (on any PJRT device, the
# neuron plugin included) keys executables by that hash: two graphs that differ only in which
# kernel a custom-call runs would share the first one's executable. Every call emitted here is
# recorded by its operands' shapes and dtypes (the first place where two such graphs could differ
# has equal operands in both). The first call on an operand signature is emitted as it is; the
# k-th different one (config or output types) on the same signature gets one operand rewritten
# as ``x - sum(zeros(0, k))``: exactly x (x - 0 keeps -0.0, infinities and NaN), and a node whose
# hash holds k, so the graphs' hashes differ. lazy.compile_graph also lowers graphs holding such
# an ambiguous signature every time (it predates this; it also covers hand-built custom-calls).

_CALLS_ON: dict[tuple, list[tuple]] = {}  # operand signature -> its (config, output shapes, dtypes), in order
_SIGNATURES: dict[str, set[tuple]] = {}   # config -> the operand signatures it was emitted on
_AMBIGUOUS: set[tuple] = set()            # signatures that received two different calls
_RECORD_LOCK = threading.Lock()


def _record(signature: tuple, call: tuple) -> int:
    """Records the call; returns its rank among the different calls seen on `signature` (0: first)."""
    calls = _CALLS_ON.get(signature)
    if calls is not None and calls[0] == call:  # the steady state (a memoised config: compared by identity)
        return 0
    with _RECORD_LOCK:
        calls = _CALLS_ON.setdefault(signature, [])
        if call not in calls:
            calls.append(call)
        if len(calls) > 1:
            _AMBIGUOUS.add(signature)
        _SIGNATURES.setdefault(call[0], set()).add(signature)
        return calls.index(call)


def _distinguished(operands: list[torch.Tensor], rank: int, config: str) -> list[torch.Tensor]:
    """`operands` with the smallest non-boolean one made ``x - sum(zeros(0, rank))`` (see above)."""
    numeric = [k for k, t in enumerate(operands) if t.dtype != torch.bool]
    if not numeric:
        raise NotImplementedError(
            f"kernel {decode(config).name!r}: a second Neuron kernel on the same boolean-only operand "
            "signature in one torch_xla process (torch_xla's graph cache can not tell such calls apart)")
    k = min(numeric, key=lambda j: operands[j].numel())
    x = operands[k]
    operands[k] = x - torch.zeros((0, rank), dtype=x.dtype, device=x.device).sum(dtype=x.dtype)
    return operands


def operand_signatures(configs: Sequence[str]) -> frozenset[tuple] | None:
    """The operand signatures the custom-call `configs` were emitted on; None when one of them
    was not emitted through `custom_call` (built by hand, e.g. with stablehlo_custom_call)."""
    found: set[tuple] = set()
    for config in configs:
        signatures = _SIGNATURES.get(config)
        if signatures is None:
            return None
        found |= signatures
    return frozenset(found)


def ambiguous(signatures: frozenset[tuple]) -> bool:
    """True when one of `signatures` has received more than one call (config or output types)."""
    return not _AMBIGUOUS.isdisjoint(signatures)


# --- NKI -----------------------------------------------------------------------------------------
# The op carries the kernel itself: its second argument is the call's backend_config (the kernel
# descriptor, whose payload is the serialised kernel IR: docs/backend-config.md), a string torch
# keeps in FX graphs and writes into .pt2 files. An exported program therefore runs in any process
# that imported this adapter, without the kernel's Python source (it used to hold an index into a
# list of this process's traces). Calls traced here are memoised by their config; a config met
# first in a loaded graph is decoded once. Only NKI descriptors are accepted: a graph read from a
# file must not smuggle native (GpSimd) code in through this op.

_CALLS: dict[str, build.NkiCall] = {}
_LOCK = threading.Lock()


def _key_of(call: build.NkiCall) -> str:
    """The op argument naming `call`: its config, remembered so that the op finds the trace."""
    if _CALLS.get(call.config) is not call:
        with _LOCK:
            _CALLS[call.config] = call
    return call.config


def _call_of(config: str) -> build.NkiCall:
    call = _CALLS.get(config)
    if call is None:
        call = build.nki_call_from_config(config)
        with _LOCK:
            call = _CALLS.setdefault(config, call)
    return call


@torch.library.custom_op("neuron::nki_call", mutates_args=())
def nki_call_op(args: list[torch.Tensor], config: str) -> list[torch.Tensor]:
    """Runs the NKI kernel of `config` on its operands: a custom-call on XLA, the emulator on CPU."""
    call = _call_of(config)
    xla = next((a.device for a in args if a.device.type == "xla"), None)
    if xla is not None:
        # A tensor the traced function made itself (torch.ones(...) inside torch.compile) is a
        # CPU constant of the graph beside XLA arguments: it joins them on the device.
        return custom_call([a if a.device == xla else a.to(xla) for a in args], call.config, call.outputs)
    outs = run_kernel(call.traced.program, [to_numpy(a) for a in args])
    device = args[0].device if args else torch.device("cpu")
    return [from_numpy(np.array(o, copy=True)).to(device) for o in outs]


@nki_call_op.register_fake
def _nki_call_fake(args: list[torch.Tensor], config: str) -> list[torch.Tensor]:
    call = _call_of(config)
    device = args[0].device if args else torch.device("cpu")
    return [torch.empty(o.shape, dtype=_HLO_TO_TORCH[o.dtype], device=device) for o in call.outputs]


# --- Autograd: a kernel has no derivative we could compute --------------------------------------
# Without a formula torch refuses neuron::nki_call as soon as an input requires grad, and
# AOTAutograd traces the backward of every graph whose inputs do (a torch.compile'd module with
# trainable parameters), so even inference failed. The formula registered here makes the backward
# one call of neuron::nki_no_backward: its fake gives zero-shaped results, so tracing succeeds,
# and running it (a backward that is really taken) raises an error naming the kernel and the fix.
# Never a silent zero gradient. Kernels with a backward go through torch.autograd.Function.


@torch.library.custom_op("neuron::nki_no_backward", mutates_args=())
def nki_no_backward(inputs: list[torch.Tensor], config: str) -> list[torch.Tensor]:
    """Stands for the gradient of NKI call `config` with respect to `inputs`: raises when run."""
    raise NotImplementedError(
        f"NKI kernel {decode(config).name!r} has no backward, and a gradient through it was asked for. "
        "Pair it with a backward (neuron_customcall.torch_xla.differentiable, or a torch.autograd.Function: "
        "docs/frameworks.md), or call it under torch.no_grad() or on detached tensors")


@nki_no_backward.register_fake
def _nki_no_backward_fake(inputs: list[torch.Tensor], config: str) -> list[torch.Tensor]:
    return [torch.empty_like(t) for t in inputs]


def _setup_context(ctx: Any, inputs: tuple, output: Any) -> None:
    args, config = inputs
    ctx.config = config
    ctx.save_for_backward(*args)


def _backward(ctx: Any, grads: list[torch.Tensor]) -> tuple:
    return list(torch.ops.neuron.nki_no_backward(list(ctx.saved_tensors), ctx.config)), None


nki_call_op.register_autograd(_backward, setup_context=_setup_context)


@nki_call_op.register_vmap
def _nki_call_vmap(info: Any, in_dims: tuple, args: list[torch.Tensor], key: str) -> tuple:
    """torch.func.vmap: the kernel batched along a new grid axis (one call), else one call per
    batch element (kernels/batching.py)."""
    dims = in_dims[0]
    size = info.batch_size
    stacked = [a.movedim(d, 0) if d is not None else a.expand(size, *a.shape) for a, d in zip(args, dims)]
    whole = build.batched_nki_call(_call_of(key), size)
    if whole is not None:
        outs = torch.ops.neuron.nki_call([a.contiguous() for a in stacked], _key_of(whole))
    else:
        rows = [torch.ops.neuron.nki_call([a[i] for a in stacked], key) for i in range(size)]
        outs = [torch.stack(col) for col in zip(*rows)]
    return list(outs), [0] * len(outs)


def _spec(x: Any) -> tuple:
    """A hashable, dynamo-constant description of an argument: shape and dtype, or the value."""
    if isinstance(x, torch.Tensor):
        r = torch_dtypes.TORCH.get(x.dtype)
        return ("tensor", tuple(x.shape), r.hlo if r is not None else str(x.dtype))
    return ("static", x)


def _tracing_spec(spec: tuple) -> Any:
    if spec[0] == "static":
        return spec[1]
    if spec[2] not in dtypes.HLO_TO_NKI:
        raise dtypes.KernelDtypeError(f"a torch tensor of element type {spec[2]} can not be an NKI "
                                      f"kernel argument (NKI types: {sorted(dtypes.HLO_TO_NKI)})")
    return build.nki_spec(spec[1], spec[2])


@torch._dynamo.assume_constant_result
def _prepare(kernel_id: int, grid: tuple[int, ...], args: tuple, kwargs: tuple) -> tuple:
    """Traces the kernel (cached) and says how to call it: (the op's config argument, operand positions in
    args + kwargs values, how results return, positions of inputs written by a kernel returning
    nothing). Under torch.compile dynamo runs this once while tracing and keeps the result as a
    constant, so the graph holds only ``neuron::nki_call``: the NKI tracer is not torch code."""
    kernel = kernel_by_id(kernel_id)
    names = list(kernel.signature.bind(*range(len(args)), **{k: 0 for k, _ in kwargs}).arguments)
    position = {name: (k if k < len(args) else len(args) + [n for n, _ in kwargs].index(name))
                for k, name in enumerate(names)}
    call = build.nki_call(kernel, grid, [_tracing_spec(a) for a in args],
                          {k: _tracing_spec(v) for k, v in kwargs})
    written = tuple(position[n] for n in call.traced.ir.outputs) if call.returns == "none" else ()
    return _key_of(call), tuple(position[n] for n in call.operands), call.returns, written


def nki_call(kernel: Kernel, grid: tuple[int, ...], args: Sequence[Any], kwargs: dict[str, Any]) -> Any:
    """A kernel launched on torch tensors (XLA, CPU, meta or fake): results as the kernel returns
    them. A kernel that writes its inputs and returns nothing gets the new values written back.
    Traceable by dynamo (torch.compile puts one ``neuron::nki_call`` in the graph)."""
    values = list(args) + list(kwargs.values())
    key, operands, returns, written = _prepare(
        id(kernel), tuple(grid), tuple(_spec(a) for a in args), tuple((k, _spec(v)) for k, v in kwargs.items()))
    outs = torch.ops.neuron.nki_call([values[i] for i in operands], key)
    if returns == "none":
        for i, value in zip(written, outs):
            values[i].copy_(value)
        return None
    return outs[0] if returns == "single" else tuple(outs)


def _accepts(args: Sequence[Any]) -> bool:
    return any(isinstance(a, torch.Tensor) for a in args)


register_framework(_accepts, nki_call)


# --- C++ custom ops -----------------------------------------------------------------------------

#: Argument signatures of one C++ op whose custom-call is kept (past it the memo starts over).
CPP_CALLS_KEPT = 256


def _argument_key(kind: str, a: Any) -> tuple:
    """What an argument contributes to its call's config: a tensor's dtype and shape, a scalar's
    type and repr (repr tells -0.0 from 0.0, which compare equal)."""
    return (a.dtype, tuple(a.shape)) if kind == "tensor" else (type(a).__name__, repr(a))


def _xla_kernel(library: str, name: str):
    # Argument signature -> (library, prepared call). Why: the op's shape and config are
    # memoised further down, but reaching them (argument descriptions, cache keys) cost about
    # half of a ~60 us custom-call in a training step's trace, four calls a step. The prepared
    # call names the library image by hash (kernels/references.py): torch_xla copies the config
    # into its IR node on every call, and the inline image made that copy ~20 us of each call.
    # The value also keeps the operands' signature that emit records.
    # An op whose arguments are all tensors (the usual case) keys a call by the tensors' dtypes and
    # shapes directly: torch.Size is a hashable tuple.
    memo: dict[tuple, tuple[loader.LoadedLibrary, Prepared, tuple]] = {}
    current: list[Any] = [None]  # (library, its op descriptor, whether every argument is a tensor) of the latest call

    def kernel(*args: Any) -> torch.Tensor:
        loaded = loader.get(library)
        cur = current[0]
        if cur is None or cur[0] is not loaded:  # a reloaded library is a new LoadedLibrary
            op = loaded.descriptor.op(name)
            cur = current[0] = (loaded, op, all(kind == "tensor" for kind in op.args))
        op = cur[1]
        kinds = op.args
        if cur[2] and len(args) == len(kinds):
            key = tuple([(a.dtype, a.shape) for a in args])
        else:
            key = tuple([_argument_key(kind, a) for kind, a in zip(kinds, args)])
        hit = memo.get(key)
        if hit is None or hit[0] is not loaded:
            specs = [torch_ops.tensor_spec(a, op) if kind == "tensor" else a for kind, a in zip(kinds, args)]
            out = loaded.host.shape(op, specs)
            config = build.gpsimd_config(op, loaded.host.path, specs, out)
            sig = TensorSig("out", tuple(out.shape), dtypes.gpsimd_to_hlo(out.dtype))
            signature = tuple((tuple(a.shape), a.dtype) for kind, a in zip(kinds, args) if kind == "tensor")
            if len(memo) >= CPP_CALLS_KEPT:
                memo.clear()
            hit = memo[key] = (loaded, Prepared(config, [sig], references.by_reference(config)), signature)
        tensors = args if cur[2] else [a for kind, a in zip(kinds, args) if kind == "tensor"]
        return emit(tensors, hit[1], hit[2])[0]

    kernel.__name__ = f"{library}_{name}_xla"
    return kernel


def register_xla(lib: torch.library.Library, library: str, name: str) -> None:
    """Gives torch.ops.<library>.<name> its XLA kernel (called for every op registered)."""
    lib.impl(name, _xla_kernel(library, name), "XLA")
    log.debug("registered XLA kernel of %s::%s", library, name)


torch_ops.add_registrar(register_xla)
