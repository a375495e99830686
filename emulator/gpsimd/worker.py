"""The GpSimd worker process: loads one custom-op library, reads its registration table, runs
its shape functions and its compute functions.

Started by process.py with two pipe descriptors and the library path. Every piece of the user's
code runs here (static initialisers at load included), so that a crash or a hang takes down this
process, never the host. It imports no framework.

Start-up sends two messages: ``{"started": true, "seccomp": ...}`` once the interpreter runs and
its sandbox is in place ("on", or why the filter is not; so the host's time limit for loading
covers the user's static initialisers only), then ``{"ready": true}`` once
the library is loaded, or ``{"ok": false, "error": ...}`` when it is not a usable library.
"""

from __future__ import annotations

import ctypes
import hashlib
import json
import mmap
import os
import select
import struct
import sys
import time
from collections import OrderedDict
from typing import Callable

from emulator import host
from emulator.gpsimd import abi, args, control, elf, protocol, sandbox


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
    """The worker's standard output: /dev/null, but during a shape call an anonymous file whose
    content (a shape function's printf, the host's printf, as shape functions run on the host)
    is sent back with the reply and printed by the host. Anything else (a kernel's std::cout,
    which goes nowhere on the device, static initialisers' output) is discarded without a
    system call per run."""

    LIMIT = 64 * 1024

    def __init__(self) -> None:
        self.fd = os.memfd_create("ncc-gpsimd-stdout", os.MFD_CLOEXEC)
        self.null = os.open(os.devnull, os.O_WRONLY | os.O_CLOEXEC)
        os.dup2(self.null, 1)
        self.libc = ctypes.CDLL(None)
        self.libc.fflush.argtypes = [ctypes.c_void_p]

    def capture(self, fn: Callable[[], int]) -> tuple[int, str]:
        """Runs `fn` with standard output captured: its result and what it wrote (the newest
        LIMIT bytes); what was buffered before goes to /dev/null."""
        self.libc.fflush(None)
        os.dup2(self.fd, 1)
        try:
            result = fn()
        finally:
            self.libc.fflush(None)
            os.dup2(self.null, 1)
        size = os.fstat(self.fd).st_size
        data = os.pread(self.fd, min(size, self.LIMIT), max(0, size - self.LIMIT)) if size else b""
        os.ftruncate(self.fd, 0)
        os.lseek(self.fd, 0, os.SEEK_SET)
        return result, data.decode("utf-8", "replace")


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


class _Prepared:
    """A prepared call (control.py): the op's ncc_args pointing into the call's own shared file,
    which this entry keeps mapped, and ncc_gpsimd_run's whole argument tuple, whose output
    pointers (counters, text, error) point into the control page."""

    __slots__ = ("mapped", "array", "dst", "arguments")

    def __init__(self, mapped: mmap.mmap, array: ctypes.Array, dst: abi.NccArg, arguments: tuple) -> None:
        self.mapped, self.array, self.dst, self.arguments = mapped, array, dst, arguments


#: ncc_gpsimd_run with every pointer an address (a prepared call's arguments are plain ints).
_RUN_BY_ADDRESS = ctypes.CFUNCTYPE(
    ctypes.c_int, ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p, ctypes.c_int,
    ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t)
#: Prepared calls one worker keeps (the host keeps at most as many alive per runner).
PREPARED_KEPT = 1024
#: "python": answer prepared calls with the Python loop even when the library has the C one
#: (to debug the protocol, or to compare the two).
LOOP_ENV = "NEURON_CUSTOMCALL_GPSIMD_LOOP"
#: A prepared call re-arms the CPU budget at most this often (seconds of wall time): arming costs
#: three system calls, a third of a small call's overhead. A request then has the budget less at
#: most this long times the cores' count of CPU time.
ARM_EVERY = 1.0
#: Prepared run requests kept (a step of a model repeats a few requests with the same bytes).
CALLS_KEPT = 64
#: A successful run's reply, but for its counters and text (most replies: JSON with the counters
#: and the text dropped in, rather than a dictionary encoded anew).
_OK_REPLY = ('{"ok":true,"counters":{' + ",".join(f'"{name}":%d' for name in abi.COUNTER_FIELDS)
             + '},"text":%s}')


