"""A built GpSimd custom-op library as seen from the host: its registration table, its ops'
compute symbols (found and signature-checked) and its shape functions.

The host never loads the library: its static initialisers, its registration body and its shape
functions run in the library's worker (the same one that runs its compute functions, see
runner.py), so a crash or a hang in any of them is a Python exception naming the library or the
op, never a dead or hung host. The host reads the compute symbols from the file's ELF symbol
table itself, and caches shape results per signature so graph building pays the worker round
trip once per signature.
"""

from __future__ import annotations

import hashlib
import logging
import os
import sys
from pathlib import Path
from typing import Sequence

from emulator.gpsimd import args, elf, shape_cache, signature, store
from emulator.gpsimd.args import TensorSpec, Value
from emulator.gpsimd.descriptor import LibraryDescriptor, OpDescriptor
from emulator.gpsimd.errors import LibraryError, ShapeFunctionCrash, ShapeFunctionError, ShapeFunctionTimeout
from emulator.gpsimd.process import WorkerDied, WorkerTimedOut
from emulator.gpsimd.runner import DEFAULT_SHAPE_TIMEOUT, GpSimdRunner, runner_for

log = logging.getLogger(__name__)

__all__ = ["HostLibrary", "MAX_FUNCTIONS", "RESERVED_NAME"]

MAX_FUNCTIONS = 10
RESERVED_NAME = "builtin"


class HostLibrary:
    """Describes a built library and answers its shape calls, through its worker.

    `runner` is the library's runner (whose worker also runs compute functions; default: the
    process-wide runner of the file); `shape_timeout` limits each shape call (default
    ``$NEURON_CUSTOMCALL_GPSIMD_SHAPE_TIMEOUT``, 60 s).
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        runner: GpSimdRunner | None = None,
        shape_timeout: float | None = None,
    ) -> None:
        self.runner = runner if runner is not None else runner_for(path)
        #: The stored, hash-checked copy of the library (what the worker runs).
        self.path = self.runner.library_path
        self.shape_timeout = DEFAULT_SHAPE_TIMEOUT if shape_timeout is None else shape_timeout
        self._shapes = shape_cache.ShapeCache()
        image = store.read_regular(self.path)
        if store.digest(image) != self.runner.sha256:
            raise LibraryError(f"GpSimd library {self.path} changed after it was stored; refusing it")
        info = self._library_request({"cmd": "info"}, "reading its registration table")["info"]
        self.descriptor = self._describe(info, image)
        log.debug("described GpSimd library %s from %s", self.descriptor.library, self.path)

    def _library_request(self, message: dict, what: str) -> dict:
        try:
            return self.runner.request(message, self.shape_timeout)
        except WorkerTimedOut:
            raise LibraryError(
                f"GpSimd library {self.runner.label}: {what} took longer than {self.shape_timeout:g} s "
                "(the NEURON_LIBRARY body runs there); the worker was killed"
            ) from None
        except WorkerDied as died:
            raise LibraryError(
                f"GpSimd library {self.runner.label} crashed ({died.signal}) while {what} (the "
                "NEURON_LIBRARY body runs there)" + died.suffix()
            ) from None

    def _describe(self, info: dict, image: bytes) -> LibraryDescriptor:
        name = info["library"]
        if info["error"]:
            raise LibraryError(f"library '{name}' ({self.runner.label}): {info['error']}")
        if not name:
            raise LibraryError(f"{self.runner.label} has no NEURON_LIBRARY(...) registration")
        if name == RESERVED_NAME:
            raise LibraryError(f"the library name '{RESERVED_NAME}' is reserved")
        if len(info["ops"]) > MAX_FUNCTIONS:
            raise LibraryError(f"library '{name}': at most {MAX_FUNCTIONS} functions per library")
        functions = elf.defined_functions(image)
        ops = tuple(
            OpDescriptor(
                library=name,
                name=op["name"],
                index=k,
                compute=op["compute"],
                symbol=self._compute_symbol(name, op, functions),
                args=tuple(op["args"]),
                multicore=bool(info["multicore"]),
                stack_size=int(info["stack_size"]),
            )
            for k, op in enumerate(info["ops"])
        )
        return LibraryDescriptor(
            library=name,
            sha256=hashlib.sha256(image).hexdigest(),
            multicore=bool(info["multicore"]),
            stack_size=int(info["stack_size"]),
            ops=ops,
        )

    def _compute_symbol(self, library: str, op: dict, functions: list[str]) -> str:
        candidates = elf.symbols_for(op["compute"], functions)
        where = f"library '{library}', op '{op['name']}'"
        if not candidates:
            raise LibraryError(
                f"{where}: compute function '{op['compute']}' is not defined in the compute sources"
            )
        if len(candidates) > 1:
            shown = ", ".join(self.demangle(candidates))
            raise LibraryError(f"{where}: compute function '{op['compute']}' is overloaded ({shown})")
        symbol = candidates[0]
        if symbol != op["compute"]:
            signature.check(where, self.demangle([symbol])[0], tuple(op["args"]))
        return symbol

    def demangle(self, symbols: Sequence[str]) -> list[str]:
        """The demangled names of C++ symbols (by the library's own ``abi::__cxa_demangle``)."""
        return self._library_request({"cmd": "demangle", "symbols": list(symbols)}, "demangling")["names"]

    def shape(self, op: OpDescriptor, values: Sequence[Value]) -> TensorSpec:
        """Runs the op's shape function on data-less tensors (once per signature: the result is
        cached) and returns the output's spec."""
        fields = args.describe(op.name, op.args, values)
        k = shape_cache.key(op.index, fields)
        cached = self._shapes.get(k)
        if cached is not None:
            return cached
        reply = self._shape_request(op, fields)
        if reply["text"]:
            # A shape function's printf is the host's printf.
            sys.stdout.write(reply["text"])
            sys.stdout.flush()
        if not reply["ok"]:
            raise ShapeFunctionError(f"op '{op.name}': {reply['error']}", reply["kind"])
        spec = args.spec_of(reply["out"])
        self._shapes.put(k, spec)
        return spec

    def _shape_request(self, op: OpDescriptor, fields: list[dict]) -> dict:
        where = f"the shape function of op '{op.name}' (library '{op.library}')"
        try:
            return self.runner.request({"cmd": "shape", "index": op.index, "args": fields}, self.shape_timeout)
        except WorkerTimedOut:
            raise ShapeFunctionTimeout(
                f"{where} ran past its time limit of {self.shape_timeout:g} s; its worker was killed "
                "(the host is unharmed)"
            ) from None
        except WorkerDied as died:
            raise ShapeFunctionCrash(
                f"{where} crashed its GpSimd worker ({died.signal}): an invalid pointer, an abort or "
                "an uncaught C++ exception; the host process is unharmed" + died.suffix()
            ) from None
