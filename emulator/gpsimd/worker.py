"""The GpSimd worker process: loads one custom-op library, reads its registration table, runs
its shape functions and its compute functions.

Started by process.py with two pipe descriptors and the library path. Every piece of the user's
code runs here (static initialisers at load included), so that a crash or a hang takes down this
process, never the host. It imports no framework.

Start-up sends two messages: ``{"started": true}`` once the interpreter runs (so the host's
time limit for loading covers the user's static initialisers only), then ``{"ready": true}`` once
the library is loaded, or ``{"ok": false, "error": ...}`` when it is not a usable library.
"""

from __future__ import annotations

import ctypes
import hashlib
import json
import mmap
import os
import struct
import sys
from collections import OrderedDict
from typing import Callable

from emulator.gpsimd import abi, args, elf, limits, protocol


class _Mappings:
    """The shared files this worker has mapped (the inputs' arena and output slabs), by file id;
    the least recently used are unmapped beyond a small number."""

    def __init__(self, keep: int = 8) -> None:
        self._maps: OrderedDict[int, tuple[mmap.mmap, ctypes.c_char, int]] = OrderedDict()
        self._keep = keep
        #: Bumped whenever a file is unmapped: addresses taken before may then be stale.
        self.generation = 0

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

    @staticmethod
    def private(spec: dict) -> tuple[mmap.mmap, int]:
        """A copy-on-write mapping of a shared file, for one run: the kernel reads the file's
        data, and its writes stay in this process (an earlier op's output, passed as an input,
        is never changed by the kernel)."""
        fd = os.open(spec["file"], os.O_RDONLY)
        try:
            mapped = mmap.mmap(fd, spec["file_size"], flags=mmap.MAP_PRIVATE,
                               prot=mmap.PROT_READ | mmap.PROT_WRITE)
        finally:
            os.close(fd)
        anchor = ctypes.c_char.from_buffer(mapped)
        address = ctypes.addressof(anchor)
        del anchor
        return mapped, address

    def _drop(self, ident: int) -> None:
        self.generation += 1
        mapped, anchor, _ = self._maps.pop(ident)
        del anchor
        mapped.close()


class LoadError(Exception):
    """The file can not be loaded or is not a GpSimd library of this runtime ABI."""


class _Stdout:
    """The worker's standard output, redirected to an anonymous file: a shape function's printf
    (the host's printf, as shape functions run on the host) is sent back with the reply and
    printed by the host; anything else (a kernel's std::cout, which goes nowhere on the device)
    is discarded."""

    LIMIT = 64 * 1024

    def __init__(self) -> None:
        self.fd = os.memfd_create("ncc-gpsimd-stdout", os.MFD_CLOEXEC)
        os.dup2(self.fd, 1)
        self.libc = ctypes.CDLL(None)
        self.libc.fflush.argtypes = [ctypes.c_void_p]

    def take(self) -> str:
        """The output written since the last call (its newest LIMIT bytes)."""
        self.libc.fflush(None)
        size = os.fstat(self.fd).st_size
        if not size:
            return ""
        data = os.pread(self.fd, min(size, self.LIMIT), max(0, size - self.LIMIT))
        os.ftruncate(self.fd, 0)
        os.lseek(self.fd, 0, os.SEEK_SET)
        return data.decode("utf-8", "replace")


