"""Named refusals: NKI reference APIs the emulator does not provide.

Every public name of NKI's reference exists in our namespaces; a name we can not honour is a
placeholder made here, which raises ``UnsupportedAPIError`` naming the API and why when it is
called (with the kernel and line while tracing), so that a kernel using it fails with a clear
message instead of an ``AttributeError`` or a plausible-looking result.
"""

from __future__ import annotations

from typing import Any, Callable, NoReturn

from .errors import UnsupportedAPIError
from .tracer import current_or_none, user_location


def refuse(api: str, reason: str) -> NoReturn:
    """Raise ``UnsupportedAPIError`` for ``api`` (a full name such as ``nki.language.all_reduce``)."""
    tr = current_or_none()
    where = ""
    if tr is not None:
        loc = user_location()
        where = f"kernel {tr.name!r}" + (f" at {loc.file}:{loc.line}" if loc else "") + ": "
    raise UnsupportedAPIError(f"{where}{api} is not supported by the emulator: {reason}")


def unsupported(api: str, reason: str) -> Callable[..., NoReturn]:
    """A placeholder for ``api`` that refuses every call."""

    def placeholder(*_args: Any, **_kwargs: Any) -> NoReturn:
        refuse(api, reason)

    placeholder.__name__ = placeholder.__qualname__ = api.rsplit(".", 1)[-1]
    placeholder.__doc__ = f"{api}: not supported by the emulator ({reason})."
    placeholder.unsupported = reason  # type: ignore[attr-defined]
    return placeholder


__all__ = ["refuse", "unsupported", "UnsupportedAPIError"]
