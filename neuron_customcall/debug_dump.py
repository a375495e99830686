"""NEURON_FRAMEWORK_DEBUG: every graph the backend sees is also written as protobuf text.

Why: when a framework path misbehaves, the first question is "which HLO did the framework hand
over?". As with the Neuron SDK, NEURON_FRAMEWORK_DEBUG=1 dumps each graph into the current
directory (NEURON_FRAMEWORK_DEBUG_DIR chooses another), as ``<module>.<fingerprint12>.pbtxt``,
a form `neuron-customcall compile` and `hlo.load` read back, and as HLO text
(``<module>.<fingerprint12>.hlo.txt``), the form people read. A graph is dumped once per process
(the backend calls this only when its memo misses), and a failed write is a warning, never an
error of the compile that triggered it.
"""
from __future__ import annotations

import logging
import os
import re
from collections.abc import Callable
from pathlib import Path

from google.protobuf import text_format

import hlo

log = logging.getLogger(__name__)

DEBUG_ENV = "NEURON_FRAMEWORK_DEBUG"
DIR_ENV = "NEURON_FRAMEWORK_DEBUG_DIR"
_FALSE = {"", "0", "false", "no", "off"}


def enabled() -> bool:
    return os.environ.get(DEBUG_ENV, "").strip().lower() not in _FALSE


def dump(proto, fingerprint: str) -> Path | None:
    """Writes the HloModuleProto `proto` if NEURON_FRAMEWORK_DEBUG is on, as protobuf text and,
    next to it, as HLO text (``.hlo.txt``, for reading); returns the .pbtxt path."""
    if not enabled():
        return None
    directory = Path(os.environ.get(DIR_ENV) or ".")
    safe_name = re.sub(r"[^A-Za-z0-9_.-]", "_", proto.name or "module")[:80]
    stem = f"{safe_name}.{fingerprint[:12]}"
    path = directory / f"{stem}.pbtxt"
    if not _write(path, lambda: text_format.MessageToString(proto)):
        return None
    _write(directory / f"{stem}.hlo.txt", lambda: hlo.module_from_proto(proto).to_text())
    return path


def _write(path: Path, render: Callable[[], str]) -> bool:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(render())
    except (OSError, hlo.HloError) as e:
        log.warning("%s: cannot write %s: %s", DEBUG_ENV, path, e)
        return False
    log.info("%s: wrote %s", DEBUG_ENV, path)
    return True
