"""`neuron-customcall cache [--clear]`: where the compile cache is, what it holds, and emptying it.

Why: the cache directory is chosen by environment variables (see neuron_customcall.cache); this
answers "which directory, how many artifacts, how large" without reading that code, and clears it
when a user wants a cold start.
"""
from __future__ import annotations

import argparse
import logging
from pathlib import Path

from neuron_customcall.cli import command

log = logging.getLogger(__name__)


def _args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--cache-dir", type=Path, help="this directory instead of the configured one")
    p.add_argument("--clear", action="store_true", help="remove every cached artifact")


@command("cache", "show (or --clear) the compile cache: directory, artifacts, size", _args)
def run(args: argparse.Namespace) -> int:
    from neuron_customcall.cache import CacheConfigError, CompileCache, default_cache_dir, disabled_by_env

    try:
        cache = CompileCache(args.cache_dir or default_cache_dir())
    except CacheConfigError as e:
        log.error("%s", e)
        return 1
    entries = cache.entries()
    size = sum(p.stat().st_size for p in entries if p.exists())
    state = " (disabled by NEURON_COMPILE_CACHE_DISABLE)" if disabled_by_env() and not args.cache_dir else ""
    print(f"{cache.directory}{state}: {len(entries)} artifacts, {size / 1e6:.2f} MB")
    if args.clear:
        for path in entries:
            cache.discard(path.stem)
        print(f"removed {len(entries)} artifacts")
    return 0
