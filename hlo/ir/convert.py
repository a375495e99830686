"""HloModuleProto <-> IR, without loss.

Reading also validates the structure a proto can get wrong while still decoding: dangling operand,
callee or root ids, duplicate names or ids, cycles among instructions or computations. A message
that decodes but does not describe a module is malformed input like any other, so it raises
HloParseError naming the computation and instruction, never a KeyError later in the compiler.
"""
from __future__ import annotations

from hlo.errors import HloParseError
from hlo.ir.module import HloComputation, HloInstruction, HloModule
from hlo.ir.shape import Shape
from hlo.schema import hlo_pb2

# Fields that become IR structure; the rest of each message stays in `attributes`.
_INST_LIFTED = ("name", "opcode", "shape", "id", "operand_ids", "called_computation_ids", "control_predecessor_ids")
_COMP_LIFTED = ("name", "instructions", "id", "root_id")
_MODULE_LIFTED = ("name", "computations", "id")


def _remainder(message, lifted: tuple[str, ...]):
    rest = type(message)()
    rest.CopyFrom(message)
    for field in lifted:
        rest.ClearField(field)
    return rest


class _Reader:
    def __init__(self, filename: str) -> None:
        self.filename = filename

    def fail(self, where: str, detail: str, expected: str = "") -> HloParseError:
        return HloParseError(f"{where}: {detail}", filename=self.filename, expected=expected)

    def module(self, p: hlo_pb2.HloModuleProto) -> HloModule:
        module = HloModule(p.name, attributes=_remainder(p, _MODULE_LIFTED), id=p.id)
        if not p.computations:
            raise self.fail(f"module {p.name!r}", "has no computations", "at least one computation")
        by_id: dict[int, HloComputation] = {}
        pending: list[tuple[HloComputation, hlo_pb2.HloComputationProto]] = []
        for cp in p.computations:
            if not cp.name:
                raise self.fail(f"module {p.name!r}", "a computation has no name", "a computation name")
            if cp.id in by_id:
                raise self.fail(f"computation {cp.name!r}", f"id {cp.id} is also the id of computation {by_id[cp.id].name!r}", "unique computation ids")
            if any(c.name == cp.name for c in module.computations):
                raise self.fail(f"computation {cp.name!r}", "the name is used twice", "unique computation names")
            comp = module.add(HloComputation(cp.name, attributes=_remainder(cp, _COMP_LIFTED), id=cp.id))
            by_id[cp.id] = comp
            pending.append((comp, cp))
        for comp, cp in pending:
            self.computation(comp, cp, by_id)
        module.entry = self.entry(p, module, by_id)
        self.check_call_graph(module)
        return module

    def entry(self, p: hlo_pb2.HloModuleProto, module: HloModule, by_id: dict[int, HloComputation]) -> HloComputation:
        if p.entry_computation_name:
            try:
                return module.computation(p.entry_computation_name)
            except KeyError:
                raise self.fail(f"module {p.name!r}", f"entry computation {p.entry_computation_name!r} does not exist", "the name of one of its computations") from None
        if p.entry_computation_id in by_id:
            return by_id[p.entry_computation_id]
        raise self.fail(f"module {p.name!r}", "names no entry computation", "entry_computation_name or entry_computation_id")

    def computation(self, comp: HloComputation, cp: hlo_pb2.HloComputationProto, comps: dict[int, HloComputation]) -> None:
        where = f"computation {comp.name!r}"
        by_id: dict[int, HloInstruction] = {}
        names: set[str] = set()
        for ip in cp.instructions:
            iwhere = f"{where}, instruction {ip.name!r}"
            if not ip.name or not ip.opcode:
                raise self.fail(iwhere, "has no name or no opcode", "a name and an opcode")
            if ip.id in by_id:
                raise self.fail(iwhere, f"id {ip.id} is also the id of {by_id[ip.id].name!r}", "unique instruction ids")
            if ip.name in names:
                raise self.fail(iwhere, "the name is used twice", "unique instruction names")
            if not ip.HasField("shape"):
                raise self.fail(iwhere, "has no shape", "a shape")
            try:
                shape = Shape.from_proto(ip.shape)
            except ValueError as e:  # an element type number outside the enum
                raise self.fail(iwhere, f"has an invalid shape ({e})", "a valid shape") from None
            inst = HloInstruction(ip.name, ip.opcode, shape, attributes=_remainder(ip, _INST_LIFTED), id=ip.id)
            by_id[ip.id] = inst
            names.add(ip.name)
            comp.add(inst)
        for inst, ip in zip(comp.instructions, cp.instructions):
            iwhere = f"{where}, instruction {ip.name!r}"
            inst.operands = [self.lookup(by_id, i, iwhere, "operand") for i in ip.operand_ids]
            inst.control_predecessors = [self.lookup(by_id, i, iwhere, "control predecessor") for i in ip.control_predecessor_ids]
            inst.called_computations = [self.lookup(comps, i, iwhere, "called computation") for i in ip.called_computation_ids]
        if not comp.instructions:
            raise self.fail(where, "has no instructions", "at least a root instruction")
        comp.root = self.lookup(by_id, cp.root_id, where, "root")
        self.check_acyclic(comp)

    def lookup(self, table: dict, key: int, where: str, what: str):
        try:
            return table[key]
        except KeyError:
            raise self.fail(where, f"{what} id {key} does not exist", f"the id of an existing {what}") from None

    def check_acyclic(self, comp: HloComputation) -> None:
        """Kahn's algorithm over operand and control edges: a cycle would hang every later walk."""
        edges = {i: i.operands + i.control_predecessors for i in comp.instructions}
        waiting = {i: len(deps) for i, deps in edges.items()}
        users: dict[HloInstruction, list[HloInstruction]] = {i: [] for i in comp.instructions}
        for inst, deps in edges.items():
            for d in deps:
                users[d].append(inst)
        ready = [i for i, n in waiting.items() if n == 0]
        done = 0
        while ready:
            inst = ready.pop()
            done += 1
            for u in users[inst]:
                waiting[u] -= 1
                if waiting[u] == 0:
                    ready.append(u)
        if done != len(comp.instructions):
            stuck = next(i for i, n in waiting.items() if n > 0)
            raise self.fail(f"computation {comp.name!r}, instruction {stuck.name!r}", "is part of a cycle of operands", "an acyclic graph")

    def check_call_graph(self, module: HloModule) -> None:
        """Computations must not call themselves, directly or not (HLO has no recursion)."""
        state: dict[HloComputation, int] = {}  # 1 = on the stack, 2 = finished
        for root in module.computations:
            if root in state:
                continue
            stack = [(root, iter(_callees(root)))]
            state[root] = 1
            while stack:
                comp, it = stack[-1]
                nxt = next(it, None)
                if nxt is None:
                    state[comp] = 2
                    stack.pop()
                elif state.get(nxt) == 1:
                    raise self.fail(f"computation {nxt.name!r}", "calls itself (directly or through others)", "an acyclic call graph")
                elif nxt not in state:
                    state[nxt] = 1
                    stack.append((nxt, iter(_callees(nxt))))


