"""The compute functions' return type, checked by the compiler when a library is built.

A compute function is registered by name only (``m.def(name, &shape_fn, "compute_fn")``) and
its symbol does not encode its return type, so neither the registration's ``static_assert``s
nor the symbol check can see it; the runtime calls every compute function as one returning
``torch::Tensor``, and one returning ``double`` (say) crashed the worker. Here the compiler
answers: once the registration table names the compute functions, each compute source is
compiled again with ``-fsyntax-only`` followed by a ``static_assert`` on the return type of each
name that source declares (a name it does not declare resolves, by qualified lookup through a
using-directive, to a fallback that passes). A passing source is remembered in the build's
object cache, keyed by the source's object key and the names, so a rebuild that changed
nothing pays nothing.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Iterable

from neuron_customcall.cpp import cache, compiler
from neuron_customcall.cpp.errors import BuildError

RULE = "a compute function must return torch::Tensor"

_PROBE_HEAD = """
#include <type_traits>
namespace ncc_return_check {
struct absent {};
template <class F> struct returns_tensor : std::false_type {};
template <class... A> struct returns_tensor<torch::Tensor (*)(A...)> : std::true_type {};
template <class... A> struct returns_tensor<torch::Tensor (*)(A...) noexcept> : std::true_type {};
template <> struct returns_tensor<absent (*)(...)> : std::true_type {};
}  // namespace ncc_return_check
namespace ncc_return_fallback {
"""


def probe(source: Path, names: Iterable[str]) -> str:
    """The check translation unit of one compute source."""
    names = sorted(set(names))
    fallbacks = "".join(f"ncc_return_check::absent {n}(...);\n" for n in names)
    asserts = "".join(
        f'static_assert(ncc_return_check::returns_tensor<decltype(&::{n})>::value, '
        f'"compute function \'{n}\': {RULE}");\n' for n in names)
    return (f'#include "{source}"\n{_PROBE_HEAD}{fallbacks}}}  // namespace ncc_return_fallback\n'
            f"using namespace ncc_return_fallback;\n{asserts}")


def check(sources: Iterable[Path], names: Iterable[str], toolchain: compiler.Toolchain,
          objects: cache.ObjectCache, identity: str) -> None:
    """Raises `BuildError` (the compiler's message at the assertion) when a compute function that
    one of `sources` defines does not return torch::Tensor."""
    names = sorted(set(names))
    for source in sources:
        key = cache.digest("\0".join([objects.key(source, toolchain.flags, identity), "returns", *names]).encode())
        stamp = objects.directory / f"{key}.returns"
        if stamp.exists() and objects.lookup(objects.key(source, toolchain.flags, identity)) is not None:
            continue
        fd, tmp = tempfile.mkstemp(suffix=".cpp", dir=objects.directory)
        try:
            with os.fdopen(fd, "w") as f:
                f.write(probe(source, names))
            try:
                toolchain.syntax_check(Path(tmp), f"checking the compute functions of {source.name}")
            except BuildError as e:
                raise BuildError(f"{source}: {RULE}\n{e}") from None
        finally:
            os.unlink(tmp)
        stamp.touch()
