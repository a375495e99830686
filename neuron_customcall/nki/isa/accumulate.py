"""Instructions that also reduce into an engine's *reduce registers* (one fp32 value per
partition, kept inside ScalarE or VectorE from one instruction to the next): ``activation`` with
``reduce_op``/``reduce_res``/``reduce_cmd``, ``activation_reduce``, ``tensor_scalar_reduce``,
``select_reduce``, ``exponential``, ``range_select``.

The registers are a kernel-wide [128, 1] fp32 on-chip tensor per engine (``Builder.register``:
allocated at the kernel's start, uninitialised like the hardware's, NaN until a reset), so that
``reduce_cmd.reduce`` carries a running value across instructions and loop iterations exactly as
the reference's pseudo code does. Each ``reduce_cmd`` is existing IR: ``memset`` (reset),
``tensor_reduce`` over the free axes, ``tensor_copy`` into the registers (with ``acc`` for
``reduce``), and a copy out to ``reduce_res``.
"""

from __future__ import annotations

from emulator import machine
from emulator.kernel_ir import affine_to_json

from .. import dtypes as nkd
from ..indexing import arange
from ..tile import Tile
from ..tracer import current
from . import enums
from .compute import activation, is_prelu, reduce_free, scalar_tensor_tensor, tensor_scalar
from .emit import alu, dtype_name, enum_name, fail, fit, free_size, result, tile, tile_or_scalar

SCALAR_REGS = "scalar"
VECTOR_REGS = "vector"

#: What a reset leaves in the registers before the first reduction, per operator.
_IDENTITY = {"add": 0.0, "maximum": float("-inf"), "minimum": float("inf"), "multiply": 1.0}


def _registers(engine: str, partitions: int) -> Tile:
    tr = current()
    decl = tr.register(f"reduce_regs_{engine}", (machine.NUM_PARTITIONS, 1), "float32")
    return Tile(tr, decl)[0:partitions, :]


def reduce_into_registers(engine: str, values: Tile | None, partitions: int, op: str, cmd: str,
                          reduce_res, api: str, init=None, negate: bool = False) -> None:
    """Apply ``reduce_cmd`` ``cmd`` with operator ``op`` to the registers of ``engine`` for the
    fp32 ``values`` ([P, ...]), then copy the registers to ``reduce_res`` if one is given."""
    tr = current()
    regs = _registers(engine, partitions)
    if cmd == "reset":
        tr.emit("memset", regs, 0.0)
    if cmd in ("reduce", "reset_reduce", "load_reduce") and values is not None:
        part = reduce_free(op, values, api)
        if cmd == "reset_reduce":
            tr.emit("tensor_copy", regs, part)
        else:
            if cmd == "load_reduce":
                start = tile_or_scalar(0.0 if init is None else init, "reduce_init", api)
                if isinstance(start, Tile):
                    start = _one_per_partition(start, partitions, "reduce_init", api)
                tr.emit("tensor_copy", regs, start)
            tr.emit("tensor_copy", regs, part, acc=op)
    if reduce_res is not None:
        out = fit(reduce_res, (partitions, 1), api)
        if negate:
            tr.emit("tensor_scalar", out, regs, -1.0, op0="multiply", reverse0=False)
        else:
            tr.emit("tensor_copy", out, regs)


def _one_per_partition(t: Tile, partitions: int, what: str, api: str) -> Tile:
    if t.shape[0] != partitions or free_size(t.shape) != 1:
        raise fail(f"{what} shape", f"{api}: {what} must be a [{partitions}, 1] tile, got "
                   f"{list(t.shape)}")
    return fit(t, (partitions, 1), api)


def _fp32_then(dst, shape, dtype: str, api: str, compute) -> tuple[Tile, Tile]:
    """Run ``compute(target)`` into fp32 values the registers can reduce: straight into the
    result when that is fp32, else into an fp32 tile copied to the result (the engine reduces
    its fp32 values, not the rounded output). Returns (result, fp32 values)."""
    out_dtype = dtype if dst is None else dst.dtype_name
    if out_dtype == "float32":
        res = compute(dst, "float32")
        return res, res
    values = compute(None, "float32")
    res = result(dst, "tensor_copy", shape, dtype, values, api=api)
    return res, values