class Worker:
    """Executes requests from the host, one at a time."""

    def __init__(self, library_path: str, sha256: str, page: control.ControlPage | None = None,
                 cpu_seconds: float = 0.0) -> None:
        self.stdout = _Stdout()
        #: Prepared calls by id, their control page, the latest sequence number answered.
        self.page = page
        self.prepared: dict[int, _Prepared] = {}
        self.sequence = 0
        self.cpu_seconds = cpu_seconds
        self._armed_until = 0.0
        self.lib, self.image = _open(library_path, sha256)
        #: Per op index, the symbols that may be its compute function (read at the first run).
        self._compute_symbols: list[set[str]] | None = None
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
            "ping": self.ping, "prepare": self.prepare_call, "forget": self.forget,
        }
        self._run_by_address = _RUN_BY_ADDRESS(ctypes.cast(self.lib.ncc_gpsimd_run, ctypes.c_void_p).value)
        #: Whether prepared calls are answered by the runtime's loop in C (`serve`): libraries
        #: built before it existed, or NEURON_CUSTOMCALL_GPSIMD_LOOP=python, take the Python loop.
        self.native = abi.bind_serve(self.lib) and os.environ.get(LOOP_ENV, "").strip() != "python"

    def handle(self, body: bytes) -> bytes:
        """The encoded reply to one encoded request. A run request whose bytes were seen before
        (same op, arguments, shared files and offsets) reuses its prepared arguments, as long as
        no shared file has been unmapped since."""
        call = self._calls.get(body)
        if call is None or call.generation != self.mappings.generation:
            request = json.loads(body)
            if request["cmd"] != "run":
                try:
                    return protocol.encode(self.handlers[request["cmd"]](request))
                except RequestError as e:
                    return protocol.encode({"ok": False, "kind": e.kind, "error": str(e)})
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

    def prepare_call(self, request: dict) -> dict:
        """Registers prepared call `id`: a run request whose tensors all lie in one shared file
        (top-level "file", "file_id", "file_size"; each tensor an "offset"), checked here once.
        Later calls of it are a call id and a sequence number in the control page (`call`)."""
        if self.page is None:
            raise RequestError("usage", "this worker has no control page for prepared calls")
        ident = request.get("id")
        if not args.is_int(ident) or not 0 <= ident < 2**62:
            raise RequestError("usage", f"a prepared call id must be an integer in 0..2**62, got {ident!r}")
        if ident not in self.prepared and len(self.prepared) >= PREPARED_KEPT:
            raise RequestError("usage", f"this worker keeps at most {PREPARED_KEPT} prepared calls")
        ncores = request.get("ncores")
        if ncores not in (1, abi.CORE_COUNT):
            raise RequestError("usage", f"a call runs on 1 or {abi.CORE_COUNT} cores, not {ncores!r}")
        function = self.function(request.get("symbol"), request.get("index"))
        specs, out = request.get("args"), request.get("out")
        if not isinstance(specs, list) or len(specs) > 64:
            raise RequestError("usage", "a prepared call's args must be a list of at most 64 arguments")
        mapped = _map_checked(request)
        try:
            base = ctypes.addressof(ctypes.c_char.from_buffer(mapped))
            array = (abi.NccArg * max(len(specs), 1))()
            dst = abi.NccArg()
            for arg, spec in zip((*array[:len(specs)], dst), (*specs, out)):
                try:
                    args.check(spec, len(mapped))
                except ValueError as e:
                    raise RequestError("usage", f"prepared call {ident}: {e}") from None
                args.fill(arg, spec, base + spec["offset"] if spec["kind"] == abi.KIND_TENSOR else None)
            if dst.kind != abi.KIND_TENSOR:
                raise RequestError("usage", f"prepared call {ident}: the output must be a tensor")
        except BaseException:
            mapped.close()
            raise
        page = self.page
        arguments = (request["index"], function, ctypes.addressof(array), len(specs), ctypes.addressof(dst), ncores,
                     page.address(control.COUNTERS_OFFSET), page.address(control.TEXT_OFFSET), abi.TEXT_CAPACITY,
                     page.address(control.TEXT_LEN * 8), page.address(control.ERROR_OFFSET), abi.ERROR_CAPACITY)
        self.forget({"ids": [ident]})
        self.prepared[ident] = _Prepared(mapped, array, dst, arguments)
        if self.native:
            self.lib.ncc_gpsimd_serve_prepare(ident, request["index"], function, ctypes.addressof(array), len(specs),
                                              ctypes.addressof(dst), ncores)
        return {"ok": True}

    def forget(self, request: dict) -> dict:
        """Drops prepared calls (their host side is gone) and unmaps their files."""
        ids = request.get("ids")
        if not isinstance(ids, list):
            raise RequestError("usage", "forget needs a list of ids")
        for ident in ids:
            entry = self.prepared.pop(ident, None) if args.is_int(ident) else None
            if entry is not None:
                if self.native:
                    self.lib.ncc_gpsimd_serve_forget(ident)  # before its arguments go
                entry.mapped.close()
        return {"ok": True}

    def call(self, sequence: int) -> None:
        """Answers the prepared call the control page holds under `sequence`: the call id is
        read from the page and checked (the page is writable by the kernels this process runs),
        the code and then the sequence number written back, and the host woken if it sleeps."""
        page = self.page
        assert page is not None
        words = page.words
        words[control.TAKEN] = sequence
        entry = self.prepared.get(words[control.CALL])
        if entry is None:
            page.set_error(f"no prepared call {words[control.CALL]} in this worker")
            code = control.REFUSED
        else:
            now = time.monotonic()
            if now >= self._armed_until:
                sandbox.arm_cpu(self.cpu_seconds)
                self._armed_until = now + ARM_EVERY
            code = self._run_by_address(*entry.arguments)
        words[control.CODE] = code
        words[control.REPLY] = sequence
        self.sequence = sequence

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
        code, text = self.stdout.capture(lambda: self.lib.ncc_gpsimd_shape(request["index"], array, len(specs),
                                                                            ctypes.byref(out), err, len(err)))
        reply: dict = {"ok": code == 0, "text": text}
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
        if not args.is_int(index) or not isinstance(symbol, str):
            raise RequestError("usage", f"a run names its op by an integer index and a symbol, not {index!r}, {symbol!r}")
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
        return self.lib.ncc_gpsimd_run(call.index, call.function, call.array, call.nargs, call.dst, call.ncores,
                                       *self._run_tail)

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


