// The Layouts extension: default, buffer and program-output layouts, as the engine's own
// Layouts extension (the XLA CPU plugin's) answers them. Our handles are turned into the
// engine's before the call; the layouts handed back are the engine's objects. Engines with no
// PJRT plugin underneath (the instance daemon's, the Neuron runtime's) get default and buffer
// layouts from the plugin's model (dense, in XLA's text form), since XLA aborts the process
// when a buffer's layout query fails; their output layouts stay UNIMPLEMENTED (JAX falls back).
//
// The extension's ABI (version 2: up to the executable's output layouts) is declared here from
// openxla/xla's public description, since the engine wheel ships only pjrt_c_api.h.
#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <unordered_set>
#include <vector>

#include "api/common.h"
#include "common/extension_type.h"
#include "core/buffer.h"
#include "core/client.h"
#include "core/device.h"
#include "core/executable.h"

extern "C" {
typedef struct PJRT_Layouts_MemoryLayout PJRT_Layouts_MemoryLayout;
typedef struct PJRT_Layouts_SerializedLayout PJRT_Layouts_SerializedLayout;

struct PJRT_Layouts_MemoryLayout_Destroy_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_Layouts_MemoryLayout* layout;
};
struct PJRT_Layouts_MemoryLayout_Serialize_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_Layouts_MemoryLayout* layout;
  const char* serialized_bytes;                                        // out
  size_t serialized_bytes_size;                                        // out
  PJRT_Layouts_SerializedLayout* serialized_layout;                    // out: owns the bytes
  void (*serialized_layout_deleter)(PJRT_Layouts_SerializedLayout*);  // out
};
struct PJRT_Layouts_PJRT_Client_GetDefaultLayout_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_Client* client;
  PJRT_Buffer_Type type;
  const int64_t* dims;
  size_t num_dims;
  PJRT_Layouts_MemoryLayout* layout;  // out
};
struct PJRT_Layouts_PJRT_Buffer_MemoryLayout_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_Buffer* buffer;
  PJRT_Layouts_MemoryLayout* layout;  // out
};
struct PJRT_Layouts_PJRT_Topology_GetDefaultLayout_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_TopologyDescription* topology_description;
  PJRT_Buffer_Type type;
  const int64_t* dims;
  size_t num_dims;
  PJRT_Layouts_MemoryLayout* layout;  // out
};
struct PJRT_Layouts_PJRT_Executable_GetOutputLayouts_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_Executable* executable;
  size_t num_outputs;                   // out
  PJRT_Layouts_MemoryLayout** layouts;  // out: owned by the executable
};
struct PJRT_Layouts_Extension {
  PJRT_Extension_Base base;
  PJRT_Error* (*MemoryLayout_Destroy)(PJRT_Layouts_MemoryLayout_Destroy_Args*);
  PJRT_Error* (*MemoryLayout_Serialize)(PJRT_Layouts_MemoryLayout_Serialize_Args*);
  PJRT_Error* (*Client_GetDefaultLayout)(PJRT_Layouts_PJRT_Client_GetDefaultLayout_Args*);
  PJRT_Error* (*Buffer_MemoryLayout)(PJRT_Layouts_PJRT_Buffer_MemoryLayout_Args*);
  PJRT_Error* (*Topology_GetDefaultLayout)(PJRT_Layouts_PJRT_Topology_GetDefaultLayout_Args*);
  PJRT_Error* (*Executable_GetOutputLayouts)(PJRT_Layouts_PJRT_Executable_GetOutputLayouts_Args*);
};
}

