"""Executing torch_xla's pending lazy tensors on the emulator: our `mark_step` and `.cpu()`.

Why: torch_xla records operations on XLA tensors as a lazy graph and runs it at `xm.mark_step()`
/ `torch_xla.sync()` / `.cpu()` on its own PJRT device. Here the same graph is taken out with
`LoweringContext` (HLO bytes plus the current value of every graph parameter), compiled by our
backend, run on the emulator, and the results are written back into the XLA tensors as device
data, exactly where torch_xla's own sync would have put them, so that the next step's graph starts
from them. A training loop therefore looks like::

    loss = loss_fn(model(x), y); loss.backward(); optimizer.step()
    neuron_customcall.torch_xla.mark_step(model, optimizer, loss)

Which tensors: `mark_step(*sources)` takes tensors, modules (parameters, their gradients and
buffers), optimizers (their parameters, gradients and state) and iterables of these. With no
source it finds every live XLA tensor with a pending graph by walking the garbage collector's
objects: convenient, but it costs time proportional to all Python objects (tens of milliseconds
in a process that imported torch), so pass the training state explicitly in a loop.

Functionalization: torch_xla wraps XLA tensors in FunctionalTensorWrapper, whose views are
regenerated from a shared base. Each tensor is synced before lowering and its new value committed
to the base after the write-back; otherwise a view taken in the next step (a weight's transpose
in `linear`) would still see the previous step's pending graph.
"""
from __future__ import annotations

import gc
import logging
import threading
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
import torch_xla
import torch_xla.runtime

import hlo
from neuron_customcall import backend
from neuron_customcall.torch_xla import custom_call
from neuron_customcall.torch_xla.tensors import device_data_to_numpy, from_numpy, numpy_to_device_data, to_numpy

log = logging.getLogger(__name__)
_X = torch_xla._XLAC

#: The module name our lowering gives a graph: torch_xla's own sync names its graphs so
#: (``SyncTensorsGraph.<n>``), and debug dumps, artifacts and errors are named after the module;
#: LoweringContext's default would be ``PyLoweringContext.<n>``, which no user recognises.
GRAPH_NAME = "SyncTensorsGraph"


def lowering_context() -> Any:
    """A torch_xla LoweringContext whose module is named as torch_xla's own sync names it."""
    return _X.lowering.LoweringContext(GRAPH_NAME)


def is_xla(t: Any) -> bool:
    return isinstance(t, torch.Tensor) and t.device.type == "xla"


def _tensors_of(source: Any) -> Iterable[torch.Tensor]:
    if isinstance(source, torch.Tensor):
        yield source
    elif isinstance(source, torch.nn.Module):
        for p in source.parameters():
            yield p
            if p.grad is not None:
                yield p.grad
        yield from source.buffers()
    elif isinstance(source, torch.optim.Optimizer):
        for group in source.param_groups:
            for p in group["params"]:
                yield p
                if p.grad is not None:
                    yield p.grad
        for state in source.state.values():
            yield from (v for v in state.values() if isinstance(v, torch.Tensor))
    elif isinstance(source, dict):
        for v in source.values():
            yield from _tensors_of(v)
    elif isinstance(source, Iterable) and not isinstance(source, (str, bytes)):
        for item in source:
            yield from _tensors_of(item)


def live_tensors() -> list[torch.Tensor]:
    """Every XLA tensor reachable as a Python object (slow: walks all objects; see module doc)."""
    found = []
    for obj in gc.get_objects():
        # torch_xla's lazy tensors are plain tensors or parameters; subclasses (FakeTensor,
        # FunctionalTensor, ...) are tracing artefacts whose attributes may not even be readable.
        # Checking the exact type never triggers lazy modules' __class__ / __getattr__ hooks.
        if type(obj) in _LAZY_TENSOR_TYPES and obj.device.type == "xla":
            found.append(obj)
    return found


_LAZY_TENSOR_TYPES = (torch.Tensor, torch.nn.Parameter)


def _with_bases(tensors: Iterable[torch.Tensor]) -> Iterable[torch.Tensor]:
    """Each view's base before the view: a view is written back by regenerating it from its
    materialised base (see `write_back`), never by pushing its value into a stale base."""
    for t in tensors:
        if isinstance(t, torch.Tensor) and t._is_view() and t._base is not None:
            yield t._base
        yield t


def pending(sources: Sequence[Any]) -> list[torch.Tensor]:
    """The XLA tensors among `sources` whose values are a pending graph, each once."""
    candidates = _tensors_of(sources) if sources else live_tensors()
    seen: set[int] = set()
    unique = []
    for t in _with_bases(candidates):
        if not is_xla(t):
            continue
        tid = _X._xla_get_tensor_id(t)
        if tid in seen:
            continue
        seen.add(tid)
        unique.append(t)
    # One call for all: it is per call, not per tensor, that it costs.
    return [t for t, need in zip(unique, _X._check_tensor_need_materialization(unique)) if need]


