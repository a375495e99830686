"""A seccomp filter that keeps a GpSimd worker's kernels away from every other process (issue 16).

The worker runs native code from a custom-op library, perhaps from an artifact someone else
built. Resource limits bound what it consumes; this filter bounds whom it can touch: signals go
only to the worker itself or its own process group (``kill(2)`` of the host's pid, of ``-1`` or
of any other group fails with EPERM), and the calls that reach into another process (``ptrace``,
``process_vm_readv/writev``, ``pidfd_send_signal``, ``pidfd_getfd``) or leave the worker's
process group (``setsid``, ``setpgid``, by which a forked child would outlive the group kill)
fail the same way. Everything else a kernel may do (memory, threads, files under the file-size
limit, ``printf``, ``raise``/``abort`` on itself) is allowed.

The filter is classic BPF over ``struct seccomp_data`` (``nr`` at byte 0, ``arch`` at 4, the
arguments as 64-bit words from 16), installed with ``PR_SET_NO_NEW_PRIVS`` and
``seccomp(SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_TSYNC)`` so that every thread has it.
Only x86-64 and AArch64 have syscall tables here; elsewhere, or where the kernel refuses
seccomp (some containers), ``install`` says why and the worker runs without it.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import os
import platform
import struct
from dataclasses import dataclass

# BPF opcodes (linux/bpf_common.h) and seccomp return values (linux/seccomp.h).
_LD_W_ABS = 0x20
_JEQ_K = 0x15
_JGE_K = 0x35
_RET_K = 0x06
RET_ALLOW = 0x7FFF0000
RET_EPERM = 0x00050000 | errno.EPERM
_NR, _ARCH, _ARG0_LOW = 0, 4, 16  # offsets in struct seccomp_data (little-endian arguments)
_X32_BIT = 0x40000000  # x86-64 syscalls made through the x32 ABI


@dataclass(frozen=True)
class Table:
    """One architecture's audit id and the syscall numbers the filter names."""
    arch: int
    seccomp: int
    #: Signal senders whose first argument is a pid or thread-group id.
    pid_first: dict[str, int]
    #: Calls refused whatever their arguments.
    denied: dict[str, int]
    x32: bool = False


TABLES = {
    "x86_64": Table(
        arch=0xC000003E, seccomp=317, x32=True,
        pid_first={"kill": 62, "tkill": 200, "tgkill": 234, "rt_sigqueueinfo": 129,
                   "rt_tgsigqueueinfo": 297},
        denied={"ptrace": 101, "process_vm_readv": 310, "process_vm_writev": 311,
                "pidfd_send_signal": 424, "pidfd_getfd": 438, "setsid": 112, "setpgid": 109}),
    "aarch64": Table(
        arch=0xC00000B7, seccomp=277,
        pid_first={"kill": 129, "tkill": 130, "tgkill": 131, "rt_sigqueueinfo": 138,
                   "rt_tgsigqueueinfo": 240},
        denied={"ptrace": 117, "process_vm_readv": 270, "process_vm_writev": 271,
                "pidfd_send_signal": 424, "pidfd_getfd": 438, "setsid": 157, "setpgid": 154}),
}

#: Set to 0 to run workers without the filter (to debug a kernel under strace or gdb).
ENV = "NEURON_CUSTOMCALL_GPSIMD_SECCOMP"


def _insn(code: int, k: int, jt: int = 0, jf: int = 0) -> bytes:
    return struct.pack("<HBBI", code, jt, jf, k & 0xFFFFFFFF)


def program(table: Table, pid: int) -> bytes:
    """The filter for a worker whose pid (and process-group id) is `pid`: signals may target
    `pid`, the caller's own group (0) or the group `-pid`; the `denied` calls fail."""
    out = [_insn(_LD_W_ABS, _ARCH), _insn(_JEQ_K, table.arch, 1, 0), _insn(_RET_K, RET_EPERM),
           _insn(_LD_W_ABS, _NR)]
    if table.x32:
        out += [_insn(_JGE_K, _X32_BIT, 0, 1), _insn(_RET_K, RET_EPERM)]
    for nr in table.denied.values():
        out += [_insn(_JEQ_K, nr, 0, 1), _insn(_RET_K, RET_EPERM)]
    allowed = (pid, 0, -pid)
    for nr in table.pid_first.values():
        # if nr matches: load the first argument; allowed targets jump to the block's ALLOW.
        block = [_insn(_LD_W_ABS, _ARG0_LOW)]
        for i, target in enumerate(allowed):
            block.append(_insn(_JEQ_K, target, len(allowed) - i, 0))
        block += [_insn(_RET_K, RET_EPERM), _insn(_RET_K, RET_ALLOW)]
        out += [_insn(_JEQ_K, nr, 0, len(block))] + block
    out.append(_insn(_RET_K, RET_ALLOW))
    return b"".join(out)


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def install() -> str | None:
    """Installs the filter on this process (all its threads); None when it is on, else why not."""
    if os.environ.get(ENV, "").strip() == "0":
        return f"{ENV}=0"
    table = TABLES.get(platform.machine())
    if table is None:
        return f"no syscall table for {platform.machine()} (only {', '.join(TABLES)})"
    code = program(table, os.getpid())
    buf = ctypes.create_string_buffer(code, len(code))
    prog = _SockFprog(len(code) // 8, ctypes.cast(buf, ctypes.c_void_p))
    libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    if libc.prctl(38, 1, 0, 0, 0) != 0:  # PR_SET_NO_NEW_PRIVS
        return f"PR_SET_NO_NEW_PRIVS failed: {os.strerror(ctypes.get_errno())}"
    # seccomp(SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_TSYNC, &prog)
    result = libc.syscall(ctypes.c_long(table.seccomp), ctypes.c_uint(1), ctypes.c_uint(1),
                          ctypes.byref(prog))
    if result == 0:
        return None
    reason = (f"thread {result} could not take it" if result > 0
              else os.strerror(ctypes.get_errno()))
    return f"seccomp(SECCOMP_SET_MODE_FILTER) failed: {reason}"
