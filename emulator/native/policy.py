"""When a program gets fused native code: NEURON_EMULATOR_NATIVE and NEURON_EMULATOR_NATIVE_AFTER.

Why not at once: g++ takes about a second per module, more than most programs ever run (a test,
a graph traced once). A program is fused once it has run NEURON_EMULATOR_NATIVE_AFTER times
(default 100): its module is then built in a background thread (or found in the cache) and
swapped in before a later run, which gives the same bits as NumPy (emulator.native.cexpr).

NEURON_EMULATOR_NATIVE = "auto" (default) | "off" (always NumPy) | "now" (built while the
artifact loads, before its first run: for tests that compare both paths and for benchmarks).
"""
from __future__ import annotations

import logging
import os

log = logging.getLogger(__name__)

MODE_ENV = "NEURON_EMULATOR_NATIVE"
AFTER_ENV = "NEURON_EMULATOR_NATIVE_AFTER"
DEFAULT_AFTER = 100
MODES = ("auto", "off", "now")


def mode() -> str:
    raw = os.environ.get(MODE_ENV, "auto").strip().lower() or "auto"
    if raw not in MODES:
        log.warning("%s=%r is not one of %s; using auto", MODE_ENV, raw, ", ".join(MODES))
        return "auto"
    return raw


def runs_before_build() -> int | None:
    """After how many runs a program's module is built: None (never), 0 (before the first)."""
    chosen = mode()
    if chosen == "off":
        return None
    if chosen == "now":
        return 0
    raw = os.environ.get(AFTER_ENV, "").strip()
    if not raw:
        return DEFAULT_AFTER
    try:
        return max(1, int(raw))
    except ValueError:
        log.warning("%s=%r is not a number; using %d", AFTER_ENV, raw, DEFAULT_AFTER)
        return DEFAULT_AFTER
