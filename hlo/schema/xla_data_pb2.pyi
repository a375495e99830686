from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class PrimitiveType(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    PRIMITIVE_TYPE_INVALID: _ClassVar[PrimitiveType]
    PRED: _ClassVar[PrimitiveType]
    S1: _ClassVar[PrimitiveType]
    S2: _ClassVar[PrimitiveType]
    S4: _ClassVar[PrimitiveType]
    S8: _ClassVar[PrimitiveType]
    S16: _ClassVar[PrimitiveType]
    S32: _ClassVar[PrimitiveType]
    S64: _ClassVar[PrimitiveType]
    U1: _ClassVar[PrimitiveType]
    U2: _ClassVar[PrimitiveType]
    U4: _ClassVar[PrimitiveType]
    U8: _ClassVar[PrimitiveType]
    U16: _ClassVar[PrimitiveType]
    U32: _ClassVar[PrimitiveType]
    U64: _ClassVar[PrimitiveType]
    F16: _ClassVar[PrimitiveType]
    F32: _ClassVar[PrimitiveType]
    BF16: _ClassVar[PrimitiveType]
    F64: _ClassVar[PrimitiveType]
    F8E5M2: _ClassVar[PrimitiveType]
    F8E4M3: _ClassVar[PrimitiveType]
    F8E4M3FN: _ClassVar[PrimitiveType]
    F8E4M3B11FNUZ: _ClassVar[PrimitiveType]
    F8E3M4: _ClassVar[PrimitiveType]
    F8E5M2FNUZ: _ClassVar[PrimitiveType]
    F8E4M3FNUZ: _ClassVar[PrimitiveType]
    F4E2M1FN: _ClassVar[PrimitiveType]
    F8E8M0FNU: _ClassVar[PrimitiveType]
    F6E3M2FN: _ClassVar[PrimitiveType]
    F6E2M3FN: _ClassVar[PrimitiveType]
    C64: _ClassVar[PrimitiveType]
    C128: _ClassVar[PrimitiveType]
    TUPLE: _ClassVar[PrimitiveType]
    OPAQUE_TYPE: _ClassVar[PrimitiveType]
    TOKEN: _ClassVar[PrimitiveType]
    BUFFER: _ClassVar[PrimitiveType]

class AsyncStreamKind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    ASYNC_STREAM_KIND_COLLECTIVE: _ClassVar[AsyncStreamKind]
    ASYNC_STREAM_KIND_P2P0: _ClassVar[AsyncStreamKind]
    ASYNC_STREAM_KIND_P2P1: _ClassVar[AsyncStreamKind]
    ASYNC_STREAM_KIND_MEMCPYP2P: _ClassVar[AsyncStreamKind]

class CollectiveOpGroupMode(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    COLLECTIVE_OP_GROUP_MODE_CROSS_REPLICA: _ClassVar[CollectiveOpGroupMode]
    COLLECTIVE_OP_GROUP_MODE_CROSS_PARTITION: _ClassVar[CollectiveOpGroupMode]
    COLLECTIVE_OP_GROUP_MODE_CROSS_REPLICA_AND_PARTITION: _ClassVar[CollectiveOpGroupMode]
    COLLECTIVE_OP_GROUP_MODE_FLATTENED_ID: _ClassVar[CollectiveOpGroupMode]

class DimLevelType(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    DIM_DENSE: _ClassVar[DimLevelType]
    DIM_COMPRESSED: _ClassVar[DimLevelType]
    DIM_SINGLETON: _ClassVar[DimLevelType]
    DIM_LOOSE_COMPRESSED: _ClassVar[DimLevelType]

class ProfileType(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    INVALID: _ClassVar[ProfileType]
    WINDOW: _ClassVar[ProfileType]
    FLAG: _ClassVar[ProfileType]
    INTEGER: _ClassVar[ProfileType]

class ProfileSource(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    PROFILE_SOURCE_UNKNOWN_SOURCE: _ClassVar[ProfileSource]
    PROFILE_SOURCE_EMBEDDED: _ClassVar[ProfileSource]
    PROFILE_SOURCE_REMOTE: _ClassVar[ProfileSource]

class CompilationEvent(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    COMPILATION_EVENT_UNKNOWN_EVENT: _ClassVar[CompilationEvent]
    COMPILATION_EVENT_FIRST_COMPILATION: _ClassVar[CompilationEvent]
    COMPILATION_EVENT_RECOMPILATION: _ClassVar[CompilationEvent]

class ProfileGenerationStrategy(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    PROFILE_GENERATION_STRATEGY_UNKNOWN: _ClassVar[ProfileGenerationStrategy]
    PROFILE_GENERATION_STRATEGY_GA: _ClassVar[ProfileGenerationStrategy]
    PROFILE_GENERATION_STRATEGY_FANTA: _ClassVar[ProfileGenerationStrategy]
    PROFILE_GENERATION_STRATEGY_CFO: _ClassVar[ProfileGenerationStrategy]
    PROFILE_GENERATION_STRATEGY_EXHAUSTIVE: _ClassVar[ProfileGenerationStrategy]
    PROFILE_GENERATION_STRATEGY_LCM_GNN: _ClassVar[ProfileGenerationStrategy]
    PROFILE_GENERATION_STRATEGY_LCM_MOE: _ClassVar[ProfileGenerationStrategy]

class PaddingType(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    PADDING_INVALID: _ClassVar[PaddingType]
    PADDING_VALID: _ClassVar[PaddingType]
    PADDING_SAME: _ClassVar[PaddingType]

class FftType(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    FFT: _ClassVar[FftType]
    IFFT: _ClassVar[FftType]
    RFFT: _ClassVar[FftType]
    IRFFT: _ClassVar[FftType]

class RandomDistribution(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    RNG_INVALID: _ClassVar[RandomDistribution]
    RNG_UNIFORM: _ClassVar[RandomDistribution]
    RNG_NORMAL: _ClassVar[RandomDistribution]

class RandomAlgorithm(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    RNG_DEFAULT: _ClassVar[RandomAlgorithm]
    RNG_THREE_FRY: _ClassVar[RandomAlgorithm]
    RNG_PHILOX: _ClassVar[RandomAlgorithm]
PRIMITIVE_TYPE_INVALID: PrimitiveType
PRED: PrimitiveType
S1: PrimitiveType
S2: PrimitiveType
S4: PrimitiveType
S8: PrimitiveType
S16: PrimitiveType
S32: PrimitiveType
S64: PrimitiveType
U1: PrimitiveType
U2: PrimitiveType
U4: PrimitiveType
U8: PrimitiveType
U16: PrimitiveType
U32: PrimitiveType
U64: PrimitiveType
F16: PrimitiveType
F32: PrimitiveType
BF16: PrimitiveType
F64: PrimitiveType
F8E5M2: PrimitiveType
F8E4M3: PrimitiveType
F8E4M3FN: PrimitiveType
F8E4M3B11FNUZ: PrimitiveType
F8E3M4: PrimitiveType
F8E5M2FNUZ: PrimitiveType
F8E4M3FNUZ: PrimitiveType
F4E2M1FN: PrimitiveType
F8E8M0FNU: PrimitiveType
F6E3M2FN: PrimitiveType
F6E2M3FN: PrimitiveType
C64: PrimitiveType
C128: PrimitiveType
TUPLE: PrimitiveType
OPAQUE_TYPE: PrimitiveType
TOKEN: PrimitiveType
BUFFER: PrimitiveType
ASYNC_STREAM_KIND_COLLECTIVE: AsyncStreamKind
ASYNC_STREAM_KIND_P2P0: AsyncStreamKind
ASYNC_STREAM_KIND_P2P1: AsyncStreamKind
ASYNC_STREAM_KIND_MEMCPYP2P: AsyncStreamKind
COLLECTIVE_OP_GROUP_MODE_CROSS_REPLICA: CollectiveOpGroupMode
COLLECTIVE_OP_GROUP_MODE_CROSS_PARTITION: CollectiveOpGroupMode
COLLECTIVE_OP_GROUP_MODE_CROSS_REPLICA_AND_PARTITION: CollectiveOpGroupMode
COLLECTIVE_OP_GROUP_MODE_FLATTENED_ID: CollectiveOpGroupMode
DIM_DENSE: DimLevelType
DIM_COMPRESSED: DimLevelType
DIM_SINGLETON: DimLevelType
DIM_LOOSE_COMPRESSED: DimLevelType
INVALID: ProfileType
WINDOW: ProfileType
FLAG: ProfileType
INTEGER: ProfileType
PROFILE_SOURCE_UNKNOWN_SOURCE: ProfileSource
PROFILE_SOURCE_EMBEDDED: ProfileSource
PROFILE_SOURCE_REMOTE: ProfileSource
COMPILATION_EVENT_UNKNOWN_EVENT: CompilationEvent
COMPILATION_EVENT_FIRST_COMPILATION: CompilationEvent
COMPILATION_EVENT_RECOMPILATION: CompilationEvent
PROFILE_GENERATION_STRATEGY_UNKNOWN: ProfileGenerationStrategy
PROFILE_GENERATION_STRATEGY_GA: ProfileGenerationStrategy
PROFILE_GENERATION_STRATEGY_FANTA: ProfileGenerationStrategy
PROFILE_GENERATION_STRATEGY_CFO: ProfileGenerationStrategy
PROFILE_GENERATION_STRATEGY_EXHAUSTIVE: ProfileGenerationStrategy
PROFILE_GENERATION_STRATEGY_LCM_GNN: ProfileGenerationStrategy
PROFILE_GENERATION_STRATEGY_LCM_MOE: ProfileGenerationStrategy
PADDING_INVALID: PaddingType
PADDING_VALID: PaddingType
PADDING_SAME: PaddingType
FFT: FftType
IFFT: FftType
RFFT: FftType
IRFFT: FftType
RNG_INVALID: RandomDistribution
RNG_UNIFORM: RandomDistribution
RNG_NORMAL: RandomDistribution
RNG_DEFAULT: RandomAlgorithm
RNG_THREE_FRY: RandomAlgorithm
RNG_PHILOX: RandomAlgorithm

class PaddingConfig(_message.Message):
    __slots__ = ("dimensions",)
    class PaddingConfigDimension(_message.Message):
        __slots__ = ("edge_padding_low", "edge_padding_high", "interior_padding")
        EDGE_PADDING_LOW_FIELD_NUMBER: _ClassVar[int]
        EDGE_PADDING_HIGH_FIELD_NUMBER: _ClassVar[int]
        INTERIOR_PADDING_FIELD_NUMBER: _ClassVar[int]
        edge_padding_low: int
        edge_padding_high: int
        interior_padding: int
        def __init__(self, edge_padding_low: _Optional[int] = ..., edge_padding_high: _Optional[int] = ..., interior_padding: _Optional[int] = ...) -> None: ...
    DIMENSIONS_FIELD_NUMBER: _ClassVar[int]
    dimensions: _containers.RepeatedCompositeFieldContainer[PaddingConfig.PaddingConfigDimension]
    def __init__(self, dimensions: _Optional[_Iterable[_Union[PaddingConfig.PaddingConfigDimension, _Mapping]]] = ...) -> None: ...

class TileProto(_message.Message):
    __slots__ = ("dimensions",)
    DIMENSIONS_FIELD_NUMBER: _ClassVar[int]
    dimensions: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, dimensions: _Optional[_Iterable[int]] = ...) -> None: ...

class SplitConfigProto(_message.Message):
    __slots__ = ("dimension", "split_indices")
    DIMENSION_FIELD_NUMBER: _ClassVar[int]
    SPLIT_INDICES_FIELD_NUMBER: _ClassVar[int]
    dimension: int
    split_indices: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, dimension: _Optional[int] = ..., split_indices: _Optional[_Iterable[int]] = ...) -> None: ...

class LayoutProto(_message.Message):
    __slots__ = ("minor_to_major", "dim_level_types", "dim_unique", "dim_ordered", "tiles", "tail_padding_alignment_in_elements", "element_size_in_bits", "memory_space", "index_primitive_type", "pointer_primitive_type", "physical_shape", "dynamic_shape_metadata_prefix_bytes", "split_configs")
    MINOR_TO_MAJOR_FIELD_NUMBER: _ClassVar[int]
    DIM_LEVEL_TYPES_FIELD_NUMBER: _ClassVar[int]
    DIM_UNIQUE_FIELD_NUMBER: _ClassVar[int]
    DIM_ORDERED_FIELD_NUMBER: _ClassVar[int]
    TILES_FIELD_NUMBER: _ClassVar[int]
    TAIL_PADDING_ALIGNMENT_IN_ELEMENTS_FIELD_NUMBER: _ClassVar[int]
    ELEMENT_SIZE_IN_BITS_FIELD_NUMBER: _ClassVar[int]
    MEMORY_SPACE_FIELD_NUMBER: _ClassVar[int]
    INDEX_PRIMITIVE_TYPE_FIELD_NUMBER: _ClassVar[int]
    POINTER_PRIMITIVE_TYPE_FIELD_NUMBER: _ClassVar[int]
    PHYSICAL_SHAPE_FIELD_NUMBER: _ClassVar[int]
    DYNAMIC_SHAPE_METADATA_PREFIX_BYTES_FIELD_NUMBER: _ClassVar[int]
    SPLIT_CONFIGS_FIELD_NUMBER: _ClassVar[int]
    minor_to_major: _containers.RepeatedScalarFieldContainer[int]
    dim_level_types: _containers.RepeatedScalarFieldContainer[DimLevelType]
    dim_unique: _containers.RepeatedScalarFieldContainer[bool]
    dim_ordered: _containers.RepeatedScalarFieldContainer[bool]
    tiles: _containers.RepeatedCompositeFieldContainer[TileProto]
    tail_padding_alignment_in_elements: int
    element_size_in_bits: int
    memory_space: int
    index_primitive_type: PrimitiveType
    pointer_primitive_type: PrimitiveType
    physical_shape: ShapeProto
    dynamic_shape_metadata_prefix_bytes: int
    split_configs: _containers.RepeatedCompositeFieldContainer[SplitConfigProto]
    def __init__(self, minor_to_major: _Optional[_Iterable[int]] = ..., dim_level_types: _Optional[_Iterable[_Union[DimLevelType, str]]] = ..., dim_unique: _Optional[_Iterable[bool]] = ..., dim_ordered: _Optional[_Iterable[bool]] = ..., tiles: _Optional[_Iterable[_Union[TileProto, _Mapping]]] = ..., tail_padding_alignment_in_elements: _Optional[int] = ..., element_size_in_bits: _Optional[int] = ..., memory_space: _Optional[int] = ..., index_primitive_type: _Optional[_Union[PrimitiveType, str]] = ..., pointer_primitive_type: _Optional[_Union[PrimitiveType, str]] = ..., physical_shape: _Optional[_Union[ShapeProto, _Mapping]] = ..., dynamic_shape_metadata_prefix_bytes: _Optional[int] = ..., split_configs: _Optional[_Iterable[_Union[SplitConfigProto, _Mapping]]] = ...) -> None: ...

class ShapeProto(_message.Message):
    __slots__ = ("element_type", "dimensions", "is_dynamic_dimension", "tuple_shapes", "layout")
    ELEMENT_TYPE_FIELD_NUMBER: _ClassVar[int]
    DIMENSIONS_FIELD_NUMBER: _ClassVar[int]
    IS_DYNAMIC_DIMENSION_FIELD_NUMBER: _ClassVar[int]
    TUPLE_SHAPES_FIELD_NUMBER: _ClassVar[int]
    LAYOUT_FIELD_NUMBER: _ClassVar[int]
    element_type: PrimitiveType
    dimensions: _containers.RepeatedScalarFieldContainer[int]
    is_dynamic_dimension: _containers.RepeatedScalarFieldContainer[bool]
    tuple_shapes: _containers.RepeatedCompositeFieldContainer[ShapeProto]
    layout: LayoutProto
    def __init__(self, element_type: _Optional[_Union[PrimitiveType, str]] = ..., dimensions: _Optional[_Iterable[int]] = ..., is_dynamic_dimension: _Optional[_Iterable[bool]] = ..., tuple_shapes: _Optional[_Iterable[_Union[ShapeProto, _Mapping]]] = ..., layout: _Optional[_Union[LayoutProto, _Mapping]] = ...) -> None: ...

class ProgramShapeProto(_message.Message):
    __slots__ = ("parameters", "result", "parameter_names")
    PARAMETERS_FIELD_NUMBER: _ClassVar[int]
    RESULT_FIELD_NUMBER: _ClassVar[int]
    PARAMETER_NAMES_FIELD_NUMBER: _ClassVar[int]
    parameters: _containers.RepeatedCompositeFieldContainer[ShapeProto]
    result: ShapeProto
    parameter_names: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, parameters: _Optional[_Iterable[_Union[ShapeProto, _Mapping]]] = ..., result: _Optional[_Union[ShapeProto, _Mapping]] = ..., parameter_names: _Optional[_Iterable[str]] = ...) -> None: ...

class ComputationStats(_message.Message):
    __slots__ = ("flop_count", "transcendental_count")
    FLOP_COUNT_FIELD_NUMBER: _ClassVar[int]
    TRANSCENDENTAL_COUNT_FIELD_NUMBER: _ClassVar[int]
    flop_count: float
    transcendental_count: float
    def __init__(self, flop_count: _Optional[float] = ..., transcendental_count: _Optional[float] = ...) -> None: ...

class Payload(_message.Message):
    __slots__ = ("value", "id")
    VALUE_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    value: bytes
    id: int
    def __init__(self, value: _Optional[bytes] = ..., id: _Optional[int] = ...) -> None: ...

class OpMetadata(_message.Message):
    __slots__ = ("op_type", "op_name", "source_file", "source_line", "source_end_line", "source_column", "source_end_column", "profile_type", "size_of_generated_code_in_bytes", "size_of_memory_working_set_in_bytes", "profile_info", "deduplicated_name", "stack_frame_id", "scheduling_name", "metadata_payload")
    class ProfileInfo(_message.Message):
        __slots__ = ("profile_type", "relative_speedup", "profile_source", "compilation_event", "profile_generation_strategy")
        PROFILE_TYPE_FIELD_NUMBER: _ClassVar[int]
        RELATIVE_SPEEDUP_FIELD_NUMBER: _ClassVar[int]
        PROFILE_SOURCE_FIELD_NUMBER: _ClassVar[int]
        COMPILATION_EVENT_FIELD_NUMBER: _ClassVar[int]
        PROFILE_GENERATION_STRATEGY_FIELD_NUMBER: _ClassVar[int]
        profile_type: _containers.RepeatedScalarFieldContainer[ProfileType]
        relative_speedup: float
        profile_source: ProfileSource
        compilation_event: CompilationEvent
        profile_generation_strategy: ProfileGenerationStrategy
        def __init__(self, profile_type: _Optional[_Iterable[_Union[ProfileType, str]]] = ..., relative_speedup: _Optional[float] = ..., profile_source: _Optional[_Union[ProfileSource, str]] = ..., compilation_event: _Optional[_Union[CompilationEvent, str]] = ..., profile_generation_strategy: _Optional[_Union[ProfileGenerationStrategy, str]] = ...) -> None: ...
    OP_TYPE_FIELD_NUMBER: _ClassVar[int]
    OP_NAME_FIELD_NUMBER: _ClassVar[int]
    SOURCE_FILE_FIELD_NUMBER: _ClassVar[int]
    SOURCE_LINE_FIELD_NUMBER: _ClassVar[int]
    SOURCE_END_LINE_FIELD_NUMBER: _ClassVar[int]
    SOURCE_COLUMN_FIELD_NUMBER: _ClassVar[int]
    SOURCE_END_COLUMN_FIELD_NUMBER: _ClassVar[int]
    PROFILE_TYPE_FIELD_NUMBER: _ClassVar[int]
    SIZE_OF_GENERATED_CODE_IN_BYTES_FIELD_NUMBER: _ClassVar[int]
    SIZE_OF_MEMORY_WORKING_SET_IN_BYTES_FIELD_NUMBER: _ClassVar[int]
    PROFILE_INFO_FIELD_NUMBER: _ClassVar[int]
    DEDUPLICATED_NAME_FIELD_NUMBER: _ClassVar[int]
    STACK_FRAME_ID_FIELD_NUMBER: _ClassVar[int]
    SCHEDULING_NAME_FIELD_NUMBER: _ClassVar[int]
    METADATA_PAYLOAD_FIELD_NUMBER: _ClassVar[int]
    op_type: str
    op_name: str
    source_file: str
    source_line: int
    source_end_line: int
    source_column: int
    source_end_column: int
    profile_type: _containers.RepeatedScalarFieldContainer[ProfileType]
    size_of_generated_code_in_bytes: int
    size_of_memory_working_set_in_bytes: int
    profile_info: OpMetadata.ProfileInfo
    deduplicated_name: str
    stack_frame_id: int
    scheduling_name: str
    metadata_payload: Payload
    def __init__(self, op_type: _Optional[str] = ..., op_name: _Optional[str] = ..., source_file: _Optional[str] = ..., source_line: _Optional[int] = ..., source_end_line: _Optional[int] = ..., source_column: _Optional[int] = ..., source_end_column: _Optional[int] = ..., profile_type: _Optional[_Iterable[_Union[ProfileType, str]]] = ..., size_of_generated_code_in_bytes: _Optional[int] = ..., size_of_memory_working_set_in_bytes: _Optional[int] = ..., profile_info: _Optional[_Union[OpMetadata.ProfileInfo, _Mapping]] = ..., deduplicated_name: _Optional[str] = ..., stack_frame_id: _Optional[int] = ..., scheduling_name: _Optional[str] = ..., metadata_payload: _Optional[_Union[Payload, _Mapping]] = ...) -> None: ...

class ExecutionProfile(_message.Message):
    __slots__ = ("compilation_cache_hit", "compile_time_ms", "compute_cycle_count", "compute_time_ns", "compute_and_transfer_time_ns", "executable_size_in_bytes", "profile_cache_hit", "warmup_run_executed")
    COMPILATION_CACHE_HIT_FIELD_NUMBER: _ClassVar[int]
    COMPILE_TIME_MS_FIELD_NUMBER: _ClassVar[int]
    COMPUTE_CYCLE_COUNT_FIELD_NUMBER: _ClassVar[int]
    COMPUTE_TIME_NS_FIELD_NUMBER: _ClassVar[int]
    COMPUTE_AND_TRANSFER_TIME_NS_FIELD_NUMBER: _ClassVar[int]
    EXECUTABLE_SIZE_IN_BYTES_FIELD_NUMBER: _ClassVar[int]
    PROFILE_CACHE_HIT_FIELD_NUMBER: _ClassVar[int]
    WARMUP_RUN_EXECUTED_FIELD_NUMBER: _ClassVar[int]
    compilation_cache_hit: bool
    compile_time_ms: int
    compute_cycle_count: int
    compute_time_ns: int
    compute_and_transfer_time_ns: int
    executable_size_in_bytes: int
    profile_cache_hit: bool
    warmup_run_executed: bool
    def __init__(self, compilation_cache_hit: bool = ..., compile_time_ms: _Optional[int] = ..., compute_cycle_count: _Optional[int] = ..., compute_time_ns: _Optional[int] = ..., compute_and_transfer_time_ns: _Optional[int] = ..., executable_size_in_bytes: _Optional[int] = ..., profile_cache_hit: bool = ..., warmup_run_executed: bool = ...) -> None: ...

class ExecutionHandle(_message.Message):
    __slots__ = ("handle",)
    HANDLE_FIELD_NUMBER: _ClassVar[int]
    handle: int
    def __init__(self, handle: _Optional[int] = ...) -> None: ...

class GlobalDataHandle(_message.Message):
    __slots__ = ("handle",)
    HANDLE_FIELD_NUMBER: _ClassVar[int]
    handle: int
    def __init__(self, handle: _Optional[int] = ...) -> None: ...

class DeviceHandle(_message.Message):
    __slots__ = ("handle", "device_count")
    HANDLE_FIELD_NUMBER: _ClassVar[int]
    DEVICE_COUNT_FIELD_NUMBER: _ClassVar[int]
    handle: int
    device_count: int
    def __init__(self, handle: _Optional[int] = ..., device_count: _Optional[int] = ...) -> None: ...

class ChannelHandle(_message.Message):
    __slots__ = ("handle", "type")
    class ChannelType(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = ()
        CHANNEL_TYPE_INVALID: _ClassVar[ChannelHandle.ChannelType]
        DEVICE_TO_DEVICE: _ClassVar[ChannelHandle.ChannelType]
        DEVICE_TO_HOST: _ClassVar[ChannelHandle.ChannelType]
        HOST_TO_DEVICE: _ClassVar[ChannelHandle.ChannelType]
    CHANNEL_TYPE_INVALID: ChannelHandle.ChannelType
    DEVICE_TO_DEVICE: ChannelHandle.ChannelType
    DEVICE_TO_HOST: ChannelHandle.ChannelType
    HOST_TO_DEVICE: ChannelHandle.ChannelType
    HANDLE_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    handle: int
    type: ChannelHandle.ChannelType
    def __init__(self, handle: _Optional[int] = ..., type: _Optional[_Union[ChannelHandle.ChannelType, str]] = ...) -> None: ...

class DeviceAssignmentProto(_message.Message):
    __slots__ = ("replica_count", "computation_count", "computation_devices")
    class ComputationDevice(_message.Message):
        __slots__ = ("replica_device_ids",)
        REPLICA_DEVICE_IDS_FIELD_NUMBER: _ClassVar[int]
        replica_device_ids: _containers.RepeatedScalarFieldContainer[int]
        def __init__(self, replica_device_ids: _Optional[_Iterable[int]] = ...) -> None: ...
    REPLICA_COUNT_FIELD_NUMBER: _ClassVar[int]
    COMPUTATION_COUNT_FIELD_NUMBER: _ClassVar[int]
    COMPUTATION_DEVICES_FIELD_NUMBER: _ClassVar[int]
    replica_count: int
    computation_count: int
    computation_devices: _containers.RepeatedCompositeFieldContainer[DeviceAssignmentProto.ComputationDevice]
    def __init__(self, replica_count: _Optional[int] = ..., computation_count: _Optional[int] = ..., computation_devices: _Optional[_Iterable[_Union[DeviceAssignmentProto.ComputationDevice, _Mapping]]] = ...) -> None: ...

class LiteralProto(_message.Message):
    __slots__ = ("shape", "preds", "s1s", "s2s", "s4s", "s8s", "u1s", "u2s", "u4s", "u8s", "s32s", "s64s", "u32s", "u64s", "f32s", "f64s", "c64s", "c128s", "tuple_literals", "f16s", "bf16s", "u16s", "s16s", "f4e2m1fns", "f8e3m4s", "f8e4m3b11fnuzs", "f8e4m3fns", "f8e4m3fnuzs", "f8e4m3s", "f8e5m2fnuzs", "f8e5m2s", "f8e8m0fnus", "f6e3m2fns", "f6e2m3fns", "sparse_indices", "dynamic_sizes")
    SHAPE_FIELD_NUMBER: _ClassVar[int]
    PREDS_FIELD_NUMBER: _ClassVar[int]
    S1S_FIELD_NUMBER: _ClassVar[int]
    S2S_FIELD_NUMBER: _ClassVar[int]
    S4S_FIELD_NUMBER: _ClassVar[int]
    S8S_FIELD_NUMBER: _ClassVar[int]
    U1S_FIELD_NUMBER: _ClassVar[int]
    U2S_FIELD_NUMBER: _ClassVar[int]
    U4S_FIELD_NUMBER: _ClassVar[int]
    U8S_FIELD_NUMBER: _ClassVar[int]
    S32S_FIELD_NUMBER: _ClassVar[int]
    S64S_FIELD_NUMBER: _ClassVar[int]
    U32S_FIELD_NUMBER: _ClassVar[int]
    U64S_FIELD_NUMBER: _ClassVar[int]
    F32S_FIELD_NUMBER: _ClassVar[int]
    F64S_FIELD_NUMBER: _ClassVar[int]
    C64S_FIELD_NUMBER: _ClassVar[int]
    C128S_FIELD_NUMBER: _ClassVar[int]
    TUPLE_LITERALS_FIELD_NUMBER: _ClassVar[int]
    F16S_FIELD_NUMBER: _ClassVar[int]
    BF16S_FIELD_NUMBER: _ClassVar[int]
    U16S_FIELD_NUMBER: _ClassVar[int]
    S16S_FIELD_NUMBER: _ClassVar[int]
    F4E2M1FNS_FIELD_NUMBER: _ClassVar[int]
    F8E3M4S_FIELD_NUMBER: _ClassVar[int]
    F8E4M3B11FNUZS_FIELD_NUMBER: _ClassVar[int]
    F8E4M3FNS_FIELD_NUMBER: _ClassVar[int]
    F8E4M3FNUZS_FIELD_NUMBER: _ClassVar[int]
    F8E4M3S_FIELD_NUMBER: _ClassVar[int]
    F8E5M2FNUZS_FIELD_NUMBER: _ClassVar[int]
    F8E5M2S_FIELD_NUMBER: _ClassVar[int]
    F8E8M0FNUS_FIELD_NUMBER: _ClassVar[int]
    F6E3M2FNS_FIELD_NUMBER: _ClassVar[int]
    F6E2M3FNS_FIELD_NUMBER: _ClassVar[int]
    SPARSE_INDICES_FIELD_NUMBER: _ClassVar[int]
    DYNAMIC_SIZES_FIELD_NUMBER: _ClassVar[int]
    shape: ShapeProto
    preds: _containers.RepeatedScalarFieldContainer[bool]
    s1s: bytes
    s2s: bytes
    s4s: bytes
    s8s: bytes
    u1s: bytes
    u2s: bytes
    u4s: bytes
    u8s: bytes
    s32s: _containers.RepeatedScalarFieldContainer[int]
    s64s: _containers.RepeatedScalarFieldContainer[int]
    u32s: _containers.RepeatedScalarFieldContainer[int]
    u64s: _containers.RepeatedScalarFieldContainer[int]
    f32s: _containers.RepeatedScalarFieldContainer[float]
    f64s: _containers.RepeatedScalarFieldContainer[float]
    c64s: _containers.RepeatedScalarFieldContainer[float]
    c128s: _containers.RepeatedScalarFieldContainer[float]
    tuple_literals: _containers.RepeatedCompositeFieldContainer[LiteralProto]
    f16s: bytes
    bf16s: bytes
    u16s: bytes
    s16s: bytes
    f4e2m1fns: bytes
    f8e3m4s: bytes
    f8e4m3b11fnuzs: bytes
    f8e4m3fns: bytes
    f8e4m3fnuzs: bytes
    f8e4m3s: bytes
    f8e5m2fnuzs: bytes
    f8e5m2s: bytes
    f8e8m0fnus: bytes
    f6e3m2fns: bytes
    f6e2m3fns: bytes
    sparse_indices: _containers.RepeatedScalarFieldContainer[int]
    dynamic_sizes: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, shape: _Optional[_Union[ShapeProto, _Mapping]] = ..., preds: _Optional[_Iterable[bool]] = ..., s1s: _Optional[bytes] = ..., s2s: _Optional[bytes] = ..., s4s: _Optional[bytes] = ..., s8s: _Optional[bytes] = ..., u1s: _Optional[bytes] = ..., u2s: _Optional[bytes] = ..., u4s: _Optional[bytes] = ..., u8s: _Optional[bytes] = ..., s32s: _Optional[_Iterable[int]] = ..., s64s: _Optional[_Iterable[int]] = ..., u32s: _Optional[_Iterable[int]] = ..., u64s: _Optional[_Iterable[int]] = ..., f32s: _Optional[_Iterable[float]] = ..., f64s: _Optional[_Iterable[float]] = ..., c64s: _Optional[_Iterable[float]] = ..., c128s: _Optional[_Iterable[float]] = ..., tuple_literals: _Optional[_Iterable[_Union[LiteralProto, _Mapping]]] = ..., f16s: _Optional[bytes] = ..., bf16s: _Optional[bytes] = ..., u16s: _Optional[bytes] = ..., s16s: _Optional[bytes] = ..., f4e2m1fns: _Optional[bytes] = ..., f8e3m4s: _Optional[bytes] = ..., f8e4m3b11fnuzs: _Optional[bytes] = ..., f8e4m3fns: _Optional[bytes] = ..., f8e4m3fnuzs: _Optional[bytes] = ..., f8e4m3s: _Optional[bytes] = ..., f8e5m2fnuzs: _Optional[bytes] = ..., f8e5m2s: _Optional[bytes] = ..., f8e8m0fnus: _Optional[bytes] = ..., f6e3m2fns: _Optional[bytes] = ..., f6e2m3fns: _Optional[bytes] = ..., sparse_indices: _Optional[_Iterable[int]] = ..., dynamic_sizes: _Optional[_Iterable[int]] = ...) -> None: ...

class WindowDimension(_message.Message):
    __slots__ = ("size", "stride", "padding_low", "padding_high", "window_dilation", "base_dilation", "window_reversal")
    SIZE_FIELD_NUMBER: _ClassVar[int]
    STRIDE_FIELD_NUMBER: _ClassVar[int]
    PADDING_LOW_FIELD_NUMBER: _ClassVar[int]
    PADDING_HIGH_FIELD_NUMBER: _ClassVar[int]
    WINDOW_DILATION_FIELD_NUMBER: _ClassVar[int]
    BASE_DILATION_FIELD_NUMBER: _ClassVar[int]
    WINDOW_REVERSAL_FIELD_NUMBER: _ClassVar[int]
    size: int
    stride: int
    padding_low: int
    padding_high: int
    window_dilation: int
    base_dilation: int
    window_reversal: bool
    def __init__(self, size: _Optional[int] = ..., stride: _Optional[int] = ..., padding_low: _Optional[int] = ..., padding_high: _Optional[int] = ..., window_dilation: _Optional[int] = ..., base_dilation: _Optional[int] = ..., window_reversal: bool = ...) -> None: ...

class Window(_message.Message):
    __slots__ = ("dimensions",)
    DIMENSIONS_FIELD_NUMBER: _ClassVar[int]
    dimensions: _containers.RepeatedCompositeFieldContainer[WindowDimension]
    def __init__(self, dimensions: _Optional[_Iterable[_Union[WindowDimension, _Mapping]]] = ...) -> None: ...

class GatherDimensionNumbers(_message.Message):
    __slots__ = ("offset_dims", "collapsed_slice_dims", "start_index_map", "index_vector_dim", "operand_batching_dims", "start_indices_batching_dims")
    OFFSET_DIMS_FIELD_NUMBER: _ClassVar[int]
    COLLAPSED_SLICE_DIMS_FIELD_NUMBER: _ClassVar[int]
    START_INDEX_MAP_FIELD_NUMBER: _ClassVar[int]
    INDEX_VECTOR_DIM_FIELD_NUMBER: _ClassVar[int]
    OPERAND_BATCHING_DIMS_FIELD_NUMBER: _ClassVar[int]
    START_INDICES_BATCHING_DIMS_FIELD_NUMBER: _ClassVar[int]
    offset_dims: _containers.RepeatedScalarFieldContainer[int]
    collapsed_slice_dims: _containers.RepeatedScalarFieldContainer[int]
    start_index_map: _containers.RepeatedScalarFieldContainer[int]
    index_vector_dim: int
    operand_batching_dims: _containers.RepeatedScalarFieldContainer[int]
    start_indices_batching_dims: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, offset_dims: _Optional[_Iterable[int]] = ..., collapsed_slice_dims: _Optional[_Iterable[int]] = ..., start_index_map: _Optional[_Iterable[int]] = ..., index_vector_dim: _Optional[int] = ..., operand_batching_dims: _Optional[_Iterable[int]] = ..., start_indices_batching_dims: _Optional[_Iterable[int]] = ...) -> None: ...

class ScatterDimensionNumbers(_message.Message):
    __slots__ = ("update_window_dims", "inserted_window_dims", "scatter_dims_to_operand_dims", "index_vector_dim", "input_batching_dims", "scatter_indices_batching_dims")
    UPDATE_WINDOW_DIMS_FIELD_NUMBER: _ClassVar[int]
    INSERTED_WINDOW_DIMS_FIELD_NUMBER: _ClassVar[int]
    SCATTER_DIMS_TO_OPERAND_DIMS_FIELD_NUMBER: _ClassVar[int]
    INDEX_VECTOR_DIM_FIELD_NUMBER: _ClassVar[int]
    INPUT_BATCHING_DIMS_FIELD_NUMBER: _ClassVar[int]
    SCATTER_INDICES_BATCHING_DIMS_FIELD_NUMBER: _ClassVar[int]
    update_window_dims: _containers.RepeatedScalarFieldContainer[int]
    inserted_window_dims: _containers.RepeatedScalarFieldContainer[int]
    scatter_dims_to_operand_dims: _containers.RepeatedScalarFieldContainer[int]
    index_vector_dim: int
    input_batching_dims: _containers.RepeatedScalarFieldContainer[int]
    scatter_indices_batching_dims: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, update_window_dims: _Optional[_Iterable[int]] = ..., inserted_window_dims: _Optional[_Iterable[int]] = ..., scatter_dims_to_operand_dims: _Optional[_Iterable[int]] = ..., index_vector_dim: _Optional[int] = ..., input_batching_dims: _Optional[_Iterable[int]] = ..., scatter_indices_batching_dims: _Optional[_Iterable[int]] = ...) -> None: ...

class ConvolutionDimensionNumbers(_message.Message):
    __slots__ = ("input_batch_dimension", "input_feature_dimension", "input_spatial_dimensions", "kernel_input_feature_dimension", "kernel_output_feature_dimension", "kernel_spatial_dimensions", "output_batch_dimension", "output_feature_dimension", "output_spatial_dimensions")
    INPUT_BATCH_DIMENSION_FIELD_NUMBER: _ClassVar[int]
    INPUT_FEATURE_DIMENSION_FIELD_NUMBER: _ClassVar[int]
    INPUT_SPATIAL_DIMENSIONS_FIELD_NUMBER: _ClassVar[int]
    KERNEL_INPUT_FEATURE_DIMENSION_FIELD_NUMBER: _ClassVar[int]
    KERNEL_OUTPUT_FEATURE_DIMENSION_FIELD_NUMBER: _ClassVar[int]
    KERNEL_SPATIAL_DIMENSIONS_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_BATCH_DIMENSION_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_FEATURE_DIMENSION_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_SPATIAL_DIMENSIONS_FIELD_NUMBER: _ClassVar[int]
    input_batch_dimension: int
    input_feature_dimension: int
    input_spatial_dimensions: _containers.RepeatedScalarFieldContainer[int]
    kernel_input_feature_dimension: int
    kernel_output_feature_dimension: int
    kernel_spatial_dimensions: _containers.RepeatedScalarFieldContainer[int]
    output_batch_dimension: int
    output_feature_dimension: int
    output_spatial_dimensions: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, input_batch_dimension: _Optional[int] = ..., input_feature_dimension: _Optional[int] = ..., input_spatial_dimensions: _Optional[_Iterable[int]] = ..., kernel_input_feature_dimension: _Optional[int] = ..., kernel_output_feature_dimension: _Optional[int] = ..., kernel_spatial_dimensions: _Optional[_Iterable[int]] = ..., output_batch_dimension: _Optional[int] = ..., output_feature_dimension: _Optional[int] = ..., output_spatial_dimensions: _Optional[_Iterable[int]] = ...) -> None: ...

class SparsityConfig(_message.Message):
    __slots__ = ("lhs", "rhs")
    class TensorSparsityConfig(_message.Message):
        __slots__ = ("num_non_zero", "block_size", "dimension", "stride")
        NUM_NON_ZERO_FIELD_NUMBER: _ClassVar[int]
        BLOCK_SIZE_FIELD_NUMBER: _ClassVar[int]
        DIMENSION_FIELD_NUMBER: _ClassVar[int]
        STRIDE_FIELD_NUMBER: _ClassVar[int]
        num_non_zero: int
        block_size: int
        dimension: int
        stride: int
        def __init__(self, num_non_zero: _Optional[int] = ..., block_size: _Optional[int] = ..., dimension: _Optional[int] = ..., stride: _Optional[int] = ...) -> None: ...
    LHS_FIELD_NUMBER: _ClassVar[int]
    RHS_FIELD_NUMBER: _ClassVar[int]
    lhs: SparsityConfig.TensorSparsityConfig
    rhs: SparsityConfig.TensorSparsityConfig
    def __init__(self, lhs: _Optional[_Union[SparsityConfig.TensorSparsityConfig, _Mapping]] = ..., rhs: _Optional[_Union[SparsityConfig.TensorSparsityConfig, _Mapping]] = ...) -> None: ...

class DotDimensionNumbers(_message.Message):
    __slots__ = ("lhs_contracting_dimensions", "rhs_contracting_dimensions", "lhs_batch_dimensions", "rhs_batch_dimensions")
    LHS_CONTRACTING_DIMENSIONS_FIELD_NUMBER: _ClassVar[int]
    RHS_CONTRACTING_DIMENSIONS_FIELD_NUMBER: _ClassVar[int]
    LHS_BATCH_DIMENSIONS_FIELD_NUMBER: _ClassVar[int]
    RHS_BATCH_DIMENSIONS_FIELD_NUMBER: _ClassVar[int]
    lhs_contracting_dimensions: _containers.RepeatedScalarFieldContainer[int]
    rhs_contracting_dimensions: _containers.RepeatedScalarFieldContainer[int]
    lhs_batch_dimensions: _containers.RepeatedScalarFieldContainer[int]
    rhs_batch_dimensions: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, lhs_contracting_dimensions: _Optional[_Iterable[int]] = ..., rhs_contracting_dimensions: _Optional[_Iterable[int]] = ..., lhs_batch_dimensions: _Optional[_Iterable[int]] = ..., rhs_batch_dimensions: _Optional[_Iterable[int]] = ...) -> None: ...

class RaggedDotDimensionNumbers(_message.Message):
    __slots__ = ("dot_dimension_numbers", "lhs_ragged_dimensions", "rhs_group_dimensions")
    DOT_DIMENSION_NUMBERS_FIELD_NUMBER: _ClassVar[int]
    LHS_RAGGED_DIMENSIONS_FIELD_NUMBER: _ClassVar[int]
    RHS_GROUP_DIMENSIONS_FIELD_NUMBER: _ClassVar[int]
    dot_dimension_numbers: DotDimensionNumbers
    lhs_ragged_dimensions: _containers.RepeatedScalarFieldContainer[int]
    rhs_group_dimensions: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, dot_dimension_numbers: _Optional[_Union[DotDimensionNumbers, _Mapping]] = ..., lhs_ragged_dimensions: _Optional[_Iterable[int]] = ..., rhs_group_dimensions: _Optional[_Iterable[int]] = ...) -> None: ...

class TriangularSolveOptions(_message.Message):
    __slots__ = ("left_side", "lower", "unit_diagonal", "transpose_a")
    class Transpose(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = ()
        TRANSPOSE_INVALID: _ClassVar[TriangularSolveOptions.Transpose]
        NO_TRANSPOSE: _ClassVar[TriangularSolveOptions.Transpose]
        TRANSPOSE: _ClassVar[TriangularSolveOptions.Transpose]
        ADJOINT: _ClassVar[TriangularSolveOptions.Transpose]
    TRANSPOSE_INVALID: TriangularSolveOptions.Transpose
    NO_TRANSPOSE: TriangularSolveOptions.Transpose
    TRANSPOSE: TriangularSolveOptions.Transpose
    ADJOINT: TriangularSolveOptions.Transpose
    LEFT_SIDE_FIELD_NUMBER: _ClassVar[int]
    LOWER_FIELD_NUMBER: _ClassVar[int]
    UNIT_DIAGONAL_FIELD_NUMBER: _ClassVar[int]
    TRANSPOSE_A_FIELD_NUMBER: _ClassVar[int]
    left_side: bool
    lower: bool
    unit_diagonal: bool
    transpose_a: TriangularSolveOptions.Transpose
    def __init__(self, left_side: bool = ..., lower: bool = ..., unit_diagonal: bool = ..., transpose_a: _Optional[_Union[TriangularSolveOptions.Transpose, str]] = ...) -> None: ...

class CholeskyOptions(_message.Message):
    __slots__ = ("lower",)
    LOWER_FIELD_NUMBER: _ClassVar[int]
    lower: bool
    def __init__(self, lower: bool = ...) -> None: ...

class CubScanOptions(_message.Message):
    __slots__ = ("vector_length", "row_length", "column_length", "kind", "is_reverse")
    class Kind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = ()
        KIND_INVALID: _ClassVar[CubScanOptions.Kind]
        SUM: _ClassVar[CubScanOptions.Kind]
    KIND_INVALID: CubScanOptions.Kind
    SUM: CubScanOptions.Kind
    VECTOR_LENGTH_FIELD_NUMBER: _ClassVar[int]
    ROW_LENGTH_FIELD_NUMBER: _ClassVar[int]
    COLUMN_LENGTH_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    IS_REVERSE_FIELD_NUMBER: _ClassVar[int]
    vector_length: int
    row_length: int
    column_length: int
    kind: CubScanOptions.Kind
    is_reverse: bool
    def __init__(self, vector_length: _Optional[int] = ..., row_length: _Optional[int] = ..., column_length: _Optional[int] = ..., kind: _Optional[_Union[CubScanOptions.Kind, str]] = ..., is_reverse: bool = ...) -> None: ...

class SortOptions(_message.Message):
    __slots__ = ("descending",)
    DESCENDING_FIELD_NUMBER: _ClassVar[int]
    descending: bool
    def __init__(self, descending: bool = ...) -> None: ...

class FrontendAttributes(_message.Message):
    __slots__ = ("map",)
    class MapEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    MAP_FIELD_NUMBER: _ClassVar[int]
    map: _containers.ScalarMap[str, str]
    def __init__(self, map: _Optional[_Mapping[str, str]] = ...) -> None: ...

class Statistic(_message.Message):
    __slots__ = ("stat_name", "stat_val")
    STAT_NAME_FIELD_NUMBER: _ClassVar[int]
    STAT_VAL_FIELD_NUMBER: _ClassVar[int]
    stat_name: str
    stat_val: float
    def __init__(self, stat_name: _Optional[str] = ..., stat_val: _Optional[float] = ...) -> None: ...

class StatisticsViz(_message.Message):
    __slots__ = ("stat_index_to_visualize", "statistics")
    STAT_INDEX_TO_VISUALIZE_FIELD_NUMBER: _ClassVar[int]
    STATISTICS_FIELD_NUMBER: _ClassVar[int]
    stat_index_to_visualize: int
    statistics: _containers.RepeatedCompositeFieldContainer[Statistic]
    def __init__(self, stat_index_to_visualize: _Optional[int] = ..., statistics: _Optional[_Iterable[_Union[Statistic, _Mapping]]] = ...) -> None: ...

class MeshProto(_message.Message):
    __slots__ = ("axes", "device_ids", "iota_transform")
    class MeshAxis(_message.Message):
        __slots__ = ("name", "size")
        NAME_FIELD_NUMBER: _ClassVar[int]
        SIZE_FIELD_NUMBER: _ClassVar[int]
        name: str
        size: int
        def __init__(self, name: _Optional[str] = ..., size: _Optional[int] = ...) -> None: ...
    class IotaTransform(_message.Message):
        __slots__ = ("reshape_dims", "transpose_perm")
        RESHAPE_DIMS_FIELD_NUMBER: _ClassVar[int]
        TRANSPOSE_PERM_FIELD_NUMBER: _ClassVar[int]
        reshape_dims: _containers.RepeatedScalarFieldContainer[int]
        transpose_perm: _containers.RepeatedScalarFieldContainer[int]
        def __init__(self, reshape_dims: _Optional[_Iterable[int]] = ..., transpose_perm: _Optional[_Iterable[int]] = ...) -> None: ...
    AXES_FIELD_NUMBER: _ClassVar[int]
    DEVICE_IDS_FIELD_NUMBER: _ClassVar[int]
    IOTA_TRANSFORM_FIELD_NUMBER: _ClassVar[int]
    axes: _containers.RepeatedCompositeFieldContainer[MeshProto.MeshAxis]
    device_ids: _containers.RepeatedScalarFieldContainer[int]
    iota_transform: MeshProto.IotaTransform
    def __init__(self, axes: _Optional[_Iterable[_Union[MeshProto.MeshAxis, _Mapping]]] = ..., device_ids: _Optional[_Iterable[int]] = ..., iota_transform: _Optional[_Union[MeshProto.IotaTransform, _Mapping]] = ...) -> None: ...

class AxisRefProto(_message.Message):
    __slots__ = ("mesh_axis_index", "sub_axis_info")
    class SubAxis(_message.Message):
        __slots__ = ("pre_size", "size")
        PRE_SIZE_FIELD_NUMBER: _ClassVar[int]
        SIZE_FIELD_NUMBER: _ClassVar[int]
        pre_size: int
        size: int
        def __init__(self, pre_size: _Optional[int] = ..., size: _Optional[int] = ...) -> None: ...
    MESH_AXIS_INDEX_FIELD_NUMBER: _ClassVar[int]
    SUB_AXIS_INFO_FIELD_NUMBER: _ClassVar[int]
    mesh_axis_index: int
    sub_axis_info: AxisRefProto.SubAxis
    def __init__(self, mesh_axis_index: _Optional[int] = ..., sub_axis_info: _Optional[_Union[AxisRefProto.SubAxis, _Mapping]] = ...) -> None: ...

class NamedShardingProto(_message.Message):
    __slots__ = ("mesh", "dim_shardings", "replicated_axes", "unreduced_axes", "manual_axes", "metadata")
    class DimensionSharding(_message.Message):
        __slots__ = ("axes", "is_closed")
        AXES_FIELD_NUMBER: _ClassVar[int]
        IS_CLOSED_FIELD_NUMBER: _ClassVar[int]
        axes: _containers.RepeatedCompositeFieldContainer[AxisRefProto]
        is_closed: bool
        def __init__(self, axes: _Optional[_Iterable[_Union[AxisRefProto, _Mapping]]] = ..., is_closed: bool = ...) -> None: ...
    MESH_FIELD_NUMBER: _ClassVar[int]
    DIM_SHARDINGS_FIELD_NUMBER: _ClassVar[int]
    REPLICATED_AXES_FIELD_NUMBER: _ClassVar[int]
    UNREDUCED_AXES_FIELD_NUMBER: _ClassVar[int]
    MANUAL_AXES_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    mesh: MeshProto
    dim_shardings: _containers.RepeatedCompositeFieldContainer[NamedShardingProto.DimensionSharding]
    replicated_axes: _containers.RepeatedCompositeFieldContainer[AxisRefProto]
    unreduced_axes: _containers.RepeatedCompositeFieldContainer[AxisRefProto]
    manual_axes: _containers.RepeatedCompositeFieldContainer[AxisRefProto]
    metadata: _containers.RepeatedCompositeFieldContainer[OpMetadata]
    def __init__(self, mesh: _Optional[_Union[MeshProto, _Mapping]] = ..., dim_shardings: _Optional[_Iterable[_Union[NamedShardingProto.DimensionSharding, _Mapping]]] = ..., replicated_axes: _Optional[_Iterable[_Union[AxisRefProto, _Mapping]]] = ..., unreduced_axes: _Optional[_Iterable[_Union[AxisRefProto, _Mapping]]] = ..., manual_axes: _Optional[_Iterable[_Union[AxisRefProto, _Mapping]]] = ..., metadata: _Optional[_Iterable[_Union[OpMetadata, _Mapping]]] = ...) -> None: ...

class OpSharding(_message.Message):
    __slots__ = ("type", "tile_shape", "tile_assignment_dimensions", "tile_assignment_devices", "tuple_shardings", "replicate_on_last_tile_dim", "metadata", "last_tile_dims", "iota_reshape_dims", "iota_transpose_perm", "is_shard_group", "shard_group_id", "shard_group_type", "named_sharding")
    class Type(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = ()
        REPLICATED: _ClassVar[OpSharding.Type]
        MAXIMAL: _ClassVar[OpSharding.Type]
        TUPLE: _ClassVar[OpSharding.Type]
        OTHER: _ClassVar[OpSharding.Type]
        MANUAL: _ClassVar[OpSharding.Type]
        UNKNOWN: _ClassVar[OpSharding.Type]
        UNREDUCED: _ClassVar[OpSharding.Type]
    REPLICATED: OpSharding.Type
    MAXIMAL: OpSharding.Type
    TUPLE: OpSharding.Type
    OTHER: OpSharding.Type
    MANUAL: OpSharding.Type
    UNKNOWN: OpSharding.Type
    UNREDUCED: OpSharding.Type
    class ShardGroupType(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = ()
        AS: _ClassVar[OpSharding.ShardGroupType]
        LIKE: _ClassVar[OpSharding.ShardGroupType]
    AS: OpSharding.ShardGroupType
    LIKE: OpSharding.ShardGroupType
    TYPE_FIELD_NUMBER: _ClassVar[int]
    TILE_SHAPE_FIELD_NUMBER: _ClassVar[int]
    TILE_ASSIGNMENT_DIMENSIONS_FIELD_NUMBER: _ClassVar[int]
    TILE_ASSIGNMENT_DEVICES_FIELD_NUMBER: _ClassVar[int]
    TUPLE_SHARDINGS_FIELD_NUMBER: _ClassVar[int]
    REPLICATE_ON_LAST_TILE_DIM_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    LAST_TILE_DIMS_FIELD_NUMBER: _ClassVar[int]
    IOTA_RESHAPE_DIMS_FIELD_NUMBER: _ClassVar[int]
    IOTA_TRANSPOSE_PERM_FIELD_NUMBER: _ClassVar[int]
    IS_SHARD_GROUP_FIELD_NUMBER: _ClassVar[int]
    SHARD_GROUP_ID_FIELD_NUMBER: _ClassVar[int]
    SHARD_GROUP_TYPE_FIELD_NUMBER: _ClassVar[int]
    NAMED_SHARDING_FIELD_NUMBER: _ClassVar[int]
    type: OpSharding.Type
    tile_shape: ShapeProto
    tile_assignment_dimensions: _containers.RepeatedScalarFieldContainer[int]
    tile_assignment_devices: _containers.RepeatedScalarFieldContainer[int]
    tuple_shardings: _containers.RepeatedCompositeFieldContainer[OpSharding]
    replicate_on_last_tile_dim: bool
    metadata: _containers.RepeatedCompositeFieldContainer[OpMetadata]
    last_tile_dims: _containers.RepeatedScalarFieldContainer[OpSharding.Type]
    iota_reshape_dims: _containers.RepeatedScalarFieldContainer[int]
    iota_transpose_perm: _containers.RepeatedScalarFieldContainer[int]
    is_shard_group: bool
    shard_group_id: int
    shard_group_type: OpSharding.ShardGroupType
    named_sharding: NamedShardingProto
    def __init__(self, type: _Optional[_Union[OpSharding.Type, str]] = ..., tile_shape: _Optional[_Union[ShapeProto, _Mapping]] = ..., tile_assignment_dimensions: _Optional[_Iterable[int]] = ..., tile_assignment_devices: _Optional[_Iterable[int]] = ..., tuple_shardings: _Optional[_Iterable[_Union[OpSharding, _Mapping]]] = ..., replicate_on_last_tile_dim: bool = ..., metadata: _Optional[_Iterable[_Union[OpMetadata, _Mapping]]] = ..., last_tile_dims: _Optional[_Iterable[_Union[OpSharding.Type, str]]] = ..., iota_reshape_dims: _Optional[_Iterable[int]] = ..., iota_transpose_perm: _Optional[_Iterable[int]] = ..., is_shard_group: bool = ..., shard_group_id: _Optional[int] = ..., shard_group_type: _Optional[_Union[OpSharding.ShardGroupType, str]] = ..., named_sharding: _Optional[_Union[NamedShardingProto, _Mapping]] = ...) -> None: ...

class ReplicaGroup(_message.Message):
    __slots__ = ("replica_ids",)
    REPLICA_IDS_FIELD_NUMBER: _ClassVar[int]
    replica_ids: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, replica_ids: _Optional[_Iterable[int]] = ...) -> None: ...

class MeshAxesReplicaGroupListProto(_message.Message):
    __slots__ = ("mesh", "axes")
    MESH_FIELD_NUMBER: _ClassVar[int]
    AXES_FIELD_NUMBER: _ClassVar[int]
    mesh: MeshProto
    axes: _containers.RepeatedCompositeFieldContainer[AxisRefProto]
    def __init__(self, mesh: _Optional[_Union[MeshProto, _Mapping]] = ..., axes: _Optional[_Iterable[_Union[AxisRefProto, _Mapping]]] = ...) -> None: ...

class IotaReplicaGroupListProto(_message.Message):
    __slots__ = ("num_replica_groups", "num_devices_per_group", "iota_reshape_dims", "iota_transpose_perm")
    NUM_REPLICA_GROUPS_FIELD_NUMBER: _ClassVar[int]
    NUM_DEVICES_PER_GROUP_FIELD_NUMBER: _ClassVar[int]
    IOTA_RESHAPE_DIMS_FIELD_NUMBER: _ClassVar[int]
    IOTA_TRANSPOSE_PERM_FIELD_NUMBER: _ClassVar[int]
    num_replica_groups: int
    num_devices_per_group: int
    iota_reshape_dims: _containers.RepeatedScalarFieldContainer[int]
    iota_transpose_perm: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, num_replica_groups: _Optional[int] = ..., num_devices_per_group: _Optional[int] = ..., iota_reshape_dims: _Optional[_Iterable[int]] = ..., iota_transpose_perm: _Optional[_Iterable[int]] = ...) -> None: ...

class CollectiveDeviceListProto(_message.Message):
    __slots__ = ("replica_groups",)
    REPLICA_GROUPS_FIELD_NUMBER: _ClassVar[int]
    replica_groups: _containers.RepeatedCompositeFieldContainer[ReplicaGroup]
    def __init__(self, replica_groups: _Optional[_Iterable[_Union[ReplicaGroup, _Mapping]]] = ...) -> None: ...

class SourceTarget(_message.Message):
    __slots__ = ("source", "target")
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    TARGET_FIELD_NUMBER: _ClassVar[int]
    source: int
    target: int
    def __init__(self, source: _Optional[int] = ..., target: _Optional[int] = ...) -> None: ...

class ResultAccuracy(_message.Message):
    __slots__ = ("mode", "tolerance")
    class Mode(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = ()
        DEFAULT: _ClassVar[ResultAccuracy.Mode]
        HIGHEST: _ClassVar[ResultAccuracy.Mode]
    DEFAULT: ResultAccuracy.Mode
    HIGHEST: ResultAccuracy.Mode
    class Tolerance(_message.Message):
        __slots__ = ("atol", "rtol", "ulps")
        ATOL_FIELD_NUMBER: _ClassVar[int]
        RTOL_FIELD_NUMBER: _ClassVar[int]
        ULPS_FIELD_NUMBER: _ClassVar[int]
        atol: float
        rtol: float
        ulps: int
        def __init__(self, atol: _Optional[float] = ..., rtol: _Optional[float] = ..., ulps: _Optional[int] = ...) -> None: ...
    MODE_FIELD_NUMBER: _ClassVar[int]
    TOLERANCE_FIELD_NUMBER: _ClassVar[int]
    mode: ResultAccuracy.Mode
    tolerance: ResultAccuracy.Tolerance
    def __init__(self, mode: _Optional[_Union[ResultAccuracy.Mode, str]] = ..., tolerance: _Optional[_Union[ResultAccuracy.Tolerance, _Mapping]] = ...) -> None: ...

class PrecisionConfig(_message.Message):
    __slots__ = ("operand_precision", "algorithm")
    class Precision(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = ()
        DEFAULT: _ClassVar[PrecisionConfig.Precision]
        HIGH: _ClassVar[PrecisionConfig.Precision]
        HIGHEST: _ClassVar[PrecisionConfig.Precision]
    DEFAULT: PrecisionConfig.Precision
    HIGH: PrecisionConfig.Precision
    HIGHEST: PrecisionConfig.Precision
    class Algorithm(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = ()
        ALG_UNSET: _ClassVar[PrecisionConfig.Algorithm]
        ALG_DOT_ANY_F8_ANY_F8_F32: _ClassVar[PrecisionConfig.Algorithm]
        ALG_DOT_ANY_F8_ANY_F8_F32_FAST_ACCUM: _ClassVar[PrecisionConfig.Algorithm]
        ALG_DOT_F16_F16_F16: _ClassVar[PrecisionConfig.Algorithm]
        ALG_DOT_F16_F16_F32: _ClassVar[PrecisionConfig.Algorithm]
        ALG_DOT_BF16_BF16_BF16: _ClassVar[PrecisionConfig.Algorithm]
        ALG_DOT_BF16_BF16_F32: _ClassVar[PrecisionConfig.Algorithm]
        ALG_DOT_BF16_BF16_F32_X3: _ClassVar[PrecisionConfig.Algorithm]
        ALG_DOT_BF16_BF16_F32_X6: _ClassVar[PrecisionConfig.Algorithm]
        ALG_DOT_TF32_TF32_F32: _ClassVar[PrecisionConfig.Algorithm]
        ALG_DOT_TF32_TF32_F32_X3: _ClassVar[PrecisionConfig.Algorithm]
        ALG_DOT_F32_F32_F32: _ClassVar[PrecisionConfig.Algorithm]
        ALG_DOT_F64_F64_F64: _ClassVar[PrecisionConfig.Algorithm]
        ALG_DOT_BF16_BF16_F32_X9: _ClassVar[PrecisionConfig.Algorithm]
    ALG_UNSET: PrecisionConfig.Algorithm
    ALG_DOT_ANY_F8_ANY_F8_F32: PrecisionConfig.Algorithm
    ALG_DOT_ANY_F8_ANY_F8_F32_FAST_ACCUM: PrecisionConfig.Algorithm
    ALG_DOT_F16_F16_F16: PrecisionConfig.Algorithm
    ALG_DOT_F16_F16_F32: PrecisionConfig.Algorithm
    ALG_DOT_BF16_BF16_BF16: PrecisionConfig.Algorithm
    ALG_DOT_BF16_BF16_F32: PrecisionConfig.Algorithm
    ALG_DOT_BF16_BF16_F32_X3: PrecisionConfig.Algorithm
    ALG_DOT_BF16_BF16_F32_X6: PrecisionConfig.Algorithm
    ALG_DOT_TF32_TF32_F32: PrecisionConfig.Algorithm
    ALG_DOT_TF32_TF32_F32_X3: PrecisionConfig.Algorithm
    ALG_DOT_F32_F32_F32: PrecisionConfig.Algorithm
    ALG_DOT_F64_F64_F64: PrecisionConfig.Algorithm
    ALG_DOT_BF16_BF16_F32_X9: PrecisionConfig.Algorithm
    OPERAND_PRECISION_FIELD_NUMBER: _ClassVar[int]
    ALGORITHM_FIELD_NUMBER: _ClassVar[int]
    operand_precision: _containers.RepeatedScalarFieldContainer[PrecisionConfig.Precision]
    algorithm: PrecisionConfig.Algorithm
    def __init__(self, operand_precision: _Optional[_Iterable[_Union[PrecisionConfig.Precision, str]]] = ..., algorithm: _Optional[_Union[PrecisionConfig.Algorithm, str]] = ...) -> None: ...

class ParameterReplication(_message.Message):
    __slots__ = ("replicated_at_leaf_buffers",)
    REPLICATED_AT_LEAF_BUFFERS_FIELD_NUMBER: _ClassVar[int]
    replicated_at_leaf_buffers: _containers.RepeatedScalarFieldContainer[bool]
    def __init__(self, replicated_at_leaf_buffers: _Optional[_Iterable[bool]] = ...) -> None: ...

class WhileLoopBackendConfig(_message.Message):
    __slots__ = ("known_trip_count", "known_init_step", "known_induction_variable", "dynamic_variables")
    class KnownInitStep(_message.Message):
        __slots__ = ("init", "step")
        INIT_FIELD_NUMBER: _ClassVar[int]
        STEP_FIELD_NUMBER: _ClassVar[int]
        init: int
        step: int
        def __init__(self, init: _Optional[int] = ..., step: _Optional[int] = ...) -> None: ...
    class KnownTripCount(_message.Message):
        __slots__ = ("n",)
        N_FIELD_NUMBER: _ClassVar[int]
        n: int
        def __init__(self, n: _Optional[int] = ...) -> None: ...
    class KnownInductionVariable(_message.Message):
        __slots__ = ("tuple_index",)
        TUPLE_INDEX_FIELD_NUMBER: _ClassVar[int]
        tuple_index: int
        def __init__(self, tuple_index: _Optional[int] = ...) -> None: ...
    class DynamicVariable(_message.Message):
        __slots__ = ("tuple_index", "init", "step")
        TUPLE_INDEX_FIELD_NUMBER: _ClassVar[int]
        INIT_FIELD_NUMBER: _ClassVar[int]
        STEP_FIELD_NUMBER: _ClassVar[int]
        tuple_index: int
        init: int
        step: int
        def __init__(self, tuple_index: _Optional[int] = ..., init: _Optional[int] = ..., step: _Optional[int] = ...) -> None: ...
    KNOWN_TRIP_COUNT_FIELD_NUMBER: _ClassVar[int]
    KNOWN_INIT_STEP_FIELD_NUMBER: _ClassVar[int]
    KNOWN_INDUCTION_VARIABLE_FIELD_NUMBER: _ClassVar[int]
    DYNAMIC_VARIABLES_FIELD_NUMBER: _ClassVar[int]
    known_trip_count: WhileLoopBackendConfig.KnownTripCount
    known_init_step: WhileLoopBackendConfig.KnownInitStep
    known_induction_variable: WhileLoopBackendConfig.KnownInductionVariable
    dynamic_variables: _containers.RepeatedCompositeFieldContainer[WhileLoopBackendConfig.DynamicVariable]
    def __init__(self, known_trip_count: _Optional[_Union[WhileLoopBackendConfig.KnownTripCount, _Mapping]] = ..., known_init_step: _Optional[_Union[WhileLoopBackendConfig.KnownInitStep, _Mapping]] = ..., known_induction_variable: _Optional[_Union[WhileLoopBackendConfig.KnownInductionVariable, _Mapping]] = ..., dynamic_variables: _Optional[_Iterable[_Union[WhileLoopBackendConfig.DynamicVariable, _Mapping]]] = ...) -> None: ...

class OutputOperandAliasing(_message.Message):
    __slots__ = ("output_shape_index", "operand_index", "operand_shape_index")
    OUTPUT_SHAPE_INDEX_FIELD_NUMBER: _ClassVar[int]
    OPERAND_INDEX_FIELD_NUMBER: _ClassVar[int]
    OPERAND_SHAPE_INDEX_FIELD_NUMBER: _ClassVar[int]
    output_shape_index: _containers.RepeatedScalarFieldContainer[int]
    operand_index: int
    operand_shape_index: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, output_shape_index: _Optional[_Iterable[int]] = ..., operand_index: _Optional[int] = ..., operand_shape_index: _Optional[_Iterable[int]] = ...) -> None: ...

class OriginalArrayProto(_message.Message):
    __slots__ = ("instruction_name", "shape_index")
    INSTRUCTION_NAME_FIELD_NUMBER: _ClassVar[int]
    SHAPE_INDEX_FIELD_NUMBER: _ClassVar[int]
    instruction_name: str
    shape_index: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, instruction_name: _Optional[str] = ..., shape_index: _Optional[_Iterable[int]] = ...) -> None: ...

class OriginalValueElementProto(_message.Message):
    __slots__ = ("shape_index", "original_array")
    SHAPE_INDEX_FIELD_NUMBER: _ClassVar[int]
    ORIGINAL_ARRAY_FIELD_NUMBER: _ClassVar[int]
    shape_index: _containers.RepeatedScalarFieldContainer[int]
    original_array: OriginalArrayProto
    def __init__(self, shape_index: _Optional[_Iterable[int]] = ..., original_array: _Optional[_Union[OriginalArrayProto, _Mapping]] = ...) -> None: ...

class OriginalValueProto(_message.Message):
    __slots__ = ("elements", "is_synthetic_call")
    ELEMENTS_FIELD_NUMBER: _ClassVar[int]
    IS_SYNTHETIC_CALL_FIELD_NUMBER: _ClassVar[int]
    elements: _containers.RepeatedCompositeFieldContainer[OriginalValueElementProto]
    is_synthetic_call: bool
    def __init__(self, elements: _Optional[_Iterable[_Union[OriginalValueElementProto, _Mapping]]] = ..., is_synthetic_call: bool = ...) -> None: ...

class GemmPerfTableEntry(_message.Message):
    __slots__ = ("b", "m", "n", "k", "flops")
    class FlopsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: int
        def __init__(self, key: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...
    B_FIELD_NUMBER: _ClassVar[int]
    M_FIELD_NUMBER: _ClassVar[int]
    N_FIELD_NUMBER: _ClassVar[int]
    K_FIELD_NUMBER: _ClassVar[int]
    FLOPS_FIELD_NUMBER: _ClassVar[int]
    b: int
    m: int
    n: int
    k: int
    flops: _containers.ScalarMap[str, int]
    def __init__(self, b: _Optional[int] = ..., m: _Optional[int] = ..., n: _Optional[int] = ..., k: _Optional[int] = ..., flops: _Optional[_Mapping[str, int]] = ...) -> None: ...

class GemmPerfTableEntryValues(_message.Message):
    __slots__ = ("entries",)
    ENTRIES_FIELD_NUMBER: _ClassVar[int]
    entries: _containers.RepeatedCompositeFieldContainer[GemmPerfTableEntry]
    def __init__(self, entries: _Optional[_Iterable[_Union[GemmPerfTableEntry, _Mapping]]] = ...) -> None: ...

class GemmPerfTable(_message.Message):
    __slots__ = ("entries",)
    class EntriesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: GemmPerfTableEntryValues
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[GemmPerfTableEntryValues, _Mapping]] = ...) -> None: ...
    ENTRIES_FIELD_NUMBER: _ClassVar[int]
    entries: _containers.MessageMap[str, GemmPerfTableEntryValues]
    def __init__(self, entries: _Optional[_Mapping[str, GemmPerfTableEntryValues]] = ...) -> None: ...
