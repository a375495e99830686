"""`neuron-customcall inspect out.neff`: what an artifact holds, without running it.

Prints first whether the artifact carries native code (GpSimd C++ libraries, which run with the
user's rights when the artifact runs: docs/trust.md), then the manifest (module, fingerprint,
compiler version, flags, inputs, outputs), the section table with sizes, and a summary of the
program (computations, instruction counts by op, constants, kernel payloads, each named after
the kernel: the NKI function, ``library::op``). `--kernels` then prints what each kernel is: an
NKI kernel's IR as readable text (emulator.kernel_ir.printer), a C++ op's signature and library.
`--json` prints the manifest alone as JSON, for scripts (native code is then reported on standard
error).
"""
from __future__ import annotations

import argparse
import collections
import hashlib
import json
import logging
from pathlib import Path
from typing import Any

from neuron_customcall.cli import command

log = logging.getLogger(__name__)


def section_table(data: bytes) -> list[tuple[str, int, int]]:
    """(name, offset from the file start, size) of each section, from the artifact header."""
    from emulator.artifact import format as fmt

    _, _, _, header_size, count, _, _, _ = fmt.HEADER.unpack_from(data)
    rows = []
    for k in range(count):
        raw, off, size = fmt.SECTION.unpack_from(data, fmt.HEADER.size + k * fmt.SECTION.size)
        rows.append((raw.rstrip(b"\x00").decode("ascii"), header_size + off, size))
    return rows


def _type_text(t: list) -> str:
    if t[0] == "tuple":
        return "(" + ", ".join(_type_text(s) for s in t[1]) + ")"
    return f"{t[0]}[{','.join(map(str, t[1]))}]"


def _io_text(entries: list[dict[str, Any]]) -> list[str]:
    return [f"  {k:3d} {e['name']}: {e['dtype']}[{','.join(map(str, e['shape']))}]" for k, e in enumerate(entries)]


def native_summary(kernels: list) -> str:
    """One line saying whether (and which) native code the artifact carries."""
    from emulator.native_policy import NO_NATIVE_ENV, native_kernels

    native = native_kernels(kernels)
    if not native:
        return "native code: none (the program and any NKI kernels are interpreted by the emulator)"
    names = ", ".join(f"{k.name} ({k.kind}, {len(k.data)} bytes)" for k in native)
    return (f"NATIVE CODE: YES - {len(native)} GpSimd payload(s): {names}. Running this artifact runs compiled "
            f"C++ with your rights; refuse it with --no-native-code or {NO_NATIVE_ENV}=1 unless you trust its author")


def _native_json(kernels: list) -> list[dict]:
    """The native payloads for `--json` readers (a script deciding whether to run an artifact reads
    standard output, not the warning on standard error): empty when there are none."""
    from emulator.native_policy import native_kernels

    return [{"name": k.name, "kind": k.kind, "bytes": len(k.data),
             "sha256": hashlib.sha256(k.data).hexdigest()} for k in native_kernels(kernels)]


def describe(data: bytes, top_ops: int = 12) -> str:
    """The human-readable report for artifact bytes (raises ArtifactError on a bad artifact)."""
    from emulator.artifact import read_artifact

    art = read_artifact(data)
    m = art.manifest
    lines = [
        native_summary(art.kernels),
        f"format {art.version[0]}.{art.version[1]}, {len(data)} bytes",
        f"module: {m['module_name']}",
        f"hlo fingerprint: {m['hlo_fingerprint']}",
        f"compiler version: {m['compiler_version']}",
        *([f"cache key: {m['cache_key']}"] if "cache_key" in m else []),
        f"flags: {json.dumps(m['flags'], sort_keys=True)}",
        f"inputs ({len(m['inputs'])}):", *_io_text(m["inputs"]),
        f"outputs ({len(m['outputs'])}):", *_io_text(m["outputs"]),
    ]
    if m.get("aliases"):
        lines.append("aliases: " + ", ".join(f"output {a['output']} <- input {a['input']}" for a in m["aliases"]))
    lines.append("sections:")
    lines += [f"  {name:<14} offset {off:>10}  size {size:>10}" for name, off, size in section_table(data)]
    prog = art.program
    ops = collections.Counter(i.op for c in prog.computations for i in c.instructions)
    entry = prog.computations[prog.entry]
    lines += [
        f"program: {len(prog.computations)} computations, {sum(ops.values())} instructions, "
        f"entry {entry.name} ({len(entry.instructions)} instructions, {entry.num_slots} slots)",
        "  ops: " + ", ".join(f"{op} {n}" for op, n in ops.most_common(top_ops))
        + (f", ... {len(ops) - top_ops} more" if len(ops) > top_ops else ""),
        f"  result: {_type_text(entry.result_type)}",
        f"constants: {len(art.constants)} ({sum(c.nbytes for c in art.constants)} bytes)",
        f"kernels: {len(art.kernels)}" + "".join(f"\n  {k.name} ({k.kind}, {len(k.data)} bytes)" for k in art.kernels),
    ]
    return "\n".join(lines)


