"""The compile cache as a trust boundary (issue 16): an entry must prove it is its key's artifact,
a directory or entry others can write is refused unless the user opts in, entries are read only
from regular files, and the directory is bounded (LRU eviction, stale temporaries removed)."""
from __future__ import annotations

import logging
import os
import threading
from pathlib import Path

import numpy as np
import pytest

import hlo
from emulator.artifact import read_artifact
from neuron_customcall import backend
from neuron_customcall.cache import (SHARED_ENV, SIZE_LIMIT_ENV, STALE_TMP_SECONDS, CacheConfigError,
                                     CompileCache, size_limit_from_env)

ADD = """HloModule g

ENTRY main {
  p0 = f32[4]{0} parameter(0)
  p1 = f32[4]{0} parameter(1)
  ROOT r = f32[4]{0} %s(p0, p1)
}
"""
X, Y = np.arange(4, dtype=np.float32), np.full(4, 3, np.float32)


@pytest.fixture(autouse=True)
def fresh_memo(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv(SHARED_ENV, raising=False)
    monkeypatch.delenv(SIZE_LIMIT_ENV, raising=False)
    backend.clear_memo()
    yield
    backend.clear_memo()


def _compile(op: str, cache_dir: Path) -> backend.Compiled:
    backend.clear_memo()
    return backend.compile_cached(ADD % op, cache=cache_dir)


def _run(compiled: backend.Compiled) -> np.ndarray:
    return compiled.executable.run([X, Y])[0]


# -- an entry proves it belongs to its key -----------------------------------------------------
def test_another_graphs_artifact_copied_into_the_slot_is_discarded(tmp_path: Path,
                                                                    caplog: pytest.LogCaptureFixture) -> None:
    add_path = _compile("add", tmp_path).artifact
    mul_path = _compile("multiply", tmp_path).artifact
    good = add_path.read_bytes()
    add_path.write_bytes(mul_path.read_bytes())  # a valid, checksummed artifact of another graph
    with caplog.at_level(logging.WARNING):
        compiled = _compile("add", tmp_path)
    np.testing.assert_array_equal(_run(compiled), X + Y)
    assert "belongs to another graph" in caplog.text
    assert add_path.read_bytes() == good  # recompiled and reinstalled


def test_the_manifest_records_key_fingerprint_and_compiler(tmp_path: Path) -> None:
    path = _compile("add", tmp_path).artifact
    m = read_artifact(path.read_bytes()).manifest
    assert m["cache_key"] == path.stem
    assert m["hlo_fingerprint"] == hlo.load(ADD % "add").fingerprint()
    assert m["compiler_version"] == backend.compiler_version()


def test_an_entry_without_a_recorded_key_is_recompiled(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    from neuron_customcall.compiler import compile_module

    path = _compile("add", tmp_path).artifact
    path.write_bytes(compile_module(hlo.load(ADD % "add")))  # the right graph, but no key inside
    with caplog.at_level(logging.WARNING):
        np.testing.assert_array_equal(_run(_compile("add", tmp_path)), X + Y)
    assert "belongs to another graph" in caplog.text
    assert read_artifact(path.read_bytes()).manifest["cache_key"] == path.stem


# -- who may write the directory -----------------------------------------------------------------
def test_new_directories_are_private(tmp_path: Path) -> None:
    path = _compile("add", tmp_path / "cache").artifact
    assert (tmp_path / "cache").stat().st_mode & 0o777 == 0o700
    assert path.parent.stat().st_mode & 0o777 == 0o700


@pytest.mark.parametrize("where", ["root", "subdir"])
def test_a_directory_others_can_write_is_refused_unless_opted_in(tmp_path: Path, where: str,
                                                                  monkeypatch: pytest.MonkeyPatch,
                                                                  caplog: pytest.LogCaptureFixture) -> None:
    path = _compile("add", tmp_path).artifact
    (tmp_path if where == "root" else path.parent).chmod(0o777)
    with caplog.at_level(logging.WARNING):
        compiled = _compile("add", tmp_path)
    assert isinstance(compiled.artifact, bytes)  # compiled without the cache
    assert "writable by group or others" in caplog.text and SHARED_ENV in caplog.text
    monkeypatch.setenv(SHARED_ENV, "1")
    assert _compile("add", tmp_path).artifact == path


def test_a_directory_of_another_user_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cache = CompileCache(tmp_path)
    me = os.geteuid()
    monkeypatch.setattr(os, "geteuid", lambda: me + 1)
    assert "owned by uid" in cache.refusal()
    assert cache.put("ab" * 32, b"x") is None
    assert CompileCache(tmp_path, allow_shared=True).refusal() is None


def test_an_entry_others_can_write_is_not_used(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    cache = CompileCache(tmp_path)
    path = cache.put("ab" * 32, b"artifact")
    path.chmod(0o666)
    with caplog.at_level(logging.WARNING):
        assert cache.get("ab" * 32) is None
    assert "writable by group or others" in caplog.text
    assert CompileCache(tmp_path, allow_shared=True).get("ab" * 32) == (path, b"artifact")


def _get_within(cache: CompileCache, key: str, seconds: float = 10.0):
    """cache.get(key) in a thread, failing (not hanging) the test if it blocks."""
    box: list = []
    t = threading.Thread(target=lambda: box.append(cache.get(key)), daemon=True)
    t.start()
    t.join(seconds)
    assert not t.is_alive(), "cache.get blocked"
    return box[0]


@pytest.mark.parametrize("kind", ["fifo", "symlink", "dev-zero", "directory"])
def test_only_regular_files_are_entries(tmp_path: Path, kind: str, caplog: pytest.LogCaptureFixture) -> None:
    cache = CompileCache(tmp_path)
    key = "cd" * 32
    path = cache.path(key)
    path.parent.mkdir(mode=0o700)
    target = tmp_path / "elsewhere.neff"
    target.write_bytes(b"planted")
    {"fifo": lambda: os.mkfifo(path), "symlink": lambda: path.symlink_to(target),
     "dev-zero": lambda: path.symlink_to("/dev/zero"), "directory": lambda: path.mkdir()}[kind]()
    with caplog.at_level(logging.WARNING):
        assert _get_within(cache, key) is None
    assert "cannot read compile cache entry" in caplog.text


# -- size limit, LRU, temporaries ----------------------------------------------------------------
def test_size_limit_evicts_least_recently_used(tmp_path: Path) -> None:
    cache = CompileCache(tmp_path, size_limit=250)
    keys = [f"{k:02x}" * 32 for k in range(3)]
    for t, key in enumerate(keys[:2]):
        os.utime(cache.put(key, bytes(100)), (1000 + t, 1000 + t))
    assert cache.get(keys[0]) is not None  # a hit makes the oldest the most recently used
    cache.put(keys[2], bytes(100))  # 300 bytes > 95% of 250: the least recently used (keys[1]) goes
    assert [p.stem for p in cache.entries()] == sorted([keys[0], keys[2]])


def test_an_entry_larger_than_the_limit_is_kept_until_the_next_install(tmp_path: Path) -> None:
    cache = CompileCache(tmp_path, size_limit=10)
    path = cache.put("ab" * 32, bytes(100))
    assert cache.entries() == [path] and path.read_bytes() == bytes(100)


def test_two_thousand_entries_stay_within_the_limit(tmp_path: Path) -> None:
    cache = CompileCache(tmp_path, size_limit=50_000)
    for k in range(2000):
        cache.put(f"{k:064x}", bytes(1000))
        if k % 97 == 0:
            assert sum(p.stat().st_size for p in cache.entries()) <= 50_000
    assert 45 <= len(cache.entries()) <= 50
    assert f"{1999:064x}" in {p.stem for p in cache.entries()}  # the newest stays


def test_stale_temporaries_go_on_install_and_all_on_clear(tmp_path: Path) -> None:
    cache = CompileCache(tmp_path)
    (tmp_path / "ab").mkdir(mode=0o700)
    stale, fresh = tmp_path / "ab" / ".abab.x1.tmp", tmp_path / "ab" / ".abab.x2.tmp"
    stale.write_bytes(b"killed writer")
    fresh.write_bytes(b"running writer")
    old = os.stat(stale).st_mtime - STALE_TMP_SECONDS - 10
    os.utime(stale, (old, old))
    cache.put("ab" * 32, b"x")
    assert not stale.exists() and fresh.exists()
    assert cache.stats()["temporaries"] == 1
    assert cache.clear() == 1
    assert cache.entries() == [] and cache.temporaries() == []


@pytest.mark.parametrize("value, limit", [("", 1 << 30), ("0", 0), ("12345", 12345), ("10M", 10 << 20),
                                          ("2 GiB", 2 << 30), ("1k", 1024)])
def test_size_limit_setting(value: str, limit: int) -> None:
    assert size_limit_from_env({SIZE_LIMIT_ENV: value}) == limit


def test_malformed_size_limit_is_named_and_compiles_without_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                   caplog: pytest.LogCaptureFixture) -> None:
    with pytest.raises(CacheConfigError, match=SIZE_LIMIT_ENV):
        size_limit_from_env({SIZE_LIMIT_ENV: "lots"})
    monkeypatch.setenv(SIZE_LIMIT_ENV, "lots")
    with caplog.at_level(logging.WARNING):
        assert isinstance(_compile("add", tmp_path).artifact, bytes)
    assert SIZE_LIMIT_ENV in caplog.text


# -- the memory budget holds on a hit ------------------------------------------------------------
def test_a_cached_artifact_is_held_to_todays_memory_limit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from neuron_customcall.compiler.errors import CompileError
    from neuron_customcall.compiler.memory import MEMORY_LIMIT_ENV

    monkeypatch.setenv(MEMORY_LIMIT_ENV, "0")
    path = _compile("add", tmp_path).artifact
    assert read_artifact(path.read_bytes()).manifest["memory_estimate"] == 3 * 16  # two params, one result
    monkeypatch.setenv(MEMORY_LIMIT_ENV, "32")  # lowered after the entry was compiled
    with pytest.raises(CompileError, match=rf"needs at least 48 bytes of memory at once \(cached at {path}\).*"
                                           f"{MEMORY_LIMIT_ENV}"):
        _compile("add", tmp_path)
    assert path.exists()  # a valid entry, kept for when the limit allows it
    monkeypatch.setenv(MEMORY_LIMIT_ENV, "48")
    np.testing.assert_array_equal(_run(_compile("add", tmp_path)), X + Y)


def test_an_entry_without_a_memory_estimate_is_recompiled(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    from emulator.artifact import ArtifactContents, write_artifact

    path = _compile("add", tmp_path).artifact
    art = read_artifact(path.read_bytes())
    del art.manifest["memory_estimate"]  # as an entry written before the estimate was recorded
    path.write_bytes(write_artifact(ArtifactContents(art.manifest, art.program, art.constants, art.kernels)))
    with caplog.at_level(logging.WARNING):
        np.testing.assert_array_equal(_run(_compile("add", tmp_path)), X + Y)
    assert "no memory estimate recorded" in caplog.text
    assert "memory_estimate" in read_artifact(path.read_bytes()).manifest
