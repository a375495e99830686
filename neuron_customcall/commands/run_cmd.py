"""`neuron-customcall run out.neff --inputs in.npz --outputs out.npz`: run an artifact on the
emulator with NumPy inputs.

Inputs are matched to the manifest by name (npz keys = input names) or by position (arr_0, arr_1,
... as `np.savez(path, *arrays)` writes them). Files are read with allow_pickle=False: an npz is
data, never code.
"""
from __future__ import annotations

import argparse
import io
import logging
import math
import statistics
import time
import zipfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from neuron_customcall.cli import command
from neuron_customcall.commands.output import OutputError, npz_bytes, npz_path, write_output
from neuron_customcall.progress import step
from neuron_customcall.commands.trust_args import add_native_argument, native_setting

log = logging.getLogger(__name__)


class InputError(ValueError):
    """The npz does not provide what the artifact's manifest asks for."""


def match_inputs(manifest: Mapping[str, Any], arrays: Mapping[str, np.ndarray]) -> list[np.ndarray]:
    """The manifest's inputs, in order, from an npz's arrays (by name, else by arr_<k>)."""
    from emulator.program.dtypes import DTYPES

    specs = manifest["inputs"]
    names = [s["name"] for s in specs]
    if all(n in arrays for n in names):
        keys = names
    elif all(f"arr_{k}" in arrays for k in range(len(specs))):
        keys = [f"arr_{k}" for k in range(len(specs))]
    elif not arrays:
        wanted = ", ".join(f"{s['name']}: {s['dtype']}{list(s['shape'])}" for s in specs)
        raise InputError(f"the artifact takes {len(specs)} input{'s' if len(specs) != 1 else ''} ({wanted}) and "
                         f"none were given: pass --inputs FILE.npz with arrays named {names} or arr_0.. in order "
                         "(np.savez(FILE, *arrays))")
    else:
        raise InputError(f"the artifact takes {len(specs)} inputs named {names} (or arr_0..arr_{len(specs) - 1}); "
                         f"the file has {sorted(arrays)}")
    extra = sorted(set(arrays) - set(keys))
    if extra:
        log.warning("ignoring arrays the artifact does not take: %s", extra)
    result = []
    for key, spec in zip(keys, specs):
        a = np.asarray(arrays[key])
        dt, shape = DTYPES[spec["dtype"]], tuple(spec["shape"])
        if a.shape != shape:
            raise InputError(f"input {spec['name']} ({key}): expected shape {list(shape)}, got {list(a.shape)}")
        if a.dtype != dt:
            if not np.can_cast(a.dtype, dt, casting="same_kind"):
                raise InputError(f"input {spec['name']} ({key}): expected {spec['dtype']} ({dt}), got {a.dtype}")
            log.warning("input %s (%s): converting %s to %s", spec["name"], key, a.dtype, dt)
            a = a.astype(dt)
        result.append(a)
    return result


# np.savez's own keyword parameters can not be array names.
_SAVEZ_PARAMETERS = {"file", "allow_pickle"}


def read_npz(path: Path, max_elements: int | None = None) -> dict[str, np.ndarray]:
    """The arrays of an npz file, never unpickling anything (a .npy holds one array: arr_0).

    Every array's header is read first and checked before anything is allocated: its data must
    fit in what the file holds (a header can claim 100000 x 100000 in a few bytes) and, with
    `max_elements` (the artifact's largest input), not have more elements (inputs of another
    dtype are converted, so the bound is on elements, not bytes). The file must be a regular file
    (a FIFO or /dev/zero would block or never end). Raises InputError or OSError."""
    from emulator.artifact.reader import read_regular_file

    data = read_regular_file(path)[0]
    if data[:6] == b"\x93NUMPY":
        _check_npy_header(io.BytesIO(data), len(data), "arr_0", max_elements)
        return {"arr_0": np.load(io.BytesIO(data), allow_pickle=False)}
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as z:
            for info in z.infolist():
                if info.filename.endswith(".npy"):
                    with z.open(info) as f:
                        _check_npy_header(f, info.file_size, info.filename[:-4], max_elements)
    except zipfile.BadZipFile as e:
        raise InputError(f"{path}: neither an .npz archive nor an .npy array ({e})") from None
    with np.load(io.BytesIO(data), allow_pickle=False) as npz:
        return {k: npz[k] for k in npz.files}


