"""``nc_find_index8`` and ``nc_match_replace8`` (AWS ISA reference), both generations, against a
NumPy transcription of the reference's rules: the first occurrence of each of the 8 values per
partition; a repeated value claims the next occurrence (in ``vals`` order for find_index8, from
the last value for match_replace8's ``dst_idx``); an absent value gives all ones."""
from __future__ import annotations

import numpy as np
import pytest

from neuron_customcall import nki
from neuron_customcall.nki import isa as nisa1
from neuron_customcall.nki import language as nl
from neuron_customcall.nki.errors import NkiValidationError
from neuron_customcall.nki.isa import beta2 as nisa


def _claim(row, vals, order):
    taken, idx = set(), [0xFFFFFFFF] * 8
    for i in order:
        for j, v in enumerate(row):
            if v == vals[i] and j not in taken:
                taken.add(j)
                idx[i] = j
                break
    return idx, taken


def _reference(data, vals, imm):
    rows = data.reshape(data.shape[0], -1)
    find = np.array([_claim(r, v, range(8))[0] for r, v in zip(rows, vals)], np.uint32)
    rev = [_claim(r, v, range(7, -1, -1)) for r, v in zip(rows, vals)]
    idx = np.array([i for i, _ in rev], np.uint32)
    rep = rows.copy()
    for r, (_, taken) in zip(rep, rev):
        r[sorted(taken)] = imm
    return find, idx, rep.reshape(data.shape)


def _case(p=16, f=40, seed=0):
    rng = np.random.default_rng(seed)
    data = rng.integers(0, 12, (p, f)).astype(np.float32)
    vals = rng.integers(0, 14, (p, 8)).astype(np.float32)   # some absent, some repeated
    vals[0] = [3, 8, 8, 8, 8, 8, 8, 8]
    data[0, :11] = [1, 2, 3, 4, 8, 8, 8, 8, 8, 8, 8]
    return data, vals


def test_the_documented_duplicate_example():
    data = np.array([[1, 2, 3, 4, 8, 8, 8, 8, 8, 8, 8]], np.float32)
    vals = np.array([[3, 8, 8, 8, 8, 8, 8, 8]], np.float32)
    _, idx, _ = _reference(data, vals, 0.0)
    assert idx[0].tolist() == [2, 10, 9, 8, 7, 6, 5, 4]


@pytest.mark.parametrize("seed", [0, 1])
def test_beta2_find_and_match_replace(seed):
    data, vals = _case(seed=seed)

    @nki.jit
    def k(d, v):
        find = nl.ndarray((16, 8), nl.uint32, buffer=nl.shared_hbm)
        idx = nl.ndarray((16, 8), nl.uint32, buffer=nl.shared_hbm)
        rep = nl.ndarray((16, 40), nl.float32, buffer=nl.shared_hbm)
        t, vv = nl.load(d), nl.load(v)
        f_sb = nl.ndarray((16, 8), nl.uint32, buffer=nl.sbuf)
        i_sb = nl.ndarray((16, 8), nl.uint32, buffer=nl.sbuf)
        r_sb = nl.ndarray((16, 40), nl.float32, buffer=nl.sbuf)
        nisa.nc_find_index8(f_sb, t, vv)
        nisa.nc_match_replace8(r_sb, t, vv, -1.0, dst_idx=i_sb)
        for o, s in ((find, f_sb), (idx, i_sb), (rep, r_sb)):
            nisa.dma_copy(o, s)
        return find, idx, rep

    got = k(data, vals)
    for g, w in zip(got, _reference(data, vals, -1.0)):
        np.testing.assert_array_equal(g, w)


def test_beta1_forms_on_a_grid():
    data, vals = _case(p=128, f=64, seed=3)
    data = np.concatenate([data, data[::-1]])
    vals = np.concatenate([vals, vals[::-1]])

    @nki.jit
    def k(d, v):
        find = nl.ndarray((256, 8), nl.uint32, buffer=nl.shared_hbm)
        rep = nl.ndarray((256, 64), nl.float32, buffer=nl.shared_hbm)
        i = nl.program_id(0)
        t, vv = nl.load(d[i * 128:(i + 1) * 128]), nl.load(v[i * 128:(i + 1) * 128])
        nl.store(find[i * 128:(i + 1) * 128], nisa1.nc_find_index8(data=t, vals=vv))
        nl.store(rep[i * 128:(i + 1) * 128], nisa1.nc_match_replace8(data=t, vals=vv, imm=0.5))
        return find, rep

    find, rep = k[2](data, vals)
    want_find, _, want_rep = _reference(data, vals, 0.5)
    np.testing.assert_array_equal(find, want_find)
    np.testing.assert_array_equal(rep, want_rep)


def test_vals_must_hold_eight_values():
    @nki.jit
    def k(d, v):
        nisa1.nc_find_index8(data=nl.load(d), vals=nl.load(v))
        return d

    with pytest.raises(NkiValidationError, match="vals must hold 8 values"):
        k(np.zeros((4, 16), np.float32), np.zeros((4, 4), np.float32))
