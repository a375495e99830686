"""send / send-done / recv / recv-done between devices, as XLA's SPMD pipelining emits them: each
carries its (source, target) pairs in the frontend attribute `_xla_send_recv_source_target_pairs`
(`"{{0,1},{1,2}}"`), XLA's decomposition of a collective-permute into point-to-point halves.

Why the exchange happens at `send`: every device runs the same program, so every device reaches
every `send` in the same order; there the pairs' sources send and their targets receive (one
permute of the Communicator, as collective-permute), and each target keeps what it got in its
device's mailbox under (channel, pairs). `recv-done` takes it from there (zeros on a device no
pair targets, as collective-permute gives); `recv` and `send-done` only pass tokens on. The
scheduler (compiler/schedule.py) places every `send` as early as its operands allow, so a
`recv-done` that needs no value computed after the matching send never waits for it.

Pairs name replicas when the program has several replicas, else partitions (XLA's rule for
point-to-point: all executions of one send/recv form its group). Host transfers
(`is_host_transfer=true`) and a send/recv without the pairs attribute (a transfer to another
program) are refused by name. `_xla_send_recv_validation` (which loop iterations really transfer)
is not needed: every iteration transfers, and the iterations XLA leaves out have undefined data.
"""
from __future__ import annotations

import re
from typing import Any

from neuron_customcall.compiler.lowering.context import LowerCtx
from neuron_customcall.compiler.lowering.registry import fail, leaf_types, lowers, shape_rule, shapes

#: the frontend attribute naming a send/recv's (source, target) pairs
PAIRS_ATTRIBUTE = "_xla_send_recv_source_target_pairs"
_PAIR = re.compile(r"\{\s*(-?\d+)\s*,\s*(-?\d+)\s*\}")
_PAIRS = re.compile(r"\s*\{\s*(?:\{\s*-?\d+\s*,\s*-?\d+\s*\}\s*(?:,\s*\{\s*-?\d+\s*,\s*-?\d+\s*\}\s*)*)?\}\s*")


def send_recv_pairs(inst: Any) -> list[list[int]]:
    """The (source, target) pairs of a send or recv, from its frontend attribute."""
    if inst.attributes.is_host_transfer:
        fail(inst, f"{inst.opcode} with is_host_transfer=true (a transfer to or from the host) is not supported")
    text = inst.frontend_attributes_dict.get(PAIRS_ATTRIBUTE)
    if text is None:
        fail(inst, f"{inst.opcode} without {PAIRS_ATTRIBUTE} (a transfer to another program) is not supported: only "
                   "device-to-device send/recv with source-target pairs runs")
    if not _PAIRS.fullmatch(text):
        fail(inst, f"{PAIRS_ATTRIBUTE}={text!r} is not a list of {{source,target}} pairs")
    pairs = [[int(s), int(t)] for s, t in _PAIR.findall(text)]
    if len({s for s, _ in pairs}) != len(pairs) or len({t for _, t in pairs}) != len(pairs):
        fail(inst, f"{PAIRS_ATTRIBUTE}={text!r} repeats a source or a target")
    return pairs


def _attrs(inst: Any) -> dict:
    data = inst.operands[0].shape if inst.opcode == "send" else inst.shape.tuple_shapes[0]
    if data.is_tuple:
        fail(inst, f"{inst.opcode} of a tuple {data} is not supported: send each array")
    return {"channel": int(inst.attributes.channel_id), "pairs": send_recv_pairs(inst)}


def _recv_of(inst: Any) -> Any:
    """recv-done's recv (XLA's verifier requires its operand to be one)."""
    (operand,) = inst.operands
    if operand.opcode != "recv":
        fail(inst, f"recv-done of {operand.opcode} {operand.name}: its operand must be a recv")
    return operand


@lowers("send")
def _send(inst: Any, ctx: LowerCtx) -> tuple[str, dict]:
    return "send", _attrs(inst)


@lowers("recv")
def _recv(inst: Any, ctx: LowerCtx) -> tuple[str, dict]:
    _attrs(inst)  # refuse what recv-done could not serve, here where the recv is named
    return "recv", {}


@lowers("recv-done")
def _recv_done(inst: Any, ctx: LowerCtx) -> tuple[str, dict]:
    return "recv-done", _attrs(_recv_of(inst))


@lowers("send-done")
def _send_done(inst: Any, ctx: LowerCtx) -> tuple[str, dict]:
    return "after-all", {}


# -- shape rules (XLA's) ------------------------------------------------------------------------
def _three(inst: Any, data: Any) -> None:
    """send and recv give (data, u32[] context, token)."""
    out = inst.shape
    parts = out.tuple_shapes if out.is_tuple else []
    if len(parts) != 3 or leaf_types(parts[0]) != leaf_types(data) or parts[0].is_tuple != data.is_tuple or \
            leaf_types(parts[1]) != [("U32", ())] or not parts[2].is_token:
        fail(inst, f"{inst.opcode} gives ({data}, u32[], token[]), not {out}")


@shape_rule("send")
def _send_shapes(inst: Any) -> None:
    ops, _ = shapes(inst)
    if len(ops) != 2 or not ops[1].is_token:
        fail(inst, "send takes (data, token)")
    _three(inst, ops[0])


@shape_rule("recv")
def _recv_shapes(inst: Any) -> None:
    ops, out = shapes(inst)
    if len(ops) != 1 or not ops[0].is_token or not out.is_tuple or len(out.tuple_shapes) != 3:
        fail(inst, f"recv takes a token and gives (data, u32[], token[]), not {out}")
    _three(inst, out.tuple_shapes[0])


@shape_rule("recv-done")
def _recv_done_shapes(inst: Any) -> None:
    (operand,), out = shapes(inst)
    data = operand.tuple_shapes[0] if operand.is_tuple and operand.tuple_shapes else operand
    parts = out.tuple_shapes if out.is_tuple else []
    if len(parts) != 2 or leaf_types(parts[0]) != leaf_types(data) or not parts[1].is_token:
        fail(inst, f"recv-done of {operand} gives ({data}, token[]), not {out}")


@shape_rule("send-done")
def _send_done_shapes(inst: Any) -> None:
    if not inst.shape.is_token:
        fail(inst, f"send-done gives a token, not {inst.shape}")
