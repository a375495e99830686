"""The compile cache: where it lives, atomic installs under concurrency, and (through
neuron_customcall.backend) hits, the off switch and recovery from corrupt entries."""
from __future__ import annotations

import logging
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import hlo
from neuron_customcall import backend
from neuron_customcall.cache import (CACHE_URL_ENV, DISABLE_ENV, CacheConfigError, CompileCache, cache_key,
                                     default_cache_dir, disabled_by_env)

ROOT = Path(__file__).resolve().parents[2]

ADD_HLO = """HloModule add

ENTRY main {
  p0 = f32[4]{0} parameter(0)
  p1 = f32[4]{0} parameter(1)
  ROOT a = f32[4]{0} add(p0, p1)
}
"""


# -- where the cache lives ---------------------------------------------------------------------
def test_default_dir_follows_xdg_then_home() -> None:
    assert default_cache_dir({"XDG_CACHE_HOME": "/x/cache", "HOME": "/h"}) == Path("/x/cache/neuron-customcall")
    assert default_cache_dir({"HOME": "/h"}) == Path("/h/.cache/neuron-customcall")


def test_cache_url_overrides_everything() -> None:
    env = {"XDG_CACHE_HOME": "/x", CACHE_URL_ENV: "/shared/neffs"}
    assert default_cache_dir(env) == Path("/shared/neffs")
    assert default_cache_dir({CACHE_URL_ENV: "file:///srv/my%20cache"}) == Path("/srv/my cache")


def test_remote_cache_urls_are_refused() -> None:
    with pytest.raises(CacheConfigError, match="s3://bucket"):
        default_cache_dir({CACHE_URL_ENV: "s3://bucket/prefix"})


@pytest.mark.parametrize("value, disabled", [("1", True), ("true", True), ("ON", True), ("0", False),
                                             ("", False), ("no", False)])
def test_disable_switch(value: str, disabled: bool) -> None:
    assert disabled_by_env({DISABLE_ENV: value}) is disabled