def _nki_text(payload: Any, artifact: Any) -> str:
    from emulator.kernel_ir import format_kernel, serialise

    return format_kernel(serialise.from_bytes(payload.data)).rstrip("\n")


def _gpsimd_op_text(payload: Any, artifact: Any) -> str:
    from emulator import kernel_payload

    libraries = kernel_payload.libraries((k.kind, k.data) for k in artifact.kernels)
    call = kernel_payload.unpack_gpsimd_op(payload.data, libraries)
    arguments = ", ".join(a["kind"] if "value" not in a else f"{a['kind']}={a['value']!r}" for a in call.arguments)
    return (f"C++ op {call.op.library}::{call.op.name}({arguments}) -> {call.output.dtype}{list(call.output.shape)}\n"
            f"  compute function {call.op.compute} (symbol {call.op.symbol}), "
            f"{'multicore' if call.op.multicore else 'single core'}, library SHA-256 "
            f"{hashlib.sha256(call.library).hexdigest()[:16]}...")


def _library_text(payload: Any, artifact: Any) -> str:
    return (f"C++ library {payload.name}: {len(payload.data)} bytes of native code, SHA-256 "
            f"{hashlib.sha256(payload.data).hexdigest()[:16]}...")


def _gpsimd_text(payload: Any, artifact: Any) -> str:
    from emulator import kernel_payload

    call = kernel_payload.unpack_gpsimd(payload.data)
    return (f"C++ op {call.op.library}::{call.op.name} -> {call.output.dtype}{list(call.output.shape)} "
            f"with its library ({len(call.library)} bytes of native code)")


#: payload kind -> (payload, artifact) -> its description as text
KERNEL_TEXT = {"nki-ir": _nki_text, "gpsimd-op": _gpsimd_op_text, "gpsimd-library": _library_text,
               "gpsimd": _gpsimd_text}


def describe_kernels(data: bytes) -> str:
    """Each kernel payload of the artifact as text: what `inspect --kernels` adds."""
    from emulator.artifact import read_artifact

    art = read_artifact(data)
    blocks = []
    for k, payload in enumerate(art.kernels):
        render = KERNEL_TEXT.get(payload.kind)
        try:
            body = render(payload, art) if render else f"(a {payload.kind} payload: no text form)"
        except Exception as e:  # noqa: BLE001 - a damaged payload is reported; the others are still shown
            body = f"(can not be read: {type(e).__name__}: {e})"
        blocks.append(f"--- kernel {k}: {payload.name} ({payload.kind}, {len(payload.data)} bytes)\n{body}")
    return "\n".join(blocks)


def _args(p: argparse.ArgumentParser) -> None:
    p.add_argument("artifact", type=Path, help="a .neff written by `neuron-customcall compile`")
    p.add_argument("--json", action="store_true",
                   help="print the manifest as JSON, with a 'native_code' key listing the native payloads")
    p.add_argument("--kernels", action="store_true",
                   help="also print each kernel: an NKI kernel's IR as text, a C++ op's signature")


@command("inspect", "print an artifact's manifest, sections and program summary", _args)
def run(args: argparse.Namespace) -> int:
    from emulator.artifact import ArtifactError, read_artifact, read_bytes

    try:
        data = read_bytes(args.artifact)
        if args.json:
            art = read_artifact(data)
            print(json.dumps({**art.manifest, "native_code": _native_json(art.kernels)}, indent=2, sort_keys=True))
            if "YES" in (summary := native_summary(art.kernels)):
                log.warning("%s: %s", args.artifact, summary)
        else:
            print(f"{args.artifact}: " + describe(data))
            if args.kernels:
                print(describe_kernels(data))
    except (OSError, ArtifactError) as e:
        log.error("%s: %s", args.artifact, e)
        return 1
    return 0