namespace pjrt_neuron::api {
namespace {

// The engine's API that made the layouts we handed out. Layout objects carry no owner, and only
// the simulator's engine (one library per process) makes them, so one pointer is enough.
std::atomic<const PJRT_Api*> layouts_api{nullptr};

Status TakeNativeError(const PJRT_Api* api, PJRT_Error* error) {
  if (error == nullptr) return Status::Ok();
  PJRT_Error_Message_Args message{PJRT_Error_Message_Args_STRUCT_SIZE, nullptr, error, nullptr, 0};
  api->PJRT_Error_Message(&message);
  PJRT_Error_GetCode_Args code{PJRT_Error_GetCode_Args_STRUCT_SIZE, nullptr, error, PJRT_Error_Code_UNKNOWN};
  PJRT_Error* code_error = api->PJRT_Error_GetCode(&code);
  Status status(code_error == nullptr ? static_cast<ErrorCode>(code.code) : ErrorCode::kUnknown,
                "the engine: " + std::string(message.message, message.message_size));
  PJRT_Error_Destroy_Args destroy{PJRT_Error_Destroy_Args_STRUCT_SIZE, nullptr, error};
  api->PJRT_Error_Destroy(&destroy);
  return status;
}

// The engine's Layouts extension, found by walking its extension chain.
StatusOr<const PJRT_Layouts_Extension*> EngineLayouts(const PJRT_Api* api) {
  if (api == nullptr) {
    return Unimplemented("this engine (the instance daemon's or the Neuron runtime's) has no Layouts extension");
  }
  for (const PJRT_Extension_Base* e = api->extension_start; e != nullptr; e = e->next) {
    if (!IsExtensionOfType(e, PJRT_Extension_Type_Layouts)) continue;
    if (e->struct_size < PN_PREFIX_SIZE(PJRT_Layouts_Extension, Executable_GetOutputLayouts)) {
      return Unimplemented("the engine's Layouts extension is older than version 2 (no output layouts)");
    }
    layouts_api.store(api);
    return reinterpret_cast<const PJRT_Layouts_Extension*>(e);
  }
  return Unimplemented("the engine offers no Layouts extension");
}

StatusOr<const PJRT_Layouts_Extension*> LayoutsOfHandedOut() {
  const PJRT_Api* api = layouts_api.load();
  if (api == nullptr) return InvalidArgument("`layout` was not made by this plugin (no layout was handed out yet)");
  return EngineLayouts(api);
}

// Layouts the plugin made itself: their serialized text. Told apart from the engine's by address.
struct ModelLayout {
  std::string text;
};
std::mutex model_layouts_mutex;
std::unordered_set<const void*> model_layouts;

PJRT_Layouts_MemoryLayout* NewModelLayout(std::string text) {
  auto* layout = new ModelLayout{std::move(text)};
  std::lock_guard<std::mutex> lock(model_layouts_mutex);
  model_layouts.insert(layout);
  return reinterpret_cast<PJRT_Layouts_MemoryLayout*>(layout);
}

const ModelLayout* FindModelLayout(const PJRT_Layouts_MemoryLayout* layout) {
  std::lock_guard<std::mutex> lock(model_layouts_mutex);
  return model_layouts.count(layout) != 0 ? reinterpret_cast<const ModelLayout*>(layout) : nullptr;
}

// XLA's text form of a layout, as the engine serializes it: "{1,0}" for a row-major matrix.
std::string LayoutText(const std::vector<int64_t>& minor_to_major) {
  std::string text = "{";
  for (size_t i = 0; i < minor_to_major.size(); ++i) text += (i ? "," : "") + std::to_string(minor_to_major[i]);
  return text + "}";
}

std::vector<int64_t> DenseMinorToMajor(size_t num_dims) {
  std::vector<int64_t> order;
  for (size_t i = num_dims; i > 0; --i) order.push_back(static_cast<int64_t>(i - 1));
  return order;
}

Status CheckDims(const int64_t* dims, size_t num_dims) {
  if (num_dims > 0 && dims == nullptr) return InvalidArgument("`dims` is null but `num_dims` is " + std::to_string(num_dims));
  for (size_t i = 0; i < num_dims; ++i) {
    if (dims[i] < 0) return InvalidArgument("dims[" + std::to_string(i) + "] is negative");
  }
  return Status::Ok();
}

Status MemoryLayoutDestroyBody(PJRT_Layouts_MemoryLayout_Destroy_Args* args) {
  PN_REQUIRE_ARGS(args, PJRT_Layouts_MemoryLayout_Destroy_Args, layout);
  if (args->layout == nullptr) return Status::Ok();
  {
    std::lock_guard<std::mutex> lock(model_layouts_mutex);
    if (model_layouts.erase(args->layout) != 0) {
      delete reinterpret_cast<ModelLayout*>(args->layout);
      return Status::Ok();
    }
  }
  PN_ASSIGN_OR_RETURN(const PJRT_Layouts_Extension* layouts, LayoutsOfHandedOut());
  PJRT_Layouts_MemoryLayout_Destroy_Args inner{sizeof(inner), nullptr, args->layout};
  return TakeNativeError(layouts_api.load(), layouts->MemoryLayout_Destroy(&inner));
}

Status MemoryLayoutSerializeBody(PJRT_Layouts_MemoryLayout_Serialize_Args* args) {
  PN_REQUIRE_ARGS(args, PJRT_Layouts_MemoryLayout_Serialize_Args, serialized_layout_deleter);
  if (args->layout == nullptr) return InvalidArgument("`layout` is null");
  if (const ModelLayout* model = FindModelLayout(args->layout)) {
    auto* copy = new std::string(model->text);  // outlives the layout, as the ABI allows
    args->serialized_bytes = copy->data();
    args->serialized_bytes_size = copy->size();
    args->serialized_layout = reinterpret_cast<PJRT_Layouts_SerializedLayout*>(copy);
    args->serialized_layout_deleter = [](PJRT_Layouts_SerializedLayout* s) { delete reinterpret_cast<std::string*>(s); };
    return Status::Ok();
  }
  PN_ASSIGN_OR_RETURN(const PJRT_Layouts_Extension* layouts, LayoutsOfHandedOut());
  PJRT_Layouts_MemoryLayout_Serialize_Args inner{};
  inner.struct_size = sizeof(inner);
  inner.layout = args->layout;
  PN_RETURN_IF_ERROR(TakeNativeError(layouts_api.load(), layouts->MemoryLayout_Serialize(&inner)));
  args->serialized_bytes = inner.serialized_bytes;
  args->serialized_bytes_size = inner.serialized_bytes_size;
  args->serialized_layout = inner.serialized_layout;
  args->serialized_layout_deleter = inner.serialized_layout_deleter;
  return Status::Ok();
}

Status ClientGetDefaultLayoutBody(PJRT_Layouts_PJRT_Client_GetDefaultLayout_Args* args) {
  PN_REQUIRE_ARGS(args, PJRT_Layouts_PJRT_Client_GetDefaultLayout_Args, layout);
  PN_ASSIGN_OR_RETURN(core::Client * client, Unwrap<core::Client>(args->client, "client"));
  PN_RETURN_IF_ERROR(CheckDims(args->dims, args->num_dims));
  const engine::Native<PJRT_Client> native = client->engine().NativeClient();
  if (native.api == nullptr) {
    args->layout = NewModelLayout(LayoutText(DenseMinorToMajor(args->num_dims)));
    return Status::Ok();
  }
  PN_ASSIGN_OR_RETURN(const PJRT_Layouts_Extension* layouts, EngineLayouts(native.api));
  PJRT_Layouts_PJRT_Client_GetDefaultLayout_Args inner{sizeof(inner), nullptr, native.handle, args->type,
                                                       args->dims, args->num_dims, nullptr};
  PN_RETURN_IF_ERROR(TakeNativeError(native.api, layouts->Client_GetDefaultLayout(&inner)));
  args->layout = inner.layout;
  return Status::Ok();
}

Status BufferMemoryLayoutBody(PJRT_Layouts_PJRT_Buffer_MemoryLayout_Args* args) {
  PN_REQUIRE_ARGS(args, PJRT_Layouts_PJRT_Buffer_MemoryLayout_Args, layout);
  PN_ASSIGN_OR_RETURN(core::Buffer * buffer, Unwrap<core::Buffer>(args->buffer, "buffer"));
  if (buffer->IsDeleted()) return InvalidArgument("`buffer` was deleted or donated");
  const engine::Native<PJRT_Buffer> native = buffer->engine_buffer().NativeBuffer();
  if (native.api == nullptr) {
    PJRT_Buffer_MemoryLayout layout{};
    PN_RETURN_IF_ERROR(buffer->GetMemoryLayout(&layout));
    std::vector<int64_t> order = DenseMinorToMajor(buffer->dims().size());
    if (layout.type == PJRT_Buffer_MemoryLayout_Type_Tiled && layout.tiled.minor_to_major != nullptr) {
      order.assign(layout.tiled.minor_to_major, layout.tiled.minor_to_major + layout.tiled.minor_to_major_size);
    }
    args->layout = NewModelLayout(LayoutText(order));
    return Status::Ok();
  }
  PN_ASSIGN_OR_RETURN(const PJRT_Layouts_Extension* layouts, EngineLayouts(native.api));
  PJRT_Layouts_PJRT_Buffer_MemoryLayout_Args inner{sizeof(inner), nullptr, native.handle, nullptr};
  PN_RETURN_IF_ERROR(TakeNativeError(native.api, layouts->Buffer_MemoryLayout(&inner)));
  args->layout = inner.layout;
  return Status::Ok();
}

// A topology made without a client (ahead-of-time compilation) has no engine behind it to ask.
Status TopologyGetDefaultLayoutBody(PJRT_Layouts_PJRT_Topology_GetDefaultLayout_Args* args) {
  PN_REQUIRE_ARGS(args, PJRT_Layouts_PJRT_Topology_GetDefaultLayout_Args, layout);
  return Unimplemented(
      "not implemented by pjrt-neuron: a topology has no engine to ask; use "
      "PJRT_Layouts_PJRT_Client_GetDefaultLayout");
}

Status ExecutableGetOutputLayoutsBody(PJRT_Layouts_PJRT_Executable_GetOutputLayouts_Args* args) {
  PN_REQUIRE_ARGS(args, PJRT_Layouts_PJRT_Executable_GetOutputLayouts_Args, layouts);
  PN_ASSIGN_OR_RETURN(core::Executable * executable, Unwrap<core::Executable>(args->executable, "executable"));
  const engine::Native<PJRT_Executable> native = executable->compiled().engine_executable().NativeExecutable();
  PN_ASSIGN_OR_RETURN(const PJRT_Layouts_Extension* layouts, EngineLayouts(native.api));
  PJRT_Layouts_PJRT_Executable_GetOutputLayouts_Args inner{sizeof(inner), nullptr, native.handle, 0, nullptr};
  PN_RETURN_IF_ERROR(TakeNativeError(native.api, layouts->Executable_GetOutputLayouts(&inner)));
  args->num_outputs = inner.num_outputs;
  args->layouts = inner.layouts;
  return Status::Ok();
}

#define PN_LAYOUTS_ENTRY(Name, Args)                                                             \
  PJRT_Error* Name(Args* args) {                                                                 \
    return Run("PJRT_Layouts_" #Name, [args] { return Name##Body(args); });                      \
  }
PN_LAYOUTS_ENTRY(MemoryLayoutDestroy, PJRT_Layouts_MemoryLayout_Destroy_Args)
PN_LAYOUTS_ENTRY(MemoryLayoutSerialize, PJRT_Layouts_MemoryLayout_Serialize_Args)
PN_LAYOUTS_ENTRY(ClientGetDefaultLayout, PJRT_Layouts_PJRT_Client_GetDefaultLayout_Args)
PN_LAYOUTS_ENTRY(BufferMemoryLayout, PJRT_Layouts_PJRT_Buffer_MemoryLayout_Args)
PN_LAYOUTS_ENTRY(TopologyGetDefaultLayout, PJRT_Layouts_PJRT_Topology_GetDefaultLayout_Args)
PN_LAYOUTS_ENTRY(ExecutableGetOutputLayouts, PJRT_Layouts_PJRT_Executable_GetOutputLayouts_Args)
#undef PN_LAYOUTS_ENTRY

PJRT_Layouts_Extension layouts_extension = {
    {sizeof(PJRT_Layouts_Extension), PJRT_Extension_Type_Layouts, nullptr},
    MemoryLayoutDestroy, MemoryLayoutSerialize, ClientGetDefaultLayout, BufferMemoryLayout,
    TopologyGetDefaultLayout, ExecutableGetOutputLayouts,
};

}  // namespace

PJRT_Extension_Base* LayoutsExtension(PJRT_Extension_Base* next) {
  layouts_extension.base.next = next;
  return &layouts_extension.base;
}

}  // namespace pjrt_neuron::api