def _sync_views(tensors: Sequence[torch.Tensor]) -> None:
    for t in tensors:
        if torch._is_functional_tensor(t):
            torch._functionalize_sync(t)


@dataclass(frozen=True)
class _Graph:
    """What one lowering taught about the graphs of one torch_xla graph hash."""

    order: tuple[int, ...] | None  # parameter number of each device-data node; None: lower every time
    signatures: frozenset[tuple] = frozenset()  # its custom-calls' operand signatures (custom_call.py)


_GRAPHS: OrderedDict[bytes, _Graph] = OrderedDict()
_GRAPHS_SIZE = 4 * backend.MEMO_SIZE
_GRAPHS_LOCK = threading.Lock()


def compile_graph(tensors: Sequence[torch.Tensor], *, flags: Any = None,
                  cache: backend.CacheSetting = None) -> tuple[Any, list[np.ndarray]]:
    """The compiled graph that computes `tensors` (a `backend` compile result, whose `.executable`
    runs on the emulator) and its inputs' current values, in parameter order.

    Separate from `execute` for callers that run the graph themselves: profiling it, or timing
    the emulator without the framework's tracing. Does not touch the tensors.

    A graph met before (same torch_xla graph hash, which is how torch_xla's own compile cache
    knows graphs) is not lowered again: its executable comes from the backend's memo and its
    inputs straight from the graph's device-data nodes. The hash ignores custom-calls'
    backend_config, so this holds only while the graph's kernels are unambiguous (see
    custom_call.py); otherwise the graph is lowered with LoweringContext every time.
    """
    tensors = list(tensors)
    _sync_views(tensors)
    # torch_xla's own executions are asynchronous: a tensor it materialised may still hold a
    # placeholder without a buffer, and reading parameter values from one crashes the process.
    _X._xla_wait_device_ops(devices=[])
    graph_hash = _graph_hash(tensors)
    known = _GRAPHS.get(graph_hash) if graph_hash is not None else None
    if known is not None and known.order is not None and not custom_call.ambiguous(known.signatures):
        compiled = backend.cached(("torch_xla", graph_hash), flags)
        if compiled is not None:
            _, data = _X._get_tensors_xla_device_data_node(tensors)
            if len(data) == len(known.order):
                inputs: list[Any] = [None] * len(data)
                for k, value in zip(known.order, device_data_to_numpy(data)):
                    inputs[k] = value
                return compiled, inputs
    ctx = lowering_context()
    ctx.build(tensors)
    params = ctx.parameter_id_tensor_mapping()
    inputs = [to_numpy(params[i]) for i in range(len(params))]
    raw = ctx.hlo()
    if graph_hash is None:
        return backend.compile_cached(raw, flags, cache=cache), inputs
    compiled = backend.compile_cached(raw, flags, cache=cache, alias=("torch_xla", graph_hash))
    if known is None:
        _remember(graph_hash, _describe(ctx, tensors, raw, len(params)))
    return compiled, inputs


def _graph_hash(tensors: list[torch.Tensor]) -> bytes | None:
    """torch_xla's hash of the graph computing `tensors`, or None when it does not describe what
    LoweringContext builds: the hash leaves out tensors that are not pending and repeats."""
    if not all(_X._check_tensor_need_materialization(tensors)):
        return None
    if len({_X._xla_get_tensor_id(t) for t in tensors}) != len(tensors):
        return None
    return _X._get_graph_hash(tensors)


def _describe(ctx: Any, tensors: list[torch.Tensor], raw: bytes, count: int) -> _Graph:
    """How to take the inputs of a graph from its device-data nodes without lowering it, and the
    operand signatures of its custom-calls; `order` None when either can not be told."""
    _, data = _X._get_tensors_xla_device_data_node(tensors)
    try:
        order = tuple(ctx.tensor_parameter_id(d) for d in data)
    except RuntimeError:  # a device-data node that is not a parameter
        return _Graph(None)
    if sorted(order) != list(range(count)):
        return _Graph(None)
    configs = []
    proto, _ = hlo.read_module_proto(raw)
    for computation in proto.computations:
        for inst in computation.instructions:
            if inst.opcode == "custom-call":
                if inst.HasField("backend_config_payload"):
                    configs.append(None)
                    continue
                try:
                    configs.append(inst.backend_config.decode("utf-8"))
                except UnicodeDecodeError:
                    configs.append(None)
    signatures = None if None in configs else custom_call.operand_signatures(configs)
    if signatures is None:  # a custom-call built by hand (not tracked): the hash can not tell it
        log.debug("a graph holds a custom-call not emitted by custom_call.py: it is lowered every time")
        return _Graph(None)
    return _Graph(order, signatures)


