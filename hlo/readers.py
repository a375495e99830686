"""Reading an HLO module in any of the three forms people have.

- binary HloModuleProto: torch_xla `LoweringContext.hlo()`, JAX
  `as_serialized_hlo_module_proto()`, `--xla_dump_hlo_as_proto` files;
- protobuf text: `LoweringContext.hlo_text()`, NEURON_FRAMEWORK_DEBUG `.pbtxt` dumps;
- HLO text: JAX `as_text(dialect='hlo')`, `_get_xla_tensors_hlo`, `--xla_dump_to` `.txt` files.

`load` recognises the form from the content (a file name's suffix only breaks ties), so a user can
hand over whatever file they have. Any failure inside a decoder becomes HloParseError.
"""
from __future__ import annotations

import enum
import os
import re
import stat
from pathlib import Path
from typing import Union

from google.protobuf import message as pb_message
from google.protobuf import text_format

from hlo.errors import HloError, HloParseError
from hlo.ir.convert import module_from_proto
from hlo.ir.module import HloModule
from hlo.schema import hlo_pb2

Source = Union[str, bytes, bytearray, memoryview, os.PathLike, hlo_pb2.HloModuleProto]


class Form(enum.Enum):
    PROTO = "proto"
    PBTXT = "pbtxt"
    TEXT = "text"


