"""Building lib<name>.so from compute and shape sources plus the GpSimd device runtime.

Sources compile in parallel into the object cache; the library is relinked only when one of its
objects changed. Argument rules that need no compiler (the reserved name, STACK_SIZE's maximum)
are checked here first so that their errors are immediate.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

from emulator.gpsimd import store
from emulator.gpsimd.errors import LibraryError
from emulator.gpsimd.sources import RUNTIME_SOURCE
from neuron_customcall import progress
from neuron_customcall.cpp import cache, compiler, prelude, returns
from neuron_customcall.cpp.errors import BuildError

log = logging.getLogger(__name__)

RESERVED_NAME = "builtin"
MAX_STACK_SIZE = 400 * 1024
_STACK_FLAG = "-DSTACK_SIZE="
SHAPE_FLAGS = ("-O1",)  # host-side code: after the base flags' -O3 (the -O3 prelude stays valid)


@dataclass(frozen=True)
class BuildRequest:
    """The arguments of custom_op.load, normalised."""

    name: str
    compute_srcs: tuple[Path, ...]
    shape_srcs: tuple[Path, ...]
    build_directory: Path
    multicore: bool
    verbose: bool
    extra_cflags: tuple[str, ...]

    @property
    def flags(self) -> tuple[str, ...]:
        return (*compiler.BASE_FLAGS, *compiler.tuning_flags(), f"-DNCC_MULTICORE={int(self.multicore)}",
                *self.extra_cflags)

    @property
    def output(self) -> Path:
        return self.build_directory / f"lib{self.name}.so"


def default_build_directory(name: str) -> Path:
    """``<private base>/cpp/<name>``: the user's own 0700 directory (see emulator.gpsimd.store)."""
    return _private(lambda: store.private_directory(store.private_base() / "cpp")) / name


def _as_paths(kind: str, srcs: Sequence[str | os.PathLike[str]] | str) -> tuple[Path, ...]:
    if isinstance(srcs, (str, os.PathLike)):
        srcs = [srcs]
    paths = tuple(Path(s).resolve() for s in srcs)
    if not paths:
        raise BuildError(f"{kind} must name at least one source file")
    for p in paths:
        if not p.is_file():
            raise BuildError(f"{kind}: no such source file: {p}")
    return paths


def check_stack_flags(flags: Sequence[str]) -> None:
    """-DSTACK_SIZE=<bytes> is honoured up to 400 KB; anything else is a clear error."""
    for flag in flags:
        if flag.startswith(_STACK_FLAG):
            value = flag[len(_STACK_FLAG):]
            if not value.isdigit():
                raise BuildError(f"{flag}: STACK_SIZE must be a number of bytes")
            if int(value) > MAX_STACK_SIZE:
                raise BuildError(
                    f"{flag}: the GpSimd stack is at most 400 KB ({MAX_STACK_SIZE} bytes)"
                )


def make_request(
    name: str,
    compute_srcs: Sequence[str | os.PathLike[str]],
    shape_srcs: Sequence[str | os.PathLike[str]],
    build_directory: str | os.PathLike[str] | None,
    multicore: bool,
    verbose: bool,
    extra_cflags: Sequence[str] | None,
) -> BuildRequest:
    if name == RESERVED_NAME:
        raise BuildError(f"the library name '{RESERVED_NAME}' is reserved")
    if not name or not name.replace("_", "a").isalnum():
        raise BuildError(f"library name {name!r} must be an identifier (it names lib<name>.so)")
    flags = tuple(extra_cflags or ())
    check_stack_flags(flags)
    directory = Path(build_directory) if build_directory else default_build_directory(name)
    return BuildRequest(
        name=name,
        compute_srcs=_as_paths("compute_srcs", compute_srcs),
        shape_srcs=_as_paths("shape_srcs", shape_srcs),
        build_directory=directory.resolve(),
        multicore=bool(multicore),
        verbose=bool(verbose),
        extra_cflags=flags,
    )


def _private(make: Callable[[], Path]) -> Path:
    """`make()`, its refusal of a directory others could write as a BuildError."""
    try:
        return make()
    except LibraryError as e:
        raise BuildError(str(e)) from None


def shared_cache_root() -> Path:
    """Where objects shared by all libraries live (the runtime object, precompiled preludes): a
    directory private to this user (mode 0700, owner checked), since its objects are linked into
    every library: ``$NEURON_CUSTOMCALL_CPP_CACHE`` or ``<private base>/cpp-shared``."""
    override = os.environ.get("NEURON_CUSTOMCALL_CPP_CACHE")
    return _private(lambda: store.private_directory(override) if override
                    else store.private_directory(store.private_base() / "cpp-shared"))


def _compile_cached(objects: cache.ObjectCache, toolchain: compiler.Toolchain, src: Path, key: str,
                    shown: progress.Progress | None = None) -> bool:
    """Compiles `src` into the cache unless a valid object is there; True when it compiled.
    Objects are written under temporary names and renamed: concurrent builds may share a cache."""
    if objects.lookup(key) is not None:
        return False
    obj, _, depfile = objects.paths(key)
    suffix = f".{os.getpid()}.{threading.get_ident()}.tmp"
    tmp_obj, tmp_dep = obj.with_name(obj.name + suffix), depfile.with_name(depfile.name + suffix)
    toolchain.compile(src, tmp_obj, tmp_dep)
    os.replace(tmp_dep, depfile)
    os.replace(tmp_obj, obj)
    objects.record(key)
    if shown is not None:
        shown.advance(src.name)
    return True


