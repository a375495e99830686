"""Both generations' argument names: beta 1 and beta 2 sometimes name one argument differently
(``nl.copy(src=...)`` / ``nl.copy(x=...)``, ``device_print(prefix, x)`` / ``device_print(
print_prefix, tensor)``). ``keyword_aliases`` lets a function take the other generation's name
for a parameter; its signature stays ours (``inspect.signature`` follows ``__wrapped__``) and the
aliases are listed in ``nki_aliases`` (the API signature test reads them)."""

from __future__ import annotations

import functools
from typing import Callable


def keyword_aliases(**aliases: str) -> Callable[[Callable], Callable]:
    """``@keyword_aliases(src="x")``: ``f(src=t)`` is ``f(x=t)``; both at once is a TypeError."""

    def decorate(f: Callable) -> Callable:
        @functools.wraps(f)
        def call(*args, **kwargs):
            for alias, name in aliases.items():
                if alias in kwargs:
                    if name in kwargs:
                        raise TypeError(f"{f.__name__}() got {name!r} and its other name {alias!r}")
                    kwargs[name] = kwargs.pop(alias)
            return f(*args, **kwargs)

        call.nki_aliases = dict(aliases)  # type: ignore[attr-defined]
        return call

    return decorate