# Leading comments and blank space that may precede the first token of a text form.
_LEADING = re.compile(r"(?:\s+|//[^\n]*\n?|#[^\n]*\n?|/\*.*?\*/)*", re.S)
_PBTXT_START = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)\s*(:|\{|<)")
# HLO text without its `HloModule` header (XLA's parser takes it: XLA's own test files start so):
# a computation `name {`, `%name {` or `ENTRY ...` (`word {` is told from protobuf text below).
_HEADERLESS_TEXT = re.compile(r"ENTRY\b|%[\w.\-]+\s*\{")


def detect_form(data: bytes) -> Form:
    """Which form `data` is in, from its first token."""
    try:
        text = data[:4096].decode("utf-8")
    except UnicodeDecodeError as e:
        if e.start < 4000:  # not a cut in the middle of a character at the window's end
            return Form.PROTO
        text = data[: e.start].decode("utf-8")
    head = text[_LEADING.match(text).end():]
    if head.startswith("HloModule") or _HEADERLESS_TEXT.match(head):
        return Form.TEXT
    m = _PBTXT_START.match(head)
    if m and "\x00" not in text:
        # `word {` is a message field of protobuf text only if HloModuleProto has that field;
        # otherwise it is a computation of header-less HLO text (`add {`, `fusion {`)
        if m.group(2) == "{" and m.group(1) not in hlo_pb2.HloModuleProto.DESCRIPTOR.fields_by_name:
            return Form.TEXT
        return Form.PBTXT
    return Form.PROTO


def read_proto(data: bytes, filename: str = "<bytes>") -> hlo_pb2.HloModuleProto:
    """Decodes a binary HloModuleProto."""
    p = hlo_pb2.HloModuleProto()
    try:
        p.ParseFromString(bytes(data))
    except (pb_message.DecodeError, RuntimeError, ValueError) as e:
        raise HloParseError(_not_a_module(bytes(data), e), filename=filename,
                            expected="a serialized HloModuleProto, protobuf text or HLO text") from None
    return p


def _not_a_module(data: bytes, error: Exception) -> str:
    """Why bytes that are none of the three forms were refused. Text that is neither HLO text nor
    protobuf text was tried as binary only because nothing else fits: say what text must start
    with, and show its start, rather than a protobuf decoding error about a binary nobody wrote."""
    try:
        text = data[:200].decode("utf-8")
    except UnicodeDecodeError:
        text = None
    if text is not None and text.strip() and all(c.isprintable() or c in "\t\r\n" for c in text):
        head = text[_LEADING.match(text).end():].splitlines()[0][:60] if text.strip() else ""
        return (f"not an HLO module: HLO text starts with 'HloModule', protobuf text with a field "
                f"('name: ...'), and this text starts with {head!r}")
    return f"not a binary HloModuleProto ({error})"


def read_pbtxt(text: str, filename: str = "<pbtxt>") -> hlo_pb2.HloModuleProto:
    """Parses the protobuf text form of an HloModuleProto."""
    p = hlo_pb2.HloModuleProto()
    try:
        text_format.Parse(text, p)
    except text_format.ParseError as e:
        line, col = e.GetLine() or 0, e.GetColumn() or 0
        detail = str(e)
        detail = re.sub(r"^\d+:\d+ : ", "", detail)
        raise HloParseError(f"invalid protobuf text HloModuleProto: {detail}", filename=filename, line=line,
                            column=col, expected="a field of HloModuleProto in protobuf text format") from None
    except (RecursionError, ValueError, RuntimeError, UnicodeError) as e:
        raise HloParseError(f"invalid protobuf text HloModuleProto: {e}", filename=filename,
                            expected="protobuf text format") from None
    return p


def read_text(text: str, filename: str = "<text>") -> hlo_pb2.HloModuleProto:
    """Parses HLO text (the grammar lives in hlo.text)."""
    from hlo.text.parser import parse_hlo_text

    return parse_hlo_text(text, filename=filename)


def _decode_text(data: bytes, filename: str) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise HloParseError(f"byte {e.start} is not UTF-8 text", filename=filename, expected="UTF-8 text") from None


_READERS = {
    Form.PROTO: lambda data, name: read_proto(data, name),
    Form.PBTXT: lambda data, name: read_pbtxt(_decode_text(data, name), name),
    Form.TEXT: lambda data, name: read_text(_decode_text(data, name), name),
}


def _as_bytes(source: Source) -> tuple[bytes, str]:
    if isinstance(source, (bytes, bytearray, memoryview)):
        return bytes(source), "<bytes>"
    if isinstance(source, str) and (source.lstrip().startswith("HloModule") or "\n" in source):
        return source.encode("utf-8"), "<string>"
    path = Path(source)
    try:
        return _read_regular(path), str(path)
    except OSError as e:
        raise HloError(f"cannot read HLO module {path}: {e.strerror or e}") from None
    except ValueError as e:  # a NUL byte: neither a path nor HLO text
        raise HloError(f"cannot read HLO module {str(source)[:60]!r}: {e} (not a path, and not HLO text)") from None


def _read_regular(path: Path) -> bytes:
    """A regular file's bytes up to its size when opened: a FIFO (opened without blocking), a
    device such as /dev/zero or a directory is an error, never a hang or an endless read."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    with os.fdopen(fd, "rb", buffering=0) as f:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise OSError(0, "a directory" if stat.S_ISDIR(st.st_mode) else "not a regular file")
        return f.read(st.st_size)


def read_module_proto(source: Source, *, form: Form | str | None = None) -> tuple[hlo_pb2.HloModuleProto, str]:
    """Decodes `source` to an HloModuleProto without building the IR; returns it and its name."""
    if isinstance(source, hlo_pb2.HloModuleProto):
        return source, "<proto>"
    data, name = _as_bytes(source)
    chosen = Form(form) if form is not None else detect_form(data)
    try:
        return _READERS[chosen](data, name), name
    except HloError:
        raise
    except Exception as e:  # the last line of defence: no raw exception escapes a reader
        raise HloParseError(f"cannot read {chosen.value} HLO: {type(e).__name__}: {e}", filename=name) from None


def load(source: Source, *, form: Form | str | None = None) -> HloModule:
    """Reads an HLO module from a path, bytes, a string of text, or a decoded proto.

    The form is recognised from the content unless `form` ("proto", "pbtxt", "text") is given.
    Raises HloParseError (with file, line, column where the form has them) on malformed input.
    """
    proto, name = read_module_proto(source, form=form)
    try:
        return module_from_proto(proto, filename=name)
    except HloError:
        raise
    except Exception as e:
        raise HloParseError(f"malformed module: {type(e).__name__}: {e}", filename=name) from None
