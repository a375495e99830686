#!/usr/bin/env python3
"""Regenerate (or, with --check, verify) the Python protobuf modules of hlo/schema/*.proto.

Why a script and committed output: the generated ``*_pb2.py`` files are imported by everything
that reads HLO, so they are committed (no code generation at install or import time), and this
script is the one way to remake them. The generated code embeds the protoc version and checks it
against the protobuf runtime at import, so it must come from the protoc bundled with the
grpcio-tools version pinned in pyproject.toml: the script refuses any other version, which also
keeps ``--check`` byte-for-byte reproducible.

Usage::

    python tools/gen_proto.py          # rewrite hlo/schema/*_pb2.py and *_pb2.pyi
    python tools/gen_proto.py --check  # exit 1 if the committed files differ from a fresh build
"""

from __future__ import annotations

import argparse
import importlib.metadata
import logging
import re
import shutil
import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path

log = logging.getLogger("gen_proto")

ROOT = Path(__file__).resolve().parent.parent
SCHEMA_DIR = ROOT / "hlo" / "schema"
GENERATED_SUFFIXES = ("_pb2.py", "_pb2.pyi")


class VersionMismatch(RuntimeError):
    """The installed grpcio-tools is not the version pinned in pyproject.toml."""


def proto_sources(root: Path = ROOT) -> list[Path]:
    """The .proto files of the schema, relative to the repository root (protoc's -I)."""
    return sorted(p.relative_to(root) for p in (root / "hlo" / "schema").glob("*.proto"))


def generated_names(root: Path = ROOT) -> list[Path]:
    """Repository-relative paths of every file the generator produces."""
    return [
        src.with_name(src.stem + suffix)
        for src in proto_sources(root)
        for suffix in GENERATED_SUFFIXES
    ]


def pinned_grpcio_tools(pyproject: Path = ROOT / "pyproject.toml") -> str:
    """The exact grpcio-tools version pinned in pyproject's `dev` extra (code generators; the
    `test` extra includes it)."""
    data = tomllib.loads(pyproject.read_text())
    for req in data["project"]["optional-dependencies"]["dev"]:
        m = re.fullmatch(r"\s*grpcio-tools\s*==\s*([\w.]+)\s*", req)
        if m:
            return m.group(1)
    raise LookupError("pyproject.toml: no `grpcio-tools==X` pin in the dev extra")


def check_protoc_version() -> str:
    """Return the installed grpcio-tools version; raise VersionMismatch if it is not the pin."""
    want = pinned_grpcio_tools()
    try:
        have = importlib.metadata.version("grpcio-tools")
    except importlib.metadata.PackageNotFoundError as e:
        raise VersionMismatch(
            f"grpcio-tools is not installed; pyproject pins {want} (run scripts/bootstrap.sh)"
        ) from e
    if have != want:
        raise VersionMismatch(
            f"grpcio-tools {have} is installed but pyproject pins {want}: generated code would "
            "differ. Run scripts/bootstrap.sh (or pip install -e '.[test]')."
        )
    return have


def generate(out_dir: Path, root: Path = ROOT) -> list[Path]:
    """Run the pinned protoc over the schema, writing into out_dir/<repo-relative path>.

    Returns the repo-relative paths written. protoc runs in a subprocess so that repeated runs
    (tests) do not share the compiler's process-global state.
    """
    sources = proto_sources(root)
    if not sources:
        raise FileNotFoundError(f"no .proto files under {root / 'hlo' / 'schema'}")
    cmd = [
        sys.executable,
        "-m",
        "grpc_tools.protoc",
        f"-I{root}",
        f"--python_out={out_dir}",
        f"--pyi_out={out_dir}",
        *(str(s) for s in sources),
    ]
    log.debug("running %s", " ".join(cmd))
    proc = subprocess.run(cmd, cwd=root, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"protoc failed ({proc.returncode}):\n{proc.stderr}")
    written = generated_names(root)
    missing = [p for p in written if not (out_dir / p).is_file()]
    if missing:
        raise RuntimeError(f"protoc did not write {missing}")
    return written


def differences(root: Path = ROOT) -> list[str]:
    """Regenerate into a temporary directory; list committed files that differ or are missing."""
    with tempfile.TemporaryDirectory(prefix="gen_proto_") as tmp:
        fresh_dir = Path(tmp)
        bad = []
        for rel in generate(fresh_dir, root):
            committed = root / rel
            if not committed.is_file():
                bad.append(f"{rel}: missing")
            elif committed.read_bytes() != (fresh_dir / rel).read_bytes():
                bad.append(f"{rel}: differs from a fresh build")
        return bad


def write(root: Path = ROOT) -> list[Path]:
    """Regenerate and copy the results over the committed files."""
    with tempfile.TemporaryDirectory(prefix="gen_proto_") as tmp:
        written = generate(Path(tmp), root)
        for rel in written:
            shutil.copyfile(Path(tmp) / rel, root / rel)
            log.info("wrote %s", rel)
        return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--check", action="store_true", help="verify the committed files instead of writing"
    )
    parser.add_argument("-v", "--verbose", action="store_true")
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO, format="gen_proto: %(message)s"
    )
    try:
        version = check_protoc_version()
    except (VersionMismatch, LookupError) as e:
        log.error("%s", e)
        return 2
    log.debug("grpcio-tools %s", version)
    if args.check:
        bad = differences()
        for line in bad:
            log.error("%s", line)
        if bad:
            log.error("run: python tools/gen_proto.py")
            return 1
        log.info("generated files are up to date (grpcio-tools %s)", version)
        return 0
    write()
    return 0


if __name__ == "__main__":
    sys.exit(main())
