"""Outputs a kernel never writes (a forgotten grid, a grid too small, a missing store, a mask
that skips elements) are reported by a warning naming the output and how much of it is left
unwritten (logger neuron_customcall.nki.checks), not silently returned as NaN."""

from __future__ import annotations

import logging

import numpy as np
import pytest

from neuron_customcall import nki
from neuron_customcall.nki import language as nl

from tests.neuron_customcall.nki.row_kernels import tiled_add

LOGGER = "neuron_customcall.nki.checks"


def _warnings(caplog):
    return [r.getMessage() for r in caplog.records
            if r.name == LOGGER and r.levelno == logging.WARNING and "uninitialised" in r.message]


def test_forgotten_grid_reports_the_unwritten_share(caplog):
    a = np.ones((512, 64), np.float32)
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        out = tiled_add(a, a)                       # grid (1,): only rows 0..127
    assert np.isnan(out[128:]).all()
    (msg,) = _warnings(caplog)
    assert "output 0" in msg and "float32[512, 64]" in msg
    assert "24576 of its 32768 elements (75.0%)" in msg and "grid too small" in msg


def test_full_grid_and_covering_loops_say_nothing(caplog):
    a = np.ones((512, 64), np.float32)

    @nki.jit
    def halves(x):
        out = nl.ndarray((256, 64), dtype=x.dtype, buffer=nl.shared_hbm)
        for h in nl.affine_range(2):
            t = nl.load(x[h * 128:(h + 1) * 128, :])
            nl.store(out[h * 128:(h + 1) * 128, 0:32], value=t[:, 0:32])
            nl.store(out[h * 128:(h + 1) * 128, 32:64], value=t[:, 32:64])
        return out

    with caplog.at_level(logging.WARNING, logger=LOGGER):
        tiled_add[4](a, a)
        halves(a)
    assert _warnings(caplog) == []


@pytest.mark.parametrize("case,fragment", [
    ("never", "is never written: all its 512 elements"),
    ("masked", "128 of its 512 elements (25.0%)"),
    ("accumulate only", "is never written"),
])
def test_missing_masked_and_accumulate_only_outputs(caplog, case, fragment):
    @nki.jit
    def k(a):
        out = nl.ndarray((128, 4), dtype=a.dtype, buffer=nl.shared_hbm)
        other = nl.ndarray((128, 4), dtype=a.dtype, buffer=nl.shared_hbm)
        t = nl.load(a)
        nl.store(other, value=t)
        if case == "masked":
            i_f = nl.arange(4)[None, :]
            nl.store(out[nl.arange(128)[:, None], i_f], value=t, mask=(i_f < 3))
        elif case == "accumulate only":
            nl.atomic_rmw(out, value=t, op=nl.add)     # adds to uninitialised memory
        return other, out

    with caplog.at_level(logging.WARNING, logger=LOGGER):
        k(np.ones((128, 4), np.float32))
    (msg,) = _warnings(caplog)
    assert "output 1" in msg and fragment in msg
