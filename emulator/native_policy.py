"""Whether an artifact may run native code: the switch that refuses artifacts carrying any.

Why: an artifact's GpSimd payloads are compiled C++ libraries; running the artifact runs them (in
the GpSimd worker process, but as native code with the user's rights). An artifact received from
someone else is therefore as trusted as a shared library from them. NKI payloads and the graph
program are data the emulator interprets, and are not covered by this switch. See docs/trust.md.
"""
from __future__ import annotations

import os
from collections.abc import Iterable, Mapping

from emulator.artifact.errors import ArtifactError
from emulator.artifact.writer import KernelPayload
from emulator.kernel_payload import NATIVE_KINDS

NO_NATIVE_ENV = "NEURON_CUSTOMCALL_NO_NATIVE_CODE"
_FALSE = {"", "0", "false", "no", "off"}


def native_refused(environ: Mapping[str, str] | None = None) -> bool:
    """True when NEURON_CUSTOMCALL_NO_NATIVE_CODE holds a true value (1, true, yes, on)."""
    env = os.environ if environ is None else environ
    return env.get(NO_NATIVE_ENV, "").strip().lower() not in _FALSE


def native_kernels(kernels: Iterable[KernelPayload]) -> list[KernelPayload]:
    """The payloads that are, or name, native code."""
    return [k for k in kernels if k.kind in NATIVE_KINDS]


def check_native(kernels: Iterable[KernelPayload], allow_native: bool | None) -> None:
    """Raise ArtifactError if the kernels carry native code and it is not allowed (`allow_native`
    None: as NEURON_CUSTOMCALL_NO_NATIVE_CODE says)."""
    allowed = not native_refused() if allow_native is None else allow_native
    native = native_kernels(kernels)
    if native and not allowed:
        names = ", ".join(sorted({f"{k.name} ({k.kind})" for k in native}))
        raise ArtifactError(f"artifact carries native code (GpSimd C++ kernels: {names}), and native code is "
                            f"refused ({NO_NATIVE_ENV} or --no-native-code); run it only if you trust its author")
