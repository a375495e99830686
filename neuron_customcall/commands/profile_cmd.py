"""`neuron-customcall profile out.neff [--inputs in.npz] [-o trace.json] [--top N]`: run an
artifact once with profiling on, print the summary table (estimated time per engine, top
instructions) and write the per-engine timeline as Chrome/Perfetto trace JSON.

Without --inputs, inputs are seeded random arrays of the manifest's shapes and dtypes (the cost
model depends on shapes, and on data only through GpSimd kernels' counters).
"""
from __future__ import annotations

import argparse
import json
import logging
from pathlib import Path

from neuron_customcall.cli import command
from neuron_customcall.progress import step
from neuron_customcall.commands.trust_args import add_native_argument, native_setting
from neuron_customcall.commands.run_cmd import InputError, match_inputs, max_input_elements, read_npz

log = logging.getLogger(__name__)


def _args(p: argparse.ArgumentParser) -> None:
    p.add_argument("artifact", type=Path, help="a .neff written by `neuron-customcall compile`")
    add_native_argument(p)
    p.add_argument("--inputs", type=Path, help="npz with one array per input (default: seeded random inputs)")
    p.add_argument("-o", "--output", type=Path,
                   help="trace JSON to write (default: the artifact's path with .trace.json)")
    p.add_argument("--top", type=int, default=10, metavar="N", help="instructions listed in the summary (10)")
    p.add_argument("--seed", type=int, default=0, help="seed of the random inputs (0)")


@command("profile", "profile one execution of a .neff: estimated per-engine timeline as Chrome trace JSON "
         "and a summary table", _args)
def run(args: argparse.Namespace) -> int:
    import emulator
    from emulator.artifact import ArtifactError
    from neuron_customcall.profile import profile, random_inputs

    try:
        with step(f"loading {args.artifact}"):
            exe = emulator.load_artifact(args.artifact, allow_native=native_setting(args))
        if args.inputs is not None:
            inputs = match_inputs(exe.manifest, read_npz(args.inputs, max_input_elements(exe.manifest)))
        else:
            inputs = random_inputs(exe.manifest, args.seed)
    except (InputError, ArtifactError, OSError, ValueError) as e:
        log.error("%s", e)
        return 1
    try:
        with step(f"profiling {args.artifact.name}"):
            result = profile(exe, inputs)
    except emulator.EmulatorError as e:
        log.error("%s: %s", args.artifact, e)
        return 1
    output = args.output or args.artifact.with_suffix(".trace.json")
    try:
        output.write_text(json.dumps(result.to_chrome_trace()))
    except OSError as e:
        log.error("can not write %s: %s", output, e)
        return 1
    print(result.summary(max(args.top, 0)))
    print(f"\nwrote {output} (open it in https://ui.perfetto.dev or chrome://tracing)")
    return 0
