// What PJRT C API callers of minor versions 0.82 to 0.114 (JAX 0.11 speaks 0.114) expect beyond
// the 0.81 header the plugin is built against: the PJRT_Api slots added since, the argument
// structs of the entries we serve, and the function tables that now lead PJRT_Error and
// PJRT_Memory objects. Written from the header's published facts (field names and order);
// tests/test_newer_callers.py checks the layout against a real 0.115 plugin (the newer engine
// build) with a C client that calls through it as a 0.114 caller does.
#pragma once

#include <cstddef>
#include <cstdint>

#include "pjrt_c_api.h"

extern "C" {

// The minor version whose PJRT_Api layout PJRT_Api_Newer matches.
#define PN_NEWER_API_MINOR 114

// ---- Errors: every PJRT_Error starts with a pointer to its function table (0.112), which a
// caller may call directly instead of the PJRT_Api entries.
typedef void (*PJRT_Error_PayloadVisitor)(const char* key, size_t key_size, const char* value, size_t value_size,
                                          void* user_arg);

struct PJRT_Error_FunctionTable {
  size_t struct_size;
  size_t instance_size;
  PJRT_Extension_Base* extension_start;
  void (*destroy)(PJRT_Error* error);
  void (*message)(const PJRT_Error* error, const char** message, size_t* message_size);
  PJRT_Error_Code (*get_code)(const PJRT_Error* error);
  void (*for_each_payload)(const PJRT_Error* error, PJRT_Error_PayloadVisitor visitor, void* user_arg);
};
const size_t PJRT_Error_FunctionTable_STRUCT_SIZE =
    offsetof(PJRT_Error_FunctionTable, for_each_payload) + sizeof(void (*)());

struct PJRT_Error_ForEachPayload_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  const PJRT_Error* error;
  PJRT_Error_PayloadVisitor visitor;
  void* user_arg;
};

// ---- Memories: every PJRT_Memory starts with a pointer to its function table (0.112); a caller
// keeps its own per-memory state there under keys of its choosing.
struct PJRT_Memory_FunctionTable {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  size_t instance_struct_size;
  void* (*get_user_data)(PJRT_Memory* memory, const void* key);
  void (*set_user_data)(PJRT_Memory* memory, const void* key, void* data, void (*destructor)(void*));
};
const size_t PJRT_Memory_FunctionTable_STRUCT_SIZE =
    offsetof(PJRT_Memory_FunctionTable, set_user_data) + sizeof(void (*)());

// ---- Argument structs of the newer entries we serve.
struct PJRT_Device_GetAttributes_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_Device* device;
  const PJRT_NamedValue* attributes;  // out
  size_t num_attributes;              // out
  struct PJRT_Device_Attributes* device_attributes;                       // out, freed by the deleter
  void (*attributes_deleter)(struct PJRT_Device_Attributes* attributes);  // out
};

struct PJRT_TopologyDescription_Fingerprint_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  const PJRT_TopologyDescription* topology;
  uint64_t fingerprint;  // out
};

struct PJRT_Executable_ParameterMemoryKinds_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_Executable* executable;
  size_t num_parameters;            // out
  const char* const* memory_kinds;  // out
  const size_t* memory_kind_sizes;  // out
};

struct PJRT_LogicalDeviceIds {
  int replica;
  int partition;
};

struct PJRT_LoadedExecutable_AddressableDeviceLogicalIds_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_LoadedExecutable* executable;
  const PJRT_LogicalDeviceIds* addressable_device_logical_ids;  // out
  size_t num_addressable_device_logical_ids;                    // out
};

struct PJRT_Device_ClearMemoryStats_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_Device* device;
};

struct PJRT_TopologyDescription_GetMemorySpaceKindIds_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  const PJRT_TopologyDescription* topology;
  const int* memory_space_kind_ids;  // out
  size_t num_memory_space_kind_ids;  // out
};

// Entries we do not serve; their argument structs are never read.
struct PJRT_Client_CreateErrorBuffer_Args;
struct PJRT_AsyncHostToDeviceTransferManager_TransferLiteral_Args;
struct PJRT_Buffer_CopyRawToHostFuture_Args;
struct PJRT_Device_PoisonExecution_Args;
struct PJRT_Device_CreateAsyncTrackingEvent_Args;
struct PJRT_AsyncTrackingEvent_Destroy_Args;
struct PJRT_Executable_GetCompileOptions_Args;
struct PJRT_Buffer_DonateWithControlDependency_Args;
struct PJRT_Event_Create_Args;
struct PJRT_Event_Set_Args;
struct PJRT_Client_Load_Args;
struct PJRT_Buffer_Bitcast_Args;
struct PJRT_TopologyDescription_MakeCanonicalShapeForMemorySpace_Args;

#define PN_NEWER_ENTRY(Name) PJRT_Error* (*PJRT_##Name)(struct PJRT_##Name##_Args * args)

// PJRT_Api as of 0.114: the 0.81 table, then the 20 slots added since, in the header's order.
struct PJRT_Api_Newer {
  PJRT_Api base;
  PN_NEWER_ENTRY(Client_CreateErrorBuffer);                               // 0.82
  PN_NEWER_ENTRY(AsyncHostToDeviceTransferManager_TransferLiteral);
  PN_NEWER_ENTRY(Buffer_CopyRawToHostFuture);                             // 0.84
  PN_NEWER_ENTRY(Device_PoisonExecution);                                 // 0.85
  PN_NEWER_ENTRY(Device_CreateAsyncTrackingEvent);
  PN_NEWER_ENTRY(AsyncTrackingEvent_Destroy);
  PN_NEWER_ENTRY(Executable_GetCompileOptions);
  PN_NEWER_ENTRY(Buffer_DonateWithControlDependency);                     // 0.88
  PN_NEWER_ENTRY(Event_Create);
  PN_NEWER_ENTRY(Event_Set);
  PN_NEWER_ENTRY(Device_GetAttributes);
  PN_NEWER_ENTRY(Client_Load);
  PN_NEWER_ENTRY(LoadedExecutable_AddressableDeviceLogicalIds);
  PN_NEWER_ENTRY(Buffer_Bitcast);                                         // 0.98
  PN_NEWER_ENTRY(Error_ForEachPayload);
  PN_NEWER_ENTRY(TopologyDescription_Fingerprint);
  PN_NEWER_ENTRY(Executable_ParameterMemoryKinds);                        // 0.102
  PN_NEWER_ENTRY(Device_ClearMemoryStats);
  PN_NEWER_ENTRY(TopologyDescription_MakeCanonicalShapeForMemorySpace);
  PN_NEWER_ENTRY(TopologyDescription_GetMemorySpaceKindIds);
};

#undef PN_NEWER_ENTRY

}  // extern "C"

static_assert(sizeof(PJRT_Api) == 123 * sizeof(void*), "the 0.81 table ends at LoadedExecutable_GetDeviceAssignment");
static_assert(sizeof(PJRT_Api_Newer) == 143 * sizeof(void*), "the 0.114 table has 143 pointer-sized slots");
