// The simulator engine's XLA CPU client, its devices and memories (cpu_client.h).
#include "engine/sim/cpu_client.h"

#include "engine/named_values.h"
#include "engine/sim/engine_library.h"

namespace pjrt_neuron::engine::sim {

CpuClient::~CpuClient() {
  if (client_ != nullptr) {
    INNER_ARGS(PJRT_Client_Destroy_Args, args);
    args.client = client_;
    TakeError(api_, api_->PJRT_Client_Destroy(&args));
  }
  // The library stays loaded: XLA's CPU runtime keeps threads and statics alive.
}

Status CpuClient::Init(const EngineOptions& options) {
  PN_ASSIGN_OR_RETURN(api_, LoadApi(options.library_path));
  Attributes create_options{{"cpu_device_count", int64_t{options.num_cores}}};
  for (const Attribute& a : options.passthrough) {
    if (!std::holds_alternative<bool>(a.value) && !std::holds_alternative<int64_t>(a.value)) {
      return InvalidArgument("engine option '" + a.name + "' must be a bool or an integer");
    }
    create_options.push_back(a);
  }
  const NamedValues values(create_options);
  INNER_ARGS(PJRT_Client_Create_Args, create);
  create.create_options = values.data();
  create.num_options = values.size();
  PN_RETURN_IF_ERROR(TakeError(api_, api_->PJRT_Client_Create(&create)));
  client_ = create.client;

  INNER_ARGS(PJRT_Client_AddressableDevices_Args, devices);
  devices.client = client_;
  PN_RETURN_IF_ERROR(TakeError(api_, api_->PJRT_Client_AddressableDevices(&devices)));
  if (devices.num_addressable_devices != static_cast<size_t>(options.num_cores)) {
    return Internal("the XLA CPU engine made " + std::to_string(devices.num_addressable_devices) +
                    " devices, expected " + std::to_string(options.num_cores));
  }
  devices_.assign(devices.addressable_devices, devices.addressable_devices + devices.num_addressable_devices);
  for (PJRT_Device* device : devices_) {
    INNER_ARGS(PJRT_Device_AddressableMemories_Args, memories);
    memories.device = device;
    PN_RETURN_IF_ERROR(TakeError(api_, api_->PJRT_Device_AddressableMemories(&memories)));
    std::vector<std::pair<std::string, PJRT_Memory*>> by_kind;
    for (size_t i = 0; i < memories.num_memories; ++i) {
      by_kind.emplace_back(MemoryKind(memories.memories[i]), memories.memories[i]);
    }
    memories_.push_back(std::move(by_kind));
  }
  return Status::Ok();
}

int CpuClient::CoreOf(PJRT_Device* device) const {
  for (size_t i = 0; i < devices_.size(); ++i) {
    if (devices_[i] == device) return static_cast<int>(i);
  }
  return -1;
}

StatusOr<PJRT_Memory*> CpuClient::memory(int core, const std::string& kind) const {
  for (const auto& [memory_kind, memory] : memories_.at(core)) {
    if (memory_kind == kind) return memory;
  }
  return InvalidArgument("the engine has no '" + kind + "' memory on core " + std::to_string(core));
}

std::string CpuClient::MemoryKind(PJRT_Memory* memory) const {
  INNER_ARGS(PJRT_Memory_Kind_Args, args);
  args.memory = memory;
  if (!TakeError(api_, api_->PJRT_Memory_Kind(&args)).ok()) return "device";
  return std::string(args.kind, args.kind_size);
}

}  // namespace pjrt_neuron::engine::sim
