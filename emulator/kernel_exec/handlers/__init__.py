"""The instruction table: op name -> handler, one module per engine, named after it.

Where an instruction's handler lives is decided by its spec's engine
(emulator/kernel_ir/instructions.py): ``dma`` (load, store), ``vector`` (VectorE), ``scalar``
(ScalarE), ``tensor`` (TensorE), ``gpsimd`` (GpSimd) and ``none`` (bookkeeping: alloc). Each module
registers its handlers with ``EngineHandlers.register``; importing this package fails if a
specified instruction has no handler, so a spec without its handler never gets as far as a run.
"""

from __future__ import annotations

import importlib

from emulator.kernel_ir.instructions import ENGINES, SPECS

from .registry import EngineHandlers, Handler

#: engine -> its handler module (bookkeeping, engine ``none``, lives in ``lifetime``).
MODULES: dict[str, str] = {e: ("lifetime" if e == "none" else e) for e in ENGINES}


def _collect() -> dict[str, Handler]:
    table: dict[str, Handler] = {}
    for engine, module in MODULES.items():
        handlers: EngineHandlers = importlib.import_module(f"{__name__}.{module}").HANDLERS
        if handlers.engine != engine:
            raise ImportError(f"handlers/{module}.py registers for {handlers.engine}, not {engine}")
        table.update(handlers.table)
    missing = sorted(set(SPECS) - set(table))
    if missing:
        raise ImportError(f"kernel-IR instructions without a handler: {missing}")
    return table


HANDLERS: dict[str, Handler] = _collect()