def _map_checked(request: dict) -> mmap.mmap:
    """The shared file a prepared call names, mapped after checking that it is the very file the
    host made (inode) and of the size it said."""
    path, ident, size = request.get("file"), request.get("file_id"), request.get("file_size")
    if not isinstance(path, str) or not path.startswith("/proc/") or not args.is_int(size) or size <= 0:
        raise RequestError("usage", "a prepared call needs its shared file (a /proc path, its id and size)")
    try:
        fd = os.open(path, os.O_RDWR | os.O_CLOEXEC)
    except OSError as e:
        raise RequestError("usage", f"cannot open the prepared call's shared file: {e.strerror}") from None
    try:
        stat = os.fstat(fd)
        if stat.st_ino != ident or stat.st_size != size:
            raise RequestError("usage", "the prepared call's shared file is not the one described")
        return mmap.mmap(fd, size)
    finally:
        os.close(fd)


def _fill(arg: abi.NccArg, spec: dict, mappings: _Mappings, private: list[mmap.mmap]) -> None:
    try:
        args.check(spec, spec.get("file_size") if spec.get("kind") == abi.KIND_TENSOR else None)
    except ValueError as e:
        raise RequestError("usage", str(e)) from None
    data = None
    if spec["kind"] == abi.KIND_TENSOR:
        if spec.get("private"):
            mapped, base = mappings.private(spec)
            private.append(mapped)
        else:
            base = mappings.base(spec)
        data = base + spec["offset"]
    args.fill(arg, spec, data)


def serve(worker: Worker, fd_in: int, fd_out: int) -> int:
    """Answers requests until the host closes the request pipe: prepared calls in the runtime's
    C loop (`serve_native`) when the library has it, else in `serve_python`."""
    return (serve_native if worker.native else serve_python)(worker, fd_in, fd_out)