def activation_reduce(dst, op, data, *, bias=None, scale=1.0, reduce_op=None, reduce_res=None,
                      reduce_cmd=None, dtype=None, mask=None, api="nki.isa.activation") -> Tile:
    """``nisa.activation`` with its reduction: ``op(data * scale + bias)``, then per the
    reference's pseudo code ``reduce_regs`` (reset, reduced with ``add``) and ``reduce_res``."""
    cmd = enum_name(reduce_cmd, "reduce_cmd", enums.REDUCE_CMD_NAMES, api)
    cmd = "idle" if cmd == "unknown" else cmd
    if reduce_op is None and reduce_res is None and cmd == "idle":
        return activation(dst, op, data, bias=bias, scale=scale, dtype=dtype, mask=mask, api=api)
    if cmd == "load_reduce":
        raise fail("invalid reduce_cmd", f"{api}: ScalarE reduce_cmd is idle, reset, reduce or "
                   "reset_reduce")
    red = alu(reduce_op if reduce_op is not None else "add", api)
    if red != "add":
        raise fail("activation reduce_op", f"{api}: reduce_op must be nl.add, got {reduce_op!r}")
    x = tile(data, "data", api)
    default = dtype_name(dtype, x.dtype_name if nkd.is_float(x.dtype_name) else "float32")
    res, values = _fp32_then(dst, x.shape, default, api, lambda d, dt: activation(
        d, op, x, bias=bias, scale=scale, dtype=dt, mask=mask, api=api))
    reduce_into_registers(SCALAR_REGS, values, x.shape[0], "add", cmd, reduce_res, api)
    return res


def tensor_scalar_reduce(dst, data, op0, operand0, reduce_op, reduce_res=None, reverse0=False,
                         reduce_cmd=None, reduce_init=None, reduce_res_negate=False, *,
                         dtype=None, mask=None, api="nki.isa.tensor_scalar_reduce") -> Tile:
    """``data <op0> operand0``, reduced along all free axes with ``reduce_op`` into the VectorE
    registers (``reset_reduce`` by default) and ``reduce_res`` (negated on request)."""
    cmd = enum_name(reduce_cmd if reduce_cmd is not None else "reset_reduce", "reduce_cmd",
                    enums.REDUCE_CMD_NAMES, api)
    red = alu(reduce_op, api)
    if red not in _IDENTITY:
        raise fail("tensor_scalar_reduce reduce_op", f"{api}: reduce_op is add, multiply, max or "
                   f"min, got {reduce_op!r}")
    x = tile(data, "data", api)
    res, values = _fp32_then(dst, x.shape, dtype_name(dtype, x.dtype_name), api,
                             lambda d, dt: tensor_scalar(d, x, op0, operand0, reverse0, dtype=dt,
                                                         mask=mask, api=api))
    reduce_into_registers(VECTOR_REGS, values, x.shape[0], red, cmd, reduce_res, api,
                          init=reduce_init, negate=bool(reduce_res_negate))
    return res


