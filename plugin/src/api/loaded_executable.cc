// PJRT_LoadedExecutable: a program loaded on NeuronCores, and its execution.
#include "api/executable_views.h"
#include "hlo/compile_options.h"

namespace pjrt_neuron::api {
namespace {

StatusOr<core::LoadedExecutable*> UnwrapLoaded(PJRT_LoadedExecutable* e, const char* field = "executable") {
  return Unwrap<core::LoadedExecutable>(e, field);
}

PN_ENTRY(PJRT_LoadedExecutable_Destroy) {
  PN_REQUIRE_ARGS(args, PJRT_LoadedExecutable_Destroy_Args, executable);
  PN_ASSIGN_OR_RETURN(core::LoadedExecutable * executable, UnwrapLoaded(args->executable));
  delete executable;
  return Status::Ok();
}

PN_ENTRY(PJRT_LoadedExecutable_GetExecutable) {
  PN_REQUIRE_ARGS(args, PJRT_LoadedExecutable_GetExecutable_Args, executable);
  PN_ASSIGN_OR_RETURN(core::LoadedExecutable * loaded, UnwrapLoaded(args->loaded_executable, "loaded_executable"));
  args->executable = Wrap<PJRT_Executable>(new core::Executable(loaded->program()));
  return Status::Ok();
}

PN_ENTRY(PJRT_LoadedExecutable_AddressableDevices) {
  PN_REQUIRE_ARGS(args, PJRT_LoadedExecutable_AddressableDevices_Args, num_addressable_devices);
  PN_ASSIGN_OR_RETURN(core::LoadedExecutable * loaded, UnwrapLoaded(args->executable));
  args->addressable_devices = reinterpret_cast<PJRT_Device* const*>(loaded->addressable_devices().data());
  args->num_addressable_devices = loaded->addressable_devices().size();
  return Status::Ok();
}

PN_ENTRY(PJRT_LoadedExecutable_Delete) {
  PN_REQUIRE_ARGS(args, PJRT_LoadedExecutable_Delete_Args, executable);
  PN_ASSIGN_OR_RETURN(core::LoadedExecutable * loaded, UnwrapLoaded(args->executable));
  loaded->Delete();
  return Status::Ok();
}

PN_ENTRY(PJRT_LoadedExecutable_IsDeleted) {
  PN_REQUIRE_ARGS(args, PJRT_LoadedExecutable_IsDeleted_Args, is_deleted);
  PN_ASSIGN_OR_RETURN(core::LoadedExecutable * loaded, UnwrapLoaded(args->executable));
  args->is_deleted = loaded->IsDeleted();
  return Status::Ok();
}

PN_ENTRY(PJRT_LoadedExecutable_Fingerprint) {
  PN_REQUIRE_ARGS(args, PJRT_LoadedExecutable_Fingerprint_Args, executable_fingerprint_size);
  PN_ASSIGN_OR_RETURN(core::LoadedExecutable * loaded, UnwrapLoaded(args->executable));
  const ExecutableViews& views = ViewsOf(loaded->program());
  if (!views.fingerprint_status.ok()) return views.fingerprint_status;
  args->executable_fingerprint = views.fingerprint.c_str();
  args->executable_fingerprint_size = views.fingerprint.size();
  return Status::Ok();
}

PN_ENTRY(PJRT_LoadedExecutable_GetDeviceAssignment) {
  PN_REQUIRE_ARGS(args, PJRT_LoadedExecutable_GetDeviceAssignment_Args, serialized_device_assignment_deleter);
  PN_ASSIGN_OR_RETURN(core::LoadedExecutable * loaded, UnwrapLoaded(args->executable));
  PN_ASSIGN_OR_RETURN(std::string bytes, loaded->SerializedDeviceAssignment());
  auto* owned = new std::string(std::move(bytes));
  args->serialized_bytes = owned->data();
  args->serialized_bytes_size = owned->size();
  args->serialized_device_assignment = reinterpret_cast<PJRT_DeviceAssignmentSerialized*>(owned);
  args->serialized_device_assignment_deleter = [](PJRT_DeviceAssignmentSerialized* d) {
    delete reinterpret_cast<std::string*>(d);
  };
  return Status::Ok();
}

PN_ENTRY(PJRT_LoadedExecutable_AddressableDeviceLogicalIds) {
  PN_REQUIRE_ARGS(args, PJRT_LoadedExecutable_AddressableDeviceLogicalIds_Args, num_addressable_device_logical_ids);
  PN_ASSIGN_OR_RETURN(core::LoadedExecutable * loaded, UnwrapLoaded(args->executable));
  PN_ASSIGN_OR_RETURN(const auto* ids, loaded->AddressableLogicalIds());
  static_assert(sizeof(core::LoadedExecutable::LogicalId) == sizeof(PJRT_LogicalDeviceIds), "same layout");
  args->addressable_device_logical_ids = reinterpret_cast<const PJRT_LogicalDeviceIds*>(ids->data());
  args->num_addressable_device_logical_ids = ids->size();
  return Status::Ok();
}

// Reads the options an older caller may have sent shorter; absent fields keep defaults.
StatusOr<engine::ExecuteOptions> ReadExecuteOptions(const PJRT_ExecuteOptions* options) {
  engine::ExecuteOptions out;
  if (options == nullptr) return out;
  PN_REQUIRE_ARGS(options, PJRT_ExecuteOptions, num_recv_ops);
  out.send_callbacks = options->send_callbacks;
  out.recv_callbacks = options->recv_callbacks;
  out.num_send_ops = options->num_send_ops;
  out.num_recv_ops = options->num_recv_ops;
  if (PN_HAS(options, PJRT_ExecuteOptions, launch_id)) out.launch_id = options->launch_id;
  if (PN_HAS(options, PJRT_ExecuteOptions, num_non_donatable_input_indices) &&
      options->num_non_donatable_input_indices > 0) {
    if (options->non_donatable_input_indices == nullptr) {
      return InvalidArgument("non_donatable_input_indices is null but its count is " +
                             std::to_string(options->num_non_donatable_input_indices));
    }
    out.non_donatable_input_indices = {options->non_donatable_input_indices, options->num_non_donatable_input_indices};
  }
  return out;
}

PN_ENTRY(PJRT_LoadedExecutable_Execute) {
  PN_REQUIRE_ARGS(args, PJRT_LoadedExecutable_Execute_Args, device_complete_events);
  PN_ASSIGN_OR_RETURN(core::LoadedExecutable * loaded, UnwrapLoaded(args->executable));
  PN_ASSIGN_OR_RETURN(engine::ExecuteOptions options, ReadExecuteOptions(args->options));
  core::Device* only_device = nullptr;
  if (PN_HAS(args, PJRT_LoadedExecutable_Execute_Args, execute_device) && args->execute_device != nullptr) {
    PN_ASSIGN_OR_RETURN(only_device, Unwrap<core::Device>(args->execute_device, "execute_device"));
    if (only_device->client() != loaded->client()) return InvalidArgument("`execute_device` belongs to another client");
  }
  // Lists with nothing to hold may be null: no arguments, no outputs, or no devices.
  const bool has_outputs = !loaded->compiled().outputs().empty();
  if (args->num_devices > 0 && args->num_args > 0 && args->argument_lists == nullptr) {
    return InvalidArgument("`argument_lists` is null");
  }
  if (args->num_devices > 0 && has_outputs && args->output_lists == nullptr) {
    return InvalidArgument("`output_lists` is null");
  }
  for (size_t d = 0; d < args->num_devices; ++d) {
    if (args->num_args > 0 && args->argument_lists[d] == nullptr) {
      return InvalidArgument("argument list " + std::to_string(d) + " is null");
    }
    if (has_outputs && args->output_lists[d] == nullptr) {
      return InvalidArgument("output list " + std::to_string(d) + " is null");
    }
  }
  // Handles are the core objects' addresses (Wrap), so the caller's lists are read in place.
  core::ArgumentLists arguments{reinterpret_cast<core::Buffer* const* const*>(args->argument_lists),
                                args->num_devices, args->num_args};
  core::ExecuteResult result;
  PN_RETURN_IF_ERROR(loaded->Execute(arguments, options, only_device, &result));
  for (size_t d = 0; d < result.outputs.size(); ++d) {
    for (size_t o = 0; o < result.outputs[d].size(); ++o) {
      args->output_lists[d][o] = Wrap<PJRT_Buffer>(result.outputs[d][o].release());
    }
    if (args->device_complete_events != nullptr) {
      args->device_complete_events[d] = Wrap<PJRT_Event>(result.completions[d].release());
    }
  }
  return Status::Ok();
}

}  // namespace

void BindNewerLoadedExecutables(PJRT_Api_Newer* api) {
  api->PJRT_LoadedExecutable_AddressableDeviceLogicalIds = PJRT_LoadedExecutable_AddressableDeviceLogicalIds;
}

void BindLoadedExecutables(PJRT_Api* api) {
  api->PJRT_LoadedExecutable_Destroy = PJRT_LoadedExecutable_Destroy;
  api->PJRT_LoadedExecutable_GetExecutable = PJRT_LoadedExecutable_GetExecutable;
  api->PJRT_LoadedExecutable_AddressableDevices = PJRT_LoadedExecutable_AddressableDevices;
  api->PJRT_LoadedExecutable_Delete = PJRT_LoadedExecutable_Delete;
  api->PJRT_LoadedExecutable_IsDeleted = PJRT_LoadedExecutable_IsDeleted;
  api->PJRT_LoadedExecutable_Execute = PJRT_LoadedExecutable_Execute;
  api->PJRT_LoadedExecutable_Fingerprint = PJRT_LoadedExecutable_Fingerprint;
  api->PJRT_LoadedExecutable_GetDeviceAssignment = PJRT_LoadedExecutable_GetDeviceAssignment;
}

}  // namespace pjrt_neuron::api
