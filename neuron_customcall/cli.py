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


def _verbosity(default: object) -> argparse.ArgumentParser:
    """-v/-q, accepted before and after the subcommand (`neuron-customcall compile -v x.hlo`): a
    parent parser of the top parser (default 0) and of every subcommand's (default SUPPRESS, so
    that a subcommand which does not repeat them keeps what was given before it). Two parents,
    because argparse shares a parent's action objects, defaults included, with its children."""
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("-v", "--verbose", action="count", default=default,
                        help="more messages: -v progress and steps (INFO), -vv debug")
    common.add_argument("-q", "--quiet", action="count", default=default,
                        help="fewer messages: -q errors only, -qq nothing but the result")
    return common


def log_level(verbose: int, quiet: int) -> int:
    """Warnings and errors by default (quiet, as compilers are); each -v one level more, each -q
    one less."""
    return max(logging.DEBUG, min(logging.CRITICAL, logging.WARNING - 10 * verbose + 10 * quiet))


def build_parser() -> argparse.ArgumentParser:
    from neuron_customcall import __version__
    from neuron_customcall import commands  # noqa: F401  (registers the subcommands)

    parser = argparse.ArgumentParser(
        prog="neuron-customcall", parents=[_verbosity(0)],
        description="Compile HLO graphs holding Neuron custom operators (C++ GpSimd or NKI kernels) "
        "into a NEFF-like artifact and run them on an emulated NeuronCore.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub_common = _verbosity(argparse.SUPPRESS)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, cmd in sorted(COMMANDS.items()):
        p = sub.add_parser(name, help=cmd.help, description=cmd.help, parents=[sub_common])
        cmd.add_arguments(p)
        p.set_defaults(_run=cmd.run)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(level=log_level(args.verbose, args.quiet), format="%(levelname)s %(name)s: %(message)s",
                        stream=sys.stderr)
    if not getattr(args, "_run", None):
        parser.print_help()
        return 0
    return int(args._run(args) or 0)