def _check_npy_header(f: Any, size: int, name: str, max_elements: int | None) -> None:
    """InputError unless the .npy header in `f` (of `size` bytes) describes data that fits."""
    fmt = np.lib.format
    try:
        version = fmt.read_magic(f)
        read = {(1, 0): fmt.read_array_header_1_0, (2, 0): fmt.read_array_header_2_0}.get(version)
        shape, _, dtype = read(f) if read else fmt._read_array_header(f, version)  # 3.0: no public reader
    except (ValueError, OSError, SyntaxError, TypeError) as e:
        raise InputError(f"array {name}: malformed .npy header ({e})") from None
    if dtype.hasobject:
        raise InputError(f"array {name}: object arrays need pickle, which is never used for inputs")
    count = math.prod(shape)
    nbytes = count * dtype.itemsize
    held = size - f.tell()
    if nbytes > held:
        raise InputError(f"array {name}: its header claims {dtype}{list(shape)} ({nbytes} bytes), the file holds "
                         f"{held} bytes")
    if max_elements is not None and count > max_elements:
        raise InputError(f"array {name}: {dtype}{list(shape)} has more elements than any input of the "
                         f"artifact ({max_elements})")


def max_input_elements(manifest: Mapping[str, Any]) -> int:
    """The element count of the artifact's largest input (a bound for arrays read for it)."""
    return max((math.prod(e["shape"]) for e in manifest["inputs"]), default=0)


def output_names(manifest: Mapping[str, Any]) -> list[str]:
    """Keys for the output npz: the manifest's names when they are unique, else arr_<k>."""
    names = [o["name"] for o in manifest["outputs"]]
    if len(set(names)) == len(names) and all(names) and not set(names) & _SAVEZ_PARAMETERS:
        return names
    return [f"arr_{k}" for k in range(len(names))]


def _args(p: argparse.ArgumentParser) -> None:
    p.add_argument("artifact", type=Path, help="a .neff written by `neuron-customcall compile`")
    add_native_argument(p)
    p.add_argument("--inputs", type=Path, help="npz with one array per input (by name or arr_0, arr_1, ...)")
    p.add_argument("--outputs", type=Path, help="npz to write the outputs to (keys: the manifest's output names)")
    p.add_argument("--repeat", type=int, default=1, metavar="N", help="run N times and report the median time")


@command("run", "run a .neff artifact on the emulated NeuronCore with inputs from an npz file", _args)
def run(args: argparse.Namespace) -> int:
    import emulator
    from emulator.artifact import ArtifactError

    try:
        outputs_path = npz_path(args.outputs) if args.outputs is not None else None
        with step(f"loading {args.artifact}"):
            exe = emulator.load_artifact(args.artifact, allow_native=native_setting(args))
        arrays: dict[str, np.ndarray] = {}
        if args.inputs is not None:
            arrays = read_npz(args.inputs, max_input_elements(exe.manifest))
        inputs = match_inputs(exe.manifest, arrays)
    except (InputError, ArtifactError, OSError, ValueError) as e:  # OutputError is a ValueError
        log.error("%s", e)
        return 1
    times = []
    try:
        with step(f"running {args.artifact.name} x{max(args.repeat, 1)}"):
            for _ in range(max(args.repeat, 1)):
                start = time.perf_counter()
                outputs = exe.run(inputs)
                times.append(time.perf_counter() - start)
    except emulator.EmulatorError as e:
        log.error("%s: %s", args.artifact, e)
        return 1
    names = output_names(exe.manifest)
    for name, out in zip(names, outputs):
        print(f"{name}: {out.dtype}{list(out.shape)}")
    if args.repeat > 1:
        print(f"median run time: {statistics.median(times) * 1e3:.3f} ms over {len(times)} runs")
    if outputs_path is not None:
        try:
            write_output(outputs_path, npz_bytes(dict(zip(names, outputs))))
        except OutputError as e:
            log.error("%s", e)
            return 1
        print(f"wrote {outputs_path}")
    return 0