def select_reduce(dst, predicate, on_true, on_false, reduce_res=None, reduce_cmd=None,
                  reduce_op="maximum", reverse_pred=False, *, dtype=None, mask=None,
                  api="nki.isa.select_reduce") -> Tile:
    """``where(predicate, on_true, on_false)`` (``on_false`` a scalar or [P, 1] tile), with an
    optional max-reduction into the VectorE registers and ``reduce_res``."""
    cmd = enum_name(reduce_cmd, "reduce_cmd", enums.REDUCE_CMD_NAMES, api)
    cmd = "idle" if cmd == "unknown" else cmd
    if alu(reduce_op, api) != "maximum":
        raise fail("select_reduce reduce_op", f"{api}: reduce_op must be nl.maximum")
    pred, t = tile(predicate, "predicate", api), tile(on_true, "on_true", api)
    if free_size(pred.shape) != free_size(t.shape) or pred.shape[0] != t.shape[0]:
        raise fail("select_reduce shape", f"{api}: predicate {list(pred.shape)} and on_true "
                   f"{list(t.shape)} must have the same partitions and elements per partition")
    pred = fit(pred, t.shape, api)
    f = tile_or_scalar(on_false, "on_false", api)
    if isinstance(f, Tile):
        f = _one_per_partition(f, t.shape[0], "on_false", api)
    yes, no = (f, t) if reverse_pred else (t, f)

    def select(d, dt):
        return result(d, "select", t.shape, dt, pred, yes, no, api=api, mask=mask)

    res, values = _fp32_then(dst, t.shape, dtype_name(dtype, t.dtype_name), api, select)
    reduce_into_registers(VECTOR_REGS, values, t.shape[0], "maximum", cmd, reduce_res, api)
    return res


def exponential(dst, src, max_value=0.0, reduce_res=None, reduce_cmd=None, reduce_init=0.0, *,
                dtype=None, mask=None, api="nki.isa.exponential") -> Tile:
    """``exp(src - max_value)`` (``max_value`` a scalar or [P, 1] tile), with an optional running
    sum in the VectorE registers (``reduce_cmd``) copied to ``reduce_res``."""
    cmd = enum_name(reduce_cmd, "reduce_cmd", enums.REDUCE_CMD_NAMES, api)
    cmd = "idle" if cmd == "unknown" else cmd
    if cmd == "reset":
        raise fail("invalid reduce_cmd", f"{api}: reduce_cmd is idle, reset_reduce, reduce or "
                   "load_reduce")
    x = tile(src, "src", api)
    m = tile_or_scalar(max_value, "max_value", api)
    bias = -m if not isinstance(m, Tile) else tensor_scalar(
        None, _one_per_partition(m, x.shape[0], "max_value", api), "multiply", -1.0,
        dtype="float32", api=api)
    res, values = _fp32_then(
        dst, x.shape, dtype_name(dtype, x.dtype_name if nkd.is_float(x.dtype_name)
                                 else "float32"), api,
        lambda d, dt: activation(d, "exp", x, bias=bias, dtype=dt, mask=mask, api=api))
    reduce_into_registers(VECTOR_REGS, values, x.shape[0], "add", cmd, reduce_res, api,
                          init=reduce_init)
    return res


_RANGE_CMP = frozenset({"equal", "less", "less_equal", "greater", "greater_equal"})


def range_select(dst, on_true_tile, comp_op0, comp_op1, bound0, bound1, reduce_cmd=None,
                 reduce_res=None, reduce_op="maximum", range_start=0, on_false_value=None, *,
                 dtype=None, mask=None, api="nki.isa.range_select") -> Tile:
    """``on_true_tile`` where ``comp_op0(i, bound0) & comp_op1(i, bound1)`` for the free index
    ``i`` (+ ``range_start``, compared in fp32), else ``on_false_value`` (FP32_MIN); with a
    max-reduction into the VectorE registers and ``reduce_res``."""
    cmd = enum_name(reduce_cmd if reduce_cmd is not None else "reset_reduce", "reduce_cmd",
                    enums.REDUCE_CMD_NAMES, api)
    cmp0, cmp1 = alu(comp_op0, api), alu(comp_op1, api)
    if cmp0 not in _RANGE_CMP or cmp1 not in _RANGE_CMP:
        raise fail("range_select comparison", f"{api}: comparisons are equal, less, less_equal, "
                   f"greater or greater_equal; got {comp_op0!r}, {comp_op1!r}")
    if alu(reduce_op, api) != "maximum":
        raise fail("range_select reduce_op", f"{api}: reduce_op must be nl.maximum")
    t = tile(on_true_tile, "on_true_tile", api)
    p = t.shape[0]
    b0 = _one_per_partition(tile(bound0, "bound0", api), p, "bound0", api)
    b1 = _one_per_partition(tile(bound1, "bound1", api), p, "bound1", api)
    tr = current()
    free = free_size(t.shape)
    flat = fit(t, (p, free), api) if t.ndim != 2 else t
    index = tr.new("iota", (p, free), "float32",
                   expr=affine_to_json((arange(free)[None, :] + int(range_start)).to_affine(2)))
    c0 = tr.new("tensor_tensor", (p, free), "bool", index, b0, op=cmp0)
    c1 = tr.new("tensor_tensor", (p, free), "bool", index, b1, op=cmp1)
    both = tr.new("tensor_tensor", (p, free), "bool", c0, c1, op="logical_and")
    false = enums.fp32.min if on_false_value in (None, Ellipsis) else float(on_false_value)

    def select(d, dt):
        return result(d, "select", (p, free), dt, both, flat, false, api=api, mask=mask)

    res, values = _fp32_then(dst, (p, free), dtype_name(dtype, t.dtype_name), api, select)
    reduce_into_registers(VECTOR_REGS, values, p, "maximum", cmd, reduce_res, api)
    return res


