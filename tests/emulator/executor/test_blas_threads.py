"""BLAS thread policy of a run (emulator/blas.py): set inside, restored after, overridable."""
from __future__ import annotations

import pytest

from emulator import blas


@pytest.fixture(autouse=True)
def four_cpus(monkeypatch):
    """The policy sees four usable CPUs, of which the tests say how many are free."""
    monkeypatch.setattr(blas, "usable_cpus", lambda: 4)
    monkeypatch.setattr(blas, "free_cpus", lambda: 4)


def _threads() -> set[int]:
    """The thread counts of every loaded OpenBLAS, read independently of blas.py."""
    from threadpoolctl import threadpool_info

    return {lib["num_threads"] for lib in threadpool_info() if lib["internal_api"] == "openblas"}


@pytest.fixture
def getter():
    if not blas._openblas():
        pytest.skip("NumPy is not linked against OpenBLAS here")
    return _threads


def test_every_openblas_is_controlled():
    """NumPy's and SciPy's OpenBLAS (the LAPACK ops' library) alike."""
    from threadpoolctl import threadpool_info

    ours = {lib.filepath for lib in blas._openblas()}  # loads SciPy's first
    loaded = {lib["filepath"] for lib in threadpool_info() if lib["internal_api"] == "openblas"}
    assert ours == loaded and len(loaded) >= 1


def test_fixed_thread_count_inside_and_restored_after(getter, monkeypatch):
    before = getter()
    monkeypatch.setenv("NEURON_EMULATOR_BLAS_THREADS", "1")
    with blas.blas_threads_for_run():
        assert getter() == {1}
    assert getter() == before


def test_off_leaves_blas_alone_and_auto_follows_the_free_cores(getter, monkeypatch):
    before = getter()
    monkeypatch.setenv("NEURON_EMULATOR_BLAS_THREADS", "off")
    with blas.blas_threads_for_run():
        assert getter() == before
    monkeypatch.setenv("NEURON_EMULATOR_BLAS_THREADS", "auto")
    monkeypatch.setattr(blas, "free_cpus", lambda: 1)  # strangers busy on three of four
    with blas.blas_threads_for_run():
        assert getter() == {1}
    monkeypatch.setattr(blas, "free_cpus", lambda: 3)
    assert blas._wanted() == 3
    monkeypatch.setattr(blas, "free_cpus", lambda: 4)  # all free: BLAS keeps its own setting
    with blas.blas_threads_for_run():
        assert getter() == before
    assert getter() == before


def test_a_bad_setting_falls_back_to_auto(monkeypatch):
    monkeypatch.setenv("NEURON_EMULATOR_BLAS_THREADS", "many")
    assert blas._wanted() is None


def test_concurrent_devices_share_the_cores_and_their_runs_keep_that(getter, monkeypatch):
    """run of several devices at once (the PJRT plugin's run_devices): a share each, which the
    runs inside (auto, every core free: leave BLAS alone) neither change nor restore."""
    before = getter()
    monkeypatch.setenv("NEURON_EMULATOR_BLAS_THREADS", "auto")
    with blas.blas_threads_for_devices(2):
        assert getter() == {2}
        with blas.blas_threads_for_run():
            assert getter() == {2}
        assert getter() == {2}
    assert getter() == before
    with blas.blas_threads_for_devices(8):
        assert getter() == {1}
    monkeypatch.setenv("NEURON_EMULATOR_BLAS_THREADS", "3")  # a number wins, "off" leaves BLAS alone
    with blas.blas_threads_for_devices(4):
        assert getter() == {3}
    monkeypatch.setenv("NEURON_EMULATOR_BLAS_THREADS", "off")
    with blas.blas_threads_for_devices(4):
        assert getter() == before
