"""The `torch.compile` backend "neuron": FX graphs lowered through torch_xla, run on the emulator.

Why through torch_xla: it already lowers every aten op to HLO. For each call signature (tensor
shapes and dtypes, other argument values) the FX graph is run once, lazily, on XLA copies of the
arguments; LoweringContext gives the HLO and tells which entry parameter is which argument (the
remaining parameters are constants torch_xla made device data, such as Python scalars). Later
calls with that signature skip torch_xla entirely: CPU tensors -> NumPy -> emulator -> CPU tensors.

Training goes through AOTAutograd, which hands us functional forward and backward graphs (no
in-place updates of inputs; mutations come back as outputs that AOTAutograd applies), so running
them away from the caller's tensors is sound.

Limits: randomness inside a graph (dropout) is frozen at trace time, because torch_xla makes the
RNG seed a device-data constant; a graph whose outputs include CPU tensors it created itself
returns those trace-time values.
"""
from __future__ import annotations

import logging
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
import torch_xla

from neuron_customcall import backend
from neuron_customcall.torch_xla.lazy import lowering_context
from neuron_customcall.torch_xla.tensors import from_numpy, to_numpy

log = logging.getLogger(__name__)
_X = torch_xla._XLAC
BACKEND_NAME = "neuron"
_FROM_GRAPH = object()  # marks an output the executable computes (None is a real output value)


@dataclass(frozen=True)
class _Trace:
    """How a call with one signature maps to the compiled graph."""

    sources: tuple[int | np.ndarray, ...]   # per entry parameter: argument index or constant value
    outputs: tuple[Any, ...]                # per output: _FROM_GRAPH or a fixed value (None, ...)
    returns_tuple: bool
    executable: Any


def _signature(args: Sequence[Any]) -> Hashable:
    parts = []
    for a in args:
        if isinstance(a, torch.Tensor):
            parts.append(("T", tuple(a.shape), a.dtype))
        else:
            parts.append(("V", type(a).__name__, a if isinstance(a, Hashable) else repr(a)))
    return tuple(parts)


class NeuronFxGraph:
    """One FX graph compiled for the emulator; called with CPU tensors, returns CPU tensors."""

    def __init__(self, gm: torch.fx.GraphModule, *, flags: Any = None, cache: backend.CacheSetting = None) -> None:
        self._gm = gm
        self._flags = flags
        self._cache = cache
        self._traces: dict[Hashable, _Trace] = {}

    @property
    def trace_count(self) -> int:
        return len(self._traces)

    def __call__(self, *args: Any) -> Any:
        key = _signature(args)
        trace = self._traces.get(key)
        if trace is None:
            trace = self._trace(args)
            self._traces[key] = trace
        inputs = [to_numpy(args[s]) if isinstance(s, int) else s for s in trace.sources]
        values = iter(trace.executable.run(inputs))
        outs = [from_numpy(next(values)) if fixed is _FROM_GRAPH else fixed for fixed in trace.outputs]
        return tuple(outs) if trace.returns_tuple else outs[0]

    def _trace(self, args: Sequence[Any]) -> _Trace:
        device = torch_xla.device()
        xla_args = [_stand_in(a).to(device) if isinstance(a, torch.Tensor) else a for a in args]
        with torch.no_grad():
            result = self._gm(*xla_args)
        returns_tuple = isinstance(result, (tuple, list))
        results = list(result) if returns_tuple else [result]
        on_xla = [isinstance(r, torch.Tensor) and r.device.type == "xla" for r in results]
        graph_outputs = [r for r, x in zip(results, on_xla) if x]
        outputs = tuple(_FROM_GRAPH if x else r for r, x in zip(results, on_xla))
        _X._xla_wait_device_ops(devices=[])  # see lazy.compile_graph: no placeholder may be read
        ctx = lowering_context()
        ctx.build(graph_outputs)
        params = ctx.parameter_id_tensor_mapping()
        by_param: dict[int, int] = {}
        for i, a in enumerate(xla_args):
            if isinstance(a, torch.Tensor):
                pid = ctx.tensor_parameter_id(a)
                if pid >= 0:
                    by_param.setdefault(pid, i)
        sources = tuple(by_param[p] if p in by_param else to_numpy(params[p]) for p in range(len(params)))
        compiled = backend.compile_cached(ctx.hlo(), self._flags, cache=self._cache)
        log.debug("traced FX graph: %d parameters (%d arguments), %d outputs",
                  len(sources), len(by_param), len(graph_outputs))
        return _Trace(sources, outputs, returns_tuple, compiled.executable)


def _stand_in(t: torch.Tensor) -> torch.Tensor:
    """The tensor to trace with in place of argument `t`.

    torch_xla folds 0-d tensors holding 0 or 1 into the graph as constants ("special scalars"),
    which would freeze such an argument (BatchNorm's num_batches_tracked, a step counter) at its
    trace-time value; a 0-d number is therefore traced as 2, which stays a parameter. The value
    does not matter otherwise: the trace only yields the graph, never results.
    """
    t = t.detach()
    if t.dim() == 0 and t.dtype != torch.bool:
        return torch.full((), 2, dtype=t.dtype)
    return t


def compile_fx(gm: torch.fx.GraphModule, example_inputs: Sequence[Any]) -> Callable[..., Any]:
    """A compiler for AOTAutograd's forward and backward graphs, in its boxed calling convention
    (one list argument, which AOTAutograd may free early)."""
    from torch._functorch.aot_autograd import make_boxed_func

    return make_boxed_func(NeuronFxGraph(gm))


def _make_backend() -> Callable[..., Any]:
    from torch._dynamo.backends.common import aot_autograd

    return aot_autograd(fw_compiler=compile_fx, bw_compiler=compile_fx)


neuron_backend = _make_backend()


def register() -> None:
    """Makes `torch.compile(model, backend="neuron")` find this backend (idempotent)."""
    from torch._dynamo import list_backends, register_backend

    if BACKEND_NAME not in list_backends(exclude_tags=()):
        register_backend(compiler_fn=neuron_backend, name=BACKEND_NAME)


register()
