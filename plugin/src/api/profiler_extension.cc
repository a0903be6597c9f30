// The Profiler extension: frameworks' profilers (jax.profiler, torch-xla's xp.trace) start a
// session here and receive a plane per NeuronCore with a span per program execution.
//
// The extension's ABI (xla/backends/profiler/plugin/profiler_c_api.h and
// xla/pjrt/c/pjrt_c_api_profiler_extension.h) is not in the engine wheel's include directory,
// so the structs are declared here field for field. Callers do not always fill struct_size
// (XLA's own plugin tracer leaves it unset), so it is not checked.
#include <cstdint>
#include <string>

#include "api/common.h"
#include "core/profiler.h"

extern "C" {
typedef struct PLUGIN_Profiler PLUGIN_Profiler;
typedef struct PLUGIN_Profiler_Error PLUGIN_Profiler_Error;

struct PLUGIN_Profiler_Error_Destroy_Args {
  size_t struct_size;
  void* priv;
  PLUGIN_Profiler_Error* error;
};
struct PLUGIN_Profiler_Error_Message_Args {
  size_t struct_size;
  void* priv;
  const PLUGIN_Profiler_Error* error;
  const char* message;
  size_t message_size;
};
struct PLUGIN_Profiler_Error_GetCode_Args {
  size_t struct_size;
  void* priv;
  const PLUGIN_Profiler_Error* error;
  int code;
};
struct PLUGIN_Profiler_Create_Args {
  size_t struct_size;
  const char* options;
  size_t options_size;
  PLUGIN_Profiler* profiler;
};
struct PLUGIN_Profiler_Destroy_Args {
  size_t struct_size;
  PLUGIN_Profiler* profiler;
};
struct PLUGIN_Profiler_Start_Args {
  size_t struct_size;
  PLUGIN_Profiler* profiler;
};
struct PLUGIN_Profiler_Stop_Args {
  size_t struct_size;
  PLUGIN_Profiler* profiler;
};
struct PLUGIN_Profiler_CollectData_Args {
  size_t struct_size;
  PLUGIN_Profiler* profiler;
  uint8_t* buffer;
  size_t buffer_size_in_bytes;
};
struct PLUGIN_Profiler_Api {
  size_t struct_size;
  void* priv;
  void (*error_destroy)(PLUGIN_Profiler_Error_Destroy_Args*);
  void (*error_message)(PLUGIN_Profiler_Error_Message_Args*);
  PLUGIN_Profiler_Error* (*error_get_code)(PLUGIN_Profiler_Error_GetCode_Args*);
  PLUGIN_Profiler_Error* (*create)(PLUGIN_Profiler_Create_Args*);
  PLUGIN_Profiler_Error* (*destroy)(PLUGIN_Profiler_Destroy_Args*);
  PLUGIN_Profiler_Error* (*start)(PLUGIN_Profiler_Start_Args*);
  PLUGIN_Profiler_Error* (*stop)(PLUGIN_Profiler_Stop_Args*);
  PLUGIN_Profiler_Error* (*collect_data)(PLUGIN_Profiler_CollectData_Args*);
};
struct PJRT_Profiler_Extension {
  PJRT_Extension_Base base;
  PLUGIN_Profiler_Api* profiler_api;
  int64_t traceme_context_id;
};
}

struct PLUGIN_Profiler {
  pjrt_neuron::core::profiler::Session session;
};

struct PLUGIN_Profiler_Error {
  pjrt_neuron::Status status;
};

