"""Result shapes of instructions written without one (`ROOT r = add(p, q)`), as XLA's parser
infers them with its ShapeInference.

XLA's text format lets an instruction leave out its result shape for a list of opcodes, and its
parser then derives the shape from the operands, the attributes and the called computations.
One rule per opcode, in a table; the shapes are built as XLA builds them (element type and
dimensions from XLA's shape rules; the layout of the operand for element-wise ops, a permuted
layout for transpose, the default layout for shapes made anew). An opcode XLA infers and we do
not is an error asking for the shape, never a guess.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from hlo.schema import xla_data_pb2
from hlo.text.shapes import default_layout

__all__ = ["infer_shape", "InferError", "INFERRED"]

ShapeProto = xla_data_pb2.ShapeProto
PT = xla_data_pb2.PrimitiveType


class InferError(ValueError):
    """The result shape can not be inferred; the message says why."""


#: A rule: (instruction proto, operand shapes, result shapes of the called computations) -> shape.
Rule = Callable[[Any, Sequence[ShapeProto], Sequence[ShapeProto]], ShapeProto]
_RULES: dict[str, Rule] = {}

_COMPONENT = {PT.C64: PT.F32, PT.C128: PT.F64}
_COMPLEX_OF = {PT.F32: PT.C64, PT.F64: PT.C128}


def _rule(*opcodes: str) -> Callable[[Rule], Rule]:
    def register(fn: Rule) -> Rule:
        for op in opcodes:
            _RULES[op] = fn
        return fn
    return register


def _array(element_type: int, dims: Sequence[int], dynamic: Sequence[bool] | None = None) -> ShapeProto:
    """A new array shape with XLA's default layout."""
    s = ShapeProto(element_type=element_type)
    s.dimensions.extend(dims)
    s.is_dynamic_dimension.extend(dynamic if dynamic is not None else [False] * len(dims))
    s.layout.CopyFrom(default_layout(len(dims)))
    return s


def _copy(shape: ShapeProto, element_type: int | None = None) -> ShapeProto:
    s = ShapeProto()
    s.CopyFrom(shape)
    if element_type is not None:
        s.element_type = element_type
    return s


def _need_array(shape: ShapeProto, what: str) -> None:
    if shape.element_type in (PT.TUPLE, PT.TOKEN, PT.OPAQUE_TYPE):
        raise InferError(f"{what} must be an array")


@_rule("abs", "round-nearest-afz", "round-nearest-even", "bitcast", "ceil", "count-leading-zeros", "copy",
       "imag", "is-finite", "floor", "not", "negate", "popcnt", "real", "sign", "exponential-minus-one",
       "log", "log-plus-one", "logistic", "sqrt", "cbrt", "rsqrt", "tanh", "erf", "sine", "cosine", "tan",
       "exponential")
def _unary(inst: Any, ops: Sequence[ShapeProto], called: Sequence[ShapeProto]) -> ShapeProto:
    """The operand's shape; abs, real and imag of a complex value are real; is-finite is PRED."""
    (x,) = _arity(inst, ops, 1)
    _need_array(x, "the operand")
    if inst.opcode == "is-finite":
        return _copy(x, PT.PRED)
    if inst.opcode in ("abs", "real", "imag") and x.element_type in _COMPONENT:
        return _copy(x, _COMPONENT[x.element_type])
    return _copy(x)


def _same_dims(a: ShapeProto, b: ShapeProto, opcode: str) -> None:
    _need_array(a, f"{opcode}'s operands")
    _need_array(b, f"{opcode}'s operands")
    if list(a.dimensions) != list(b.dimensions):
        raise InferError(f"{opcode} operands have different dimensions {list(a.dimensions)} and {list(b.dimensions)}")


@_rule("add", "divide", "multiply", "subtract", "atan2", "complex", "maximum", "minimum", "power", "remainder",
       "and", "or", "xor", "shift-left", "shift-right-arithmetic", "shift-right-logical", "compare")
def _binary(inst: Any, ops: Sequence[ShapeProto], called: Sequence[ShapeProto]) -> ShapeProto:
    """The lhs's shape (compare: PRED; complex: the complex type of its real parts)."""
    a, b = _arity(inst, ops, 2)
    _same_dims(a, b, inst.opcode)
    if inst.opcode == "compare":
        return _copy(a, PT.PRED)
    if inst.opcode == "complex":
        if a.element_type not in _COMPLEX_OF:
            raise InferError("complex takes f32 or f64 parts")
        return _copy(a, _COMPLEX_OF[a.element_type])
    if a.element_type != b.element_type:
        raise InferError(f"{inst.opcode} operands have different element types")
    return _copy(a)