def serve_native(worker: Worker, fd_in: int, fd_out: int) -> int:
    """The runtime's loop answers prepared calls (runtime/gpsimd_serve.h: the same protocol as
    `serve_python`, with no Python per call) and returns here for each JSON request."""
    page = worker.page
    assert page is not None
    config = abi.NccServeConfig(
        page=page.address(0), request=control.REQUEST, call=control.CALL, host_waiting=control.HOST_WAITING,
        poll=control.POLL, reply=control.REPLY, code=control.CODE, worker_waiting=control.WORKER_WAITING,
        text_len=control.TEXT_LEN, taken=control.TAKEN, counters_offset=control.COUNTERS_OFFSET,
        error_offset=control.ERROR_OFFSET, text_offset=control.TEXT_OFFSET, text_capacity=abi.TEXT_CAPACITY,
        error_capacity=abi.ERROR_CAPACITY, refused=control.REFUSED, sequence=worker.sequence,
        gaps_kept=2 * PREPARED_KEPT, fd_in=fd_in, fd_out=fd_out,
        wake_token=int.from_bytes(control.WAKE_TOKEN, "little"), cpu_seconds=worker.cpu_seconds,
        arm_every=ARM_EVERY, first_slice=control.FIRST_SLICE, preempted=control.PREEMPTED,
        backoff=control.BACKOFF, spin_floor=control.SPIN_MARGIN, spin_max=control.WORKER_SPIN_MAX,
        request_at=control.REQUEST_AT, slept=control.WORKER_SLEPT, polled=control.WORKER_POLLED,
        preempted_count=control.WORKER_PREEMPTED, next_poll=control.NEXT_POLL, stalls=control.WORKER_STALLS,
        backoff_first=control.BACKOFF_FIRST, host_cpu=control.HOST_CPU, wake_ahead=control.WAKE_AHEAD,
        worker_cpu=control.WORKER_CPU, timed=control.WORKER_TIMED, shared=control.WORKER_SHARED,
        late=control.WORKER_LATE, wake_ahead_max=control.SLEEP_THROUGH_MAX, wake_margin=control.WAKE_MARGIN,
        lead_max=control.LEAD_MAX, late_first=control.LATE_FIRST, window_share=control.WAKE_WINDOW_SHARE,
        window_max=control.WORKER_SPIN_SPARE, shared_nap=0.0, hit_min=control.HIT_MIN,
        hit_weight=control.HIT_WEIGHT, unplanned=control.WORKER_UNPLANNED, more=control.MORE,
        prime=control.PRIME, prime_poll=control.PRIME_POLL, primed=control.WORKER_PRIMED)
    while True:
        if worker.lib.ncc_gpsimd_serve(ctypes.byref(config)):
            return 1  # a message where a wake token belonged, or poll() failed
        if not answer_frame(worker, fd_in, fd_out):
            return 0


def answer_frame(worker: Worker, fd_in: int, fd_out: int) -> bool:
    """Reads the frame waiting on the request pipe and answers it (a wake token, which came
    with no call, is skipped); False when the host closed the pipe."""
    body = protocol.receive_body(fd_in, tokens=True)
    if body is None:
        return False
    if body:
        sandbox.arm_cpu(worker.cpu_seconds)
        protocol.send_body(fd_out, worker.handle(body))
    return True


