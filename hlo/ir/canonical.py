"""The canonical form of a module: what stays when ids are forgotten.

Ids are bookkeeping: XLA's text form does not print them and every reader numbers them its own
way. Two modules are the same module when their protos agree after renumbering computations and
instructions in order of appearance. The compile cache keys on the fingerprint of that form.
"""
from __future__ import annotations

import hashlib

from hlo.schema import hlo_pb2


def canonical_proto(source) -> hlo_pb2.HloModuleProto:
    """A copy of the module's proto (from an HloModule or a proto) with ids renumbered 0, 1, ..."""
    if isinstance(source, hlo_pb2.HloModuleProto):
        p = hlo_pb2.HloModuleProto()
        p.CopyFrom(source)
    else:
        p = source.to_proto()
    comp_ids = {c.id: n for n, c in enumerate(p.computations)}
    inst_ids: dict[tuple[int, int], int] = {}
    counter = 0
    for c in p.computations:
        for i in c.instructions:
            inst_ids[(c.id, i.id)] = counter
            counter += 1
    sequences = dict(p.schedule.sequences) if p.HasField("schedule") else {}
    new_sequences = {}
    for cid, seq in sequences.items():
        if cid in comp_ids:
            new_sequences[comp_ids[cid]] = [inst_ids.get((cid, i), i) for i in seq.instruction_ids]
    for c in p.computations:
        old = c.id
        for i in c.instructions:
            i.id = inst_ids[(old, i.id)]
            renumbered = [inst_ids.get((old, o), o) for o in i.operand_ids]
            del i.operand_ids[:]
            i.operand_ids.extend(renumbered)
            renumbered = [inst_ids.get((old, o), o) for o in i.control_predecessor_ids]
            del i.control_predecessor_ids[:]
            i.control_predecessor_ids.extend(renumbered)
            renumbered = [comp_ids.get(o, o) for o in i.called_computation_ids]
            del i.called_computation_ids[:]
            i.called_computation_ids.extend(renumbered)
        c.root_id = inst_ids.get((old, c.root_id), c.root_id)
        c.id = comp_ids[old]
    p.entry_computation_id = comp_ids.get(p.entry_computation_id, p.entry_computation_id)
    p.id = 0
    if sequences:
        p.schedule.ClearField("sequences")
        for cid, ids in new_sequences.items():
            p.schedule.sequences[cid].instruction_ids.extend(ids)
    return p


def fingerprint(source) -> str:
    """Hex SHA-256 of the canonical proto's deterministic serialisation."""
    data = canonical_proto(source).SerializeToString(deterministic=True)
    return hashlib.sha256(data).hexdigest()


def modules_equal(a, b) -> bool:
    """True when two modules (IR or proto) are equal up to their ids."""
    return canonical_proto(a) == canonical_proto(b)