@_rule("select", "clamp")
def _ternary(inst: Any, ops: Sequence[ShapeProto], called: Sequence[ShapeProto]) -> ShapeProto:
    """select: the on_true operand's shape; clamp: the clamped operand's."""
    return _copy(_arity(inst, ops, 3)[1])


@_rule("tuple")
def _tuple(inst: Any, ops: Sequence[ShapeProto], called: Sequence[ShapeProto]) -> ShapeProto:
    s = ShapeProto(element_type=PT.TUPLE)
    for o in ops:
        s.tuple_shapes.add().CopyFrom(o)
    return s


@_rule("get-tuple-element")
def _get_tuple_element(inst: Any, ops: Sequence[ShapeProto], called: Sequence[ShapeProto]) -> ShapeProto:
    (t,) = _arity(inst, ops, 1)
    if t.element_type != PT.TUPLE or not 0 <= inst.tuple_index < len(t.tuple_shapes):
        raise InferError(f"index {inst.tuple_index} is not an element of the operand")
    return _copy(t.tuple_shapes[inst.tuple_index])


@_rule("transpose")
def _transpose(inst: Any, ops: Sequence[ShapeProto], called: Sequence[ShapeProto]) -> ShapeProto:
    """Dimensions permuted; the layout permuted with them (the same bytes, as XLA makes it)."""
    (x,) = _arity(inst, ops, 1)
    _need_array(x, "the operand")
    perm = list(inst.dimensions)
    if sorted(perm) != list(range(len(x.dimensions))):
        raise InferError(f"dimensions {perm} are not a permutation of the operand's")
    s = _array(x.element_type, [x.dimensions[p] for p in perm],
               [x.is_dynamic_dimension[p] for p in perm] if x.is_dynamic_dimension else None)
    if x.HasField("layout"):
        inverse = {p: i for i, p in enumerate(perm)}
        s.layout.CopyFrom(x.layout)
        del s.layout.minor_to_major[:]
        s.layout.minor_to_major.extend(inverse[d] for d in x.layout.minor_to_major)
    return s


@_rule("reverse", "opt-barrier", "while")
def _same_as_operand(inst: Any, ops: Sequence[ShapeProto], called: Sequence[ShapeProto]) -> ShapeProto:
    return _copy(_arity(inst, ops, 1)[0])


@_rule("concatenate")
def _concatenate(inst: Any, ops: Sequence[ShapeProto], called: Sequence[ShapeProto]) -> ShapeProto:
    if not ops:
        raise InferError("concatenate needs operands")
    (dim,) = list(inst.dimensions) or [None]
    first = ops[0]
    rank = len(first.dimensions)
    if dim is None or not 0 <= dim < rank:
        raise InferError(f"dimension {dim} is not a dimension of the operands")
    dims = list(first.dimensions)
    for o in ops[1:]:
        if len(o.dimensions) != rank or o.element_type != first.element_type or any(
                o.dimensions[k] != dims[k] for k in range(rank) if k != dim):
            raise InferError("concatenate operands differ outside the concatenated dimension")
        dims[dim] += o.dimensions[dim]
    return _array(first.element_type, dims)


@_rule("pad")
def _pad(inst: Any, ops: Sequence[ShapeProto], called: Sequence[ShapeProto]) -> ShapeProto:
    x, _value = _arity(inst, ops, 2)
    pads = inst.padding_config.dimensions
    if len(pads) != len(x.dimensions):
        raise InferError("padding does not have one entry per dimension")
    dims = []
    for d, p in zip(x.dimensions, pads):
        n = d + p.edge_padding_low + p.edge_padding_high + max(d - 1, 0) * p.interior_padding
        if n < 0:
            raise InferError("padding makes a negative dimension")
        dims.append(n)
    return _array(x.element_type, dims)