def serve_python(worker: Worker, fd_in: int, fd_out: int) -> int:
    """Prepared calls from the control page, waited for after each answer as the gap before the
    next call last time says (`control.wait_plan`: a poll, or a sleep timed to end just before
    the call and then a poll; none while that gap's plans have been missing, control.next_score),
    then, asleep on the request pipe, JSON requests and wake tokens (control.py describes the
    hand-over)."""
    page = worker.page
    assert page is not None
    words = page.words
    spinner = control.Spinner(control.WORKER_SPIN_MAX)
    gaps: dict[int, tuple[float, float]] = {}  # call id -> (how long the next call took to come, last time;
    # how often the plan made from it found the call: control.next_score)
    previous: int | None = None
    replied_at = 0.0
    late = control.LATE_FIRST  # how late a timed sleep ends (control.next_late)
    slept_for = -1  # the latest call it counted a sleep on the pipe for
    shared_quiet_from = 0.0  # no moves off the host's CPU before this time (one failed)
    while True:
        expected = worker.sequence + 1
        cap = min(words[control.POLL] * 1e-9, control.WORKER_SPIN_MAX) if previous is not None else 0.0
        polling = cap > 0
        ready = words[control.REQUEST] == expected
        if not ready:
            known = gaps.get(previous) if polling else None
            hinted = polling and bool(words[control.MORE])  # the host's run has more calls: poll whatever the score
            if hinted:
                nap, limit = control.hinted_plan(None if known is None else known[0], cap)
            elif polling:
                nap, limit = control.followed_plan(known, cap, words[control.WAKE_AHEAD] * 1e-9, late)
            else:
                nap, limit = 0.0, 0.0
            words[control.WORKER_UNPLANNED] += not hinted and known is not None and known[1] < control.HIT_MIN
            if limit > 0:
                cpu = words[control.WORKER_CPU] = host.current_cpu()
                shared = control.shares_cpu(words, control.HOST_CPU, cpu) and time.monotonic() >= shared_quiet_from
                words[control.WORKER_SHARED] += shared
            else:
                shared = False
            words[control.NEXT_POLL] = int(limit * 1e9)
            if nap > 0:
                # Asleep until just before the expected call, flagged: a call that comes
                # earlier wakes this loop with a token.
                words[control.WORKER_TIMED] += 1
                started = time.monotonic()
                woken = _sleep(words, fd_in, expected, (nap,))
                ready = words[control.REQUEST] == expected
                if woken and not ready:
                    outcome = _woken_without_call(worker, fd_in, fd_out, expected, spinner, woken)
                    if outcome == _WAIT_AGAIN:
                        continue
                    if outcome is not None:
                        return outcome
                    ready, woken = True, False  # the prime's poll found it; its token is read
                # A call that came as the timer ended may have seen the flag: its token, read
                # now, would otherwise wake the next sleep for nothing.
                else:
                    woken = woken or (ready and bool(select.select([fd_in], [], [], 0)[0]))
                if woken and os.read(fd_in, len(control.WAKE_TOKEN)) != control.WAKE_TOKEN:
                    return 1
                if not woken and not ready:
                    late = control.next_late(late, time.monotonic() - started - nap)
                    words[control.WORKER_LATE] = int(late * 1e9)
            elif shared:
                # The host's CPU: moved off it (host.leave_cpu). Still on it (no other CPU it
                # may run on): no moves for a while.
                if not host.leave_cpu(words[control.HOST_CPU]):
                    shared_quiet_from = time.monotonic() + control.BACKOFF
                words[control.WORKER_CPU] = host.current_cpu()
                ready = words[control.REQUEST] == expected
            if not ready:
                ready = limit > 0 and spinner.poll(words, control.REQUEST, expected, limit)
                words[control.WORKER_POLLED] += ready
        if not ready:
            words[control.WORKER_PREEMPTED], words[control.WORKER_STALLS] = spinner.preempted, spinner.stalls
            words[control.WORKER_SLEPT] += slept_for != expected  # calls it slept for, not sleeps
            slept_for = expected
            woken = _sleep(words, fd_in, expected, (None,))  # a lost wake-up: the host's slice
            if words[control.REQUEST] == expected:
                if woken:
                    # The call's wake token (a JSON request never comes while a call waits):
                    # read now, it would otherwise wake this worker again at its next sleep.
                    if os.read(fd_in, len(control.WAKE_TOKEN)) != control.WAKE_TOKEN:
                        return 1
            else:
                outcome = _woken_without_call(worker, fd_in, fd_out, expected, spinner, woken)
                if outcome == _WAIT_AGAIN:
                    continue
                if outcome is not None:
                    return outcome
        if polling:
            if len(gaps) > 2 * PREPARED_KEPT:
                gaps.clear()
            gap = control.request_gap(words[control.REQUEST_AT], replied_at, time.monotonic())
            gaps[previous] = control.learned(gaps.get(previous), gap, cap, words[control.WAKE_AHEAD] * 1e-9, late)
        words[control.WORKER_CPU] = host.current_cpu()
        previous = words[control.CALL]
        worker.call(expected)
        if words[control.HOST_WAITING]:
            os.write(fd_out, control.WAKE_TOKEN)
        replied_at = time.monotonic()


#: _take_prime's outcomes: no prime (the pipe holds a frame to answer), the call found, not found.
_NO_PRIME, _PRIME_FOUND, _PRIME_MISSED = 0, 1, 2


