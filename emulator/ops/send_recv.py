"""send / recv / recv-done (neuron_customcall/compiler/lowering/send_recv.py says why the
exchange happens at send): `send` is a collective-permute of its data over its pairs, whose
received value waits in the device's mailbox (emulator.collectives.context.DeviceContext) for the
`recv-done` with the same channel and pairs; values of one key are taken oldest first, so a send
in loop iteration i meets the recv-done that follows it."""
from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import Any

import numpy as np

from emulator.collectives.comm import CollectiveError
from emulator.collectives.context import current
from emulator.ops.collective import permute_pairs
from emulator.ops.shape import TOKEN_VALUE
from emulator.program.context import HandlerContext
from emulator.program.dtypes import DTYPES, TUPLE
from emulator.program.ops import handles


def _key(ctx: HandlerContext) -> tuple:
    return int(ctx.attrs["channel"]), tuple(tuple(p) for p in ctx.attrs["pairs"])


def _leaf(t: Any) -> tuple[np.dtype, tuple[int, ...]]:
    if t[0] == TUPLE:
        raise CollectiveError(f"send/recv of a tuple {t} is not supported (send each array)")
    return DTYPES[t[0]], tuple(t[1])


@handles("send")
def _send(ctx: HandlerContext) -> Callable:
    find = permute_pairs(ctx, [tuple(p) for p in ctx.attrs["pairs"]], point_to_point=True)
    key = _key(ctx)
    what = f"send {ctx.name or '?'} (channel {key[0]})"
    _leaf(ctx.in_types[0])

    def send(data: np.ndarray, token: Any) -> tuple:
        dev = current()
        flat = find(dev)
        got = dev.communicator.permute(flat, np.asarray(data), op=what)
        if any(t == dev.device for _, t in flat):
            dev.mailbox.setdefault(key, deque()).append(got)
        return (data, np.zeros((), np.uint32), TOKEN_VALUE)
    return send


@handles("recv")
def _recv(ctx: HandlerContext) -> Callable:
    dt, shape = _leaf(ctx.type[1][0])
    return lambda token: (np.zeros(shape, dt), np.zeros((), np.uint32), TOKEN_VALUE)


@handles("recv-done")
def _recv_done(ctx: HandlerContext) -> Callable:
    find = permute_pairs(ctx, [tuple(p) for p in ctx.attrs["pairs"]], point_to_point=True)
    key = _key(ctx)
    dt, shape = _leaf(ctx.type[1][0])
    what = f"recv-done {ctx.name or '?'} (channel {key[0]}, pairs {[list(p) for p in key[1]]})"

    def recv_done(received: Any) -> tuple:
        dev = current()
        if not any(t == dev.device for _, t in find(dev)):
            return (np.zeros(shape, dt), TOKEN_VALUE)
        waiting = dev.mailbox.get(key)
        if not waiting:
            raise CollectiveError(f"{what}: device {dev.device} reached it before any send of the same channel and "
                                  "pairs (a send whose data depends on this recv-done, or none at all)")
        value = waiting.popleft()
        if value.shape != shape or value.dtype != dt:
            raise CollectiveError(f"{what}: received {value.dtype}{list(value.shape)}, the recv declares "
                                  f"{dt}{list(shape)}")
        return (value, TOKEN_VALUE)
    return recv_done
