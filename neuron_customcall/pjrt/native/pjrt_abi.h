// Our own declarations of the PJRT C API ABI, version 0.75 (the PJRT_Api table and the argument
// structs of the calls this plugin implements), written from the field lists of openxla/xla's
// xla/pjrt/c/pjrt_c_api.h at that version. Why 0.75: jaxlib 0.10.2 is built against 0.112 and
// torch_xla 2.9.0 against 0.75; both accept an older plugin minor (ENABLE_PJRT_COMPATIBILITY is on
// by default, minimum 0.29) and gate every newer call on the plugin's minor version, so 0.75 is the
// newest version both frameworks take. Every struct's field order and types are the wire format:
// static_asserts in neuron_pjrt.cc pin the sizes the frameworks check against `struct_size`.
#pragma once

#include <cstddef>
#include <cstdint>

extern "C" {

namespace abi {

constexpr int kMajor = 0;
constexpr int kMinor = 75;

struct ExtensionBase {
  size_t struct_size;
  int type;
  ExtensionBase* next;
};

struct ApiVersion {
  size_t struct_size;
  ExtensionBase* extension_start;
  int major_version;
  int minor_version;
};

// Opaque handles: defined by the plugin (neuron_pjrt.cc).
struct Error;
struct Event;
struct Client;
struct Device;
struct Memory;
struct Buffer;
struct Executable;
struct LoadedExecutable;

enum ErrorCode : int {
  kCancelled = 1, kUnknown = 2, kInvalidArgument = 3, kDeadlineExceeded = 4, kNotFound = 5,
  kAlreadyExists = 6, kPermissionDenied = 7, kResourceExhausted = 8, kFailedPrecondition = 9,
  kAborted = 10, kOutOfRange = 11, kUnimplemented = 12, kInternal = 13, kUnavailable = 14,
  kDataLoss = 15, kUnauthenticated = 16,
};

enum NamedValueType : int { kString = 0, kInt64 = 1, kInt64List = 2, kFloat = 3, kBool = 4 };

struct NamedValue {
  size_t struct_size;
  ExtensionBase* extension_start;
  const char* name;
  size_t name_size;
  NamedValueType type;
  union {
    const char* string_value;
    int64_t int64_value;
    const int64_t* int64_array_value;
    float float_value;
    bool bool_value;
  };
  size_t value_size;
};

// Element types, in PJRT_Buffer_Type's order.
enum BufferType : int {
  kInvalid = 0, kPred, kS8, kS16, kS32, kS64, kU8, kU16, kU32, kU64, kF16, kF32, kF64, kBF16,
  kC64, kC128, kF8E5M2, kF8E4M3FN, kF8E4M3B11FNUZ, kF8E5M2FNUZ, kF8E4M3FNUZ, kS4, kU4, kToken,
  kS2, kU2, kF8E4M3, kF8E3M4, kF8E8M0FNU, kF4E2M1FN,
};

enum HostBufferSemantics : int {
  kImmutableOnlyDuringCall = 0, kImmutableUntilTransferCompletes = 1, kImmutableZeroCopy = 2,
  kMutableZeroCopy = 3,
};

struct MemoryLayoutTiled {
  size_t struct_size;
  ExtensionBase* extension_start;
  const int64_t* minor_to_major;
  size_t minor_to_major_size;
  const int64_t* tile_dims;
  const size_t* tile_dim_sizes;
  size_t num_tiles;
};

struct MemoryLayoutStrides {
  size_t struct_size;
  ExtensionBase* extension_start;
  const int64_t* byte_strides;
  size_t num_byte_strides;
};

enum MemoryLayoutType : int { kTiled = 0, kStrides = 1 };

struct MemoryLayout {
  size_t struct_size;
  ExtensionBase* extension_start;
  union {
    MemoryLayoutTiled tiled;
    MemoryLayoutStrides strides;
  };
  MemoryLayoutType type;
};

struct Program {
  size_t struct_size;
  ExtensionBase* extension_start;
  char* code;
  size_t code_size;
  const char* format;
  size_t format_size;
};

// ---- argument structs (each begins with struct_size and extension_start) ----
#define NPJRT_ARGS(name, ...)            \
  struct name {                          \
    size_t struct_size;                  \
    ExtensionBase* extension_start;      \
    __VA_ARGS__                          \
  }

NPJRT_ARGS(ErrorDestroyArgs, Error* error;);
NPJRT_ARGS(ErrorMessageArgs, const Error* error; const char* message; size_t message_size;);
NPJRT_ARGS(ErrorGetCodeArgs, const Error* error; ErrorCode code;);
NPJRT_ARGS(PluginInitializeArgs, );
NPJRT_ARGS(PluginAttributesArgs, const NamedValue* attributes; size_t num_attributes;);

NPJRT_ARGS(EventArgs, Event* event;);  // Destroy, Error, Await
NPJRT_ARGS(EventIsReadyArgs, Event* event; bool is_ready;);
typedef void (*OnReadyCallback)(Error* error, void* user_arg);
NPJRT_ARGS(EventOnReadyArgs, Event* event; OnReadyCallback callback; void* user_arg;);

// The framework's key-value store (PJRT_KeyValue*Callback): jax.distributed's coordination
// service, torch_xla's coordinator. The plugin supplies `callback_error`, which builds its own
// Error from the store's failure; a value comes with the framework's deleter.
typedef Error* (*CallbackErrorFn)(ErrorCode code, const char* message, size_t message_size);
typedef void (*KvValueDeleter)(char* value);
NPJRT_ARGS(KvGetArgs, const char* key; size_t key_size; int timeout_in_ms; CallbackErrorFn* callback_error;
           void* user_arg; char* value; size_t value_size; KvValueDeleter value_deleter_callback;);
NPJRT_ARGS(KvTryGetArgs, const char* key; size_t key_size; CallbackErrorFn* callback_error; void* user_arg;
           char* value; size_t value_size; KvValueDeleter value_deleter_callback;);
NPJRT_ARGS(KvPutArgs, const char* key; size_t key_size; const char* value; size_t value_size;
           CallbackErrorFn* callback_error; void* user_arg;);
typedef Error* (*KvGetFn)(KvGetArgs* args);
typedef Error* (*KvTryGetFn)(KvTryGetArgs* args);
typedef Error* (*KvPutFn)(KvPutArgs* args);

NPJRT_ARGS(ClientCreateArgs, const NamedValue* create_options; size_t num_options;
           KvGetFn kv_get_callback; void* kv_get_user_arg; KvPutFn kv_put_callback;
           void* kv_put_user_arg; Client* client; KvTryGetFn kv_try_get_callback;
           void* kv_try_get_user_arg;);
NPJRT_ARGS(ClientArgs, Client* client;);  // Destroy
// PJRT_Client_UpdateGlobalProcessInfo: the framework's view of which processes are alive.
NPJRT_ARGS(ClientUpdateGlobalProcessInfoArgs, Client* client; void* process_infos; size_t num_process_infos;);
NPJRT_ARGS(ClientStringArgs, Client* client; const char* value; size_t value_size;);  // PlatformName/Version
NPJRT_ARGS(ClientProcessIndexArgs, Client* client; int process_index;);
NPJRT_ARGS(ClientDevicesArgs, Client* client; Device* const* devices; size_t num_devices;);
NPJRT_ARGS(ClientLookupDeviceArgs, Client* client; int id; Device* device;);
NPJRT_ARGS(ClientMemoriesArgs, Client* client; Memory* const* memories; size_t num_memories;);
NPJRT_ARGS(ClientCompileArgs, Client* client; const Program* program; const char* compile_options;
           size_t compile_options_size; LoadedExecutable* executable;);
NPJRT_ARGS(ClientDefaultDeviceAssignmentArgs, Client* client; int num_replicas; int num_partitions;
           size_t default_assignment_size; int* default_assignment;);
NPJRT_ARGS(ClientBufferFromHostArgs, Client* client; const void* data; BufferType type;
           const int64_t* dims; size_t num_dims; const int64_t* byte_strides;
           size_t num_byte_strides; HostBufferSemantics host_buffer_semantics; Device* device;
           Memory* memory; MemoryLayout* device_layout; Event* done_with_host_buffer;
           Buffer* buffer;);
NPJRT_ARGS(ClientCreateUninitializedBufferArgs, Client* client; const int64_t* shape_dims;
           size_t shape_num_dims; BufferType shape_element_type; MemoryLayout* shape_layout;
           Device* device; Memory* memory; Buffer* buffer;);

// Device descriptions are the devices themselves (PJRT_DeviceDescription* == our Device*).
NPJRT_ARGS(DescIntArgs, Device* description; int value;);  // Id, ProcessIndex
NPJRT_ARGS(DescAttributesArgs, Device* description; size_t num_attributes; const NamedValue* attributes;);
NPJRT_ARGS(DescStringArgs, Device* description; const char* value; size_t value_size;);  // Kind, DebugString, ToString
NPJRT_ARGS(DeviceGetDescriptionArgs, Device* device; Device* description;);
NPJRT_ARGS(DeviceIsAddressableArgs, Device* device; bool is_addressable;);
NPJRT_ARGS(DeviceIntArgs, Device* device; int value;);  // LocalHardwareId
NPJRT_ARGS(DeviceMemoriesArgs, Device* device; Memory* const* memories; size_t num_memories;);
NPJRT_ARGS(DeviceDefaultMemoryArgs, Device* device; Memory* memory;);
struct OptionalStat { int64_t value; bool is_set; };
NPJRT_ARGS(DeviceMemoryStatsArgs, Device* device; int64_t bytes_in_use;
           OptionalStat peak_bytes_in_use; OptionalStat num_allocs;
           OptionalStat largest_alloc_size; OptionalStat bytes_limit; OptionalStat bytes_reserved;
           OptionalStat peak_bytes_reserved; OptionalStat bytes_reservable_limit;
           OptionalStat largest_free_block_bytes; OptionalStat pool_bytes;
           OptionalStat peak_pool_bytes;);

NPJRT_ARGS(MemoryIntArgs, Memory* memory; int value;);  // Id, Kind_Id
NPJRT_ARGS(MemoryStringArgs, Memory* memory; const char* value; size_t value_size;);  // Kind, DebugString, ToString
NPJRT_ARGS(MemoryDevicesArgs, Memory* memory; Device* const* devices; size_t num_devices;);

NPJRT_ARGS(ExecutableArgs, Executable* executable;);  // Destroy
NPJRT_ARGS(ExecutableStringArgs, Executable* executable; const char* value; size_t value_size;);  // Name, Fingerprint
NPJRT_ARGS(ExecutableSizeArgs, Executable* executable; size_t value;);  // NumReplicas, NumPartitions, NumOutputs
NPJRT_ARGS(ExecutableCodeSizeArgs, Executable* executable; int64_t size_in_bytes;);
NPJRT_ARGS(ExecutableCostArgs, Executable* executable; size_t num_properties; const NamedValue* properties;);
NPJRT_ARGS(ExecutableMemoryKindsArgs, Executable* executable; size_t num_outputs;
           const char* const* memory_kinds; const size_t* memory_kind_sizes;);
NPJRT_ARGS(ExecutableOptimizedProgramArgs, Executable* executable; Program* program;);
NPJRT_ARGS(ExecutableOutputTypesArgs, Executable* executable; BufferType* output_types; size_t num_output_types;);
NPJRT_ARGS(ExecutableOutputDimsArgs, Executable* executable; size_t num_outputs; const int64_t* dims;
           const size_t* dim_sizes;);
NPJRT_ARGS(ExecutableMemoryStatsArgs, Executable* executable; int64_t generated_code_size_in_bytes;
           int64_t argument_size_in_bytes; int64_t output_size_in_bytes; int64_t alias_size_in_bytes;
           int64_t temp_size_in_bytes; int64_t host_generated_code_size_in_bytes;
           int64_t host_argument_size_in_bytes; int64_t host_output_size_in_bytes;
           int64_t host_alias_size_in_bytes; int64_t host_temp_size_in_bytes;
           int64_t peak_memory_in_bytes;);

NPJRT_ARGS(LoadedArgs, LoadedExecutable* executable;);  // Destroy, Delete
NPJRT_ARGS(LoadedGetExecutableArgs, LoadedExecutable* loaded_executable; Executable* executable;);
NPJRT_ARGS(LoadedDevicesArgs, LoadedExecutable* executable; Device* const* devices; size_t num_devices;);
NPJRT_ARGS(LoadedIsDeletedArgs, LoadedExecutable* executable; bool is_deleted;);
NPJRT_ARGS(LoadedStringArgs, LoadedExecutable* executable; const char* value; size_t value_size;);  // Fingerprint
NPJRT_ARGS(ExecuteOptions, void** send_callbacks; void** recv_callbacks; size_t num_send_ops;
           size_t num_recv_ops; int launch_id; const int64_t* non_donatable_input_indices;
           size_t num_non_donatable_input_indices; void* context;);
NPJRT_ARGS(LoadedExecuteArgs, LoadedExecutable* executable; ExecuteOptions* options;
           Buffer* const* const* argument_lists; size_t num_devices; size_t num_args;
           Buffer** const* output_lists; Event** device_complete_events; Device* execute_device;);

NPJRT_ARGS(BufferArgs, Buffer* buffer;);  // Destroy, Delete, Inc/DecreaseExternalReferenceCount
NPJRT_ARGS(BufferTypeArgs, Buffer* buffer; BufferType type;);
NPJRT_ARGS(BufferDimsArgs, Buffer* buffer; const int64_t* dims; size_t num_dims;);  // Dimensions, UnpaddedDimensions
NPJRT_ARGS(BufferDynamicDimsArgs, Buffer* buffer; const size_t* dynamic_dim_indices; size_t num_dynamic_dims;);
NPJRT_ARGS(BufferLayoutArgs, Buffer* buffer; MemoryLayout layout;);
NPJRT_ARGS(BufferSizeArgs, Buffer* buffer; size_t on_device_size_in_bytes;);
NPJRT_ARGS(BufferDeviceArgs, Buffer* buffer; Device* device;);
NPJRT_ARGS(BufferMemoryArgs, Buffer* buffer; Memory* memory;);
NPJRT_ARGS(BufferBoolArgs, Buffer* buffer; bool value;);  // IsDeleted, IsOnCpu
NPJRT_ARGS(BufferCopyToDeviceArgs, Buffer* buffer; Device* dst_device; Buffer* dst_buffer;);
NPJRT_ARGS(BufferCopyToMemoryArgs, Buffer* buffer; Memory* dst_memory; Buffer* dst_buffer;);
NPJRT_ARGS(BufferToHostArgs, Buffer* src; MemoryLayout* host_layout; void* dst; size_t dst_size; Event* event;);
NPJRT_ARGS(BufferReadyEventArgs, Buffer* buffer; Event* event;);
NPJRT_ARGS(BufferPointerArgs, Buffer* buffer; uintptr_t buffer_pointer;);
NPJRT_ARGS(BufferOpaquePointerArgs, Buffer* buffer; void* device_memory_ptr;);
NPJRT_ARGS(BufferCopyRawToHostArgs, Buffer* buffer; void* dst; int64_t offset; int64_t transfer_size; Event* event;);

#undef NPJRT_ARGS

// The PJRT_Api function table at 0.75: 115 entries, every one `Error* (*)(Args*)` except the
// first two, which return void. Names in table order (also used in "not supported" messages).
#define NPJRT_API_NAMES(X)                                                                        \
  X(Error_Destroy) X(Error_Message) X(Error_GetCode) X(Plugin_Initialize) X(Plugin_Attributes)    \
  X(Event_Destroy) X(Event_IsReady) X(Event_Error) X(Event_Await) X(Event_OnReady)                \
  X(Client_Create) X(Client_Destroy) X(Client_PlatformName) X(Client_ProcessIndex)                \
  X(Client_PlatformVersion) X(Client_Devices) X(Client_AddressableDevices)                        \
  X(Client_LookupDevice) X(Client_LookupAddressableDevice) X(Client_AddressableMemories)          \
  X(Client_Compile) X(Client_DefaultDeviceAssignment) X(Client_BufferFromHostBuffer)              \
  X(DeviceDescription_Id) X(DeviceDescription_ProcessIndex) X(DeviceDescription_Attributes)       \
  X(DeviceDescription_Kind) X(DeviceDescription_DebugString) X(DeviceDescription_ToString)        \
  X(Device_GetDescription) X(Device_IsAddressable) X(Device_LocalHardwareId)                      \
  X(Device_AddressableMemories) X(Device_DefaultMemory) X(Device_MemoryStats) X(Memory_Id)        \
  X(Memory_Kind) X(Memory_DebugString) X(Memory_ToString) X(Memory_AddressableByDevices)          \
  X(Executable_Destroy) X(Executable_Name) X(Executable_NumReplicas) X(Executable_NumPartitions)  \
  X(Executable_NumOutputs) X(Executable_SizeOfGeneratedCodeInBytes) X(Executable_GetCostAnalysis) \
  X(Executable_OutputMemoryKinds) X(Executable_OptimizedProgram) X(Executable_Serialize)          \
  X(LoadedExecutable_Destroy) X(LoadedExecutable_GetExecutable)                                   \
  X(LoadedExecutable_AddressableDevices) X(LoadedExecutable_Delete) X(LoadedExecutable_IsDeleted) \
  X(LoadedExecutable_Execute) X(Executable_DeserializeAndLoad) X(LoadedExecutable_Fingerprint)    \
  X(Buffer_Destroy) X(Buffer_ElementType) X(Buffer_Dimensions) X(Buffer_UnpaddedDimensions)       \
  X(Buffer_DynamicDimensionIndices) X(Buffer_GetMemoryLayout) X(Buffer_OnDeviceSizeInBytes)       \
  X(Buffer_Device) X(Buffer_Memory) X(Buffer_Delete) X(Buffer_IsDeleted) X(Buffer_CopyToDevice)   \
  X(Buffer_ToHostBuffer) X(Buffer_IsOnCpu) X(Buffer_ReadyEvent) X(Buffer_UnsafePointer)           \
  X(Buffer_IncreaseExternalReferenceCount) X(Buffer_DecreaseExternalReferenceCount)               \
  X(Buffer_OpaqueDeviceMemoryDataPointer) X(CopyToDeviceStream_Destroy)                           \
  X(CopyToDeviceStream_AddChunk) X(CopyToDeviceStream_TotalBytes)                                 \
  X(CopyToDeviceStream_GranuleSize) X(CopyToDeviceStream_CurrentBytes)                            \
  X(TopologyDescription_Create) X(TopologyDescription_Destroy)                                    \
  X(TopologyDescription_PlatformName) X(TopologyDescription_PlatformVersion)                      \
  X(TopologyDescription_GetDeviceDescriptions) X(TopologyDescription_Serialize)                   \
  X(TopologyDescription_Attributes) X(Compile) X(Executable_OutputElementTypes)                   \
  X(Executable_OutputDimensions) X(Buffer_CopyToMemory) X(Client_CreateViewOfDeviceBuffer)        \
  X(Executable_Fingerprint) X(Client_TopologyDescription) X(Executable_GetCompiledMemoryStats)    \
  X(Memory_Kind_Id) X(ExecuteContext_Create) X(ExecuteContext_Destroy) X(Buffer_CopyRawToHost)    \
  X(AsyncHostToDeviceTransferManager_Destroy) X(AsyncHostToDeviceTransferManager_TransferData)    \
  X(Client_CreateBuffersForAsyncHostToDevice) X(AsyncHostToDeviceTransferManager_RetrieveBuffer)  \
  X(AsyncHostToDeviceTransferManager_Device) X(AsyncHostToDeviceTransferManager_BufferCount)      \
  X(AsyncHostToDeviceTransferManager_BufferSize) X(AsyncHostToDeviceTransferManager_SetBufferError) \
  X(AsyncHostToDeviceTransferManager_AddMetadata) X(Client_DmaMap) X(Client_DmaUnmap)             \
  X(Client_CreateUninitializedBuffer) X(Client_UpdateGlobalProcessInfo)                           \
  X(TopologyDescription_Deserialize)

enum Slot : int {
#define NPJRT_SLOT(n) k_##n,
  NPJRT_API_NAMES(NPJRT_SLOT)
#undef NPJRT_SLOT
  kNumSlots
};

typedef Error* (*Fn)(void* args);

struct Api {
  size_t struct_size;
  ExtensionBase* extension_start;
  ApiVersion pjrt_api_version;
  Fn fns[kNumSlots];
};

}  // namespace abi
}  // extern "C"
