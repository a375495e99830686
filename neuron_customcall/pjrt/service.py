"""The Python half of the neuron PJRT plugin: what the C++ plugin (native/neuron_pjrt.cc) asks for.

The plugin keeps devices, buffers and events in C++ and calls these functions, under the GIL, to
describe the devices, allocate buffer arrays, compile a program (our backend: the compile cache, the
"Using a cached neff" line and NEURON_FRAMEWORK_DEBUG dumps included) and run it (our emulator).
Buffers are NumPy arrays: an execute passes the argument arrays themselves to the emulator and keeps
the result arrays, so nothing is copied between the frameworks' buffers and the emulator.

Every exception raised here reaches the framework as a PJRT error whose text `describe_error`
writes: for a failure inside an executed graph it names the program, the kernel and the user's
source line where the emulator's error carries them.
"""
from __future__ import annotations

import contextlib
import logging
import re
import threading
from collections.abc import Sequence
from typing import Any

import numpy as np

from neuron_customcall import backend
from neuron_customcall.kernels import references
from neuron_customcall.pjrt import devices, options
from neuron_customcall.pjrt import world as world_mod

log = logging.getLogger(__name__)

#: PJRT_Buffer_Type codes of the element types the emulator holds, by the manifest's dtype names:
#: every array type of the C API at 0.75 (token, 23, is no array). Sub-byte types are held one
#: element per byte, as ml_dtypes and jaxlib's host buffers hold them.
PJRT_TYPE_CODES: dict[str, int] = {
    "pred": 1, "s8": 2, "s16": 3, "s32": 4, "s64": 5, "u8": 6, "u16": 7, "u32": 8, "u64": 9,
    "f16": 10, "f32": 11, "f64": 12, "bf16": 13, "c64": 14, "c128": 15, "f8e5m2": 16, "f8e4m3fn": 17,
    "f8e4m3b11fnuz": 18, "f8e5m2fnuz": 19, "f8e4m3fnuz": 20, "s4": 21, "u4": 22, "s2": 24, "u2": 25,
    "f8e4m3": 26, "f8e3m4": 27, "f8e8m0fnu": 28, "f4e2m1fn": 29,
}

#: PJRT error codes (PJRT_Error_Code) used in describe_error.
INVALID_ARGUMENT, UNIMPLEMENTED, INTERNAL, FAILED_PRECONDITION = 3, 12, 13, 9


#: How the emulator's error names the failing instruction ("... instruction NAME failed: ...").
_FAILED_INSTRUCTION = re.compile(r"instruction (\S+)(?: \([^)]*\))? failed")


class ExecutionError(RuntimeError):
    """A program failed while running on the emulator (a kernel's error, a crash of its worker)."""


class UnsupportedProgramError(ValueError):
    """A program or compile option the neuron device does not support (yet); names the feature."""


def _dtypes_by_code() -> dict[int, np.dtype]:
    from emulator.program.dtypes import DTYPES

    return {code: DTYPES[name] for name, code in PJRT_TYPE_CODES.items()}


_DTYPES = _dtypes_by_code()


#: This process's world (set when the client is created; one client per process in practice).
_world: world_mod.World | None = None


#: the framework's key-value store functions (get, put, try_get or None) from client creation
_kv: Any = None


def client_info(options: dict[str, Any] | None = None, kv: Any = None) -> dict[str, Any]:
    """The platform version, this process's index and every device of its world as (global id,
    process index, hardware index or -1, kind): the processes of a torchrun / xmp.spawn /
    jax.distributed run each see all of them, their own addressable (world.py). `options` are
    the client's create options (JAX passes node_id and num_nodes); `kv` the framework's
    key-value store callbacks as functions (pjrt/native: PJRT_Client_Create_Args), kept for the
    processes' rendezvous (distributed/kv_store.py)."""
    global _world, _kv
    from neuron_customcall import __version__

    _world = world_mod.from_environment(options=options)
    # Only a framework that says it runs several processes (JAX's num_nodes after
    # jax.distributed.initialize) gets its store used: torch_xla 2.9 passes kv callbacks to every
    # plugin client, also with no coordinator behind them, and calling those kills the process
    # (SIGSEGV in its kv_put, seen in a one-process run); its processes meet as before.
    num_nodes = (options or {}).get("num_nodes")
    _kv = kv if isinstance(num_nodes, int) and num_nodes > 1 else None
    if _world.num_processes > 1:
        log.info("neuron device: process %d of %d, devices %d-%d of %d", _world.process_index,
                 _world.num_processes, _world.first_local_id,
                 _world.first_local_id + len(_world.local_cores) - 1, _world.num_devices)
    topo = _world.topology
    return {"platform_version": f"neuron-customcall {__version__} (emulated NeuronCore; {topo.describe()})",
            "process_index": _world.process_index, "devices": _world.devices(),
            "cores_per_chip": topo.cores_per_chip, "hbm_bytes_per_core": topo.hbm_bytes_per_core}