@_rule("dot")
def _dot(inst: Any, ops: Sequence[ShapeProto], called: Sequence[ShapeProto]) -> ShapeProto:
    """Batch dimensions, then the lhs's free ones, then the rhs's; the lhs's element type."""
    a, b = _arity(inst, ops, 2)
    d = inst.dot_dimension_numbers
    lc, rc = list(d.lhs_contracting_dimensions), list(d.rhs_contracting_dimensions)
    lb, rb = list(d.lhs_batch_dimensions), list(d.rhs_batch_dimensions)
    if len(lc) != len(rc) or len(lb) != len(rb) or any(
            a.dimensions[i] != b.dimensions[j] for i, j in zip(lc + lb, rc + rb)):
        raise InferError("dot dimension numbers do not fit the operands")
    free_a = [a.dimensions[k] for k in range(len(a.dimensions)) if k not in lc and k not in lb]
    free_b = [b.dimensions[k] for k in range(len(b.dimensions)) if k not in rc and k not in rb]
    return _array(a.element_type, [a.dimensions[k] for k in lb] + free_a + free_b)


def _strided_bound(bound: int, window: int, stride: int) -> int:
    """Positions of a window in a (padded, dilated) bound: XLA's window_util::StridedBound."""
    return 0 if window > bound else (bound - window) // stride + 1


@_rule("convolution")
def _convolution(inst: Any, ops: Sequence[ShapeProto], called: Sequence[ShapeProto]) -> ShapeProto:
    """XLA's InferConvolveShape: batch / batch_group_count, the kernel's output features, and per
    spatial dimension the positions of the dilated window in the dilated, padded input."""
    lhs, rhs = _arity(inst, ops, 2)
    _need_array(lhs, "the input")
    _need_array(rhs, "the kernel")
    if lhs.element_type != rhs.element_type:
        raise InferError("convolution operands have different element types (the result type is not inferred)")
    dn = inst.convolution_dimension_numbers
    spatial = list(dn.input_spatial_dimensions)
    if len(inst.window.dimensions) != len(spatial) or len(dn.kernel_spatial_dimensions) != len(spatial) or \
            len(dn.output_spatial_dimensions) != len(spatial) or len(lhs.dimensions) != len(spatial) + 2:
        raise InferError("convolution window and dimension numbers do not fit the operands")
    groups = inst.batch_group_count or 1
    features = inst.feature_group_count or 1
    if lhs.dimensions[dn.input_feature_dimension] != rhs.dimensions[dn.kernel_input_feature_dimension] * features \
            or lhs.dimensions[dn.input_batch_dimension] % groups:
        raise InferError("convolution input features are not the kernel's times feature_group_count, or the "
                         "batch is not a multiple of batch_group_count")
    dims = [0] * len(lhs.dimensions)
    dims[dn.output_batch_dimension] = lhs.dimensions[dn.input_batch_dimension] // groups
    dims[dn.output_feature_dimension] = rhs.dimensions[dn.kernel_output_feature_dimension]
    for i, w in enumerate(inst.window.dimensions):
        if w.size != rhs.dimensions[dn.kernel_spatial_dimensions[i]]:
            raise InferError(f"convolution window size {w.size} differs from the kernel's spatial dimension {i}")
        base = (lhs.dimensions[spatial[i]] - 1) * (w.base_dilation or 1) + 1 + w.padding_low + w.padding_high
        window = (rhs.dimensions[dn.kernel_spatial_dimensions[i]] - 1) * (w.window_dilation or 1) + 1
        dims[dn.output_spatial_dimensions[i]] = _strided_bound(base, window, w.stride or 1)
    return _array(lhs.element_type, dims)


@_rule("call")
def _call(inst: Any, ops: Sequence[ShapeProto], called: Sequence[ShapeProto]) -> ShapeProto:
    return _copy(_callee(inst, called))


@_rule("map")
def _map(inst: Any, ops: Sequence[ShapeProto], called: Sequence[ShapeProto]) -> ShapeProto:
    if not ops:
        raise InferError("map needs operands")
    return _array(_callee(inst, called).element_type, ops[0].dimensions)


@_rule("reduce")
def _reduce(inst: Any, ops: Sequence[ShapeProto], called: Sequence[ShapeProto]) -> ShapeProto:
    """The inputs' dimensions without the reduced ones, with the reducer's element type(s)."""
    if not ops or len(ops) % 2:
        raise InferError("reduce takes inputs and as many init values")
    n = len(ops) // 2
    reduced = set(inst.dimensions)
    dims = [d for k, d in enumerate(ops[0].dimensions) if k not in reduced]
    root = _callee(inst, called)
    types = [s.element_type for s in root.tuple_shapes] if root.element_type == PT.TUPLE else [root.element_type]
    if len(types) != n:
        raise InferError("the reducer's result does not match the number of inputs")
    if n == 1:
        return _array(types[0], dims)
    s = ShapeProto(element_type=PT.TUPLE)
    for t in types:
        s.tuple_shapes.add().CopyFrom(_array(t, dims))
    return s