def test_from_env_honours_the_switch(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv(CACHE_URL_ENV, str(tmp_path))
    monkeypatch.setenv(DISABLE_ENV, "1")
    assert CompileCache.from_env() is None
    assert CompileCache.from_env(tmp_path / "explicit").directory == tmp_path / "explicit"
    monkeypatch.delenv(DISABLE_ENV)
    assert CompileCache.from_env().directory == tmp_path


def test_key_depends_on_every_part() -> None:
    base = cache_key("fp", "flags", "1.0")
    assert len({base, cache_key("fp2", "flags", "1.0"), cache_key("fp", "flags2", "1.0"),
                cache_key("fp", "flags", "1.1"), cache_key("fpf", "lags", "1.0")}) == 5
    assert cache_key("fp", "flags", "1.0") == base


# -- installing entries ------------------------------------------------------------------------
def test_put_get_round_trip_leaves_no_temporaries(tmp_path: Path) -> None:
    cache = CompileCache(tmp_path)
    key = cache_key("fp", "", "v")
    assert cache.get(key) is None
    path = cache.put(key, b"artifact")
    assert path == cache.path(key) and cache.get(key) == (path, b"artifact")
    assert path.stat().st_mode & 0o777 == 0o644  # readable by others sharing the cache
    assert cache.put(key, b"artifact two") == path and path.read_bytes() == b"artifact two"
    assert [p.name for p in path.parent.iterdir()] == [path.name]
    assert cache.entries() == [path]
    cache.discard(key)
    cache.discard(key)  # a second discard (another process got there first) is not an error
    assert cache.get(key) is None


def test_unwritable_cache_warns_and_carries_on(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    blocker = tmp_path / "file"
    blocker.write_bytes(b"")
    cache = CompileCache(blocker / "cache")  # a directory below a regular file can not exist
    with caplog.at_level(logging.WARNING):
        assert cache.put("ab" * 32, b"x") is None
    assert "cannot write compile cache entry" in caplog.text


_WRITER = textwrap.dedent("""
    import sys
    from pathlib import Path
    from neuron_customcall.cache import CompileCache
    cache = CompileCache(Path(sys.argv[1]))
    data = bytes(range(256)) * 4096  # 1 MiB: large enough for a torn write to be visible
    for _ in range(int(sys.argv[3])):
        assert cache.put(sys.argv[2], data) is not None
""")


def test_concurrent_writers_never_expose_a_partial_entry(tmp_path: Path) -> None:
    key = cache_key("fp", "", "v")
    data = bytes(range(256)) * 4096
    cache = CompileCache(tmp_path)
    procs = [subprocess.Popen([sys.executable, "-c", _WRITER, str(tmp_path), key, "15"], cwd=ROOT)
             for _ in range(4)]
    seen = 0
    while any(p.poll() is None for p in procs):
        entry = cache.get(key)
        if entry is not None:
            assert entry[1] == data
            seen += 1
    assert [p.wait() for p in procs] == [0, 0, 0, 0]
    assert cache.get(key)[1] == data
    assert [p.name for p in cache.path(key).parent.iterdir()] == [cache.path(key).name]


# -- the backend: memo, hits, the off switch, corrupt entries, several processes ---------------
@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """Counts compiles and artifact loads, and starts from an empty in-process memo."""
    counts = {"compile": 0, "load": 0}
    real_compile, real_load = backend._compile, backend._load

    def counting_compile(module, flags, *identity):
        counts["compile"] += 1
        return real_compile(module, flags, *identity)

    def counting_load(artifact, *identity):
        counts["load"] += 1
        return real_load(artifact, *identity)

    monkeypatch.setattr(backend, "_compile", counting_compile)
    monkeypatch.setattr(backend, "_load", counting_load)
    backend.clear_memo()
    yield counts
    backend.clear_memo()


def _run_add(executable) -> np.ndarray:
    (out,) = executable.run([np.arange(4, dtype=np.float32), np.ones(4, np.float32)])
    return out


def test_memo_then_disk_hit(tmp_path: Path, calls: dict[str, int], caplog: pytest.LogCaptureFixture) -> None:
    first = backend.compile_cached(ADD_HLO.encode(), cache=tmp_path)
    assert isinstance(first.artifact, Path) and first.artifact.parent.parent == tmp_path
    np.testing.assert_array_equal(_run_add(first.executable), [1, 2, 3, 4])
    again = backend.compile_cached(ADD_HLO.encode(), cache=tmp_path)
    assert again.executable is first.executable and calls == {"compile": 1, "load": 1}
    backend.clear_memo()  # a new process, as far as the cache can tell
    with caplog.at_level(logging.INFO, logger="neuron_customcall.backend"):
        hit = backend.compile_cached(hlo.load(ADD_HLO), cache=tmp_path)
    assert calls == {"compile": 1, "load": 2}
    assert f"Using a cached neff at {first.artifact}" in caplog.text
    np.testing.assert_array_equal(_run_add(hit.executable), [1, 2, 3, 4])


def test_key_covers_flags_and_compiler_version(tmp_path: Path, calls: dict[str, int],
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    from neuron_customcall.compiler import CompileFlags

    backend.compile_cached(ADD_HLO, None, cache=tmp_path)
    backend.compile_cached(ADD_HLO, CompileFlags(), cache=tmp_path)  # the defaults spelt out: same entry
    backend.compile_cached(ADD_HLO, CompileFlags(instruction_names=False), cache=tmp_path)
    assert calls["compile"] == 2 and len(CompileCache(tmp_path).entries()) == 2
    monkeypatch.setattr(backend, "compiler_version", lambda: "a newer compiler")
    backend.compile_cached(ADD_HLO, cache=tmp_path)
    assert calls["compile"] == 3 and len(CompileCache(tmp_path).entries()) == 3


def test_disabled_cache_writes_nothing(tmp_path: Path, calls: dict[str, int], monkeypatch: pytest.MonkeyPatch) -> None:
    compiled = backend.compile_cached(ADD_HLO, cache=False)
    assert isinstance(compiled.artifact, bytes)
    monkeypatch.setenv(CACHE_URL_ENV, str(tmp_path / "env"))
    monkeypatch.setenv(DISABLE_ENV, "1")
    backend.clear_memo()
    compiled = backend.compile_cached(ADD_HLO)
    assert isinstance(compiled.artifact, bytes) and calls["compile"] == 2
    assert not (tmp_path / "env").exists()
    monkeypatch.delenv(DISABLE_ENV)
    backend.clear_memo()
    assert isinstance(backend.compile_cached(ADD_HLO).artifact, Path)
    assert len(CompileCache(tmp_path / "env").entries()) == 1


def test_unsupported_cache_url_compiles_without_a_cache(calls: dict[str, int], monkeypatch: pytest.MonkeyPatch,
                                                        caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setenv(CACHE_URL_ENV, "s3://bucket/neffs")
    with caplog.at_level(logging.WARNING):
        compiled = backend.compile_cached(ADD_HLO)
    assert isinstance(compiled.artifact, bytes)
    assert "only local paths and file:// URLs" in caplog.text and "compiling without a cache" in caplog.text


@pytest.mark.parametrize("damage", ["garbage", "truncated", "empty"])
def test_corrupt_entry_is_recompiled_with_a_warning(tmp_path: Path, calls: dict[str, int], damage: str,
                                                    caplog: pytest.LogCaptureFixture) -> None:
    path = backend.compile_cached(ADD_HLO, cache=tmp_path).artifact
    good = path.read_bytes()
    path.write_bytes({"garbage": b"not an artifact at all", "truncated": good[: len(good) // 2], "empty": b""}[damage])
    backend.clear_memo()
    with caplog.at_level(logging.WARNING):
        compiled = backend.compile_cached(ADD_HLO, cache=tmp_path)
    assert "is unusable" in caplog.text and str(path) in caplog.text
    assert calls["compile"] == 2
    assert path.read_bytes() == good  # the entry was replaced by a good one
    np.testing.assert_array_equal(_run_add(compiled.executable), [1, 2, 3, 4])


_COMPILER_PROCESS = textwrap.dedent("""
    import sys
    from neuron_customcall import backend
    compiled = backend.compile_cached(open(sys.argv[2]).read(), cache=sys.argv[1])
    print(compiled.artifact)
""")


def test_concurrent_compiles_of_one_graph_from_several_processes(tmp_path: Path) -> None:
    from neuron_customcall.compiler import compile_module

    graph = tmp_path / "add.txt"
    graph.write_text(ADD_HLO)
    cache_dir = tmp_path / "cache"
    procs = [subprocess.Popen([sys.executable, "-c", _COMPILER_PROCESS, str(cache_dir), str(graph)], cwd=ROOT,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(4)]
    results = [p.communicate(timeout=300) for p in procs]
    assert [p.returncode for p in procs] == [0] * 4, [err for _, err in results]
    entries = CompileCache(cache_dir).entries()
    assert len(entries) == 1 and {out.strip() for out, _ in results} == {str(entries[0])}
    module = hlo.load(ADD_HLO)
    assert entries[0].read_bytes() == compile_module(module, fingerprint=module.fingerprint(),
                                                     cache_key=entries[0].stem)
    assert [p.name for p in entries[0].parent.iterdir()] == [entries[0].name]  # no temporaries left


def test_framework_debug_dumps_each_new_graph_once(tmp_path: Path, calls: dict[str, int],
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NEURON_FRAMEWORK_DEBUG", "1")
    monkeypatch.setenv("NEURON_FRAMEWORK_DEBUG_DIR", str(tmp_path / "dumps"))
    for _ in range(2):
        backend.compile_cached(ADD_HLO.encode(), cache=False)
    stem = f"add.{hlo.load(ADD_HLO).fingerprint()[:12]}"
    assert sorted(p.name for p in (tmp_path / "dumps").iterdir()) == [f"{stem}.hlo.txt", f"{stem}.pbtxt"]
    for dump in (tmp_path / "dumps").iterdir():
        assert hlo.modules_equal(hlo.load(dump), hlo.load(ADD_HLO))
    monkeypatch.setenv("NEURON_FRAMEWORK_DEBUG", "0")
    backend.clear_memo()
    backend.compile_cached(ADD_HLO.replace("add(", "multiply("), cache=False)
    assert len(list((tmp_path / "dumps").iterdir())) == 2
