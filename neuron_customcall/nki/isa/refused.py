"""Public ``nki.isa`` APIs the emulator does not implement: each is a function that refuses by
name (``UnsupportedAPIError``, a ``NotImplementedError``, through ``nki/unsupported.py``), so
that a kernel using one stops at its line with the API named, never with an ``AttributeError``
or a result of another meaning."""

from __future__ import annotations

from ..unsupported import unsupported as refusal


#: (generation prefix, name) -> why; beta1.py and beta2.py create the functions.
WHY: dict[str, str] = {
    "builtin_custom_op": "built-in custom ops are compiled libraries of the Neuron compiler",
}
