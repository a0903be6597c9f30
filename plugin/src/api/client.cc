// PJRT_Client: creation, device and memory queries, host transfers, compilation.
#include <cstring>

#include "api/common.h"

namespace pjrt_neuron::api {
namespace {

StatusOr<core::Client*> UnwrapClient(PJRT_Client* client) { return Unwrap<core::Client>(client, "client"); }

// Errors for the caller's callbacks to return (TakeCallerError reads them, and errors of the
// caller's own making).
PJRT_Error* CallbackError(PJRT_Error_Code code, const char* message, size_t message_size) {
  return new PJRT_Error(Status(static_cast<ErrorCode>(code), std::string(message, message_size)));
}


// The key-value store of PJRT_Client_Create's callbacks (JAX's distributed service).
class CallbackKeyValueStore : public engine::KeyValueStore {
 public:
  CallbackKeyValueStore(PJRT_KeyValueGetCallback get, void* get_arg, PJRT_KeyValuePutCallback put, void* put_arg)
      : get_(get), get_arg_(get_arg), put_(put), put_arg_(put_arg) {}

  StatusOr<std::string> Get(const std::string& key, int timeout_ms) override {
    PJRT_CallbackError make_error = CallbackError;
    PJRT_KeyValueGetCallback_Args args{};
    args.struct_size = PJRT_KeyValueGetCallback_Args_STRUCT_SIZE;
    args.key = key.data();
    args.key_size = key.size();
    args.timeout_in_ms = timeout_ms;
    args.callback_error = &make_error;
    args.user_arg = get_arg_;
    PN_RETURN_IF_ERROR(TakeCallerError(get_(&args), "the key-value store's get of '" + key + "'"));
    std::string value(args.value != nullptr ? args.value : "", args.value != nullptr ? args.value_size : 0);
    if (args.value != nullptr && args.value_deleter_callback != nullptr) args.value_deleter_callback(args.value);
    return value;
  }

  Status Put(const std::string& key, const std::string& value) override {
    PJRT_CallbackError make_error = CallbackError;
    PJRT_KeyValuePutCallback_Args args{};
    args.struct_size = PJRT_KeyValuePutCallback_Args_STRUCT_SIZE;
    args.key = key.data();
    args.key_size = key.size();
    args.value = value.data();
    args.value_size = value.size();
    args.callback_error = &make_error;
    args.user_arg = put_arg_;
    return TakeCallerError(put_(&args), "the key-value store's put of '" + key + "'");
  }