def _take_prime(words: memoryview, fd_in: int, expected: int, spinner: control.Spinner) -> int | None:
    """For a worker woken with call `expected` not come: when it was a prime for that call (word
    PRIME; control.py: a graph's runs), reads the prime's wake token and polls for the call for up
    to word PRIME_POLL (at most WORKER_SPIN_MAX). The runtime's C loop does the same, and also
    stops when the host withdraws the prime. None: the pipe held something other than a wake
    token (the protocol is broken)."""
    if words[control.PRIME] != expected:
        return _NO_PRIME
    if os.read(fd_in, len(control.WAKE_TOKEN)) != control.WAKE_TOKEN:
        return None
    cpu = words[control.WORKER_CPU] = host.current_cpu()
    if control.shares_cpu(words, control.HOST_CPU, cpu):
        words[control.WORKER_SHARED] += 1
        host.leave_cpu(cpu)
        words[control.WORKER_CPU] = host.current_cpu()
    limit = min(max(words[control.PRIME_POLL], 0) * 1e-9, control.WORKER_SPIN_MAX)
    if spinner.poll(words, control.REQUEST, expected, limit):
        words[control.WORKER_PRIMED] += 1
        return _PRIME_FOUND
    return _PRIME_MISSED


#: _woken_without_call's outcome for a loop that goes back to waiting for its call.
_WAIT_AGAIN = -1


def _woken_without_call(worker: Worker, fd_in: int, fd_out: int, expected: int, spinner: control.Spinner,
                        woken: bool) -> int | None:
    """A loop that stopped waiting (`woken`: by its pipe) with call `expected` not come: a prime
    polled for (`_take_prime`), else the frame on the pipe answered. None: the prime's poll
    found the call; `_WAIT_AGAIN`: wait for it again; 0 or 1: what serve_python returns (the
    host closed the pipe; the pipe held something other than a wake token)."""
    assert worker.page is not None
    primed = _take_prime(worker.page.words, fd_in, expected, spinner) if woken else _NO_PRIME
    if primed is None:
        return 1
    if primed == _PRIME_FOUND:
        return None
    if primed == _NO_PRIME and not answer_frame(worker, fd_in, fd_out):
        return 0
    return _WAIT_AGAIN


def _sleep(words: memoryview, fd_in: int, expected: int, slices: tuple[float | None, ...]) -> bool:
    """Sleeps on the request pipe with the worker-asleep flag set, for each of `slices` in turn
    (None: until woken) while call `expected` has not come: whether the pipe woke it."""
    words[control.WORKER_WAITING] = 1
    try:
        for wait in slices:
            if words[control.REQUEST] == expected:
                return False
            if select.select([fd_in], [], [], wait)[0]:
                return True
        return False
    finally:
        words[control.WORKER_WAITING] = 0


#: prctl's PR_SET_TIMERSLACK, and the slack asked for, in nanoseconds.
_PR_SET_TIMERSLACK = 29
TIMER_SLACK_NS = 1000


def tighten_timers() -> None:
    """Lets this thread's timed sleeps end within a microsecond of their time instead of the
    default 50 us: the sleep before an expected call (control.wait_plan) ends a few tens of
    microseconds before it, and 50 us of slack would often make it end after the call came."""
    try:
        ctypes.CDLL(None).prctl(_PR_SET_TIMERSLACK, ctypes.c_ulong(TIMER_SLACK_NS), ctypes.c_ulong(0),
                                ctypes.c_ulong(0), ctypes.c_ulong(0))
    except (AttributeError, OSError):
        pass  # not Linux: the default slack


def main(argv: list[str]) -> int:
    fd_in, fd_out, library_path, sha256 = int(argv[1]), int(argv[2]), argv[3], argv[4]
    memory, cpu_seconds, control_fd = int(argv[5]), float(argv[6]), int(argv[7])
    without_seccomp = sandbox.apply(memory)
    page = control.ControlPage(control_fd)
    os.close(control_fd)
    protocol.send(fd_out, {"ok": True, "started": True, "seccomp": without_seccomp or "on"})
    try:
        worker = Worker(library_path, sha256, page, cpu_seconds)
    except LoadError as exc:
        protocol.send(fd_out, {"ok": False, "error": str(exc)})
        return 1
    protocol.send(fd_out, {"ok": True, "ready": True, "loop": "native" if worker.native else "python"})
    tighten_timers()
    return serve(worker, fd_in, fd_out)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