_group: Any = None
_group_lock = threading.Lock()


def process_group() -> Any:
    """The gloo group of this world's processes (distributed.rendezvous), created on first use by
    every process at the same program: the first whose collectives cross processes."""
    global _group
    with _group_lock:
        if _group is None:
            from emulator.collectives.local import default_timeout
            from neuron_customcall.distributed.rendezvous import gloo_group

            world = current_world()
            _group = gloo_group(world.process_index, world.num_processes, default_timeout(), kv=_kv)
        return _group


def current_world() -> world_mod.World:
    """The world of this process's client (a world of this process alone before one exists)."""
    return _world if _world is not None else world_mod.from_environment()


def _dtype(type_code: int) -> np.dtype:
    dtype = _DTYPES.get(type_code)
    if dtype is None:
        raise UnsupportedProgramError(f"element type code {type_code} (PJRT_Buffer_Type) is not supported by "
                                      f"the neuron device; supported: {', '.join(PJRT_TYPE_CODES)}")
    return dtype


def new_array(type_code: int, shape: tuple[int, ...]) -> np.ndarray:
    """Uninitialised C-contiguous memory for a buffer of this PJRT element type."""
    return np.empty(shape, _dtype(type_code))


#: The plugin's HostLoan type (the owner of lent host memory), learnt from the first loan.
_loan_type: type | None = None


def host_array(owner: Any, type_code: int, shape: tuple[int, ...]) -> np.ndarray:
    """A read-only array on a framework's host memory (`owner` exports it, a HostLoan of the
    plugin): a zero-copy host-to-device transfer. The array and everything made from it keep
    `owner` alive; the caller may free the memory once the last of them is gone."""
    global _loan_type
    _loan_type = type(owner)
    return np.frombuffer(owner, _dtype(type_code)).reshape(shape)


def _is_lent(a: np.ndarray) -> bool:
    base = a.base
    while isinstance(base, np.ndarray):
        base = base.base
    return _loan_type is not None and type(base) is _loan_type


