"""Backend configs that name their library image by hash, and their expansion back to inline.

Why: a GpSimd descriptor carries its library image inline, so that HLO alone compiles anywhere;
but torch_xla copies each custom-call's config into its IR node on every call, and a ~170 KB copy
per call of a C++ op was the largest part of a training step's tracing cost. On that path the
adapter emits `by_reference(config)` instead (a document of about 1 KB whose payload is the
image's SHA-256, registered in kernels/images). Wherever such HLO reaches our compiler or leaves
the process, `expand_proto` / `expand_text` put the images back, so that compile-cache keys,
NEURON_FRAMEWORK_DEBUG dumps, artifacts and exported HLO are exactly what inline configs give.

The two directions are memoised: one conversion per distinct config and process.
"""
from __future__ import annotations

import base64
import binascii
import dataclasses
import json
import threading
from typing import Any

from neuron_customcall.kernels.descriptor import REFERENCE, TARGET, DescriptorError, decode, encode

#: A reference config is a payload-free document; longer configs are never decoded to find out.
_REFERENCE_AT_MOST = 64 * 1024

_INLINE_OF: dict[str, str] = {}     # reference config -> its inline config
_REFERENCE_OF: dict[str, str] = {}  # inline config -> its reference config
_LOCK = threading.Lock()


def by_reference(config: str) -> str:
    """The config naming its payload by hash (the image registered in this process)."""
    ref = _REFERENCE_OF.get(config)
    if ref is None:
        ref = encode(dataclasses.replace(decode(config), by_reference=True))
        with _LOCK:
            _REFERENCE_OF[config] = ref
            _INLINE_OF[ref] = config
    return ref


def emitted() -> list[str]:
    """The reference configs this process has made."""
    return list(_INLINE_OF)


def _is_reference(config: str) -> bool:
    if len(config) > _REFERENCE_AT_MOST:
        return False
    try:
        doc = json.loads(base64.b64decode(config, validate=True))
    except (binascii.Error, ValueError):
        return False  # not a descriptor at all: the compiler says so, by instruction
    payload = doc.get("payload") if type(doc) is dict else None
    return type(payload) is dict and payload.get("encoding") == REFERENCE


def expand(config: str) -> str:
    """`config` with its payload inline: unchanged when it already is; DescriptorError (naming the
    kernel) for a reference to an image this process does not hold."""
    inline = _INLINE_OF.get(config)
    if inline is not None:
        return inline
    if not _is_reference(config):
        return config
    inline = encode(dataclasses.replace(decode(config), by_reference=False))
    with _LOCK:
        _INLINE_OF[config] = inline
    return inline


def expand_text(text: str) -> str:
    """A text (HLO, StableHLO or torch_xla IR) with every reference config this process emitted
    replaced by its inline config."""
    for ref, inline in list(_INLINE_OF.items()):
        if ref in text:
            text = text.replace(ref, inline)
    return text


def expand_proto(proto: Any) -> bool:
    """Expands, in place, the kernel configs of an HloModuleProto; True when one changed. A
    reference this process can not resolve stays: the compiler then refuses its custom-call,
    naming the instruction and the kernel (the DescriptorError of `expand`)."""
    changed = False
    for comp in proto.computations:
        for inst in comp.instructions:
            if inst.custom_call_target != TARGET or not inst.backend_config:
                continue
            raw = inst.backend_config
            config = raw.decode("ascii", "replace") if isinstance(raw, bytes) else str(raw)
            try:
                inline = expand(config)
            except DescriptorError:
                continue
            if inline is not config:
                inst.backend_config = inline.encode("ascii") if isinstance(raw, bytes) else inline
                changed = True
    return changed


