"""The one table of instruction attributes, read by the parser and written by the printer.

Each row says: the attribute's spelling in HLO text, the proto field it lives in (a dotted path
into HloInstructionProto), its value kind (how to read and write it), the opcodes that take it, and
whether XLA requires it.  The order of the rows is the order the printer writes attributes in,
which follows XLA's printer: opcode-specific attributes, called computations, generic ones
(sharding, frontend attributes, control predecessors), then metadata and backend_config.

Defaults that XLA's parser fills when an attribute is absent (e.g. the comparison type of a
compare, DEFAULT operand precisions of a dot) are part of the kinds, so that a module read from
text has the fields XLA's own `ToProto` would write.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, FrozenSet, List, Optional, Sequence, Tuple

from hlo.schema import hlo_pb2, xla_data_pb2
from hlo.text import values as V
from hlo.text.cursor import Cursor
from hlo.text.kinds import (
    BoolKind, BoolListKind, BytesKind, ComparisonTypeKind, ComputationKind, ComputationListKind,
    ControlPredecessorsKind, DomainKind, DotAlgorithmKind, EnumKind, FirstOfListKind, FloatKind,
    GroupCountKind, InstKind, IntKind, IntListKind, Kind, MessageKind, OperandLayoutsKind,
    OptionalIntKind, PrecisionKind, PresentKind, ReadContext, ResultAccuracyKind, SkippedKind,
    TextKind, WriteContext,
)
from hlo.text.permute_slices import has_permute_slice_sizes, read_permute_slice_sizes, write_permute_slice_sizes
from hlo.text.shapes import parse_shape, print_shape

__all__ = ["AttrSpec", "ReadContext", "WriteContext", "ATTRIBUTES", "specs_for", "apply_defaults",
           "fill_defaults", "write_attributes"]

Inst = hlo_pb2.HloInstructionProto
PT = xla_data_pb2.PrimitiveType


# -- the table ----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class AttrSpec:
    """One attribute: text name, proto field path, value kind, the opcodes taking it (None: all)."""

    name: str
    field: str
    kind: Kind
    opcodes: Optional[FrozenSet[str]] = None
    required: bool = False


def _ops(*names: str) -> FrozenSet[str]:
    return frozenset(names)


def _pred_conditional(inst: Inst, ctx: WriteContext) -> bool:
    return bool(ctx.operand_shapes) and ctx.operand_shapes[0].element_type == PT.PRED and len(inst.called_computation_ids) == 2


def _branch_conditional(inst: Inst, ctx: WriteContext) -> bool:
    return not _pred_conditional(inst, ctx)


_CONV = _ops("convolution")
_DOT = _ops("dot")
_GATHER = _ops("gather")
_SCATTER = _ops("scatter")
_COLLECTIVES = _ops("all-reduce", "all-reduce-start", "all-gather", "all-gather-start", "all-to-all",
                    "reduce-scatter", "collective-broadcast", "ragged-all-to-all")
_CHANNEL_OPS = _COLLECTIVES | _ops("collective-permute", "collective-permute-start", "send", "send-done",
                                   "recv", "recv-done")
_DIMENSION_OPS = _ops("broadcast", "transpose", "reduce", "reverse", "concatenate", "sort", "map", "scan",
                      "get-dimension-size", "set-dimension-size")
_COLLECTIVE_DIMENSION_OPS = _ops("all-gather", "all-gather-start", "all-to-all", "reduce-scatter", "ragged-all-to-all")
_TO_APPLY = _ops("reduce", "reduce-window", "map", "sort", "scatter", "call", "all-reduce",
                 "all-reduce-start", "reduce-scatter", "custom-call", "scan")
_CALLS = _ops("fusion", "async-start")
_FUSION_KINDS = {k: k for k in ("kLoop", "kInput", "kOutput", "kCustom")}
_API = {n: v for n, v in hlo_pb2.CustomCallApiVersion.items()}
_SCHEDULE = {n: v for n, v in hlo_pb2.CustomCallSchedule.items()}
_DIRECTIONS = {d: d for d in ("EQ", "NE", "GE", "GT", "LE", "LT")}
_DISTRIBUTION = {n.lower(): v for n, v in xla_data_pb2.RandomDistribution.items() if n != "RNG_INVALID"}
_RNG_ALGORITHM = {n.lower(): v for n, v in xla_data_pb2.RandomAlgorithm.items()}
_FFT = {n: v for n, v in xla_data_pb2.FftType.items()}
_TRANSPOSE = {n: v for n, v in xla_data_pb2.TriangularSolveOptions.Transpose.items()}
_TRI_STATE = {"true": hlo_pb2.TRI_STATE_TRUE, "false": hlo_pb2.TRI_STATE_FALSE}

ATTRIBUTES: Tuple[AttrSpec, ...] = (
    # opcode-specific attributes, in XLA's printing order
    AttrSpec("index", "tuple_index", IntKind(omit=None), _ops("get-tuple-element"), required=True),
    AttrSpec("dimensions", "dimensions", IntListKind(always=True), _DIMENSION_OPS),
    AttrSpec("num_carries", "num_carries", IntKind(), _ops("scan")),
    AttrSpec("is_reverse", "is_reverse", BoolKind(), _ops("scan")),
    AttrSpec("is_associative", "is_associative", EnumKind(_TRI_STATE), _ops("scan")),
    AttrSpec("iota_dimension", "dimensions", FirstOfListKind(), _ops("iota"), required=True),
    AttrSpec("inferred_dimension", "dimensions", FirstOfListKind(), _ops("reshape")),
    AttrSpec("slice", "slice_dimensions", InstKind(V.read_slice, V.write_slice, lambda i: True), _ops("slice"), required=True),
    AttrSpec("dynamic_slice_sizes", "dynamic_slice_sizes", IntListKind(always=True), _ops("dynamic-slice"), required=True),
    AttrSpec("padding", "padding_config", MessageKind(V.read_padding, V.write_padding), _ops("pad"), required=True),
    AttrSpec("window", "window", MessageKind(V.read_window, V.write_window, lambda w: len(w.dimensions) > 0),
             _CONV | _ops("reduce-window", "select-and-scatter", "custom-call")),
    AttrSpec("dim_labels", "convolution_dimension_numbers", MessageKind(V.read_dim_labels, V.write_dim_labels),
             _CONV | _ops("custom-call")),
    AttrSpec("feature_group_count", "feature_group_count", GroupCountKind(), _CONV | _ops("custom-call")),
    AttrSpec("batch_group_count", "batch_group_count", GroupCountKind(), _CONV | _ops("custom-call")),
    AttrSpec("lhs_batch_dims", "dot_dimension_numbers.lhs_batch_dimensions", IntListKind(), _DOT | _ops("ragged-dot", "scaled-dot")),
    AttrSpec("lhs_contracting_dims", "dot_dimension_numbers.lhs_contracting_dimensions", IntListKind(always=True), _DOT | _ops("ragged-dot", "scaled-dot")),
    AttrSpec("rhs_batch_dims", "dot_dimension_numbers.rhs_batch_dimensions", IntListKind(), _DOT | _ops("ragged-dot", "scaled-dot")),
    AttrSpec("rhs_contracting_dims", "dot_dimension_numbers.rhs_contracting_dimensions", IntListKind(always=True), _DOT | _ops("ragged-dot", "scaled-dot")),
    AttrSpec("lhs_ragged_dims", "ragged_dot_dimension_numbers.lhs_ragged_dimensions", IntListKind(), _ops("ragged-dot")),
    AttrSpec("rhs_group_dims", "ragged_dot_dimension_numbers.rhs_group_dimensions", IntListKind(), _ops("ragged-dot")),
    AttrSpec("offset_dims", "gather_dimension_numbers.offset_dims", IntListKind(always=True), _GATHER),
    AttrSpec("collapsed_slice_dims", "gather_dimension_numbers.collapsed_slice_dims", IntListKind(always=True), _GATHER),
    AttrSpec("start_index_map", "gather_dimension_numbers.start_index_map", IntListKind(always=True), _GATHER),
    AttrSpec("operand_batching_dims", "gather_dimension_numbers.operand_batching_dims", IntListKind(), _GATHER),
    AttrSpec("start_indices_batching_dims", "gather_dimension_numbers.start_indices_batching_dims", IntListKind(), _GATHER),
    AttrSpec("index_vector_dim", "gather_dimension_numbers.index_vector_dim", IntKind(omit=None), _GATHER, required=True),
    AttrSpec("slice_sizes", "gather_slice_sizes", IntListKind(always=True), _GATHER, required=True),
    AttrSpec("update_window_dims", "scatter_dimension_numbers.update_window_dims", IntListKind(always=True), _SCATTER),
    AttrSpec("inserted_window_dims", "scatter_dimension_numbers.inserted_window_dims", IntListKind(always=True), _SCATTER),
    AttrSpec("scatter_dims_to_operand_dims", "scatter_dimension_numbers.scatter_dims_to_operand_dims", IntListKind(always=True), _SCATTER),
    AttrSpec("input_batching_dims", "scatter_dimension_numbers.input_batching_dims", IntListKind(), _SCATTER),
    AttrSpec("scatter_indices_batching_dims", "scatter_dimension_numbers.scatter_indices_batching_dims", IntListKind(), _SCATTER),
    AttrSpec("index_vector_dim", "scatter_dimension_numbers.index_vector_dim", IntKind(omit=None), _SCATTER, required=True),
    AttrSpec("indices_are_sorted", "indices_are_sorted", BoolKind(), _GATHER | _SCATTER),
    AttrSpec("unique_indices", "unique_indices", BoolKind(), _SCATTER),
    AttrSpec("direction", "comparison_direction", EnumKind(_DIRECTIONS), _ops("compare"), required=True),
    AttrSpec("type", "comparison_type", ComparisonTypeKind(), _ops("compare")),
    AttrSpec("is_stable", "is_stable", BoolKind(), _ops("sort")),
    AttrSpec("distribution", "distribution", EnumKind(_DISTRIBUTION), _ops("rng"), required=True),
    AttrSpec("algorithm", "rng_algorithm", EnumKind(_RNG_ALGORITHM), _ops("rng-bit-generator"), required=True),
    AttrSpec("fft_type", "fft_type", EnumKind(_FFT), _ops("fft"), required=True),
    AttrSpec("fft_length", "fft_length", IntListKind(always=True), _ops("fft"), required=True),
    AttrSpec("exponent_bits", "exponent_bits", IntKind(omit=None, lo=0, hi=(1 << 31) - 1), _ops("reduce-precision"), required=True),
    AttrSpec("mantissa_bits", "mantissa_bits", IntKind(omit=None, lo=0, hi=(1 << 31) - 1), _ops("reduce-precision"), required=True),
    AttrSpec("epsilon", "epsilon", FloatKind(), _ops("batch-norm-training", "batch-norm-inference", "batch-norm-grad"), required=True),
    AttrSpec("feature_index", "feature_index", IntKind(omit=None), _ops("batch-norm-training", "batch-norm-inference", "batch-norm-grad"), required=True),
    AttrSpec("left_side", "triangular_solve_options.left_side", BoolKind(), _ops("triangular-solve")),
    AttrSpec("lower", "triangular_solve_options.lower", BoolKind(), _ops("triangular-solve")),
    AttrSpec("unit_diagonal", "triangular_solve_options.unit_diagonal", BoolKind(), _ops("triangular-solve")),
    AttrSpec("transpose_a", "triangular_solve_options.transpose_a", EnumKind(_TRANSPOSE, omit=(0,)), _ops("triangular-solve")),
    AttrSpec("lower", "cholesky_options.lower", BoolKind(), _ops("cholesky")),
    AttrSpec("k", "k", IntKind(omit=None), _ops("topk"), required=True),
    AttrSpec("largest", "largest", BoolKind(absent=True), _ops("topk")),
    AttrSpec("delta", "delta", IntKind(omit=None), _ops("rng-get-and-update-state"), required=True),
    AttrSpec("kind", "fusion_kind", EnumKind(_FUSION_KINDS), _ops("fusion"), required=True),
    AttrSpec("channel_id", "channel_id", IntKind(), _CHANNEL_OPS),
    AttrSpec("replica_groups", "collective_device_list",
             InstKind(V.read_replica_groups, V.write_replica_groups, lambda i: True), _COLLECTIVES),
    AttrSpec("constrain_layout", "constrain_layout", BoolKind(), _COLLECTIVES),
    # XLA: all-gather and all-to-all print dimensions before use_global_device_ids,
    # reduce-scatter (an all-reduce underneath) after it
    AttrSpec("dimensions", "dimensions", IntListKind(), _COLLECTIVE_DIMENSION_OPS - _ops("reduce-scatter")),
    AttrSpec("use_global_device_ids", "use_global_device_ids", BoolKind(), _COLLECTIVES),
    AttrSpec("dimensions", "dimensions", IntListKind(), _ops("reduce-scatter")),
    AttrSpec("source_target_pairs", "source_target_pairs",
             InstKind(lambda c, i: [i.source_target_pairs.add(source=p[0], target=p[1]) if len(p) == 2 else _bad_pair(c)
                                    for p in c.nested_int_lists("as source_target_pairs")],
                      lambda i: "{" + ",".join(f"{{{p.source},{p.target}}}" for p in i.source_target_pairs) + "}",
                      lambda i: True),
             _ops("collective-permute", "collective-permute-start")),
    AttrSpec("slice_sizes", "dynamic_slice_sizes",
             InstKind(read_permute_slice_sizes, write_permute_slice_sizes, has_permute_slice_sizes),
             _ops("collective-permute", "collective-permute-start")),
    AttrSpec("is_host_transfer", "is_host_transfer", BoolKind(), _ops("send", "send-done", "recv", "recv-done")),
    AttrSpec("infeed_config", "infeed_config", BytesKind(), _ops("infeed")),
    AttrSpec("outfeed_shape", "outfeed_shape", MessageKind(lambda c, s: s.CopyFrom(parse_shape(c)), print_shape),
             _ops("outfeed")),
    AttrSpec("outfeed_config", "outfeed_config", BytesKind(), _ops("outfeed")),
    AttrSpec("cross_program_prefetch_index", "cross_program_prefetch_index", OptionalIntKind(), _ops("copy-start")),
    AttrSpec("parameter_replication", "parameter_replication.replicated_at_leaf_buffers", BoolListKind()),
    AttrSpec("custom_call_target", "custom_call_target", TextKind(always=True), _ops("custom-call"), required=True),
    AttrSpec("operand_layout_constraints", "operand_shapes_with_layout", OperandLayoutsKind(), _ops("custom-call")),
    AttrSpec("custom_call_has_side_effect", "custom_call_has_side_effect", BoolKind(), _ops("custom-call")),
    AttrSpec("literal", "literal", MessageKind(V.read_shaped_literal, V.write_shaped_literal), _ops("custom-call")),
    AttrSpec("output_to_operand_aliasing", "output_operand_aliasing",
             InstKind(V.read_output_operand_aliasing, V.write_output_operand_aliasing,
                      lambda i: len(i.output_operand_aliasing) > 0),
             _ops("custom-call", "fusion")),
    AttrSpec("schedule", "custom_call_schedule", EnumKind(_SCHEDULE, omit=(0,)), _ops("custom-call")),
    AttrSpec("api_version", "custom_call_api_version",
             EnumKind(_API, omit=(0, hlo_pb2.API_VERSION_ORIGINAL), default=hlo_pb2.API_VERSION_ORIGINAL),
             _ops("custom-call")),
    AttrSpec("operand_precision", "precision_config", PrecisionKind(), _DOT | _CONV | _ops("custom-call", "ragged-dot", "scaled-dot")),
    AttrSpec("algorithm", "precision_config.algorithm", DotAlgorithmKind(), _DOT | _CONV | _ops("ragged-dot", "scaled-dot")),
    AttrSpec("sparsity", "dot_sparsity", SkippedKind(), _DOT),
    AttrSpec("sparsity_config", "sparsity_config", PresentKind(), _CONV),
    AttrSpec("async_execution_thread", "async_execution_thread", TextKind(), _ops("async-start", "async-update", "async-done")),
    AttrSpec("is_composite", "is_composite", BoolKind(), _ops("call")),
    AttrSpec("domain", "domain_entry_sharding", DomainKind(), _ops("domain")),
    # called computations
    AttrSpec("calls", "called_computation_ids", ComputationKind(0), _CALLS, required=True),
    AttrSpec("calls", "called_computation_ids", ComputationKind(0), _ops("async-update", "async-done")),
    AttrSpec("to_apply", "called_computation_ids", ComputationKind(0), _TO_APPLY),
    AttrSpec("condition", "called_computation_ids", ComputationKind(1), _ops("while"), required=True),
    AttrSpec("body", "called_computation_ids", ComputationKind(0), _ops("while"), required=True),
    AttrSpec("select", "called_computation_ids", ComputationKind(0), _ops("select-and-scatter"), required=True),
    AttrSpec("scatter", "called_computation_ids", ComputationKind(1), _ops("select-and-scatter"), required=True),
    AttrSpec("true_computation", "called_computation_ids", ComputationKind(0, _pred_conditional), _ops("conditional")),
    AttrSpec("false_computation", "called_computation_ids", ComputationKind(1, _pred_conditional), _ops("conditional")),
    AttrSpec("branch_computations", "called_computation_ids", ComputationListKind(_branch_conditional), _ops("conditional")),
    AttrSpec("called_computations", "called_computation_ids",
             ComputationListKind(lambda i, c: len(i.called_computation_ids) > 1), _ops("custom-call")),
    # generic attributes
    AttrSpec("sharding", "sharding", MessageKind(V.read_sharding, V.write_sharding)),
    AttrSpec("frontend_attributes", "frontend_attributes",
             MessageKind(V.read_frontend_attributes, V.write_frontend_attributes, lambda m: len(m.map) > 0)),
    AttrSpec("control-predecessors", "control_predecessor_ids", ControlPredecessorsKind()),
    AttrSpec("statistics", "statistics_viz", MessageKind(V.read_statistics, V.write_statistics, lambda m: len(m.statistics) > 0)),
    AttrSpec("result_accuracy", "result_accuracy", ResultAccuracyKind(),
             _ops("exponential", "exponential-minus-one", "log", "log-plus-one", "logistic", "rsqrt", "sqrt", "cbrt",
                  "tanh", "tan", "sine", "cosine", "erf")),
    AttrSpec("origin", "original_value", MessageKind(V.read_original_value, V.write_original_value)),
    AttrSpec("metadata", "metadata", MessageKind(V.read_metadata, V.write_metadata, lambda m: m.ByteSize() > 0)),
    AttrSpec("backend_config", "backend_config", BytesKind(raw_braces=True)),
)


def _bad_pair(cur: Cursor) -> None:
    raise cur.fail("a source-target pair needs exactly two numbers")




_BY_OPCODE: Dict[str, Dict[str, AttrSpec]] = {}


def specs_for(opcode: str) -> Dict[str, AttrSpec]:
    """Attribute name -> spec for one opcode (cached)."""
    table = _BY_OPCODE.get(opcode)
    if table is None:
        table = {}
        for spec in ATTRIBUTES:
            if spec.opcodes is None or opcode in spec.opcodes:
                table.setdefault(spec.name, spec)
        _BY_OPCODE[opcode] = table
    return table


def apply_defaults(inst: Inst, given: FrozenSet[str], operand_shapes: Sequence[xla_data_pb2.ShapeProto]) -> Optional[str]:
    """Fill XLA's defaults for absent attributes; returns the name of a missing required one."""
    for name, spec in specs_for(inst.opcode).items():
        if name in given:
            continue
        if spec.required:
            return name
        spec.kind.default(inst, spec, operand_shapes)
        spec.kind.text_default(inst, spec)
    return None


def fill_defaults(inst: Inst, operand_shapes: Sequence[xla_data_pb2.ShapeProto]) -> None:
    """Fill every default XLA fills on load that is still unset (idempotent; for canonical forms)."""
    for spec in specs_for(inst.opcode).values():
        spec.kind.default(inst, spec, operand_shapes)


def write_attributes(inst: Inst, ctx: WriteContext) -> List[str]:
    """`name=value` texts of the instruction's attributes, in the table's order."""
    out: List[str] = []
    for spec in ATTRIBUTES:
        if spec.opcodes is not None and inst.opcode not in spec.opcodes:
            continue
        text = spec.kind.write(inst, spec, ctx)
        if text is not None:
            out.append(f"{spec.name}={text}")
    return out
