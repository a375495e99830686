"""`slice_sizes={{4,4},{2,4}}` of the in-place collective-permute (4 operands: input, output,
input start indices, output start indices), stored as XLA stores it: every list flattened, one
after another, into `dynamic_slice_sizes`.

Why the writer needs the shape: the proto keeps no list boundaries, so the printer cuts the flat
list by the ranks of the results (for an async start, of its element 1): each result leaf e
(rank r_e) has G lists of r_e sizes, leaf-major, G = total / sum(r_e), as XLA orders them.
"""
from __future__ import annotations

from typing import List

from hlo.schema import hlo_pb2, xla_data_pb2
from hlo.text.cursor import Cursor

__all__ = ["read_permute_slice_sizes", "write_permute_slice_sizes", "has_permute_slice_sizes"]


def read_permute_slice_sizes(cur: Cursor, inst: hlo_pb2.HloInstructionProto) -> None:
    lists = cur.nested_int_lists("as collective-permute slice_sizes")
    if not lists or any(not sizes for sizes in lists):
        raise cur.fail("collective-permute slice_sizes needs one non-empty list per slice")
    del inst.dynamic_slice_sizes[:]
    for sizes in lists:
        inst.dynamic_slice_sizes.extend(sizes)


def _ranks(inst: hlo_pb2.HloInstructionProto) -> List[int]:
    shape = inst.shape
    if inst.opcode == "collective-permute-start" and shape.element_type == xla_data_pb2.TUPLE and \
            len(shape.tuple_shapes) > 1:
        shape = shape.tuple_shapes[1]
    leaves = list(shape.tuple_shapes) if shape.element_type == xla_data_pb2.TUPLE else [shape]
    return [len(s.dimensions) for s in leaves]


def has_permute_slice_sizes(inst: hlo_pb2.HloInstructionProto) -> bool:
    return len(inst.dynamic_slice_sizes) > 0


def write_permute_slice_sizes(inst: hlo_pb2.HloInstructionProto) -> str:
    flat = list(inst.dynamic_slice_sizes)
    ranks = _ranks(inst)
    per_group = sum(ranks)
    if not per_group or len(flat) % per_group:  # not cut by the shape: one list, as it is
        return "{{" + ",".join(str(v) for v in flat) + "}}"
    groups = len(flat) // per_group
    lists, at = [], 0
    for rank in ranks:
        for _ in range(groups):
            lists.append(flat[at:at + rank])
            at += rank
    return "{" + ",".join("{" + ",".join(str(v) for v in sizes) + "}" for sizes in lists) + "}"
