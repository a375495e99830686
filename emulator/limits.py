"""The emulator's resource limits and their settings: how long an HLO while loop may run, how many
programs an NKI grid may have, and the C++ kernel timeouts' parsing.

Why limits: an artifact or HLO module from elsewhere can hold `while(true)` or a grid of 2^31
programs; without a bound the run never ends and the only way out is to kill the process. Each
limit is an environment variable (README's settings table, docs/trust.md) and exceeding it is a
clear error naming the variable, like the GpSimd kernel timeout. A malformed setting is named too.
"""
from __future__ import annotations

import logging
import math
import os
from collections.abc import Mapping

log = logging.getLogger(__name__)

WHILE_TIMEOUT_ENV = "NEURON_EMULATOR_WHILE_TIMEOUT"
DEFAULT_WHILE_TIMEOUT = 600.0
MAX_GRID_ENV = "NEURON_EMULATOR_MAX_GRID_PROGRAMS"
DEFAULT_MAX_GRID = 1 << 22
#: Iterations one run of a data-dependent NKI loop (``nl.while_loop``, ``while reg:``, register
#: bounds of ``nl.dynamic_range``/``fori_loop``) may make before it is stopped.
MAX_KERNEL_LOOP_ENV = "NEURON_EMULATOR_MAX_KERNEL_LOOP_ITERATIONS"
DEFAULT_MAX_KERNEL_LOOP = 1_000_000


class LimitSettingError(ValueError):
    """An environment variable that sets a limit holds something that is not one."""


class GridLimitError(ValueError):
    """An NKI grid with more programs than NEURON_EMULATOR_MAX_GRID_PROGRAMS allows."""


def positive_setting(name: str, default: float, kind: type = float,
                     environ: Mapping[str, str] | None = None) -> float:
    """The positive number in variable `name` (`default` when unset); LimitSettingError otherwise."""
    env = os.environ if environ is None else environ
    raw = env.get(name, "").strip()
    if not raw:
        return default
    try:
        value = kind(raw)
    except ValueError:
        value = None
    if value is None or not value > 0 or (isinstance(value, float) and not math.isfinite(value)):
        raise LimitSettingError(f"{name}={raw!r} is not a positive {'integer' if kind is int else 'number'}")
    return value


def setting_or_default(name: str, default: float, environ: Mapping[str, str] | None = None) -> float:
    """As positive_setting, but a malformed value is reported with a warning and the default used
    (for settings read at import, where an exception would make the package unimportable)."""
    try:
        return positive_setting(name, default, environ=environ)
    except LimitSettingError as e:
        log.warning("%s; using the default, %g", e, default)
        return default


def while_timeout() -> float:
    """Seconds one HLO while loop may run before it is stopped."""
    return positive_setting(WHILE_TIMEOUT_ENV, DEFAULT_WHILE_TIMEOUT)


def max_grid_programs() -> int:
    """The most programs an NKI grid may launch."""
    return int(positive_setting(MAX_GRID_ENV, DEFAULT_MAX_GRID, int))


def max_kernel_loop_iterations() -> int:
    """The most iterations one run of a data-dependent kernel loop may make."""
    return int(positive_setting(MAX_KERNEL_LOOP_ENV, DEFAULT_MAX_KERNEL_LOOP, int))


def check_grid(grid: tuple[int, ...] | list[int]) -> None:
    """GridLimitError if `grid` launches more programs than allowed."""
    n = math.prod(int(g) for g in grid)
    limit = max_grid_programs()
    if n > limit:
        raise GridLimitError(f"grid {list(grid)} launches {n} programs, more than {limit} "
                             f"({MAX_GRID_ENV})")
