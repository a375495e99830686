"""Runs a directory of HLO text modules on XLA:CPU (jaxlib) and on our compiler + emulator, and
classifies each module by how ours compares.

    python tools/xla_corpus.py /tmp/xla_corpus --json report.json [--only NAME] [--jobs 1] [--resume]

Why: the differential tests are modules we wrote, so they share our blind spots. HLO written by
someone else (XLA's own test and benchmark modules) finds the forms and semantics we did not think
of. The corpus is not committed (it is XLA's code); this runner is.

Every module runs in its own subprocess (a per-module timeout, a memory cap, and an XLA parser that
aborts the process on some inputs cannot take the run down); the worker answers with one JSON line
on stdout. Nothing is pickled.

Classes, worst first:
  mismatch      both ran and the answers differ (a silent wrong answer)
  our_crash     any exception of ours that is not a deliberate refusal (a bug)
  timeout       the module did not finish within --timeout seconds (the detail says whose code ran)
  memory        the worker ran out of its memory cap
  our_refused   our parser (HloParseError), compiler (CompileError) or emulator (EmulatorError) said no
  xla_refused   XLA's parser or XLA:CPU refused it (not ours to run)
  random        differs, and the module draws random numbers (`rng`, the GetRngSeed custom-call):
                XLA:CPU's generator is not ours, random by design (not run further)
  undefined     differs, but matches once scalar parameters are 0: a reduce whose init value is a
                parameter and not an identity, so XLA's result is implementation-defined (or a
                constant init that is not the reducer's identity, for the same reason); or an
                unstable sort of keys with ties whose outputs hold the same (key, values) per row
  unverified    differs from a reference that is not exact for the module (as_calls wrote a bitcast
                between layouts as a reshape): no verdict, look at it by hand
  slow          matched, but ours took more than --slow-factor times XLA:CPU (median of runs)
  match         matched within the dtype's tolerance
"""
from __future__ import annotations

import argparse
import concurrent.futures
import json
import logging
import os
import re
import resource
import statistics
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

log = logging.getLogger("xla_corpus")

#: (rtol, atol) per result dtype name; atol is scaled by max(1, max |reference|) of the output.
TOLERANCES = {"float64": (1e-9, 1e-9), "float32": (1e-4, 1e-5), "float16": (1e-2, 1e-2),
              "bfloat16": (2e-2, 2e-2), "complex64": (1e-4, 1e-5), "complex128": (1e-9, 1e-9)}
#: 8-bit and narrower floats: one unit in the last place of their few mantissa bits.
NARROW_FLOAT_TOLERANCE = (0.13, 0.13)
CLASSES = ("mismatch", "our_crash", "timeout", "memory", "our_refused", "xla_refused", "random", "undefined",
           "unverified", "slow", "match")
#: opcodes whose values are the generator's (XLA's `rng` leaves the algorithm to the backend)
RANDOM_OPCODES = frozenset({"rng"})
#: custom-call targets whose values are the run's (XLA:CPU's GetRngSeed is a new seed per run)
RANDOM_TARGETS = frozenset({"GetRngSeed"})
STAGE_MARK = "xla_corpus stage: "
MODULE_SEPARATOR = re.compile(r"^//\s*-----\s*$", re.M)
TEST_DIRECTIVE = re.compile(r"^\s*//\s*(RUN|CHECK[\w-]*|[A-Z][A-Z0-9-]*-?(LABEL|NEXT|SAME|DAG|NOT|COUNT-\d+))?:.*$")


@dataclass
class Result:
    """One module's outcome, as the worker reports it (JSON)."""

    name: str
    cls: str
    detail: str = ""
    xla_ms: float | None = None
    ours_ms: float | None = None
    xla_cpu_ms: float | None = None
    ours_cpu_ms: float | None = None
    max_err: float | None = None
    outputs: list[str] = field(default_factory=list)


# ----------------------------------------------------------------------------------------- corpus

