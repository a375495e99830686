"""A built GpSimd custom-op library as seen from the host: its registration table, its ops'
compute symbols (found and signature-checked) and its shape functions.

Shape functions run in the host process (they only compute shapes, so tracing stays cheap);
compute functions never do: they run in the worker (see runner.py).
"""

from __future__ import annotations

import ctypes
import hashlib
import json
import logging
import os
from pathlib import Path
from typing import Sequence

from emulator.gpsimd import abi, args, elf, signature
from emulator.gpsimd.args import TensorSpec, Value
from emulator.gpsimd.descriptor import LibraryDescriptor, OpDescriptor
from emulator.gpsimd.errors import LibraryError, ShapeFunctionError

log = logging.getLogger(__name__)

MAX_FUNCTIONS = 10
RESERVED_NAME = "builtin"


def materialise(image: bytes, directory: Path) -> Path:
    """Writes library bytes to a content-addressed file (dlopen needs a path) and returns it."""
    digest = hashlib.sha256(image).hexdigest()
    path = directory / f"libgpsimd-{digest[:24]}.so"
    if not path.exists():
        directory.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".tmp{os.getpid()}")
        tmp.write_bytes(image)
        os.replace(tmp, path)
    return path


class HostLibrary:
    """Loads a built library into the host process and describes it."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path).resolve()
        image = self.path.read_bytes()
        try:
            self._lib = ctypes.CDLL(str(self.path), mode=os.RTLD_LOCAL | os.RTLD_NOW)
        except OSError as exc:
            raise LibraryError(f"cannot load GpSimd library {self.path}: {exc}") from exc
        if not hasattr(self._lib, "ncc_gpsimd_abi_version"):
            raise LibraryError(f"{self.path} is not a GpSimd custom-op library (no ncc_gpsimd_* API)")
        abi.bind(self._lib)
        if self._lib.ncc_gpsimd_abi_version() != abi.ABI_VERSION:
            raise LibraryError(f"{self.path} was built for another GpSimd runtime ABI; rebuild it")
        info = json.loads(self._lib.ncc_gpsimd_library_info().decode())
        self.descriptor = self._describe(info, image)
        log.debug("loaded GpSimd library %s from %s", self.descriptor.library, self.path)

    def _describe(self, info: dict, image: bytes) -> LibraryDescriptor:
        name = info["library"]
        if info["error"]:
            raise LibraryError(f"library '{name}' ({self.path.name}): {info['error']}")
        if not name:
            raise LibraryError(f"{self.path.name} has no NEURON_LIBRARY(...) registration")
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
            shown = ", ".join(self.demangle(c) for c in candidates)
            raise LibraryError(f"{where}: compute function '{op['compute']}' is overloaded ({shown})")
        symbol = candidates[0]
        if symbol != op["compute"]:
            signature.check(where, self.demangle(symbol), tuple(op["args"]))
        return symbol

    def demangle(self, symbol: str) -> str:
        out = ctypes.create_string_buffer(4096)
        if self._lib.ncc_gpsimd_demangle(symbol.encode(), out, len(out)) != 0:
            return symbol
        return out.value.decode()

    def shape(self, op: OpDescriptor, values: Sequence[Value]) -> TensorSpec:
        """Runs the op's shape function on data-less tensors and returns the output's spec."""
        packed = args.pack(op.name, op.args, values)
        out = abi.NccArg()
        err = ctypes.create_string_buffer(abi.ERROR_CAPACITY)
        code = self._lib.ncc_gpsimd_shape(op.index, packed, len(op.args), ctypes.byref(out), err, len(err))
        if code != 0:
            kind = abi.ERROR_KINDS.get(code, "other")
            raise ShapeFunctionError(f"op '{op.name}': {err.value.decode(errors='replace')}", kind)
        return args.spec_of(out)