_CUMULATIVE_OPS = frozenset({"add", "subtract", "multiply", "maximum", "minimum"})


def tensor_scalar_cumulative(dst, src, op0, op1, imm0, imm1=None, reduce_cmd=None, *,
                             api="nki.isa.tensor_scalar_cumulative") -> Tile:
    """Per partition, ``reg = op1(op0(src[i], imm0), reg)`` along the free elements, each step
    written to ``dst``; ``reg`` starts at ``op1``'s identity (``reset_reduce``), ``imm1``
    (``load_reduce``) or the VectorE registers (``reduce``), which keep the last value. A
    ``tensor_tensor_scan`` of the ``tensor_scalar`` result."""
    cmd = enum_name(reduce_cmd if reduce_cmd is not None else "reset_reduce", "reduce_cmd",
                    enums.REDUCE_CMD_NAMES, api)
    if cmd not in ("reset_reduce", "reduce", "load_reduce"):
        raise fail("invalid reduce_cmd", f"{api}: reduce_cmd is reset_reduce, reduce or "
                   f"load_reduce, got {cmd}")
    red = alu(op1, api)
    if red not in _CUMULATIVE_OPS:
        raise fail("tensor_scalar_cumulative op1", f"{api}: op1 is add, subtract, multiply, "
                   f"maximum or minimum, got {op1!r}")
    x = tile(src, "src", api)
    p, f = x.shape[0], free_size(x.shape)
    x = fit(x, (p, f), api) if x.ndim != 2 else x
    if dst is None or not isinstance(dst, Tile):
        raise fail("dst", f"{api}: dst must be an on-chip tile")
    y = tensor_scalar(None, x, op0, imm0, dtype="float32", api=api)
    regs = _registers(VECTOR_REGS, p)
    if cmd == "reset_reduce":
        start = {"subtract": 0.0}.get(red, _IDENTITY.get(red, 0.0))
    elif cmd == "reduce":
        start = regs
    else:
        start = tile_or_scalar(imm1, "imm1", api)
        if isinstance(start, Tile):
            start = _one_per_partition(start, p, "imm1", api)
    tr = current()
    zeros = tr.new("memset", (p, f), "float32", 0.0)
    scan = tr.new("tensor_tensor_scan", (p, f), "float32", y, zeros, start, op0=red, op1="add",
                  reverse0=False, reverse1=False)
    tr.emit("tensor_copy", regs, scan[:, f - 1:f])
    tr.emit("tensor_copy", fit(dst, (p, f), api), scan)
    return dst


_BYPASS = "bypass"
_ACTIVATE2_STAGES = {("multiply", "add"), ("multiply", "subtract"), ("multiply", _BYPASS),
                     ("add", _BYPASS), ("subtract", _BYPASS), (_BYPASS, _BYPASS)}
