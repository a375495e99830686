"""``nki.typing`` (NKI beta 1): annotations for kernel parameters and tiles.

``tensor`` annotates a tensor argument or a tile (``nt.tensor[128, 512]``, ``nt.tensor[[128,
512], nl.bfloat16]``, or bare ``nt.tensor``); ``mutable_tensor`` an argument the kernel writes
in place (beta 1's outputs passed by the caller). Annotated *parameters* are checked when the
kernel is traced: an argument that does not match its annotation's shape or dtype is a trace
error. Annotations of local variables are never evaluated by Python, so they are documentation.
"""

from __future__ import annotations

import inspect
from typing import Any

from . import dtypes as nkd


class TensorType:
    """A tensor annotation with an optional shape (None entries match any size) and dtype."""

    def __init__(self, kind: str, shape: tuple | None = None, dtype: Any = None):
        self.kind = kind
        self.shape = shape
        self.dtype = None if dtype is None else nkd.name_of(dtype)

    def __getitem__(self, key) -> "TensorType":
        if self.shape is not None:
            raise TypeError(f"{self!r} is already parameterised")
        key = key if isinstance(key, tuple) else (key,)
        if len(key) == 2 and isinstance(key[0], (list, tuple)):
            return TensorType(self.kind, _dims(key[0]), key[1])
        return TensorType(self.kind, _dims(key))

    def mismatch(self, shape: tuple[int, ...], dtype: str) -> str | None:
        """Why a tensor of ``shape``/``dtype`` does not match, or None."""
        if self.shape is not None and (len(shape) != len(self.shape) or any(
                want is not None and want != got for want, got in zip(self.shape, shape))):
            return f"shape {list(shape)} does not match the annotated {list(self.shape)}"
        if self.dtype is not None and dtype != self.dtype:
            return f"dtype {dtype} does not match the annotated {self.dtype}"
        return None

    def __repr__(self) -> str:
        args = [] if self.shape is None else [str(list(self.shape))]
        if self.dtype is not None:
            args.append(self.dtype)
        return f"nki.typing.{self.kind}" + (f"[{', '.join(args)}]" if args else "")


def _dims(key) -> tuple:
    out = []
    for k in key:
        if k is None or k is Ellipsis:
            out.append(None)
        elif isinstance(k, int) and not isinstance(k, bool) and k >= 0:
            out.append(int(k))
        else:
            raise TypeError(f"a tensor annotation's dimensions are integers, not {k!r}")
    return tuple(out)


tensor = TensorType("tensor")
mutable_tensor = TensorType("mutable_tensor")

__all__ = ["tensor", "mutable_tensor", "TensorType"]


def argument_mismatch(func, pname: str, shape: tuple[int, ...], dtype: str) -> str | None:
    """Why the tensor argument ``pname`` of ``func`` does not match its ``nki.typing``
    annotation, or None (no annotation, one that is not ours, or a match). String annotations
    (``from __future__ import annotations``) are resolved as ``typing.get_type_hints`` does, in
    the kernel's own module: the kernel's source is code we run anyway."""
    ann = getattr(func, "__annotations__", {}).get(pname)
    if isinstance(ann, str):
        try:
            ann = inspect.get_annotations(func, eval_str=True).get(pname)
        except Exception:  # noqa: BLE001 - an annotation we can not resolve is not ours to check
            return None
    if not isinstance(ann, TensorType):
        return None
    why = ann.mismatch(tuple(shape), dtype)
    return None if why is None else f"argument {pname!r}: {why}"