namespace pjrt_neuron::api {
namespace {

PLUGIN_Profiler_Error* ToError(const Status& status, const char* function) {
  if (status.ok()) return nullptr;
  return new PLUGIN_Profiler_Error{Status(status.code(), std::string(function) + ": " + status.message())};
}

Status CheckProfiler(const void* args, PLUGIN_Profiler* profiler) {
  if (args == nullptr) return InvalidArgument("args is null");
  if (profiler == nullptr) return InvalidArgument("`profiler` is null");
  return Status::Ok();
}

void ErrorDestroy(PLUGIN_Profiler_Error_Destroy_Args* args) {
  if (args != nullptr) delete args->error;
}

void ErrorMessage(PLUGIN_Profiler_Error_Message_Args* args) {
  if (args == nullptr || args->error == nullptr) return;
  args->message = args->error->status.message().data();
  args->message_size = args->error->status.message().size();
}

PLUGIN_Profiler_Error* ErrorGetCode(PLUGIN_Profiler_Error_GetCode_Args* args) {
  if (args == nullptr || args->error == nullptr) {
    return ToError(InvalidArgument("`error` is null"), "PLUGIN_Profiler_Error_GetCode");
  }
  args->code = static_cast<int>(args->error->status.code());
  return nullptr;
}

PLUGIN_Profiler_Error* Create(PLUGIN_Profiler_Create_Args* args) {
  if (args == nullptr) return ToError(InvalidArgument("args is null"), "PLUGIN_Profiler_Create");
  args->profiler = new PLUGIN_Profiler();  // options (a ProfileOptions proto) change nothing here
  return nullptr;
}

PLUGIN_Profiler_Error* Destroy(PLUGIN_Profiler_Destroy_Args* args) {
  if (args == nullptr) return ToError(InvalidArgument("args is null"), "PLUGIN_Profiler_Destroy");
  delete args->profiler;
  return nullptr;
}

PLUGIN_Profiler_Error* Start(PLUGIN_Profiler_Start_Args* args) {
  Status checked = CheckProfiler(args, args == nullptr ? nullptr : args->profiler);
  return ToError(checked.ok() ? args->profiler->session.Start() : checked, "PLUGIN_Profiler_Start");
}

PLUGIN_Profiler_Error* Stop(PLUGIN_Profiler_Stop_Args* args) {
  Status checked = CheckProfiler(args, args == nullptr ? nullptr : args->profiler);
  return ToError(checked.ok() ? args->profiler->session.Stop() : checked, "PLUGIN_Profiler_Stop");
}

// Two conventions are in use: called with a null buffer, the size is reported and `buffer`
// points at our copy (which callers such as XLA's plugin tracer read directly); called again
// with a buffer, the data are copied into it.
PLUGIN_Profiler_Error* CollectData(PLUGIN_Profiler_CollectData_Args* args) {
  Status checked = CheckProfiler(args, args == nullptr ? nullptr : args->profiler);
  if (!checked.ok()) return ToError(checked, "PLUGIN_Profiler_CollectData");
  StatusOr<const std::string*> bytes = args->profiler->session.Collect();
  if (!bytes.ok()) return ToError(bytes.status(), "PLUGIN_Profiler_CollectData");
  const std::string& data = **bytes;
  if (args->buffer == nullptr) {
    args->buffer = reinterpret_cast<uint8_t*>(const_cast<char*>(data.data()));
  } else if (args->buffer != reinterpret_cast<const uint8_t*>(data.data())) {
    std::copy(data.begin(), data.end(), args->buffer);
  }
  args->buffer_size_in_bytes = data.size();
  return nullptr;
}

PLUGIN_Profiler_Api profiler_api = {
    sizeof(PLUGIN_Profiler_Api), nullptr, ErrorDestroy, ErrorMessage, ErrorGetCode, Create, Destroy, Start, Stop,
    CollectData,
};

PJRT_Profiler_Extension profiler_extension = {
    {sizeof(PJRT_Profiler_Extension), PJRT_Extension_Type_Profiler, nullptr},
    &profiler_api,
    0,
};

}  // namespace

PJRT_Extension_Base* ProfilerExtension(PJRT_Extension_Base* next) {
  profiler_extension.base.next = next;
  return &profiler_extension.base;
}

}  // namespace pjrt_neuron::api