def modules_in(directory: Path) -> list[tuple[str, str]]:
    """(name, text) of every module in the .hlo files of `directory`: files holding several modules
    separated by `// -----` are split (name `file#k`), test directives (`// RUN:`, `// CHECK:`) removed."""
    out = []
    for path in sorted(directory.glob("**/*.hlo")):
        parts = MODULE_SEPARATOR.split(path.read_text())
        for k, part in enumerate(parts):
            text = "\n".join(line for line in part.splitlines() if not TEST_DIRECTIVE.match(line)).strip()
            if not re.search(r"\bparameter\(|\bconstant\(|\biota\(", text):
                continue
            stem = str(path.relative_to(directory).with_suffix(""))
            out.append((stem if len(parts) == 1 else f"{stem}#{k}", text + "\n"))
    return out


# ----------------------------------------------------------------------------------------- worker

def random_inputs(shapes: list[Any], seed: int = 0) -> list[Any]:
    """Seeded inputs for the entry parameters: small non-negative integers (valid as indices and
    shift amounts), normal floats, random preds, complex with normal parts."""
    import numpy as np

    rng = np.random.default_rng(seed)
    out = []
    for shape in shapes:
        dt, dims = shape.dtype, tuple(shape.dimensions)
        if dt == np.bool_:
            out.append(rng.random(dims) < 0.5)
        elif dt.kind in "iu":
            out.append(rng.integers(0, 5, size=dims).astype(dt))
        elif dt.kind == "c":
            out.append((rng.standard_normal(dims) + 1j * rng.standard_normal(dims)).astype(dt))
        else:
            out.append(rng.standard_normal(dims).astype(dt))
    return out


def compare(ours: list[Any], ref: list[Any]) -> tuple[bool, str, float]:
    """(equal, what differs, largest error over |ref|-scaled tolerance units)."""
    import numpy as np

    if len(ours) != len(ref):
        return False, f"{len(ours)} outputs, XLA gave {len(ref)}", float("inf")
    worst = 0.0
    for k, (a, b) in enumerate(zip(ours, ref)):
        a, b = np.asarray(a), np.asarray(b)
        if a.shape != b.shape:
            return False, f"output {k}: shape {a.shape} vs XLA {b.shape}", float("inf")
        if a.dtype != b.dtype:
            return False, f"output {k}: dtype {a.dtype} vs XLA {b.dtype}", float("inf")
        if a.size == 0:
            continue
        if a.dtype.kind in "fcV" or a.dtype.name in TOLERANCES or a.dtype.itemsize == 1 and a.dtype.kind not in "iub":
            rtol, atol = TOLERANCES.get(a.dtype.name, NARROW_FLOAT_TOLERANCE)
            wide = np.complex128 if a.dtype.kind == "c" else np.float64
            x, y = a.astype(wide), b.astype(wide)
            nan_x, nan_y = np.isnan(x), np.isnan(y)
            if not np.array_equal(nan_x, nan_y):
                return False, f"output {k}: NaN at {int((nan_x != nan_y).sum())} places that differ", float("inf")
            ok = ~nan_x
            finite = np.abs(y[ok])[np.isfinite(y[ok])]
            scale = max(1.0, float(finite.max())) if finite.size else 1.0
            same_inf = np.isinf(x[ok]) & (x[ok] == y[ok])
            with np.errstate(invalid="ignore"):  # inf - inf where both are the same infinity
                err = np.where(same_inf, 0.0, np.abs(x[ok] - y[ok]))
            bound = atol * scale + rtol * np.abs(np.where(np.isfinite(y[ok]), y[ok], 0))
            excess = np.where(np.isfinite(err), err / np.maximum(bound, 1e-300), np.inf)
            if excess.size:
                worst = max(worst, float(excess.max()))
            if excess.size and excess.max() > 1:
                i = int(np.argmax(excess))
                return False, (f"output {k} ({a.dtype}{list(a.shape)}): {int((excess > 1).sum())} of {a.size} "
                               f"differ; worst ours {x[ok].ravel()[i]} vs XLA {y[ok].ravel()[i]}"), worst
        elif not np.array_equal(a, b):
            bad = int((a != b).sum())
            i = int(np.argmax((a != b).ravel()))
            return False, (f"output {k} ({a.dtype}{list(a.shape)}): {bad} of {a.size} differ; "
                           f"first ours {a.ravel()[i]} vs XLA {b.ravel()[i]}"), float("inf")
    return True, "", worst


