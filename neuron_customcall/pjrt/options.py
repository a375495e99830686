"""PJRT compile options (xla.CompileOptionsProto), read from their protobuf wire format.

Why a reader of our own: the frameworks hand the plugin a serialized CompileOptionsProto, which our
HLO schema does not carry, and the plugin needs five of its fields. The field numbers are XLA's
(xla/pjrt/proto/compile_options.proto and xla/xla_data.proto): CompileOptionsProto
{argument_layouts = 1 (ShapeProto), parameter_is_tupled_arguments = 2, executable_build_options = 3},
ExecutableBuildOptionsProto {device_ordinal = 1, num_replicas = 4, num_partitions = 5,
use_spmd_partitioning = 6, device_assignment = 9}, DeviceAssignmentProto {replica_count = 1,
computation_count = 2, computation_devices = 3 {replica_device_ids = 1}}. Unknown fields are
skipped, as protobuf does.
"""
from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

from hlo.schema import xla_data_pb2


class OptionsFormatError(ValueError):
    """The compile options are not a well-formed CompileOptionsProto."""


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    value, shift = 0, 0
    while True:
        if pos >= len(data):
            raise OptionsFormatError("truncated varint in the compile options")
        b = data[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value, pos
        shift += 7
        if shift > 63:
            raise OptionsFormatError("varint longer than 64 bits in the compile options")


def fields(data: bytes) -> Iterator[tuple[int, int | bytes]]:
    """(field number, value) of each field of a message: ints for varint and fixed fields,
    bytes for length-delimited ones."""
    pos = 0
    while pos < len(data):
        key, pos = _varint(data, pos)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = _varint(data, pos)
        elif wire == 1:
            value, pos = int.from_bytes(data[pos:pos + 8], "little"), pos + 8
        elif wire == 5:
            value, pos = int.from_bytes(data[pos:pos + 4], "little"), pos + 4
        elif wire == 2:
            n, pos = _varint(data, pos)
            value, pos = data[pos:pos + n], pos + n
        else:
            raise OptionsFormatError(f"unsupported wire type {wire} in the compile options")
        if pos > len(data):
            raise OptionsFormatError("truncated field in the compile options")
        yield number, value


def _signed(v: int) -> int:
    return v - (1 << 64) if v >= 1 << 63 else v


def _packed_or_single(value: int | bytes) -> list[int]:
    if isinstance(value, int):
        return [_signed(value)]
    out, pos = [], 0
    while pos < len(value):
        v, pos = _varint(value, pos)
        out.append(_signed(v))
    return out


@dataclass
class CompileOptions:
    """The compile options the plugin acts on."""

    num_replicas: int = 1
    num_partitions: int = 1
    use_spmd_partitioning: bool = False
    parameter_is_tupled_arguments: bool = False
    device_ordinal: int = -1
    #: device ids per [replica][computation], from the device assignment (empty: none given)
    device_assignment: list[list[int]] = field(default_factory=list)
    argument_layouts: list[xla_data_pb2.ShapeProto] = field(default_factory=list)

    @property
    def device_ids(self) -> list[int]:
        """The devices the program runs on, replica-major: the assignment's; without one, the
        first replicas x partitions devices, or the ordinal's device for a one-device program."""
        if self.device_assignment:
            return [d for row in self.device_assignment for d in row]
        count = self.num_replicas * self.num_partitions
        return list(range(count)) if count > 1 else [max(self.device_ordinal, 0)]


def _device_assignment(data: bytes) -> list[list[int]]:
    replicas, computations, per_computation = 0, 0, []
    for number, value in fields(data):
        if number == 1:
            replicas = int(value)
        elif number == 2:
            computations = int(value)
        elif number == 3:
            ids: list[int] = []
            for n, v in fields(bytes(value)):
                if n == 1:
                    ids.extend(_packed_or_single(v))
            per_computation.append(ids)
    # computation_devices[c].replica_device_ids[r] -> rows by replica
    if len(per_computation) != computations or any(len(c) != replicas for c in per_computation):
        raise OptionsFormatError(f"device assignment of {replicas} replicas x {computations} computations "
                                 f"lists {[len(c) for c in per_computation]} devices")
    return [[per_computation[c][r] for c in range(computations)] for r in range(replicas)]


def parse(data: bytes) -> CompileOptions:
    """Reads a serialized CompileOptionsProto."""
    opts = CompileOptions()
    for number, value in fields(data):
        if number == 1:
            opts.argument_layouts.append(xla_data_pb2.ShapeProto.FromString(bytes(value)))
        elif number == 2:
            opts.parameter_is_tupled_arguments = bool(value)
        elif number == 3:
            for n, v in fields(bytes(value)):
                if n == 1:
                    opts.device_ordinal = _signed(int(v))
                elif n == 4:
                    opts.num_replicas = int(v)
                elif n == 5:
                    opts.num_partitions = int(v)
                elif n == 6:
                    opts.use_spmd_partitioning = bool(v)
                elif n == 9:
                    opts.device_assignment = _device_assignment(bytes(v))
    return opts


def is_default_layout(shape: xla_data_pb2.ShapeProto) -> bool:
    """Whether an argument layout is the dense row-major one (or none at all), recursively for
    tuples."""
    if shape.tuple_shapes:
        return all(is_default_layout(s) for s in shape.tuple_shapes)
    if not shape.HasField("layout"):
        return True
    m2m = list(shape.layout.minor_to_major)
    rank = len(shape.dimensions)
    return (not m2m or m2m == list(range(rank - 1, -1, -1))) and not shape.layout.tiles
