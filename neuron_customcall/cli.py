"""The `neuron-customcall` command line.

Each subcommand lives in a table (name -> (help, add_arguments, run)) so that later stages add
their commands (compile, run, inspect, profile) without growing an if-chain here.
"""
from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Callable, Sequence
from typing import NamedTuple

log = logging.getLogger("neuron_customcall")


class Command(NamedTuple):
    help: str
    add_arguments: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace], int]


COMMANDS: dict[str, Command] = {}


def command(name: str, help: str, add_arguments: Callable[[argparse.ArgumentParser], None]):
    """Registers `run` as the subcommand `name`."""

    def register(run: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
        COMMANDS[name] = Command(help, add_arguments, run)
        return run

    return register


def build_parser() -> argparse.ArgumentParser:
    from neuron_customcall import __version__
    from neuron_customcall import commands  # noqa: F401  (registers the subcommands)

    parser = argparse.ArgumentParser(
        prog="neuron-customcall",
        description="Compile HLO graphs holding Neuron custom operators (C++ GpSimd or NKI kernels) "
        "into a NEFF-like artifact and run them on an emulated NeuronCore.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    parser.add_argument("-v", "--verbose", action="count", default=0, help="more logging (-vv for debug)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, cmd in sorted(COMMANDS.items()):
        p = sub.add_parser(name, help=cmd.help, description=cmd.help)
        cmd.add_arguments(p)
        p.set_defaults(_run=cmd.run)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    level = logging.WARNING - 10 * min(args.verbose, 2)
    logging.basicConfig(level=min(level, logging.INFO), format="%(levelname)s %(name)s: %(message)s", stream=sys.stderr)
    if not getattr(args, "_run", None):
        parser.print_help()
        return 0
    return int(args._run(args) or 0)