def build(request: BuildRequest) -> Path:
    """Compiles (through the caches) and links the library; returns its path.

    The runtime object and the precompiled prelude come from the shared cache (built on first
    use, in parallel with each other); the user's sources then compile in parallel."""
    request.build_directory.mkdir(parents=True, exist_ok=True)
    identity = compiler.compiler_identity()
    shared_root = shared_cache_root()
    shared = cache.ObjectCache(shared_root / "objects")
    # The runtime object only sets cores up and tears them down (its hot paths are header code
    # inlined into the kernels), so it is not worth -O3's compile time.
    runtime_flags = (*compiler.BASE_FLAGS, *request.extra_cflags, *SHAPE_FLAGS)
    runtime_tools = compiler.Toolchain(runtime_flags, request.verbose)
    runtime_key = shared.key(RUNTIME_SOURCE, runtime_flags, identity)
    prelude_tools = compiler.Toolchain(request.flags, request.verbose)
    pch_dir = prelude.directory_for(prelude_tools, identity, shared_root)
    flags = (*request.flags, *prelude.flags(pch_dir))
    toolchain = compiler.Toolchain(flags, request.verbose)
    # Shape functions run once per trace on the host: optimising them is wasted build time.
    shape_toolchain = compiler.Toolchain((*flags, *SHAPE_FLAGS), request.verbose)
    objects = cache.ObjectCache(request.build_directory / ".ncc-objects")
    jobs = [(toolchain, src) for src in request.compute_srcs] + \
           [(shape_toolchain, src) for src in request.shape_srcs]
    keys = [objects.key(src, tools.flags, identity) for tools, src in jobs]
    # What g++ must do (the progress display counts it; a build from the caches shows nothing).
    pch_todo = not prelude.is_built(prelude_tools, identity, shared_root)
    todo = (shared.lookup(runtime_key) is None) + pch_todo + sum(objects.lookup(k) is None for k in keys)
    shown_task = progress.task(f"building lib{request.name}.so", todo) if todo else contextlib.nullcontext()
    workers = max(1, os.cpu_count() or 1)
    with shown_task as shown, ThreadPoolExecutor(max_workers=workers) as pool:
        runtime_job = pool.submit(_compile_cached, shared, runtime_tools, RUNTIME_SOURCE, runtime_key, shown)
        prelude.ensure(prelude_tools, identity, shared_root)
        if pch_todo and shown is not None:
            shown.advance("precompiled header")
        compiled = list(pool.map(lambda job: _compile_cached(objects, job[0][0], job[0][1], job[1], shown),
                                 zip(jobs, keys)))
        compiled.append(runtime_job.result())
    object_paths = [objects.paths(k)[0] for k in keys] + [shared.paths(runtime_key)[0]]
    # The prelude's directory is named by the runtime headers' content: a new runtime relinks.
    # The runtime object's own bytes count too: it is shared by every build, and recompiled
    # under the same key when a header it includes (runtime/gpsimd_serve.h) changes, so only
    # the first build after the change would see it recompiled; the others kept a library
    # linked with the old runtime.
    runtime_bytes = cache.file_digest(object_paths[-1]) or ""
    link_key = cache.digest("\0".join([identity, *compiler.LINK_FLAGS, *keys, runtime_key, runtime_bytes,
                                        str(pch_dir)]).encode())
    stamp = request.build_directory / f".lib{request.name}.so.key"
    # An object recompiled under the same key (a header changed) must be relinked too.
    if not any(compiled) and request.output.exists() and stamp.exists() and stamp.read_text() == link_key:
        log.info("lib%s.so is up to date in %s", request.name, request.build_directory)
        return request.output
    toolchain.link(object_paths, request.output)
    stamp.write_text(link_key)
    log.info("built lib%s.so in %s (%d of %d sources compiled)", request.name,
             request.build_directory, sum(compiled[:-1]), len(jobs))
    return request.output


def check_built(request: BuildRequest, library: Path) -> None:
    """The return-type check for a build that does not load its library (setuptools'
    BuildExtension, which only ships it): the registration table is read in a worker of its own
    (the library's code never runs in this process), which is stopped again, then the compute
    sources are checked as custom_op.load checks them."""
    from emulator.gpsimd.library import HostLibrary
    from emulator.gpsimd.runner import evict, runner_for

    runner = runner_for(library)
    try:
        names = [op.compute for op in HostLibrary(library, runner).descriptor.ops]
    finally:
        evict(runner)
    check_compute_returns(request, names)


def check_compute_returns(request: BuildRequest, names: Sequence[str]) -> None:
    """Refuses compute functions (`names`, from the library's registration table) that do not
    return torch::Tensor, by compiling each compute source once more (see returns.py); cached
    with the build's objects."""
    identity = compiler.compiler_identity()
    pch_dir = prelude.ensure(compiler.Toolchain(request.flags, request.verbose), identity, shared_cache_root())
    toolchain = compiler.Toolchain((*request.flags, *prelude.flags(pch_dir)), request.verbose)
    returns.check(request.compute_srcs, names, toolchain,
                  cache.ObjectCache(request.build_directory / ".ncc-objects"), identity)
