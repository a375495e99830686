"""The C ABI shared with the device runtime (emulator/gpsimd/include/neuron/gpsimd_runtime.hpp).

Kept in one place so that the structure layouts, dtype codes and error codes have a single Python
definition; docs/gpsimd.md documents the same layout.
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass

from emulator import dtypes as records

MAX_DIMS = 8
CORE_COUNT = 8
TEXT_CAPACITY = 128 * 1024  # the largest device printf buffer (NEURON_RT_GPSIMD_STDOUT_QUEUE_SIZE_BYTES)
ERROR_CAPACITY = 4096

# ncc_arg.kind
KIND_TENSOR = 0
KIND_SCALAR_DOUBLE = 1
KIND_SCALAR_INT = 2
KIND_DOUBLE = 3
KIND_INT64 = 4


class NccArg(ctypes.Structure):
    """One argument or result (struct ncc_arg)."""

    _fields_ = [
        ("kind", ctypes.c_int32),
        ("dtype", ctypes.c_int32),
        ("ndim", ctypes.c_int32),
        ("reserved", ctypes.c_int32),
        ("sizes", ctypes.c_int64 * MAX_DIMS),
        ("data", ctypes.c_void_p),
        ("f", ctypes.c_double),
        ("i", ctypes.c_int64),
    ]


COUNTER_FIELDS = (
    "element_accesses",
    "stream_bytes",
    "tcm_bytes",
    "arith_elements",
    "factory_bytes",
    "tcm_peak_bytes",
    "stack_bytes",
    "printf_lost_bytes",
)


class NccCounters(ctypes.Structure):
    """Per-execution counters (struct ncc_counters)."""

    _fields_ = [(name, ctypes.c_uint64) for name in COUNTER_FIELDS]

    def as_dict(self) -> dict[str, int]:
        return {name: int(getattr(self, name)) for name in COUNTER_FIELDS}


@dataclass(frozen=True)
class DType:
    """A device dtype: its c10 ScalarType code, name and element size."""

    code: int
    name: str
    itemsize: int


#: The runtime's dtypes (name -> code and size), from the one dtype record (emulator/dtypes.py);
#: the codes are c10's ScalarType values, which the runtime header uses too.
DTYPES: dict[str, DType] = {
    name: DType(r.gpsimd_code, name, r.itemsize) for name, r in records.BY_GPSIMD.items()
}
DTYPES_BY_CODE: dict[int, DType] = {d.code: d for d in DTYPES.values()}

# Return codes of ncc_gpsimd_shape / ncc_gpsimd_run: 1 + ncc_gpsimd::ErrorKind, or 100.
ERROR_KINDS: dict[int, str] = {
    1: "bounds",
    2: "shape_reads_data",
    3: "dtype",
    4: "coherence",
    5: "tcm",
    6: "multicore",
    7: "usage",
    100: "other",
}


def bind(lib: ctypes.CDLL) -> None:
    """Declares the argument and result types of a library's C API functions."""
    lib.ncc_gpsimd_abi_version.restype = ctypes.c_int
    lib.ncc_gpsimd_library_info.restype = ctypes.c_char_p
    lib.ncc_gpsimd_demangle.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_size_t]
    lib.ncc_gpsimd_demangle.restype = ctypes.c_int
    lib.ncc_gpsimd_shape.argtypes = [
        ctypes.c_int,
        ctypes.POINTER(NccArg),
        ctypes.c_int,
        ctypes.POINTER(NccArg),
        ctypes.c_char_p,
        ctypes.c_size_t,
    ]
    lib.ncc_gpsimd_shape.restype = ctypes.c_int
    lib.ncc_gpsimd_run.argtypes = [
        ctypes.c_int,
        ctypes.c_void_p,
        ctypes.POINTER(NccArg),
        ctypes.c_int,
        ctypes.POINTER(NccArg),
        ctypes.c_int,
        ctypes.POINTER(NccCounters),
        ctypes.c_char_p,
        ctypes.c_size_t,
        ctypes.POINTER(ctypes.c_size_t),
        ctypes.c_char_p,
        ctypes.c_size_t,
    ]
    lib.ncc_gpsimd_run.restype = ctypes.c_int


ABI_VERSION = 1


class NccServeConfig(ctypes.Structure):
    """The worker's loop of prepared calls in C (struct ncc_serve_config, runtime/gpsimd_serve.h):
    the control page, its layout and time constants (control.py defines them), the pipes, and
    the latest sequence number answered, which the loop updates."""

    _fields_ = [
        ("page", ctypes.c_void_p),
        *((name, ctypes.c_int64) for name in (
            "request", "call", "host_waiting", "poll", "reply", "code", "worker_waiting", "text_len", "taken",
            "counters_offset", "error_offset", "text_offset", "text_capacity", "error_capacity", "refused",
            "sequence", "gaps_kept")),
        ("fd_in", ctypes.c_int32),
        ("fd_out", ctypes.c_int32),
        ("wake_token", ctypes.c_uint32),
        *((name, ctypes.c_double) for name in (
            "cpu_seconds", "arm_every", "first_slice", "preempted", "backoff", "spin_floor", "spin_max")),
        # Appended (a library built before reads only the fields above): word indices of the
        # host's request time, of the worker's wait counts and of its latest poll's length.
        *((name, ctypes.c_int64) for name in ("request_at", "slept", "polled", "preempted_count", "next_poll",
                                               "stalls")),
        ("backoff_first", ctypes.c_double),
        # Appended: the CPU words, the timed sleeps' words and constants (control.wait_plan).
        *((name, ctypes.c_int64) for name in ("host_cpu", "wake_ahead", "worker_cpu", "timed", "shared", "late")),
        *((name, ctypes.c_double) for name in ("wake_ahead_max", "wake_margin", "lead_max", "late_first",
                                                "window_share", "window_max", "shared_nap")),
        # Appended: when a call's plan is followed (control.HIT_MIN, control.HIT_WEIGHT).
        *((name, ctypes.c_double) for name in ("hit_min", "hit_weight")),
        ("unplanned", ctypes.c_int64),
        # Appended: word indices of the host's hint that more calls of its graph's run follow,
        # of a prime and its poll's length, and of this loop's count of calls a prime's poll found
        # (control.py: a graph's runs).
        *((name, ctypes.c_int64) for name in ("more", "prime", "prime_poll", "primed")),
    ]


def bind_serve(lib: ctypes.CDLL) -> bool:
    """Declares the serve loop's functions; False when the library predates them (it was built
    by an older runtime: the worker then runs its Python loop)."""
    if not hasattr(lib, "ncc_gpsimd_serve"):
        return False
    lib.ncc_gpsimd_serve.argtypes = [ctypes.POINTER(NccServeConfig)]
    lib.ncc_gpsimd_serve.restype = ctypes.c_int
    lib.ncc_gpsimd_serve_prepare.argtypes = [ctypes.c_int64, ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p,
                                             ctypes.c_int, ctypes.c_void_p, ctypes.c_int]
    lib.ncc_gpsimd_serve_prepare.restype = ctypes.c_int
    lib.ncc_gpsimd_serve_forget.argtypes = [ctypes.c_int64]
    lib.ncc_gpsimd_serve_forget.restype = ctypes.c_int
    return True