 private:
  PJRT_KeyValueGetCallback get_;
  void* get_arg_;
  PJRT_KeyValuePutCallback put_;
  void* put_arg_;
};

PN_ENTRY(PJRT_Client_Create) {
  PN_REQUIRE_ARGS(args, PJRT_Client_Create_Args, client);
  PN_ASSIGN_OR_RETURN(engine::Attributes options, ReadNamedValues(args->create_options, args->num_options));
  PN_ASSIGN_OR_RETURN(core::ClientOptions resolved, core::ResolveClientOptions(options));
  if (args->kv_get_callback != nullptr && args->kv_put_callback != nullptr) {
    resolved.kv_store = std::make_shared<CallbackKeyValueStore>(args->kv_get_callback, args->kv_get_user_arg,
                                                                args->kv_put_callback, args->kv_put_user_arg);
  }
  PN_ASSIGN_OR_RETURN(std::unique_ptr<core::Client> client, core::Client::Create(resolved));
  args->client = Wrap<PJRT_Client>(client.release());
  return Status::Ok();
}

PN_ENTRY(PJRT_Client_Destroy) {
  PN_REQUIRE_ARGS(args, PJRT_Client_Destroy_Args, client);
  PN_ASSIGN_OR_RETURN(core::Client * client, UnwrapClient(args->client));
  ForgetAttributeViews(client->topology());
  delete client;
  return Status::Ok();
}

PN_ENTRY(PJRT_Client_PlatformName) {
  PN_REQUIRE_ARGS(args, PJRT_Client_PlatformName_Args, platform_name_size);
  PN_ASSIGN_OR_RETURN(core::Client * client, UnwrapClient(args->client));
  args->platform_name = client->platform_name().c_str();
  args->platform_name_size = client->platform_name().size();
  return Status::Ok();
}

PN_ENTRY(PJRT_Client_ProcessIndex) {
  PN_REQUIRE_ARGS(args, PJRT_Client_ProcessIndex_Args, process_index);
  PN_ASSIGN_OR_RETURN(core::Client * client, UnwrapClient(args->client));
  args->process_index = client->process_index();
  return Status::Ok();
}

// The framework's view of its peers' health. The instance daemon sees peers leave on its own
// (their connection closes), so the states are checked, not acted on.
PN_ENTRY(PJRT_Client_UpdateGlobalProcessInfo) {
  PN_REQUIRE_ARGS(args, PJRT_Client_UpdateGlobalProcessInfo_Args, num_process_infos);
  PN_ASSIGN_OR_RETURN(core::Client * client, UnwrapClient(args->client));
  (void)client;
  if (args->num_process_infos > 0 && args->process_infos == nullptr) {
    return InvalidArgument("process_infos is null but num_process_infos is " + std::to_string(args->num_process_infos));
  }
  return Status::Ok();
}

PN_ENTRY(PJRT_Client_PlatformVersion) {
  PN_REQUIRE_ARGS(args, PJRT_Client_PlatformVersion_Args, platform_version_size);
  PN_ASSIGN_OR_RETURN(core::Client * client, UnwrapClient(args->client));
  args->platform_version = client->platform_version().c_str();
  args->platform_version_size = client->platform_version().size();
  return Status::Ok();
}

PN_ENTRY(PJRT_Client_TopologyDescription) {
  PN_REQUIRE_ARGS(args, PJRT_Client_TopologyDescription_Args, topology);
  PN_ASSIGN_OR_RETURN(core::Client * client, UnwrapClient(args->client));
  args->topology = Wrap<PJRT_TopologyDescription>(const_cast<core::Topology*>(&client->topology()));
  return Status::Ok();
}

PN_ENTRY(PJRT_Client_Devices) {
  PN_REQUIRE_ARGS(args, PJRT_Client_Devices_Args, num_devices);
  PN_ASSIGN_OR_RETURN(core::Client * client, UnwrapClient(args->client));
  args->devices = reinterpret_cast<PJRT_Device* const*>(client->devices().data());
  args->num_devices = client->devices().size();
  return Status::Ok();
}

PN_ENTRY(PJRT_Client_AddressableDevices) {
  PN_REQUIRE_ARGS(args, PJRT_Client_AddressableDevices_Args, num_addressable_devices);
  PN_ASSIGN_OR_RETURN(core::Client * client, UnwrapClient(args->client));
  args->addressable_devices = reinterpret_cast<PJRT_Device* const*>(client->addressable_devices().data());
  args->num_addressable_devices = client->addressable_devices().size();
  return Status::Ok();
}

PN_ENTRY(PJRT_Client_LookupDevice) {
  PN_REQUIRE_ARGS(args, PJRT_Client_LookupDevice_Args, device);
  PN_ASSIGN_OR_RETURN(core::Client * client, UnwrapClient(args->client));
  core::Device* device = client->LookupDevice(args->id);
  if (device == nullptr) {
    std::string ids;
    for (core::Device* d : client->devices()) ids += (ids.empty() ? "" : ", ") + std::to_string(d->id());
    return InvalidArgument("no NeuronCore with id " + std::to_string(args->id) + "; this client has ids " + ids);
  }
  args->device = Wrap<PJRT_Device>(device);
  return Status::Ok();
}

PN_ENTRY(PJRT_Client_LookupAddressableDevice) {
  PN_REQUIRE_ARGS(args, PJRT_Client_LookupAddressableDevice_Args, addressable_device);
  PN_ASSIGN_OR_RETURN(core::Client * client, UnwrapClient(args->client));
  core::Device* device = client->LookupAddressableDevice(args->local_hardware_id);
  if (device == nullptr) {
    return InvalidArgument("no addressable NeuronCore with local hardware id " +
                           std::to_string(args->local_hardware_id));
  }
  args->addressable_device = Wrap<PJRT_Device>(device);
  return Status::Ok();
}

PN_ENTRY(PJRT_Client_AddressableMemories) {
  PN_REQUIRE_ARGS(args, PJRT_Client_AddressableMemories_Args, num_addressable_memories);
  PN_ASSIGN_OR_RETURN(core::Client * client, UnwrapClient(args->client));
  args->addressable_memories = reinterpret_cast<PJRT_Memory* const*>(client->memories().data());
  args->num_addressable_memories = client->memories().size();
  return Status::Ok();
}

PN_ENTRY(PJRT_Client_Compile) {
  PN_REQUIRE_ARGS(args, PJRT_Client_Compile_Args, executable);
  PN_ASSIGN_OR_RETURN(core::Client * client, UnwrapClient(args->client));
  std::string options;
  PN_ASSIGN_OR_RETURN(engine::Program program,
                      ReadProgram(args->program, args->compile_options, args->compile_options_size, &options));
  PN_ASSIGN_OR_RETURN(auto executable, client->Compile(program, options));
  args->executable = Wrap<PJRT_LoadedExecutable>(executable.release());
  return Status::Ok();
}

PN_ENTRY(PJRT_Client_DefaultDeviceAssignment) {
  PN_REQUIRE_ARGS(args, PJRT_Client_DefaultDeviceAssignment_Args, default_assignment);
  PN_ASSIGN_OR_RETURN(core::Client * client, UnwrapClient(args->client));
  if (args->num_replicas < 1 || args->num_partitions < 1) {
    return InvalidArgument("num_replicas and num_partitions must be at least 1");
  }
  size_t needed = static_cast<size_t>(args->num_replicas) * args->num_partitions;
  if (needed > client->devices().size()) {
    return InvalidArgument(std::to_string(needed) + " NeuronCores requested (" + std::to_string(args->num_replicas) +
                           " replicas x " + std::to_string(args->num_partitions) + " partitions) but the instance has " +
                           std::to_string(client->devices().size()));
  }
  if (args->default_assignment == nullptr || args->default_assignment_size < needed) {
    return InvalidArgument("default_assignment must hold at least " + std::to_string(needed) + " ints");
  }
  PN_ASSIGN_OR_RETURN(std::vector<int> assignment,
                      client->DefaultDeviceAssignment(args->num_replicas, args->num_partitions));
  for (size_t i = 0; i < needed; ++i) args->default_assignment[i] = assignment[i];
  return Status::Ok();
}

// The memory a transfer targets: the one named, or the default memory of the device named.
StatusOr<core::Memory*> TargetMemory(core::Client* client, PJRT_Device* device_handle, PJRT_Memory* memory_handle) {
  core::Device* device = nullptr;
  if (device_handle != nullptr) {
    PN_ASSIGN_OR_RETURN(device, Unwrap<core::Device>(device_handle, "device"));
    if (!client->Owns(device)) return InvalidArgument("`device` belongs to another client");
  }
  if (memory_handle == nullptr) {
    if (device == nullptr) return InvalidArgument("neither `device` nor `memory` is set");
    return device->default_memory();
  }
  PN_ASSIGN_OR_RETURN(core::Memory * memory, Unwrap<core::Memory>(memory_handle, "memory"));
  if (!client->Owns(memory->device())) return InvalidArgument("`memory` belongs to another client");
  if (device != nullptr && memory->device() != device) {
    return InvalidArgument("`memory` (" + memory->to_string() + ") is not attached to `device` " +
                           device->description().to_string);
  }
  return memory;
}

Status CheckShape(const PJRT_Buffer_Type& type_field, const int64_t* dims, size_t num_dims) {
  const int64_t type = RawEnum(type_field);
  if (type <= PJRT_Buffer_Type_INVALID || type > PJRT_Buffer_Type_F4E2M1FN || type == PJRT_Buffer_Type_TOKEN) {
    return InvalidArgument("unsupported element type " + std::to_string(type));
  }
  if (num_dims > 0 && dims == nullptr) return InvalidArgument("`dims` is null but num_dims is " + std::to_string(num_dims));
  for (size_t i = 0; i < num_dims; ++i) {
    if (dims[i] < 0) return InvalidArgument("dimension " + std::to_string(i) + " is negative (" + std::to_string(dims[i]) + ")");
  }
  return Status::Ok();
}

PN_ENTRY(PJRT_Client_BufferFromHostBuffer) {
  PN_REQUIRE_ARGS(args, PJRT_Client_BufferFromHostBuffer_Args, buffer);
  PN_ASSIGN_OR_RETURN(core::Client * client, UnwrapClient(args->client));
  PN_ASSIGN_OR_RETURN(core::Memory * memory, TargetMemory(client, args->device, args->memory));
  PN_RETURN_IF_ERROR(CheckShape(args->type, args->dims, args->num_dims));
  bool empty = false;
  for (size_t i = 0; i < args->num_dims; ++i) empty = empty || args->dims[i] == 0;
  if (args->data == nullptr && !empty) return InvalidArgument("`data` is null");
  if (args->byte_strides != nullptr && args->num_byte_strides != args->num_dims) {
    return InvalidArgument("num_byte_strides is " + std::to_string(args->num_byte_strides) + " but the shape has " +
                           std::to_string(args->num_dims) + " dimensions");
  }
  if (int64_t semantics = RawEnum(args->host_buffer_semantics);
      semantics < 0 || semantics > PJRT_HostBufferSemantics_kMutableZeroCopy) {
    return InvalidArgument("unknown host_buffer_semantics " + std::to_string(semantics));
  }
  engine::HostBufferSpec spec;
  spec.data = args->data;
  spec.type = args->type;
  spec.dims.assign(args->dims, args->dims + args->num_dims);
  spec.byte_strides = args->byte_strides;
  spec.num_byte_strides = args->byte_strides != nullptr ? args->num_byte_strides : 0;
  spec.semantics = args->host_buffer_semantics;
  spec.device_layout = args->device_layout;
  std::unique_ptr<core::Event> done;
  PN_ASSIGN_OR_RETURN(auto buffer, client->BufferFromHost(memory, std::move(spec), &done));
  args->done_with_host_buffer = Wrap<PJRT_Event>(done.release());
  args->buffer = Wrap<PJRT_Buffer>(buffer.release());
  return Status::Ok();
}

PN_ENTRY(PJRT_Client_CreateUninitializedBuffer) {
  PN_REQUIRE_ARGS(args, PJRT_Client_CreateUninitializedBuffer_Args, buffer);
  PN_ASSIGN_OR_RETURN(core::Client * client, UnwrapClient(args->client));
  PN_ASSIGN_OR_RETURN(core::Memory * memory, TargetMemory(client, args->device, args->memory));
  core::Device* device = memory->device();
  PN_RETURN_IF_ERROR(CheckShape(args->shape_element_type, args->shape_dims, args->shape_num_dims));
  std::vector<int64_t> dims(args->shape_dims, args->shape_dims + args->shape_num_dims);
  PN_ASSIGN_OR_RETURN(auto buffer, client->CreateUninitializedBuffer(device, args->shape_element_type, dims));
  args->buffer = Wrap<PJRT_Buffer>(buffer.release());
  return Status::Ok();
}

PN_ENTRY(PJRT_Client_CreateAliasBuffer) {
  PN_REQUIRE_ARGS(args, PJRT_Client_CreateAliasBuffer_Args, fulfill_alias_buffer_cb);
  PN_ASSIGN_OR_RETURN(core::Client * client, UnwrapClient(args->client));
  if (args->memory == nullptr) return InvalidArgument("`memory` is null");
  PN_ASSIGN_OR_RETURN(core::Memory * memory, TargetMemory(client, nullptr, args->memory));
  PN_RETURN_IF_ERROR(CheckShape(args->shape_element_type, args->shape_dims, args->shape_num_dims));
  if (args->shape_layout != nullptr) return Unimplemented("alias buffers take the default layout only");
  std::vector<int64_t> dims(args->shape_dims, args->shape_dims + args->shape_num_dims);
  PN_ASSIGN_OR_RETURN(auto alias, client->CreateAliasBuffer(memory, args->shape_element_type, dims));
  args->alias_buffer = Wrap<PJRT_Buffer>(alias.first.release());
  args->fulfill_alias_buffer_cb = static_cast<PJRT_FulfillAliasBufferCallback*>(alias.second);
  return Status::Ok();
}

PN_ENTRY(PJRT_Client_FulfillAliasBuffer) {
  PN_REQUIRE_ARGS(args, PJRT_Client_FulfillAliasBuffer_Args, fulfill_alias_buffer_cb);
  PN_ASSIGN_OR_RETURN(core::Client * client, UnwrapClient(args->client));
  if (args->fulfill_alias_buffer_cb == nullptr) return InvalidArgument("`fulfill_alias_buffer_cb` is null");
  const auto code = static_cast<ErrorCode>(RawEnum(args->status_code));
  if (static_cast<int>(code) < 0 || static_cast<int>(code) > static_cast<int>(ErrorCode::kUnauthenticated)) {
    return InvalidArgument("status_code " + std::to_string(static_cast<int>(code)) + " is not a PJRT_Error_Code");
  }
  core::Buffer* target = nullptr;
  if (code == ErrorCode::kOk) {
    if (args->buffer == nullptr) return InvalidArgument("`buffer` is null, and status_code is OK");
    PN_ASSIGN_OR_RETURN(target, Unwrap<core::Buffer>(args->buffer, "buffer"));
  } else if (args->error_message == nullptr && args->error_message_size > 0) {
    return InvalidArgument("`error_message` is null but error_message_size is " +
                           std::to_string(args->error_message_size));
  }
  const std::string message = code == ErrorCode::kOk || args->error_message == nullptr
                                  ? std::string()
                                  : std::string(args->error_message, args->error_message_size);
  return client->FulfillAliasBuffer(args->fulfill_alias_buffer_cb, target, code, message);
}

}  // namespace

void BindClient(PJRT_Api* api) {
  api->PJRT_Client_Create = PJRT_Client_Create;
  api->PJRT_Client_Destroy = PJRT_Client_Destroy;
  api->PJRT_Client_PlatformName = PJRT_Client_PlatformName;
  api->PJRT_Client_ProcessIndex = PJRT_Client_ProcessIndex;
  api->PJRT_Client_UpdateGlobalProcessInfo = PJRT_Client_UpdateGlobalProcessInfo;
  api->PJRT_Client_PlatformVersion = PJRT_Client_PlatformVersion;
  api->PJRT_Client_TopologyDescription = PJRT_Client_TopologyDescription;
  api->PJRT_Client_Devices = PJRT_Client_Devices;
  api->PJRT_Client_AddressableDevices = PJRT_Client_AddressableDevices;
  api->PJRT_Client_LookupDevice = PJRT_Client_LookupDevice;
  api->PJRT_Client_LookupAddressableDevice = PJRT_Client_LookupAddressableDevice;
  api->PJRT_Client_AddressableMemories = PJRT_Client_AddressableMemories;
  api->PJRT_Client_Compile = PJRT_Client_Compile;
  api->PJRT_Client_DefaultDeviceAssignment = PJRT_Client_DefaultDeviceAssignment;
  api->PJRT_Client_BufferFromHostBuffer = PJRT_Client_BufferFromHostBuffer;
  api->PJRT_Client_CreateUninitializedBuffer = PJRT_Client_CreateUninitializedBuffer;
  api->PJRT_Client_CreateAliasBuffer = PJRT_Client_CreateAliasBuffer;
  api->PJRT_Client_FulfillAliasBuffer = PJRT_Client_FulfillAliasBuffer;
}

}  // namespace pjrt_neuron::api
