"""`neuron-customcall compile HLO_FILE -o out.neff`: an HLO module (binary proto, protobuf text or
HLO text) to an artifact the emulator runs, through the compile cache like every other path."""
from __future__ import annotations

import argparse
import dataclasses
import logging
from pathlib import Path

from neuron_customcall.cli import command
from neuron_customcall.commands.output import OutputError, check_output, write_output
from neuron_customcall.progress import step

log = logging.getLogger(__name__)


def add_cache_arguments(p: argparse.ArgumentParser) -> None:
    """--no-cache / --cache-dir, shared by the commands that compile."""
    p.add_argument("--no-cache", action="store_true", help="neither read nor write the compile cache")
    p.add_argument("--cache-dir", type=Path, help="compile cache directory (default: NEURON_COMPILE_CACHE_URL, "
                   "else ~/.cache/neuron-customcall)")


def cache_setting(args: argparse.Namespace):
    """The backend's `cache=` argument from --no-cache / --cache-dir."""
    if args.no_cache:
        return False
    return args.cache_dir


def add_flag_arguments(p: argparse.ArgumentParser) -> None:
    """One option per CompileFlags field (--no-<field> for a field that defaults to true), so a new
    compiler flag reaches the command line without an edit here."""
    from neuron_customcall.compiler import CompileFlags

    doc = CompileFlags.__doc__ or ""
    for f in dataclasses.fields(CompileFlags):
        option = f.name.replace("_", "-")
        if f.type in (bool, "bool"):
            if f.default is True:
                p.add_argument(f"--no-{option}", dest=f"flag_{f.name}", action="store_false", default=True,
                               help=f"compile flag {f.name}=False")
            else:
                p.add_argument(f"--{option}", dest=f"flag_{f.name}", action="store_true", help=f"compile flag {f.name}")
        else:
            p.add_argument(f"--{option}", dest=f"flag_{f.name}", type=type(f.default), default=f.default,
                           help=f"compile flag {f.name} (default {f.default!r})")
    p.epilog = "compile flags: " + " ".join(doc.split()) if doc else None


def compile_flags(args: argparse.Namespace):
    """CompileFlags from the options `add_flag_arguments` added."""
    from neuron_customcall.compiler import CompileFlags

    return CompileFlags(**{f.name: getattr(args, f"flag_{f.name}") for f in dataclasses.fields(CompileFlags)})


def _args(p: argparse.ArgumentParser) -> None:
    p.add_argument("file", type=Path, help="HLO module: binary HloModuleProto, protobuf text (.pbtxt) or HLO text")
    p.add_argument("-o", "--output", type=Path, help="artifact to write (default: FILE with suffix .neff)")
    add_cache_arguments(p)
    add_flag_arguments(p)


@command("compile", "compile an HLO module (proto, pbtxt or text) into a .neff artifact", _args)
def run(args: argparse.Namespace) -> int:
    import hlo
    from neuron_customcall import backend

    try:
        if args.output:
            check_output(args.output)  # before the work, not after it
        with step(f"reading {args.file}"):
            module = hlo.load(args.file)
        output = check_output(args.output or args.file.with_suffix(".neff"))
        with step(f"compiling {module.name}"):
            compiled = backend.compile_cached(module, compile_flags(args), cache=cache_setting(args))
    except (hlo.HloError, OutputError) as e:
        log.error("%s", e)
        return 1
    except Exception as e:  # CompileError and the artifact loader's errors: report, don't trace back
        if type(e).__name__ not in ("CompileError", "ArtifactError"):
            raise
        log.error("%s: %s", args.file, e)
        return 1
    data = compiled.artifact.read_bytes() if isinstance(compiled.artifact, Path) else compiled.artifact
    try:
        write_output(output, data)
    except OutputError as e:
        log.error("%s", e)
        return 1
    manifest = compiled.executable.manifest
    print(f"wrote {output} ({len(data)} bytes): {module.name}, {len(manifest['inputs'])} inputs, "
          f"{len(manifest['outputs'])} outputs")
    return 0
