"""Subnormal floats during a run: flushed to zero, as XLA:CPU does.

Why: XLA:CPU executes every program with the x86 MXCSR bits FTZ (results that would be
subnormal become zero) and DAZ (subnormal inputs read as zero) set, so `1e-40 > 0` is False and
`2e-38 * 0.5` is 0 in float32 there. NumPy leaves IEEE subnormals alone, so without this the
emulator and XLA:CPU disagree exactly where iterative algorithms creep towards zero (found on
`jax.scipy.linalg.eigh_tridiagonal` of a zero matrix: eigenvalues -1.2e-38 against 0, vectors
NaN against identity). `Executable.run` therefore sets both bits on the running thread (and on
the NKI executor's host threads, see kernel_exec/parallel.py) and restores the thread's previous
floating-point environment afterwards, so the caller's own NumPy code keeps IEEE behaviour.
OpenBLAS's worker threads are not reached: a GEMM split over several threads may keep subnormals
in part of its result, as its inputs' subnormals (DAZ) are still read as they are there.

`simulate_kernel` and eager NKI calls outside a graph keep IEEE behaviour (they follow NumPy and
the SDK's NumPy simulator, not XLA).

How: glibc's fegetenv/fesetenv on x86-64 carry the whole MXCSR in `fenv_t` (offset 28); a
self-test at first use checks that setting the bits really flushes, and otherwise (other
platforms, other C libraries) this is a no-op with a debug log.
Control: NEURON_EMULATOR_DENORMALS = "flush" (default) | "keep".
"""
from __future__ import annotations

import ctypes
import ctypes.util
import logging
import os
import platform
import threading
from collections.abc import Callable

import numpy as np

log = logging.getLogger(__name__)

_FENV_BYTES = 32  # sizeof(fenv_t) on x86-64 glibc
_MXCSR_OFFSET = 28
_FTZ_DAZ = 0x8000 | 0x0040

_Env = ctypes.c_uint8 * _FENV_BYTES
_api: tuple[Callable[[ctypes.Array], int], Callable[[ctypes.Array], int]] | None | bool = False
_state = threading.local()  # .depth: nesting of flushed_denormals on this thread


def _flushing(env: ctypes.Array) -> ctypes.Array:
    flush = _Env.from_buffer_copy(env)
    mxcsr = int.from_bytes(bytes(flush[_MXCSR_OFFSET:_MXCSR_OFFSET + 4]), "little") | _FTZ_DAZ
    flush[_MXCSR_OFFSET:_MXCSR_OFFSET + 4] = list(mxcsr.to_bytes(4, "little"))
    return flush


def _lookup() -> tuple[Callable[[ctypes.Array], int], Callable[[ctypes.Array], int]] | None:
    """fegetenv/fesetenv when they control MXCSR's FTZ and DAZ here, checked by a self-test."""
    global _api
    if _api is not False:
        return _api  # type: ignore[return-value]
    _api = None
    if platform.machine().lower() not in ("x86_64", "amd64") or platform.system() != "Linux":
        log.debug("subnormals are not flushed: only x86-64 Linux is supported (%s %s)",
                  platform.system(), platform.machine())
        return None
    try:
        libm = ctypes.CDLL(ctypes.util.find_library("m") or "libm.so.6")
        get, put = libm.fegetenv, libm.fesetenv
    except (OSError, AttributeError) as e:
        log.debug("subnormals are not flushed: no fegetenv/fesetenv (%s)", e)
        return None
    get.argtypes = put.argtypes = [ctypes.c_void_p]
    get.restype = put.restype = ctypes.c_int
    saved = _Env()
    if get(saved) != 0:
        return None
    tiny = np.array([1e-40, 2e-38], dtype=np.float32)
    try:
        if put(_flushing(saved)) != 0:
            return None
        works = bool(np.all(tiny * np.float32(0.5) == 0)) and not bool((tiny[:1] > 0)[0])
    finally:
        put(saved)
    if not works:
        log.debug("subnormals are not flushed: this C library's fesetenv does not set FTZ/DAZ")
        return None
    _api = (get, put)
    return _api


_MODE_ENV = "NEURON_EMULATOR_DENORMALS"
_mode_seen: tuple[str | None, bool] = ("\0", True)  # (the setting last read, whether it flushes)


def _wanted() -> bool:
    """Whether to flush: the setting is read every run (tests and users change it at run time),
    parsed only when it changed."""
    global _mode_seen
    raw = os.environ.get(_MODE_ENV)
    if raw == _mode_seen[0]:
        return _mode_seen[1]
    mode = (raw or "flush").strip().lower()
    if mode not in ("flush", "keep"):
        log.warning("%s=%r is neither flush nor keep; flushing", _MODE_ENV, mode)
    _mode_seen = (raw, mode != "keep")
    return _mode_seen[1]


#: the flushing environment made from each environment a run started in (fenv_t bytes -> it);
#: a thread's environment rarely changes, and building one costs more than the two calls
_flushing_of: dict[bytes, ctypes.Array] = {}


def active() -> bool:
    """True inside `flushed_denormals` on this thread (the NKI executor's threads follow it)."""
    return getattr(_state, "depth", 0) > 0


class flushed_denormals:  # noqa: N801 - used as a function: `with flushed_denormals():`
    """Within the block this thread flushes subnormal float results and inputs to zero (unless
    NEURON_EMULATOR_DENORMALS=keep); its previous environment is restored after.

    A class rather than a generator context manager: every `Executable.run` enters one, and
    the generator, the environment built afresh and the setting parsed each time were about
    4 us, half the fixed cost of running a small program."""

    __slots__ = ("_saved",)

    def __enter__(self) -> None:
        api = _lookup() if _wanted() else None
        self._saved = None
        if api is None:
            return
        get, put = api
        saved = _Env()
        get(saved)
        key = bytes(saved)
        flush = _flushing_of.get(key)
        if flush is None:
            if len(_flushing_of) >= 16:
                _flushing_of.clear()
            flush = _flushing_of[key] = _flushing(saved)
        put(flush)
        _state.depth = getattr(_state, "depth", 0) + 1
        self._saved = saved

    def __exit__(self, *exc: object) -> None:
        if self._saved is not None:
            _state.depth -= 1
            _api[1](self._saved)  # type: ignore[index]