def has_layout_changing_bitcast(module: Any) -> bool:
    """Whether a bitcast has a non-default layout on either side (as_calls is exact only without)."""
    def default(shape: Any) -> bool:
        m2m = tuple(shape.layout.minor_to_major) if shape.layout is not None else ()
        return m2m in ((), tuple(range(shape.rank - 1, -1, -1)))

    return any(inst.opcode == "bitcast" and not (default(inst.shape) and default(inst.operands[0].shape))
               for comp in module.computations for inst in comp.instructions)


def uses_parameter_as_reduce_init(module: Any) -> bool:
    """Whether some reduce takes its init value from a parameter (not a constant): its result then
    depends on how often XLA applies the init, which XLA leaves unspecified unless it is an identity."""
    for comp in module.computations:
        for inst in comp.instructions:
            if inst.opcode in ("reduce", "reduce-window"):
                inits = inst.operands[len(inst.operands) // 2:]
                if any(o.opcode != "constant" for o in inits):
                    return True
    return False


#: reducer opcode -> its identity as a float (NaN: none to compare, such as and/or of integers)
_IDENTITY = {"add": 0.0, "multiply": 1.0, "maximum": float("-inf"), "minimum": float("inf"), "or": 0.0}


def constant_init_not_identity(module: Any) -> bool:
    """Whether some reduce or reduce-window has a constant init value that is not its reducer's
    identity: XLA's simplifier then rewrites the module in ways that count the init a different
    number of times (it folds a pad whose value is the init into the window's padding, which
    reduce-window skips), so XLA:CPU's answer is one implementation's."""
    import numpy as np

    for comp in module.computations:
        for inst in comp.instructions:
            if inst.opcode not in ("reduce", "reduce-window") or not inst.called_computations:
                continue
            root = inst.called_computations[0].root
            identity = _IDENTITY.get(root.opcode)
            for init in inst.operands[len(inst.operands) // 2:]:
                if init.opcode != "constant" or identity is None or init.shape.is_tuple:
                    continue
                value = np.asarray(init.constant_value()).astype(np.float64)
                if value.size == 1 and float(value) != identity and not (root.opcode == "maximum" and
                                                                          float(value) <= -3.4e38):
                    return True
    return False


def draws_random_numbers(module: Any) -> bool:
    return any(inst.opcode in RANDOM_OPCODES or
               inst.opcode == "custom-call" and inst.attributes.custom_call_target in RANDOM_TARGETS
               for comp in module.computations for inst in comp.instructions)


def unstable_sort_root(module: Any) -> int | None:
    """The sort dimension when the entry's result is an unstable sort of several operands (keys
    first), else None: among equal keys, XLA leaves the order of the other operands unspecified."""
    root = module.entry.root
    if root.opcode == "sort" and len(root.operands) > 1 and not root.attributes.is_stable:
        return int(root.attributes.dimensions[0])
    return None


def same_up_to_ties(ours: list[Any], ref: list[Any], dim: int) -> bool:
    """Whether the keys (output 0) are equal and each row along `dim` holds the same (key, value)
    pairs for every other output: an unstable sort's answer up to the order among ties."""
    import numpy as np

    keys, theirs_keys = np.moveaxis(np.asarray(ours[0]), dim, -1), np.moveaxis(np.asarray(ref[0]), dim, -1)
    if not np.array_equal(keys, theirs_keys, equal_nan=keys.dtype.kind in "fc"):
        return False
    for a, b in zip(ours[1:], ref[1:]):
        a, b = np.moveaxis(np.asarray(a), dim, -1), np.moveaxis(np.asarray(b), dim, -1)
        order_a = np.lexsort((a, keys), axis=-1)
        order_b = np.lexsort((b, keys), axis=-1)
        if not np.array_equal(np.take_along_axis(a, order_a, -1), np.take_along_axis(b, order_b, -1)):
            return False
    return True


def with_dynamic_sizes(text: str) -> tuple[str, list[tuple[int, list[int]]]]:
    """The module with the entry's result flattened into its leaves followed by the
    `get-dimension-size` of every dynamic dimension of every leaf, and (leaf index, its dynamic
    dimensions) per dynamic leaf; (text, []) when no result leaf is dynamic.

    Why: a dynamic result's buffer holds its valid elements first and unspecified ones after
    (XLA:CPU's are whatever memory held); only the valid ones and the sizes can be compared."""
    import hlo
    from hlo.ir.module import HloInstruction
    from hlo.ir.shape import Shape

    module = hlo.load(text)
    entry = module.entry
    root = entry.root
    leaves: list[Any] = []

    def walk(inst: Any, shape: Any) -> None:
        if not shape.is_tuple:
            leaves.append(inst)
            return
        for k, sub in enumerate(shape.tuple_shapes):
            gte = HloInstruction(f"{inst.name}.leaf{k}", "get-tuple-element", sub, [inst])
            gte.attributes.tuple_index = k
            walk(entry.add(gte), sub)

    walk(root, root.shape)
    dynamic = [(k, [d for d, flag in enumerate(leaf.shape.is_dynamic_dimension) if flag])
               for k, leaf in enumerate(leaves) if any(leaf.shape.is_dynamic_dimension)]
    if not dynamic:
        return text, []
    sizes = []
    for k, dims in dynamic:
        for d in dims:
            g = HloInstruction(f"{leaves[k].name}.size{d}", "get-dimension-size", Shape.array("S32", ()), [leaves[k]])
            g.attributes.dimensions.append(d)
            sizes.append(entry.add(g))
    outs = leaves + sizes
    new_root = HloInstruction(f"{root.name}.with_sizes", "tuple", Shape.tuple_of([o.shape for o in outs]), outs)
    entry.root = entry.add(new_root)
    module.attributes.ClearField("host_program_shape")
    entry.attributes.ClearField("program_shape")
    return module.to_text(), dynamic


def valid_parts(outputs: list[Any], dynamic: list[tuple[int, list[int]]]) -> list[Any]:
    """Each dynamic leaf of `outputs` (as with_dynamic_sizes made them) cut to its valid elements,
    read row-major from the start of its buffer; the sizes themselves stay as outputs."""
    import numpy as np

    n_sizes = sum(len(dims) for _, dims in dynamic)
    out = [np.asarray(a) for a in outputs]
    sizes = [int(v) for v in out[len(out) - n_sizes:]]
    k = 0
    for leaf, dims in dynamic:
        shape = list(out[leaf].shape)
        for d in dims:
            shape[d] = min(max(sizes[k], 0), shape[d])
            k += 1
        out[leaf] = out[leaf].ravel()[:int(np.prod(shape))].reshape(shape)
    return out


def _median_ms(fn: Any, runs: int, budget_s: float) -> tuple[float, float]:
    """Medians of up to `runs` calls of fn (which returns the wall and CPU seconds it measured,
    CPU of every thread of the process: XLA:CPU runs on a thread pool), in ms."""
    times: list[tuple[float, float]] = []
    for _ in range(runs):
        times.append(fn())
        if sum(w for w, _ in times) > budget_s:
            break
    return (statistics.median(w for w, _ in times) * 1e3, statistics.median(c for _, c in times) * 1e3)


_FUSION = re.compile(r"\bfusion\(")
_FUSION_KIND = re.compile(r",\s*kind=k\w+")
_CALLS = re.compile(r"\bcalls=")
_BITCAST = re.compile(r"\bbitcast\(")


def as_calls(text: str) -> str:
    """The module with every `fusion` written as a `call` of the same computation and every
    `bitcast` as a `reshape`: XLA:CPU's HLO -> StableHLO path (the one jaxlib exposes) takes
    neither fusions nor bitcasts, which XLA's own files are full of. The meaning is the same for
    fusions; for a bitcast it is the same when both layouts are the default (a mismatch points
    here otherwise)."""
    text = _FUSION.sub("call(", text)
    text = _FUSION_KIND.sub("", text)
    text = _CALLS.sub("to_apply=", text)
    return _BITCAST.sub("reshape(", text)


def xla_parse(text: str) -> bytes:
    """XLA's own reading of the text (jaxlib's parser), as a serialized HloModuleProto.

    Imported here, not at the top: this tool is a differential harness like the tests, the one
    place besides the JAX adapter that consults jaxlib directly."""
    from jaxlib import _hlo

    return _hlo.hlo_module_from_text(text).as_serialized_hlo_module_proto()


def run_one(name: str, text: str, runs: int, budget_s: float, slow_factor: float,
            reference: str = "xla") -> Result:
    """Everything for one module (called in the worker subprocess).

    reference "xla": XLA:CPU runs XLA's own reading of the text (the parsers are compared too);
    "calls": XLA's reading of as_calls(text);
    "ours": XLA:CPU runs our reading (hlo.load(text).to_bytes()), for modules XLA parses but its
    HLO -> StableHLO path cannot take as parsed (shapes it leaves without a layout abort it)."""
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    import numpy as np

    import hlo
    from emulator import load_artifact
    from emulator.errors import EmulatorError
    from neuron_customcall.compiler import CompileError, compile_module
    from neuron_customcall.jax.xla_cpu import XlaCpuExecutable

    dynamic: list[tuple[int, list[int]]] = []
    try:
        text, dynamic = with_dynamic_sizes(text)
    except hlo.HloError:
        pass  # our parser's refusal is reported below, with the module as written
    _stage("xla")
    try:
        proto = xla_parse(as_calls(text) if reference == "calls" else text)
        if reference == "ours":
            proto = hlo.load(text).to_bytes()
    except hlo.HloError as e:
        return Result(name, "our_refused", f"parse: {type(e).__name__}: {_first_line(e)}")
    except Exception as e:  # XLA's parser: any error means XLA does not take this text
        return Result(name, "xla_refused", f"XLA parser: {_first_line(e)}")
    theirs = hlo.load(proto, form="proto")
    params = theirs.entry.parameters
    if any(p.shape.element_type == "TUPLE" for p in params):
        return Result(name, "xla_refused", "tuple-shaped entry parameter (no flat calling convention)")
    inputs = random_inputs([p.shape for p in params])
    try:
        ref_exe = XlaCpuExecutable(proto)
        ref = [np.asarray(a) for a in ref_exe.execute(ref_exe.put(inputs))]
    except Exception as e:
        return Result(name, "xla_refused", f"XLA:CPU: {_first_line(e)}")
    stage = "parse"
    _stage("ours")
    try:
        module = hlo.load(text)
        stage = "compile"
        exe = load_artifact(compile_module(module))
        stage = "run"
        ours = exe.run(inputs)
    except (hlo.HloError, CompileError, EmulatorError) as e:
        return Result(name, "our_refused", f"{stage}: {type(e).__name__}: {_first_line(e)}")
    except MemoryError as e:
        return Result(name, "memory", f"{stage}: MemoryError {_first_line(e)}")
    except Exception as e:
        return Result(name, "our_crash", f"{stage}: {type(e).__name__}: {_first_line(e)}")
    outputs = [f"{o.dtype}{list(o.shape)}" for o in ours]
    if dynamic and len(ours) == len(ref):
        n_sizes = sum(len(dims) for _, dims in dynamic)
        mine, theirs_sizes = [int(v) for v in ours[len(ours) - n_sizes:]], [int(v) for v in ref[len(ref) - n_sizes:]]
        if mine != theirs_sizes:
            return Result(name, "mismatch", f"dynamic sizes {mine}, XLA {theirs_sizes}", outputs=outputs)
        ours, ref = valid_parts(ours, dynamic), valid_parts(ref, dynamic)
    ok, what, worst = compare(ours, ref)
    if not ok and reference == "calls" and has_layout_changing_bitcast(hlo.load(xla_parse(text), form="proto")):
        return Result(name, "unverified", f"{what}; but the reference wrote a bitcast between layouts as a "
                      "reshape, which it is not", max_err=worst, outputs=outputs)
    if not ok and draws_random_numbers(theirs):
        return Result(name, "random", f"{what}; the module draws random numbers (rng), whose values are the "
                      "generator's: random by design", max_err=worst, outputs=outputs)
    if not ok and (sort_dim := unstable_sort_root(theirs)) is not None and len(ours) == len(ref) and \
            same_up_to_ties(ours, ref, sort_dim):
        return Result(name, "undefined", f"{what}; an unstable sort: the same (key, value) pairs per row, in "
                      "another order among equal keys, which XLA leaves unspecified", max_err=worst, outputs=outputs)
    if not ok:
        scalars = [k for k, p in enumerate(params) if not p.shape.dimensions]
        if scalars and uses_parameter_as_reduce_init(theirs):
            zeroed = [x * 0 if k in scalars else x for k, x in enumerate(inputs)]
            mine, xlas = exe.run(zeroed), [np.asarray(a) for a in ref_exe.execute(ref_exe.put(zeroed))]
            if dynamic:
                mine, xlas = valid_parts(mine, dynamic), valid_parts(xlas, dynamic)
            again, _, _ = compare(mine, xlas)
            if again:
                return Result(name, "undefined", f"{what}; the same with scalar parameters 0 matches: a reduce "
                              "init that is not an identity, whose result XLA leaves implementation-defined",
                              max_err=worst, outputs=outputs)
        if constant_init_not_identity(theirs):
            return Result(name, "undefined", f"{what}; a reduce or reduce-window whose constant init is not its "
                          "reducer's identity: XLA's rewrites count the init differently, its answer is "
                          "implementation-defined", max_err=worst, outputs=outputs)
        return Result(name, "mismatch", what, max_err=worst, outputs=outputs)

    def run_xla() -> tuple[float, float]:  # fresh buffers: a module may donate its inputs (input_output_alias)
        fresh = ref_exe.put(inputs)
        t, c = time.perf_counter(), time.process_time()
        for a in ref_exe.execute(fresh):
            a.block_until_ready()
        return time.perf_counter() - t, time.process_time() - c

    def run_ours() -> tuple[float, float]:
        t, c = time.perf_counter(), time.process_time()
        exe.run(inputs)
        return time.perf_counter() - t, time.process_time() - c

    _stage("xla")
    xla_ms, xla_cpu_ms = _median_ms(run_xla, runs, budget_s)
    _stage("ours")
    ours_ms, ours_cpu_ms = _median_ms(run_ours, runs, budget_s)
    cls = "slow" if ours_ms > slow_factor * xla_ms else "match"
    detail = f"{ours_ms / xla_ms:.1f}x XLA:CPU" if xla_ms > 0 else ""
    return Result(name, cls, detail, xla_ms=xla_ms, ours_ms=ours_ms, xla_cpu_ms=xla_cpu_ms,
                  ours_cpu_ms=ours_cpu_ms, max_err=worst, outputs=outputs)


def _stage(side: str) -> None:
    """Tells the driver (on stderr) whose code runs now, so a process abort is blamed right:
    XLA's C++ aborts the process on some inputs (a glog CHECK), which no `except` can catch."""
    print(f"{STAGE_MARK}{side}", file=sys.stderr, flush=True)


def _first_line(e: BaseException) -> str:
    s = str(e).strip().splitlines()
    return (s[0] if s else type(e).__name__)[:300]


def worker_main(path: str, name: str, runs: int, budget_s: float, slow_factor: float, reference: str) -> None:
    text = dict(modules_in(Path(path)))[name]
    print(json.dumps(asdict(run_one(name, text, runs, budget_s, slow_factor, reference))), flush=True)


# ----------------------------------------------------------------------------------------- driver

def _limit_memory(cap_bytes: int) -> None:
    resource.setrlimit(resource.RLIMIT_DATA, (cap_bytes, cap_bytes))


def run_module(directory: Path, name: str, args: argparse.Namespace) -> Result:
    """One module against XLA's reading of it; if XLA:CPU could not take that, against XLA:CPU
    running our reading (said so in the detail)."""
    first = run_in_subprocess(directory, name, args, "xla")
    if first.cls != "xla_refused" or first.detail.startswith("XLA parser"):
        return first
    for reference, what in (("calls", "fusions as calls, bitcasts as reshapes"), ("ours", "our reading")):
        again = run_in_subprocess(directory, name, args, reference)
        if again.cls != "xla_refused":
            again.detail = f"[reference: XLA:CPU on {what}; as written: {first.detail[:100]}] {again.detail}"
            return again
    return first


def run_in_subprocess(directory: Path, name: str, args: argparse.Namespace, reference: str) -> Result:
    """One module in a fresh interpreter with a timeout and a memory cap."""
    env = dict(os.environ, JAX_PLATFORMS="cpu", NEURON_EMULATOR_WHILE_TIMEOUT=str(args.timeout))
    cmd = [sys.executable, __file__, "--worker", str(directory), "--only", name, "--runs", str(args.runs),
           "--slow-factor", str(args.slow_factor), "--timeout", str(args.timeout), "--reference", reference]
    cap = int(args.memory_gib * (1 << 30))
    t = time.perf_counter()
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout, env=env,
                           preexec_fn=lambda: _limit_memory(cap))
    except subprocess.TimeoutExpired as e:
        err = e.stderr.decode(errors="replace") if isinstance(e.stderr, bytes) else (e.stderr or "")
        stages = [ln[len(STAGE_MARK):] for ln in err.splitlines() if ln.startswith(STAGE_MARK)]
        side = {"xla": "XLA:CPU", "ours": "ours"}.get(stages[-1], "?") if stages else "neither side started"
        return Result(name, "timeout", f"no answer within {args.timeout:g} s (running: {side})")
    lines = [ln for ln in p.stdout.splitlines() if ln.startswith("{")]
    if p.returncode == 0 and lines:
        return Result(**json.loads(lines[-1]))
    tail = (p.stderr.strip().splitlines() or ["(no output)"])[-1][:300]
    if "MemoryError" in p.stderr or "std::bad_alloc" in p.stderr or "Cannot allocate memory" in p.stderr:
        return Result(name, "memory", f"worker out of memory (cap {args.memory_gib:g} GiB): {tail}")
    stages = [ln[len(STAGE_MARK):] for ln in p.stderr.splitlines() if ln.startswith(STAGE_MARK)]
    fatal = next((ln for ln in p.stderr.splitlines() if re.match(r"[FE]\d{4} |.*Check failed", ln)), tail)
    if stages and stages[-1] == "xla" and p.returncode < 0:
        return Result(name, "xla_refused", f"XLA aborted (signal {-p.returncode}) after "
                                           f"{time.perf_counter() - t:.1f} s: {fatal[:300]}")
    return Result(name, "our_crash", f"worker exit {p.returncode}: {fatal[:300]}")


def summary(results: list[Result]) -> str:
    counts = {c: sum(r.cls == c for r in results) for c in CLASSES}
    lines = [f"{len(results)} modules: " + ", ".join(f"{c} {n}" for c, n in counts.items() if n)]
    width = max((len(r.name) for r in results), default=10)
    for c in CLASSES:
        for r in sorted((r for r in results if r.cls == c), key=lambda r: r.name):
            timing = (f"{r.ours_ms:9.2f} ms (CPU {r.ours_cpu_ms:8.2f}) vs {r.xla_ms:8.3f} ms (CPU {r.xla_cpu_ms:8.3f})"
                      if r.ours_ms is not None else " " * 55)
            lines.append(f"{c:11s} {r.name:{width}s} {timing}  {r.detail}")
    return "\n".join(lines)


class Report:
    """The --json report, rewritten after every module (to a temporary file, then renamed), so
    that a batch stopped or killed half-way keeps every module that finished; `complete` says
    whether the batch ran to its end. With resume, the modules of an existing report are kept and
    not run again, so a stopped batch continues where it stopped."""

    def __init__(self, path: Path | None, directory: Path, slow_factor: float, resume: bool = False) -> None:
        self.path, self.directory, self.slow_factor = path, directory, slow_factor
        self.done: dict[str, Result] = {}
        if resume and path is not None and path.exists():
            for r in json.loads(path.read_text())["results"]:
                self.done[r["name"]] = Result(**r)

    def add(self, result: Result) -> None:
        self.done[result.name] = result
        self._write(complete=False)

    def finish(self) -> None:
        self._write(complete=True)

    def _write(self, complete: bool) -> None:
        if self.path is None:
            return
        tmp = self.path.with_name(self.path.name + ".tmp")
        tmp.write_text(json.dumps({"directory": str(self.directory), "slow_factor": self.slow_factor,
                                   "complete": complete,
                                   "results": [asdict(r) for r in self.done.values()]}, indent=1))
        os.replace(tmp, self.path)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("directory", type=Path)
    ap.add_argument("--only", action="append", help="module name (repeatable); default: every module")
    ap.add_argument("--match", help="regular expression: only the modules whose name it finds")
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--timeout", type=float, default=120.0, help="seconds per module (subprocess)")
    ap.add_argument("--memory-gib", type=float, default=6.0, help="data segment cap per module")
    ap.add_argument("--runs", type=int, default=5, help="timed runs per side (median)")
    ap.add_argument("--slow-factor", type=float, default=10.0)
    ap.add_argument("--json", type=Path, help="write the report here (after every module)")
    ap.add_argument("--resume", action="store_true",
                    help="keep the modules already in the --json report and run only the others")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--reference", choices=("xla", "calls", "ours"), default="xla", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    if args.worker:
        worker_main(str(args.directory), args.only[0], args.runs, args.timeout / 4, args.slow_factor, args.reference)
        return 0
    names = [n for n, _ in modules_in(args.directory)]
    if args.only:
        names = [n for n in names if n in args.only]
    if args.match:
        names = [n for n in names if re.search(args.match, n)]
    report = Report(args.json, args.directory, args.slow_factor, resume=args.resume)
    todo = [n for n in names if n not in report.done]
    if report.done:
        log.warning("%d modules already in %s, %d to run", len(names) - len(todo), args.json, len(todo))
    with concurrent.futures.ThreadPoolExecutor(max(1, args.jobs)) as pool:
        futures = [pool.submit(run_module, args.directory, n, args) for n in todo]
        for future in concurrent.futures.as_completed(futures):
            report.add(future.result())
    report.finish()
    results = [report.done[n] for n in names if n in report.done]
    print(summary(results))
    return 1 if any(r.cls in ("mismatch", "our_crash") for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