def _callees(comp: HloComputation) -> list[HloComputation]:
    return [c for inst in comp.instructions for c in inst.called_computations]


def module_from_proto(p: hlo_pb2.HloModuleProto, filename: str = "<proto>") -> HloModule:
    """Builds the IR from a decoded HloModuleProto; HloParseError if its structure is broken."""
    return _Reader(filename).module(p)


def module_to_proto(module: HloModule) -> hlo_pb2.HloModuleProto:
    """The HloModuleProto of an IR module. Objects without ids (built by passes) get fresh ones."""
    _assign_missing_ids(module)
    p = hlo_pb2.HloModuleProto()
    p.CopyFrom(module.attributes)
    p.name = module.name
    p.id = module.id
    if module.entry is None:
        raise ValueError(f"module {module.name} has no entry computation")
    p.entry_computation_name = module.entry.name
    p.entry_computation_id = module.entry.id
    for comp in module.computations:
        cp = p.computations.add()
        cp.CopyFrom(comp.attributes)
        cp.name = comp.name
        cp.id = comp.id
        for inst in comp.instructions:
            ip = cp.instructions.add()
            ip.CopyFrom(inst.attributes)
            ip.name = inst.name
            ip.opcode = inst.opcode
            inst.shape.to_proto(ip.shape)
            ip.id = inst.id
            ip.operand_ids.extend(o.id for o in inst.operands)
            ip.control_predecessor_ids.extend(o.id for o in inst.control_predecessors)
            ip.called_computation_ids.extend(c.id for c in inst.called_computations)
        if comp.root is None:
            raise ValueError(f"computation {comp.name} has no root")
        cp.root_id = comp.root.id
    return p


def _assign_missing_ids(module: HloModule) -> None:
    next_comp = max((c.id for c in module.computations if c.id is not None), default=-1) + 1
    next_inst = max((i.id for i in module.instructions() if i.id is not None), default=-1) + 1
    for comp in module.computations:
        if comp.id is None:
            comp.id, next_comp = next_comp, next_comp + 1
        for inst in comp.instructions:
            if inst.id is None:
                inst.id, next_inst = next_inst, next_inst + 1