def _settled(outs: Sequence[np.ndarray], inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    """The results as buffers hold them: C-contiguous, and never a view of a framework's lent
    host memory (an emulator result may be a view of its argument: a reshape, a slice). The
    framework promised that memory unchanged only while the argument's buffer lives: a caller
    may refill its array (a data loader's batch) once the call has returned and the argument is
    gone, and no result may change with it (nor keep the framework's array alive)."""
    lent = [a for a in inputs if _is_lent(a)] if _loan_type is not None else []
    settled = []
    for o in outs:
        if lent and any(np.may_share_memory(o, a) for a in lent):
            o = np.array(o, order="C", copy=True)
        settled.append(o if o.flags.c_contiguous else np.ascontiguousarray(o))
    return settled


# One NeuronCore runs one program at a time; different cores run concurrently.
_core_locks: dict[int, threading.Lock] = {}
_core_locks_guard = threading.Lock()


def _core_lock(core: int) -> threading.Lock:
    with _core_locks_guard:
        return _core_locks.setdefault(core, threading.Lock())


class _Unowned:
    """The executable as run_devices calls it: results the caller never writes (owned=False)."""

    def __init__(self, executable: Any) -> None:
        self._executable = executable

    def run(self, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
        return self._executable.run(inputs, owned=False)


class Program:
    """A compiled program and the metadata the plugin reports (attributes read by the C++ side)."""

    def __init__(self, proto: Any, hlo_proto: bytes, compiled: backend.Compiled, opts: options.CompileOptions,
                 fingerprint: str, name: str) -> None:
        self.compiled = compiled
        self.executable = compiled.executable
        self.name = name
        self.fingerprint = fingerprint
        self.hlo_proto = hlo_proto
        self.optimized_program = _with_config(proto, opts)
        self.num_replicas = opts.num_replicas
        self.num_partitions = opts.num_partitions
        self.device_ids = opts.device_ids
        outs = self.executable.manifest["outputs"]
        ins = self.executable.manifest["inputs"]
        self.outputs = [(PJRT_TYPE_CODES[o["dtype"]], tuple(int(d) for d in o["shape"])) for o in outs]
        self.argument_bytes = sum(_nbytes(e) for e in ins)
        self.output_bytes = sum(_nbytes(e) for e in outs)
        self.code_size = len(compiled.artifact) if isinstance(compiled.artifact, bytes) else \
            compiled.artifact.stat().st_size
        self.temp_bytes = int(self.executable.manifest.get("scratch_bytes", 0) or 0)
        self.donated = sorted({int(e.parameter_number) for e in proto.input_output_alias.entries})
        self._proto = proto
        self._origin_of: dict[str, str] | None = None
        self._cost: list[tuple[str, float]] = []
        self._cost_lock = threading.Lock()
        self._comm: Any = None
        self._comm_lock = threading.Lock()

    def run(self, inputs: Sequence[np.ndarray], core: int, logical: int = -1) -> list[np.ndarray]:
        """Runs on one core; the results are C-contiguous arrays nobody writes (they may be
        read-only and share memory with each other: device buffers are immutable). `logical`
        is the core's device id in the program (-1: the assignment does not name it); a program
        whose other devices belong to other processes runs as that device among them."""
        if logical >= 0 and self._spans_processes():
            return self.run_devices([inputs], [core], [logical])[0]
        try:
            with _core_lock(core):
                outs = self.executable.run(inputs, owned=False)
        except Exception as e:
            raise ExecutionError(self._describe_failure(e)) from e
        return _settled(outs, inputs)

    def run_devices(self, inputs_per_device: Sequence[Sequence[np.ndarray]], cores: Sequence[int],
                    logical: Sequence[int] | None = None) -> list[list[np.ndarray]]:
        """Runs this process's devices of a program of several (replicas x partitions, device d
        being replica d // num_partitions, partition d % num_partitions; `logical` lists the d of
        each, default 0, 1, ...) at once, each in its own thread, so that their collectives meet.
        Holds the cores' locks for the whole run, taken in ascending core order as every execute
        takes them: two executes never wait on each other in a circle. A failure in one device
        ends the others' collectives (NEURON_RT_EXEC_TIMEOUT bounds a wait) and is raised naming
        that device.

        When the program's other devices are other processes', their collectives meet those
        processes' devices over a gloo group (neuron_customcall.distributed.ProcessWorld),
        created by the first collective that crosses processes; a failure here reaches the peers
        when this process exits (closed connections) or at their NEURON_RT_EXEC_TIMEOUT."""
        from emulator.blas import blas_threads_for_devices
        from emulator.collectives.run import run_devices

        logical = list(range(len(inputs_per_device))) if logical is None else [int(d) for d in logical]
        across: dict[str, Any] = {}
        if len(logical) != self.num_replicas * self.num_partitions:
            processes = self._process_world()
            if sorted(logical) != processes.devices:
                raise ExecutionError(f"{self.name}: asked to run devices {logical}; this process holds "
                                     f"{processes.devices}")
            across = {"devices": logical, "communicator": processes.new_run()}
        with contextlib.ExitStack() as held:
            for core in sorted(set(cores)):
                held.enter_context(_core_lock(core))
            held.enter_context(blas_threads_for_devices(len(inputs_per_device)))
            try:
                outs = run_devices(_Unowned(self.executable), inputs_per_device, self.num_replicas,
                                   self.num_partitions, **across)  # the wait for a peer: NEURON_RT_EXEC_TIMEOUT
            except Exception as e:
                raise ExecutionError(self._describe_failure(e)) from e
        return [_settled(device, inputs) for device, inputs in zip(outs, inputs_per_device)]

    def _spans_processes(self) -> bool:
        """Whether some device of this program belongs to another process."""
        world = current_world()
        return world.num_processes > 1 and len(self.device_ids) > 1 and \
            any(world.process_of(d) != world.process_index for d in self.device_ids)

    def _process_world(self) -> Any:
        """This program's endpoints among the processes (kept across runs: their calls are
        numbered in the order every process runs the program)."""
        with self._comm_lock:
            if self._comm is None:
                from neuron_customcall.distributed.gloo import ProcessWorld

                world = current_world()
                self._comm = ProcessWorld(world_mod.device_ranks(world, self.device_ids), world.process_index,
                                          process_group)
            return self._comm

    def _describe_failure(self, e: Exception) -> str:
        """The emulator's message, led by the program and, when it names an instruction of the
        module, that instruction's origin in the user's code (HLO metadata: source file and line,
        the framework's op name)."""
        text = f"{self.name} failed on the neuron device: {type(e).__name__}: {e}"
        found = _FAILED_INSTRUCTION.search(str(e))
        where = self._origins().get(found.group(1)) if found else None
        return f"{text}\n  (at {where})" if where else text

    def _origins(self) -> dict[str, str]:
        """Instruction name -> "file:line (op name)" of the user's code that made it (built on
        the first failure only)."""
        if self._origin_of is None:
            origins = {}
            for comp in self._proto.computations:
                for inst in comp.instructions:
                    where = _user_location(self._proto, inst.metadata)
                    if where:
                        op_name = inst.metadata.op_name
                        origins[inst.name] = f"{where} ({op_name})" if op_name else where
            self._origin_of = origins
        return self._origin_of

    def cost_analysis(self) -> list[tuple[str, float]]:
        """XLA's cost-analysis keys: "flops", "transcendentals" and "bytes accessed" counted on
        the module as XLA's HloCostAnalysis counts them (pjrt/cost.py), and the estimated trn1
        NeuronCore time of one execution from our cost model ("optimal_seconds", a profiled run
        on seeded inputs, made on the first request)."""
        with self._cost_lock:
            if not self._cost:
                import hlo
                from neuron_customcall.pjrt import cost
                from neuron_customcall.profile import profile

                counts = cost.analyse(hlo.module_from_proto(self._proto))
                prof = profile(self.compiled, warmup=0)
                self._cost = [("flops", counts.flops), ("transcendentals", counts.transcendentals),
                              ("bytes accessed", counts.bytes_accessed),
                              ("optimal_seconds", float(prof.total_seconds))]
            return self._cost


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        byte, n = n & 0x7F, n >> 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _field(number: int, payload: bytes) -> bytes:
    """A length-delimited protobuf field."""
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def _with_default_layouts(shape: Any) -> None:
    if shape.tuple_shapes:
        for s in shape.tuple_shapes:
            _with_default_layouts(s)
    elif not shape.HasField("layout") and shape.element_type not in (0, 13, 14, 17):
        # INVALID, TUPLE, OPAQUE and TOKEN shapes carry no layout
        shape.layout.minor_to_major.extend(range(len(shape.dimensions) - 1, -1, -1))


def _with_config(proto: Any, opts: options.CompileOptions) -> bytes:
    """The module as xla.HloModuleProtoWithConfig {hlo_module = 1; config = 2}, the form the
    frameworks read back as the "optimized program" (format "hlo_with_config"). The config
    (xla.HloModuleConfigProto) carries what XLA requires of it: the entry computation layout (1),
    dense row-major as the device holds its buffers, the replica count (4) and partitions (5)."""
    entry = next((c for c in proto.computations if c.id == proto.entry_computation_id), None)
    shape = type(proto.host_program_shape)()
    shape.CopyFrom(entry.program_shape if entry is not None and entry.HasField("program_shape")
                   else proto.host_program_shape)
    for s in shape.parameters:
        _with_default_layouts(s)
    _with_default_layouts(shape.result)
    config = (_field(1, shape.SerializeToString()) + _varint(4 << 3) + _varint(opts.num_replicas)
              + _varint(5 << 3) + _varint(opts.num_partitions))
    return _field(1, proto.SerializeToString()) + _field(2, config)


def _user_location(proto: Any, md: Any) -> str:
    """"file:line" of the innermost frame outside library code that made an instruction (the
    compiler's rule for profiles: compiler/source_lines.py), from the raw module proto."""
    from hlo.ir.module import metadata_frames
    from neuron_customcall.compiler.source_lines import first_user_frame

    return first_user_frame(metadata_frames(md, proto))


def _nbytes(entry: dict[str, Any]) -> int:
    from emulator.program.dtypes import DTYPES

    return int(np.prod(entry["shape"], dtype=np.int64)) * DTYPES[entry["dtype"]].itemsize


def _hlo_of(code: bytes, fmt: str) -> bytes:
    if fmt == "hlo":
        return code
    if fmt == "mlir":
        from neuron_customcall.pjrt import mlir

        return mlir.to_hlo_proto(code)
    raise UnsupportedProgramError(f"program format {fmt!r} is not supported by the neuron device (it takes "
                                  "'hlo' and 'mlir')")


def _check_options(opts: options.CompileOptions, num_devices: int) -> None:
    if opts.use_spmd_partitioning and opts.num_partitions > 1 and opts.num_replicas > 1:
        raise UnsupportedProgramError(
            f"an SPMD program of {opts.num_replicas} replicas x {opts.num_partitions} partitions: the neuron "
            "device partitions programs of one replica only")
    if opts.parameter_is_tupled_arguments:
        raise UnsupportedProgramError("tupled arguments (CompileOptions.parameter_is_tupled_arguments) are "
                                      "not supported by the neuron device")
    for k, layout in enumerate(opts.argument_layouts):
        if not options.is_default_layout(layout):
            raise UnsupportedProgramError(f"argument {k} has the layout {list(layout.layout.minor_to_major)}: "
                                          "the neuron device takes dense row-major arguments only")
    for d in opts.device_ids:
        if not 0 <= d < num_devices:
            raise UnsupportedProgramError(f"the device assignment names device {d}; this process has "
                                          f"{num_devices} NeuronCores")


def _needs_partitioning(proto: Any, opts: options.CompileOptions) -> bool:
    """Whether the SPMD pass applies: a partitioned program, or one device's program that still
    holds sharding custom-calls (a shard_map or sharding constraint on a one-device mesh)."""
    from neuron_customcall.compiler import spmd

    if not opts.use_spmd_partitioning:
        return False
    if opts.num_partitions > 1:
        return True
    return any(inst.opcode == "custom-call" and inst.custom_call_target in spmd.CUSTOM_CALLS
               for comp in proto.computations for inst in comp.instructions)


def _partitioned(proto: Any, opts: options.CompileOptions) -> tuple[Any, bytes]:
    """The per-partition module of an SPMD program (neuron_customcall.compiler.spmd)."""
    import hlo
    from neuron_customcall.compiler import spmd

    module = hlo.module_from_proto(proto)
    try:
        spmd.partition(module, opts.num_partitions)
    except spmd.UnsupportedShardingError as e:
        raise UnsupportedProgramError(f"SPMD program of {opts.num_partitions} partitions: {e}") from e
    out = module.to_proto()
    return out, out.SerializeToString(deterministic=True)


def compile(code: bytes, fmt: str, compile_options: bytes, num_devices: int) -> Program:  # noqa: A001
    """Compiles a program (HLO proto or MLIR) with our backend; an SPMD program becomes the module
    each partition runs first."""
    import hlo

    opts = options.parse(compile_options)
    _check_options(opts, num_devices)
    proto_bytes = _hlo_of(code, fmt)
    proto, _ = hlo.read_module_proto(proto_bytes)
    if references.expand_proto(proto):  # kernel images named by hash: the module as if inline
        proto_bytes = proto.SerializeToString(deterministic=True)
    if _needs_partitioning(proto, opts):
        proto, proto_bytes = _partitioned(proto, opts)
    compiled = backend.compile_cached(proto_bytes)
    fingerprint = hlo.fingerprint(proto)
    return Program(proto, proto_bytes, compiled, opts, fingerprint, proto.name or "neuron_program")


def describe_error(exc: BaseException) -> tuple[int, str]:
    """The PJRT error code and message for an exception raised by this module."""
    from neuron_customcall.compiler.errors import CompileError

    if isinstance(exc, UnsupportedProgramError):
        code = UNIMPLEMENTED
    elif isinstance(exc, (CompileError, options.OptionsFormatError, devices.DeviceConfigError)):
        code = INVALID_ARGUMENT
    else:
        code = INTERNAL
    text = f"{type(exc).__name__}: {exc}"
    log.debug("neuron PJRT error: %s", text, exc_info=exc)
    return code, text
