// Shared glue for the C API layer: errors, struct-size checks, handle unwrapping.
//
// Callers speak different PJRT minor versions. We read only the fields a caller's
// struct_size covers, give absent optional fields their defaults, and write outputs
// only where the caller's struct has room.
#pragma once

#include <cstddef>
#include <cstring>
#include <exception>
#include <functional>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "common/status.h"
#include "core/core.h"
#include "engine/named_values.h"
#include "pjrt_c_api.h"
#include "api/newer_c_api.h"
#include "api/view_cache.h"

// Led by its function table, as callers of 0.112 and later read it; older callers see an opaque
// object and go through PJRT_Api.
struct PJRT_Error {
  explicit PJRT_Error(pjrt_neuron::Status status, const char* function = nullptr);
  const PJRT_Error_FunctionTable* function_table;
  pjrt_neuron::Status status;
  const char* function;  // the entry point that failed (a payload), or null
};

namespace pjrt_neuron::api {

PJRT_Error* MakeError(const Status& status);

// The PJRT_Error of a failed entry point, its message starting with the function name; and the
// same for a stray C++ exception (called inside a catch block).
PJRT_Error* ErrorFrom(const char* function, const Status& status);
PJRT_Error* ErrorFromCurrentException(const char* function);

// Reads and frees an error a caller's callback returned (null: no error), prefixing `what`.
Status TakeCallerError(PJRT_Error* error, const std::string& what);

// Runs an entry point body; turns its Status (or a stray C++ exception) into a PJRT_Error.
// A template, so the body is inlined: every call of every entry point takes this path.
template <typename Body>
inline PJRT_Error* Run(const char* function, Body&& body) {
  try {
    Status status = body();
    if (status.ok()) [[likely]] return nullptr;
    return ErrorFrom(function, status);
  } catch (...) {
    return ErrorFromCurrentException(function);
  }
}

// Size of a struct prefix that ends with `field`.
#define PN_PREFIX_SIZE(Type, field) (offsetof(Type, field) + sizeof(((Type*)nullptr)->field))

// True when the caller's struct is long enough to hold `field`.
#define PN_HAS(args, Type, field) ((args)->struct_size >= PN_PREFIX_SIZE(Type, field))

// The caller must pass a non-null args struct that holds at least `last_needed_field`.
#define PN_REQUIRE_ARGS(args, Type, last_needed_field) \
  PN_RETURN_IF_ERROR(::pjrt_neuron::api::CheckArgs(args, PN_PREFIX_SIZE(Type, last_needed_field), #Type))

Status ArgsError(const void* args, size_t needed_size, const char* type_name);
inline Status CheckArgs(const void* args, size_t needed_size, const char* type_name) {
  if (args != nullptr && *static_cast<const size_t*>(args) >= needed_size) [[likely]] return Status::Ok();
  return ArgsError(args, needed_size, type_name);
}

// A caller's enum field as the integer it holds: C lets a caller store any int there, and in C++
// loading a value outside the enum's range as the enum is undefined (UBSan reports it).
template <typename Enum>
int64_t RawEnum(const Enum& field) {
  std::underlying_type_t<Enum> raw;
  std::memcpy(&raw, &field, sizeof(raw));
  return static_cast<int64_t>(raw);
}

// Why `object` is not a live handle of `kind`: null, another kind, or none.
Status NotLiveHandle(const void* object, uint32_t kind, const char* what);

// Turns a handle back into its core object, rejecting null and stale handles.
template <typename Core, typename Handle>
StatusOr<Core*> Unwrap(Handle* handle, const char* what) {
  auto* object = reinterpret_cast<Core*>(const_cast<std::remove_const_t<Handle>*>(handle));
  if (core::IsLiveHandle(object)) [[likely]] return object;
  return NotLiveHandle(object, Core::kKind, what);
}

template <typename Handle, typename Core>
Handle* Wrap(Core* object) {
  return reinterpret_cast<Handle*>(object);
}

// PJRT_NamedValue arrays built from engine attributes (one builder for every layer).
using engine::NamedValues;

// The named values of a device description's or topology's attributes, kept until
// ForgetAttributeViews is called for the topology (before it is destroyed).
const NamedValues& AttributeViews(const core::DeviceDescription& description);
const NamedValues& AttributeViews(const core::Topology& topology);
void ForgetAttributeViews(const core::Topology& topology);

// Reads a caller's program and serialized compile options (PJRT_Client_Compile, PJRT_Compile).
StatusOr<engine::Program> ReadProgram(const PJRT_Program* program, const char* options, size_t options_size,
                                      std::string* options_out);

// Reads caller-provided named values (create options) into engine attributes.
StatusOr<engine::Attributes> ReadNamedValues(const PJRT_NamedValue* values, size_t count);

void BindErrors(PJRT_Api* api);
void BindPlugin(PJRT_Api* api);
void BindEvents(PJRT_Api* api);
void BindClient(PJRT_Api* api);
void BindDevices(PJRT_Api* api);
void BindMemories(PJRT_Api* api);
void BindBuffers(PJRT_Api* api);
void BindExecutables(PJRT_Api* api);
void BindLoadedExecutables(PJRT_Api* api);
void BindTopology(PJRT_Api* api);
void BindExecuteContexts(PJRT_Api* api);
void BindTransferManagers(PJRT_Api* api);
// The plugin's extensions, each linked in front of `next` (PJRT_Api.extension_start).
PJRT_Extension_Base* ProfilerExtension(PJRT_Extension_Base* next);
PJRT_Extension_Base* LayoutsExtension(PJRT_Extension_Base* next);
PJRT_Extension_Base* MemoryDescriptionsExtension(PJRT_Extension_Base* next);
PJRT_Extension_Base* FfiExtension(PJRT_Extension_Base* next);
void BindStubs(PJRT_Api* api);
// The entries of PJRT_Api_Newer past the 0.81 table.
void BindNewerErrors(PJRT_Api_Newer* api);
void BindNewerDevices(PJRT_Api_Newer* api);
void BindNewerTopology(PJRT_Api_Newer* api);
void BindNewerLoadedExecutables(PJRT_Api_Newer* api);
void BindNewerStubs(PJRT_Api_Newer* api);
// The table that leads every PJRT_Memory handed out.
const PJRT_Memory_FunctionTable* MemoryFunctionTable();

}  // namespace pjrt_neuron::api

// Defines the entry point `name` (its full C API name, PJRT_...) around a body `Status nameBody(Args*)`.
#define PN_ENTRY(name)                                                            \
  ::pjrt_neuron::Status name##Body(name##_Args* args);                            \
  PJRT_Error* name(name##_Args* args) {                                           \
    return ::pjrt_neuron::api::Run(#name, [args] { return name##Body(args); });   \
  }                                                                               \
  ::pjrt_neuron::Status name##Body(name##_Args* args)