def _open(library_path: str, sha256: str) -> tuple[ctypes.CDLL, bytes]:
    """Loads the library at `library_path` if its content hashes to `sha256`: the file is opened
    once (not following links) and the bytes hashed are the ones loaded, through the open
    descriptor, so a file swapped after the check is never run."""
    try:
        fd = os.open(library_path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as exc:
        raise LoadError(f"cannot open GpSimd library {library_path}: {exc.strerror}") from None
    try:
        with os.fdopen(os.dup(fd), "rb") as f:
            image = f.read()
        actual = hashlib.sha256(image).hexdigest()
        if actual != sha256:
            raise LoadError(f"GpSimd library {library_path} does not hash to {sha256} (it is {actual}): "
                            "it was changed after it was stored; refusing to load it")
        lib = ctypes.CDLL(f"/proc/self/fd/{fd}", mode=os.RTLD_LOCAL | os.RTLD_NOW)
    except OSError as exc:
        raise LoadError(f"cannot load GpSimd library {library_path}: {exc}") from None
    finally:
        os.close(fd)
    if not hasattr(lib, "ncc_gpsimd_abi_version"):
        raise LoadError(f"{library_path} is not a GpSimd custom-op library (no ncc_gpsimd_* API)")
    abi.bind(lib)
    if lib.ncc_gpsimd_abi_version() != abi.ABI_VERSION:
        raise LoadError(f"{library_path} was built for another GpSimd runtime ABI; rebuild it")
    return lib, image


class RequestError(Exception):
    """A request this worker refuses (the reply says why; the worker goes on)."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


class _Call:
    """A run request made ready for ``ncc_gpsimd_run``: its arguments as ``ncc_arg`` structures
    pointing into the shared files, valid while the files stay mapped (`generation`)."""

    __slots__ = ("generation", "index", "function", "array", "nargs", "dst", "ncores", "private")

    def __init__(self, generation: int, index: int, function: int, array: ctypes.Array, nargs: int,
                 dst: abi.NccArg, ncores: int, private: list[mmap.mmap]) -> None:
        self.generation, self.index, self.function = generation, index, function
        self.array, self.nargs, self.dst, self.ncores = array, nargs, ctypes.byref(dst), ncores
        #: Copy-on-write mappings made for this run only (see _Mappings.private).
        self.private = private


#: Prepared run requests kept (a step of a model repeats a few requests with the same bytes).
CALLS_KEPT = 64
#: A successful run's reply, but for its counters and text (most replies: JSON with the counters
#: and the text dropped in, rather than a dictionary encoded anew).
_OK_REPLY = ('{"ok":true,"counters":{' + ",".join(f'"{name}":%d' for name in abi.COUNTER_FIELDS)
             + '},"text":%s}')


class Worker:
    """Executes requests from the host, one at a time."""

    def __init__(self, library_path: str, sha256: str) -> None:
        self.stdout = _Stdout()
        self.lib, self.image = _open(library_path, sha256)
        #: Per op index, the symbols that may be its compute function (read at the first run).
        self._compute_symbols: list[set[str]] | None = None
        self.stdout.take()  # what static initialisers printed
        self.mappings = _Mappings()
        self.functions: dict[str, int] = {}
        # Reused by every run (the worker runs one request at a time).
        self.counters = abi.NccCounters()
        self._counter_values = (ctypes.c_uint64 * len(abi.COUNTER_FIELDS)).from_buffer(self.counters)
        self.text = ctypes.create_string_buffer(abi.TEXT_CAPACITY)
        self.text_len = ctypes.c_size_t(0)
        self.err = ctypes.create_string_buffer(abi.ERROR_CAPACITY)
        self._run_tail = (ctypes.byref(self.counters), self.text, len(self.text), ctypes.byref(self.text_len),
                          self.err, len(self.err))
        self._calls: dict[bytes, _Call] = {}
        self.handlers: dict[str, Callable[[dict], dict]] = {
            "run": self.run, "shape": self.shape, "info": self.info, "demangle": self.demangle,
            "ping": self.ping,
        }

    def handle(self, body: bytes) -> bytes:
        """The encoded reply to one encoded request. A run request whose bytes were seen before
        (same op, arguments, shared files and offsets) reuses its prepared arguments, as long as
        no shared file has been unmapped since."""
        call = self._calls.get(body)
        if call is None or call.generation != self.mappings.generation:
            request = json.loads(body)
            if request["cmd"] != "run":
                return protocol.encode(self.handlers[request["cmd"]](request))
            try:
                call = self.prepare(request)
            except RequestError as e:
                return protocol.encode({"ok": False, "kind": e.kind, "error": str(e), "text": "",
                                        "counters": dict.fromkeys(abi.COUNTER_FIELDS, 0)})
            if not call.private:
                if len(self._calls) >= CALLS_KEPT:
                    self._calls.clear()
                self._calls[body] = call
        try:
            code = self.execute(call)
        finally:
            for mapped in call.private:
                mapped.close()
        if code != 0:
            return protocol.encode(self.reply(code))
        n = self.text_len.value
        text = json.dumps(ctypes.string_at(self.text, n).decode("utf-8", "replace")) if n else '""'
        return (_OK_REPLY % (*self._counter_values, text)).encode()

    def ping(self, request: dict) -> dict:
        return {"ok": True}

    def info(self, request: dict) -> dict:
        """The registration table and build switches (running the NEURON_LIBRARY body)."""
        return {"ok": True, "info": json.loads(self.lib.ncc_gpsimd_library_info().decode())}

    def demangle(self, request: dict) -> dict:
        """Demangled names of `symbols` (a symbol that does not demangle stays as it is)."""
        out = ctypes.create_string_buffer(4096)
        names = []
        for symbol in request["symbols"]:
            ok = self.lib.ncc_gpsimd_demangle(symbol.encode(), out, len(out)) == 0
            names.append(out.value.decode() if ok else symbol)
        return {"ok": True, "names": names}

    def shape(self, request: dict) -> dict:
        """Runs shape function `index` on data-less tensors; the reply holds the output's dtype
        code and shape, and the shape function's standard output."""
        specs = request["args"]
        array = (abi.NccArg * max(len(specs), 1))()
        for arg, spec in zip(array, specs):
            args.fill(arg, spec, None)
        out = abi.NccArg()
        err = self.err
        code = self.lib.ncc_gpsimd_shape(request["index"], array, len(specs), ctypes.byref(out), err, len(err))
        reply: dict = {"ok": code == 0, "text": self.stdout.take()}
        if code == 0:
            reply["out"] = {"dtype": int(out.dtype), "shape": [int(out.sizes[k]) for k in range(out.ndim)]}
        else:
            reply["kind"] = abi.ERROR_KINDS.get(code, "other")
            reply["error"] = err.value.decode("utf-8", "replace")
        return reply

    def function(self, symbol: str, index: int) -> int:
        """The address of op `index`'s compute function `symbol`. Only a symbol the library
        defines for the compute function its NEURON_LIBRARY registered for that op resolves: a
        request (from a forged artifact, say) naming any other symbol of the library handle,
        such as libc's abort or exit, is refused."""
        key = f"{index}:{symbol}"
        if key not in self.functions:
            allowed = self.compute_symbols()
            if not 0 <= index < len(allowed) or symbol not in allowed[index]:
                raise RequestError("usage", f"op index {index}: {symbol!r} is not a compute function this library "
                                            "registered for that op with NEURON_LIBRARY; refusing to call it")
            self.functions[key] = ctypes.cast(self.lib[symbol], ctypes.c_void_p).value
        return self.functions[key]

    def compute_symbols(self) -> list[set[str]]:
        """Per op index, the library's own function symbols that can be its registered compute
        function (its mangled forms or an extern "C" definition, see elf.symbols_for)."""
        if self._compute_symbols is None:
            ops = json.loads(self.lib.ncc_gpsimd_library_info().decode())["ops"]
            try:
                defined = elf.defined_functions(self.image)
            except (ValueError, IndexError, struct.error):
                defined = []
            self._compute_symbols = [set(elf.symbols_for(op["compute"], defined)) for op in ops]
        return self._compute_symbols

    def prepare(self, request: dict) -> _Call:
        """A run request's arguments as ncc_args (mapping the shared files they lie in)."""
        function = self.function(request["symbol"], request["index"])  # before mapping anything
        specs = request["args"]
        array = (abi.NccArg * max(len(specs), 1))()
        private: list[mmap.mmap] = []
        for arg, spec in zip(array, specs):
            _fill(arg, spec, self.mappings, private)
        dst = abi.NccArg()
        _fill(dst, request["out"], self.mappings, private)
        return _Call(self.mappings.generation, request["index"], function, array,
                     len(specs), dst, request["ncores"], private)

    def execute(self, call: _Call) -> int:
        """Runs a prepared request; its counters, text and error are left in this worker's
        buffers. Returns ncc_gpsimd_run's code."""
        code = self.lib.ncc_gpsimd_run(call.index, call.function, call.array, call.nargs, call.dst, call.ncores,
                                       *self._run_tail)
        self.stdout.take()  # host-only output of a kernel goes nowhere, as on the device
        return code

    def reply(self, code: int) -> dict:
        """The reply to the run that just returned `code`."""
        reply = {
            "ok": code == 0,
            "counters": self.counters.as_dict(),
            "text": ctypes.string_at(self.text, self.text_len.value).decode("utf-8", "replace"),
        }
        if code != 0:
            reply["kind"] = abi.ERROR_KINDS.get(code, "other")
            reply["error"] = self.err.value.decode("utf-8", "replace")
        return reply

    def run(self, request: dict) -> dict:
        call = self.prepare(request)
        try:
            return self.reply(self.execute(call))
        finally:
            for mapped in call.private:
                mapped.close()


def _fill(arg: abi.NccArg, spec: dict, mappings: _Mappings, private: list[mmap.mmap]) -> None:
    data = None
    if spec["kind"] == abi.KIND_TENSOR:
        if spec.get("private"):
            mapped, base = mappings.private(spec)
            private.append(mapped)
        else:
            base = mappings.base(spec)
        data = base + spec["offset"]
    args.fill(arg, spec, data)


def main(argv: list[str]) -> int:
    fd_in, fd_out, library_path, sha256 = int(argv[1]), int(argv[2]), argv[3], argv[4]
    memory, cpu_seconds = int(argv[5]), float(argv[6])
    limits.apply(memory)
    protocol.send(fd_out, {"ok": True, "started": True})
    try:
        worker = Worker(library_path, sha256)
    except LoadError as exc:
        protocol.send(fd_out, {"ok": False, "error": str(exc)})
        return 1
    protocol.send(fd_out, {"ok": True, "ready": True})
    while True:
        body = protocol.receive_body(fd_in)
        if body is None:
            return 0
        limits.arm_cpu(cpu_seconds)
        protocol.send_body(fd_out, worker.handle(body))


if __name__ == "__main__":
    sys.exit(main(sys.argv))
