"""The tracer's context: which kernel is being traced (the active ``builder.Builder``, a context
variable, so that ``nl.*`` functions find it without it being passed around) and where in the
user's code it is (the first stack frame outside this package, recorded with every statement).
"""

from __future__ import annotations

import contextvars
import os
import sys
from typing import TYPE_CHECKING

from emulator.kernel_ir import SourceLoc

from .errors import KernelTraceError

if TYPE_CHECKING:  # the builder records user_location(); this only names its type
    from .builder import Builder

_PKG_DIR = os.path.dirname(os.path.abspath(__file__))
_current: contextvars.ContextVar["Builder | None"] = contextvars.ContextVar("nki_trace", default=None)


def in_front_end(filename: str) -> bool:
    """True for files of this package (and its ``lang`` subpackage): not the user's code."""
    return os.path.abspath(filename).startswith(_PKG_DIR + os.sep)


def user_location() -> SourceLoc | None:
    """The innermost frame that is not in the NKI front end: the user's kernel line."""
    f = sys._getframe(1)
    while f is not None:
        if not in_front_end(f.f_code.co_filename):
            return SourceLoc(f.f_code.co_filename, f.f_lineno)
        f = f.f_back
    return None


def current() -> Builder:
    tr = _current.get()
    if tr is None:
        raise KernelTraceError("<none>", user_location(), "no kernel is being traced",
                               "NKI language functions can only be called inside an nki.jit kernel")
    return tr


def current_or_none() -> Builder | None:
    return _current.get()


#: How many traces are active in any thread: a plain int that kernel launches read first (it
#: is cheap, and graph tracers such as torch dynamo can read a module global but not a
#: ContextVar), asking ``current_or_none`` only while some trace runs.
_ACTIVE = 0


def any_active() -> bool:
    return _ACTIVE > 0


def activate(trace: Builder):
    global _ACTIVE
    _ACTIVE += 1
    return _current.set(trace)


def deactivate(token) -> None:
    global _ACTIVE
    _ACTIVE -= 1
    _current.reset(token)


__all__ = ["current", "current_or_none", "any_active", "activate", "deactivate", "user_location",
           "in_front_end"]
