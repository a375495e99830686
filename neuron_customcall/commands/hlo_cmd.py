"""`neuron-customcall hlo FILE`: read an HLO module in any of its three forms and print or convert
it. The quickest way to see what a framework handed us."""
from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

from neuron_customcall.cli import command
from neuron_customcall.commands.output import OutputError, check_output, write_output

log = logging.getLogger(__name__)

_WRITERS = {
    "text": lambda m: m.to_text().encode(),
    "pbtxt": lambda m: m.to_pbtxt().encode(),
    "proto": lambda m: m.to_bytes(),
}


def _args(p: argparse.ArgumentParser) -> None:
    p.add_argument("file", type=Path, help="HLO module: binary HloModuleProto, protobuf text (.pbtxt) or HLO text")
    p.add_argument("--to", choices=sorted(_WRITERS), default="text", help="output form (default: HLO text)")
    p.add_argument("-o", "--output", type=Path, help="write here instead of standard output")


@command("hlo", "read an HLO module (proto, pbtxt or text) and print or convert it", _args)
def run(args: argparse.Namespace) -> int:
    import hlo

    try:
        if args.output:
            check_output(args.output)
        module = hlo.load(args.file)
        data = _WRITERS[args.to](module)
        if args.output:
            write_output(args.output, data)
    except (hlo.HloError, OutputError) as e:
        log.error("%s", e)
        return 1
    if args.output:
        log.info("wrote %s (%d bytes)", args.output, len(data))
    else:
        sys.stdout.buffer.write(data)
    return 0
