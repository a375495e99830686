"""`neuron-customcall cache [--stats] [--clear]`: where the compile cache is, what it holds, and
emptying it.

Why: the cache directory is chosen by environment variables (see neuron_customcall.cache); this
answers "which directory, how many artifacts, how large" without reading that code, and clears it
when a user wants a cold start. `--stats` adds the size limit, how full it is, leftover
temporaries and whether the directory is refused (others can write it).
"""
from __future__ import annotations

import argparse
import logging
import time
from pathlib import Path

from neuron_customcall.cli import command

log = logging.getLogger(__name__)


def _args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--cache-dir", type=Path, help="this directory instead of the configured one")
    p.add_argument("--stats", action="store_true", help="also the size limit, use, temporaries and trust")
    p.add_argument("--clear", action="store_true", help="remove every cached artifact and leftover temporary")


def _when(t: float | None) -> str:
    return "-" if t is None else time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(t))


@command("cache", "show (or --clear) the compile cache: directory, artifacts, size", _args)
def run(args: argparse.Namespace) -> int:
    from neuron_customcall.cache import (SIZE_LIMIT_ENV, CacheConfigError, CompileCache, default_cache_dir,
                                         disabled_by_env)

    try:
        cache = CompileCache(args.cache_dir or default_cache_dir())
    except CacheConfigError as e:
        log.error("%s", e)
        return 1
    st = cache.stats()
    state = " (disabled by NEURON_COMPILE_CACHE_DISABLE)" if disabled_by_env() and not args.cache_dir else ""
    print(f"{cache.directory}{state}: {st['entries']} artifacts, {st['bytes'] / 1e6:.2f} MB")
    if args.stats:
        limit = f"{st['limit'] / 1e6:.2f} MB ({100 * st['bytes'] / st['limit']:.1f}% used)" if st["limit"] else "none"
        print(f"size limit: {limit} [{SIZE_LIMIT_ENV}]")
        print(f"least recently used: {_when(st['oldest_use'])}; most recently used: {_when(st['newest_use'])}")
        print(f"temporaries: {st['temporaries']} ({st['temporary_bytes'] / 1e6:.2f} MB)")
        print(f"trusted: {'no: ' + st['refused'] if st['refused'] else 'yes'}")
    if args.clear:
        removed = cache.clear()
        print(f"removed {removed} artifacts")
    return 0