_ABS_REDUCE = {"abs_max": "maximum", "abs_min": "minimum"}


def _op_or_bypass(op, api: str) -> str:
    name = getattr(op, "_nki_alu", None) or getattr(op, "__name__", op)
    return _BYPASS if op is None or name == _BYPASS else alu(op, api)


def _activate(dst, op, y: Tile, relu_param, dtype, api: str) -> Tile:
    """Stage 2 of ``activate2``: ``op(y, relu_param=relu_param)``. Of the activation table's
    functions only PReLU is parameterised (``nl.prelu``: "the slope for negative inputs is
    controlled by the relu_param argument"): ``y`` where ``y >= 0``, else ``relu_param * y``,
    computed in fp32 as ``max(y, 0) + relu_param * min(y, 0)`` (exact: one term is zero) and
    rounded once into the result. Other functions take no parameter and ignore it, as the
    reference's pseudo code passes it to every ``op``."""
    if not is_prelu(op):
        return activation(dst, op, y, dtype=dtype, api=api)
    negative = tensor_scalar(None, y, "minimum", 0.0, False, "multiply", relu_param,
                             dtype="float32", api=api)
    return scalar_tensor_tensor(dst, y, "maximum", 0.0, "add", negative,
                                dtype=dtype if dst is None else None, api=api)


def activate2(dst, op, data, imm0, imm1, op0, op1, relu_param=0.0, reverse0=False,
              reverse1=False, reduce_op=None, reduce_res=None, reduce_cmd=None, *,
              api="nki.isa.activate2") -> Tile:
    """ScalarE: ``op((data op0 imm0) op1 imm1)`` (either step may be ``bypass``; ``reverseN``
    swaps its operands), with an optional reduction (``add``, ``maximum``, ``minimum``,
    ``abs_max``, ``abs_min``) into the ScalarE registers and ``reduce_res``."""
    s0, s1 = _op_or_bypass(op0, api), _op_or_bypass(op1, api)
    if (s0, s1) not in _ACTIVATE2_STAGES:
        raise fail("activate2 ops", f"{api}: (op0, op1) is one of (multiply, add), (multiply, "
                   f"subtract), (multiply, bypass), (add, bypass), (subtract, bypass), (bypass, "
                   f"bypass); got ({s0}, {s1})")
    x = tile(data, "data", api)
    rp = tile_or_scalar(relu_param, "relu_param", api)
    if isinstance(rp, Tile):
        rp = _one_per_partition(rp, x.shape[0], "relu_param", api)
    y = x
    if s0 != _BYPASS:
        y = tensor_scalar(None, x, s0, imm0, reverse0, None if s1 == _BYPASS else s1,
                          None if s1 == _BYPASS else imm1, reverse1, dtype="float32", api=api)
    cmd = enum_name(reduce_cmd, "reduce_cmd", enums.REDUCE_CMD_NAMES, api)
    cmd = "idle" if cmd == "unknown" else cmd
    if reduce_op is None and reduce_res is None and cmd == "idle":
        return _activate(dst, op, y, rp, x.dtype_name if dst is None else None, api)
    name = getattr(reduce_op, "__name__", reduce_op)
    red = _ABS_REDUCE.get(name, None) or alu(reduce_op if reduce_op is not None else "add", api)
    if red not in ("add", "maximum", "minimum"):
        raise fail("activate2 reduce_op", f"{api}: reduce_op is add, maximum, minimum, abs_max "
                   f"or abs_min, got {reduce_op!r}")
    res, values = _fp32_then(dst, x.shape, x.dtype_name, api,
                             lambda d, dt: _activate(d, op, y, rp, dt, api))
    if name in _ABS_REDUCE:
        values = activation(None, "abs", values, dtype="float32", api=api)
    reduce_into_registers(SCALAR_REGS, values, x.shape[0], red, cmd, reduce_res, api)
    return res
