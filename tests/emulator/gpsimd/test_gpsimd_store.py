"""Issue 16 "library planting": library images live in a private, owner-checked directory, a
stored file is used only when its content hashes to its name, new files are created exclusively
and never through a link, and the worker loads only the bytes it has hashed. Issue 12: one
runner registry (one runner per library content; a reload evicts the old one)."""

from __future__ import annotations

import os
import stat

import numpy as np
import pytest

from emulator.gpsimd import store
from emulator.gpsimd.errors import LibraryError
from emulator.gpsimd.process import WorkerProcess
from emulator.gpsimd.runner import GpSimdRunner, evict, runner_for
from gpsimd_kernels import library, run, tensor


@pytest.fixture
def private(tmp_path, monkeypatch):
    base = tmp_path / "private"
    monkeypatch.setenv(store.ENV_BASE, str(base))
    return base


def test_the_store_is_private_to_the_user(private):
    path, sha = store.install(b"image")
    assert path.parent == private / "gpsimd" and path.name == f"libgpsimd-{sha}.so"
    for d in (private, private / "gpsimd"):
        info = os.lstat(d)
        assert stat.S_IMODE(info.st_mode) == 0o700 and info.st_uid == os.getuid()


def test_a_directory_open_to_others_is_refused(private):
    private.mkdir(mode=0o777)
    os.chmod(private, 0o777)
    with pytest.raises(LibraryError, match="open to other users"):
        store.install(b"image")


def test_a_link_in_place_of_the_directory_is_refused(private, tmp_path):
    target = tmp_path / "elsewhere"
    target.mkdir(mode=0o700)
    private.symlink_to(target)
    with pytest.raises(LibraryError, match="not a symbolic link"):
        store.install(b"image")


def test_a_planted_library_is_replaced_not_reused(private):
    path, sha = store.install(b"good")
    path.write_bytes(b"planted")  # someone's library under the good one's name
    again, _ = store.install(b"good")
    assert again == path and path.read_bytes() == b"good"


def test_installing_never_writes_through_a_link(private, tmp_path):
    victim = tmp_path / "victim"
    victim.write_bytes(b"precious")
    directory = store.library_directory()
    sha = store.digest(b"image")
    (directory / f"libgpsimd-{sha}.so").symlink_to(victim)
    path, _ = store.install(b"image")
    assert victim.read_bytes() == b"precious"
    assert not path.is_symlink() and path.read_bytes() == b"image"


def test_the_worker_refuses_a_library_that_does_not_match_its_hash(private):
    path, sha = store.install(library("access_ops").read_bytes())
    with pytest.raises(LibraryError, match="does not hash to"):
        WorkerProcess(path, "0" * 64, 60.0)


def test_the_worker_refuses_a_link(private, tmp_path):
    path, sha = store.install(library("access_ops").read_bytes())
    link = tmp_path / "link.so"
    link.symlink_to(path)
    with pytest.raises(LibraryError, match="cannot open"):
        WorkerProcess(link, sha, 60.0)


def test_one_runner_per_library_content_and_eviction_stops_it():
    image = library("access_ops").read_bytes()
    first = runner_for(library("access_ops"))
    assert runner_for(image) is first  # by file or by bytes: one runner, one worker
    x = np.arange(8, dtype=np.float32)
    host_op = run("access_ops", "copy_elem", tensor(x))  # the helper's own runner still works
    assert np.array_equal(host_op.output.view(np.float32), x)
    evict(first)
    assert first.closed
    second = runner_for(image)
    assert second is not first and not second.closed
    evict(second)


def test_a_closed_runner_does_not_restart_a_worker():
    runner = GpSimdRunner(library("access_ops"))
    runner.close()
    with pytest.raises(Exception, match="closed"):
        runner.request({"cmd": "info"}, 10)