def _remember(graph_hash: bytes, graph: _Graph) -> None:
    with _GRAPHS_LOCK:
        _GRAPHS[graph_hash] = graph
        while len(_GRAPHS) > _GRAPHS_SIZE:
            _GRAPHS.popitem(last=False)


def execute(tensors: Sequence[torch.Tensor], *, flags: Any = None, cache: backend.CacheSetting = None) -> list[np.ndarray]:
    """Runs the graph that computes `tensors` on the emulator and returns their values.

    Does not touch the tensors; `write_back` does.
    """
    compiled, inputs = compile_graph(tensors, flags=flags, cache=cache)
    outputs = compiled.executable.run(inputs)
    if len(outputs) != len(tensors):
        raise RuntimeError(f"graph of {len(tensors)} tensors returned {len(outputs)} outputs")
    return outputs


def write_back(tensors: Sequence[torch.Tensor], values: Sequence[np.ndarray]) -> None:
    """Makes each XLA tensor device data holding its value, as torch_xla's own sync does. The
    values are handed over (on the CPU device the tensors keep their memory: see
    `numpy_to_device_data`); the caller must not write to them afterwards.

    Bases first, committed to their functional storage, so that views and later views see the
    new value; then views, synced to the new base and given their value without a commit (a
    commit would record an update of the base through the view: a new pending graph). A view
    whose base is not among `tensors` is committed, leaving the base pending.
    """
    data = numpy_to_device_data(values, [str(t.device) for t in tensors])
    written: set[int] = set()
    views = []
    for t, d in zip(tensors, data):
        if t._is_view():
            views.append((t, d))
            continue
        _replace(t, d, commit=True)
        written.add(id(t))
    for t, d in views:
        base_written = t._base is not None and id(t._base) in written
        if base_written and torch._is_functional_tensor(t):
            torch._functionalize_sync(t)
        _replace(t, d, commit=not base_written)


def _replace(t: torch.Tensor, data: torch.Tensor, *, commit: bool) -> None:
    _X._replace_xla_tensor(t, data)
    if commit and torch._is_functional_tensor(t):
        torch._functionalize_commit_update(t)


def on_neuron_device(flags: Any = None, cache: backend.CacheSetting = None) -> bool:
    """True when torch_xla itself runs graphs on the emulator (``PJRT_DEVICE=NEURON``: the neuron
    PJRT plugin) and no per-call compile flags or cache were asked for: `mark_step` and `to_cpu`
    are then torch_xla's own sync and ``.cpu()``, one execution path. On PJRT_DEVICE=CPU (XLA:CPU
    can not run Neuron custom-calls) they take the graph out themselves, as described above."""
    return flags is None and cache is None and torch_xla.runtime.device_type() == "NEURON"


def mark_step(*sources: Any, tensors: Any = None, flags: Any = None, cache: backend.CacheSetting = None) -> int:
    """Executes the pending graphs of `sources` (tensors, modules, optimizers, iterables; none, or
    only None: every live XLA tensor) on the emulator and writes the results back. `tensors=` is
    one more source, for callers that spell it as a keyword. Returns how many tensors were
    materialised. On the neuron device this is ``torch_xla.sync()`` (every pending graph, as
    torch_xla tracks them: no walk over Python's objects), and the count is of `sources`' tensors."""
    given = tuple(s for s in (*sources, tensors) if s is not None)
    if on_neuron_device(flags, cache):
        count = len(pending(given)) if given else 0
        torch_xla.sync()
        return count
    tensors = pending(given)
    if not tensors:
        return 0
    write_back(tensors, execute(tensors, flags=flags, cache=cache))
    log.debug("materialised %d tensors on the emulator", len(tensors))
    return len(tensors)


def to_cpu(t: torch.Tensor, *, flags: Any = None, cache: backend.CacheSetting = None) -> torch.Tensor:
    """The value of `t` as a CPU tensor, computed on the emulator (the analogue of `t.cpu()`).

    A pending `t` is materialised in place, so later graphs start from its value.
    """
    if not is_xla(t):
        return t.detach().clone()
    if on_neuron_device(flags, cache) or not _X._check_tensor_need_materialization([t])[0]:
        return t.detach().cpu()
    (value,) = execute([t], flags=flags, cache=cache)
    write_back([t], [value])
    return from_numpy(np.array(value, copy=True))