@_rule("reduce-window")
def _reduce_window(inst: Any, ops: Sequence[ShapeProto], called: Sequence[ShapeProto]) -> ShapeProto:
    """XLA's InferReduceWindowShape: per dimension, the positions of the dilated window in the
    dilated, padded input; the reducer's element type(s)."""
    if len(ops) != 2:
        raise InferError("the result shape of reduce-window of several inputs is not inferred (nor by XLA's "
                         "parser): write it")
    x = ops[0]
    _need_array(x, "the input")
    window = inst.window.dimensions
    if len(window) != len(x.dimensions):
        raise InferError(f"reduce-window's window has {len(window)} dimensions, its input {len(x.dimensions)}")
    dims = []
    for d, w in zip(x.dimensions, window):
        base = (d - 1) * (w.base_dilation or 1) + 1 + w.padding_low + w.padding_high if d else 0
        dims.append(_strided_bound(base, (w.size - 1) * (w.window_dilation or 1) + 1, w.stride or 1))
    root = _callee(inst, called)
    if root.element_type == PT.TUPLE:
        raise InferError("reduce-window's reducer returns a tuple for one input")
    return _array(root.element_type, dims)


@_rule("sort")
def _sort(inst: Any, ops: Sequence[ShapeProto], called: Sequence[ShapeProto]) -> ShapeProto:
    if len(ops) == 1:
        return _copy(ops[0])
    return _tuple(inst, ops, called)


@_rule("conditional")
def _conditional(inst: Any, ops: Sequence[ShapeProto], called: Sequence[ShapeProto]) -> ShapeProto:
    if not called:
        raise InferError("conditional names no branch computations")
    return _copy(called[0])


@_rule("get-dimension-size")
def _get_dimension_size(inst: Any, ops: Sequence[ShapeProto], called: Sequence[ShapeProto]) -> ShapeProto:
    return _array(PT.S32, [])


@_rule("after-all")
def _after_all(inst: Any, ops: Sequence[ShapeProto], called: Sequence[ShapeProto]) -> ShapeProto:
    return ShapeProto(element_type=PT.TOKEN)


@_rule("topk")
def _topk(inst: Any, ops: Sequence[ShapeProto], called: Sequence[ShapeProto]) -> ShapeProto:
    """(values, s32 indices), the last dimension k."""
    (x,) = _arity(inst, ops, 1)
    if not x.dimensions or not 0 <= inst.k <= x.dimensions[-1]:
        raise InferError(f"k={inst.k} does not fit the operand's last dimension")
    dims = list(x.dimensions[:-1]) + [inst.k]
    s = ShapeProto(element_type=PT.TUPLE)
    s.tuple_shapes.add().CopyFrom(_array(x.element_type, dims))
    s.tuple_shapes.add().CopyFrom(_array(PT.S32, dims))
    return s


def _arity(inst: Any, ops: Sequence[ShapeProto], n: int) -> Sequence[ShapeProto]:
    if len(ops) != n:
        raise InferError(f"{inst.opcode} takes {n} operand{'s' if n != 1 else ''}, not {len(ops)}")
    return ops


def _callee(inst: Any, called: Sequence[ShapeProto]) -> ShapeProto:
    if len(called) != 1:
        raise InferError(f"{inst.opcode} must name one computation")
    return called[0]


#: Opcodes whose result shape may be left out of the text.
INFERRED = frozenset(_RULES)


def infer_shape(inst: Any, operand_shapes: Sequence[ShapeProto],
                called_results: Sequence[ShapeProto]) -> ShapeProto:
    """The result shape of `inst` (its opcode and attributes filled in) from its operands' shapes
    and its called computations' result shapes, or InferError."""
    rule = _RULES.get(inst.opcode)
    if rule is None:
        raise InferError(f"the result shape of {inst.opcode} is not inferred here; write it "
                         f"(shapes are inferred for {', '.join(sorted(INFERRED))})")
    try:
        return rule(inst, operand_shapes, called_results)
    except (IndexError, KeyError) as exc:
        raise InferError(f"the operands do not fit {inst.opcode}: {exc}") from None
