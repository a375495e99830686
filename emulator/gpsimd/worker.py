"""The GpSimd worker process: loads one custom-op library and runs its compute functions.

Started by runner.py with two pipe descriptors and the library path; kernels run here so that a
crash or a hang takes down this process, never the host. It imports no framework.
"""

from __future__ import annotations

import ctypes
import mmap
import os
import sys
from collections import OrderedDict
from typing import Callable

from emulator.gpsimd import abi, args, protocol


class _Mappings:
    """The shared files this worker has mapped (the inputs' arena and output slabs), by file id;
    the least recently used are unmapped beyond a small number."""

    def __init__(self, keep: int = 8) -> None:
        self._maps: OrderedDict[int, tuple[mmap.mmap, ctypes.c_char, int]] = OrderedDict()
        self._keep = keep

    def base(self, spec: dict) -> int:
        ident, size = spec["file_id"], spec["file_size"]
        entry = self._maps.get(ident)
        if entry is not None and len(entry[0]) >= size:
            self._maps.move_to_end(ident)
            return entry[2]
        if entry is not None:
            self._drop(ident)
        fd = os.open(spec["file"], os.O_RDWR)
        try:
            mapped = mmap.mmap(fd, size)
        finally:
            os.close(fd)
        anchor = ctypes.c_char.from_buffer(mapped)
        self._maps[ident] = (mapped, anchor, ctypes.addressof(anchor))
        while len(self._maps) > self._keep:
            self._drop(next(iter(self._maps)))
        return self._maps[ident][2]

    def _drop(self, ident: int) -> None:
        mapped, anchor, _ = self._maps.pop(ident)
        del anchor
        mapped.close()


class Worker:
    """Executes requests from the host, one at a time."""

    def __init__(self, library_path: str) -> None:
        self.lib = ctypes.CDLL(library_path, mode=os.RTLD_LOCAL | os.RTLD_NOW)
        abi.bind(self.lib)
        self.mappings = _Mappings()
        self.functions: dict[str, int] = {}
        # Reused by every run (the worker runs one request at a time).
        self.counters = abi.NccCounters()
        self.text = ctypes.create_string_buffer(abi.TEXT_CAPACITY)
        self.text_len = ctypes.c_size_t(0)
        self.err = ctypes.create_string_buffer(abi.ERROR_CAPACITY)
        self.handlers: dict[str, Callable[[dict], dict]] = {"run": self.run, "ping": self.ping}

    def ping(self, request: dict) -> dict:
        return {"ok": True}

    def function(self, symbol: str) -> int:
        if symbol not in self.functions:
            self.functions[symbol] = ctypes.cast(self.lib[symbol], ctypes.c_void_p).value
        return self.functions[symbol]

    def run(self, request: dict) -> dict:
        specs = request["args"]
        array = (abi.NccArg * max(len(specs), 1))()
        for arg, spec in zip(array, specs):
            _fill(arg, spec, self.mappings)
        dst = abi.NccArg()
        _fill(dst, request["out"], self.mappings)
        counters, text, text_len, err = self.counters, self.text, self.text_len, self.err
        code = self.lib.ncc_gpsimd_run(
            request["index"], self.function(request["symbol"]), array, len(specs),
            ctypes.byref(dst), request["ncores"], ctypes.byref(counters),
            text, len(text), ctypes.byref(text_len), err, len(err),
        )
        reply = {
            "ok": code == 0,
            "counters": counters.as_dict(),
            "text": ctypes.string_at(text, text_len.value).decode("utf-8", "replace"),
        }
        if code != 0:
            reply["kind"] = abi.ERROR_KINDS.get(code, "other")
            reply["error"] = err.value.decode("utf-8", "replace")
        return reply


def _fill(arg: abi.NccArg, spec: dict, mappings: _Mappings) -> None:
    data = mappings.base(spec) + spec["offset"] if spec["kind"] == abi.KIND_TENSOR else None
    args.fill(arg, spec, data)


def main(argv: list[str]) -> int:
    fd_in, fd_out, library_path = int(argv[1]), int(argv[2]), argv[3]
    worker = Worker(library_path)
    protocol.send(fd_out, {"ok": True, "ready": True})
    while True:
        request = protocol.receive(fd_in)
        if request is None:
            return 0
        protocol.send(fd_out, worker.handlers[request["cmd"]](request))


if __name__ == "__main__":
    sys.exit(main(sys.argv))
