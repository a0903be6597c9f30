#include <cstdlib>
#include <utility>

#include "core/compile_options.h"
#include "core/core.h"

namespace pjrt_neuron::core {

const char* PluginVersion() { return PJRT_NEURON_VERSION; }

namespace {

const std::string* StringValue(const engine::Attribute& a) { return std::get_if<std::string>(&a.value); }

std::string FormatBytes(int64_t bytes) {
  if (bytes % kGiB == 0) return std::to_string(bytes / kGiB) + " GiB";
  return std::to_string(bytes) + " bytes";
}

}  // namespace

StatusOr<ClientOptions> ResolveClientOptions(const engine::Attributes& create_options) {
  ClientOptions options;
  if (const char* env = std::getenv("PJRT_NEURON_INSTANCE_TYPE"); env != nullptr && *env != '\0') {
    options.instance_type = env;
  }
  if (const char* env = std::getenv("PJRT_NEURON_ENGINE_LIBRARY"); env != nullptr && *env != '\0') {
    options.engine_library_path = env;
  }
  for (const engine::Attribute& option : create_options) {
    if (option.name == "instance_type" || option.name == "engine_library_path") {
      const std::string* value = StringValue(option);
      if (value == nullptr) return InvalidArgument("create option '" + option.name + "' must be a string");
      (option.name == "instance_type" ? options.instance_type : options.engine_library_path) = *value;
    } else if (option.name == "asynchronous") {
      if (!std::holds_alternative<bool>(option.value)) return InvalidArgument("create option 'asynchronous' must be a bool");
      options.engine_passthrough.push_back(option);
    } else if (option.name == "max_inflight_computations") {
      if (!std::holds_alternative<int64_t>(option.value)) {
        return InvalidArgument("create option 'max_inflight_computations' must be an integer");
      }
      options.engine_passthrough.push_back(option);
    } else {
      return InvalidArgument("unknown create option '" + option.name +
                             "'; known options: instance_type, engine_library_path, asynchronous, "
                             "max_inflight_computations");
    }
  }
  if (FindInstanceType(options.instance_type) == nullptr) {
    return InvalidArgument("unknown instance type '" + options.instance_type +
                           "' (PJRT_NEURON_INSTANCE_TYPE or create option instance_type); known: " +
                           KnownInstanceTypeNames());
  }
  return options;
}

Topology::Topology(const InstanceType& instance) : instance_(instance) {
  for (int chip = 0; chip < instance.chips; ++chip) {
    for (int core = 0; core < instance.cores_per_chip; ++core) {
      auto d = std::make_unique<DeviceDescription>();
      d->id = chip * instance.cores_per_chip + core;
      d->chip = chip;
      d->core_on_chip = core;
      d->kind = instance.core_generation;
      d->to_string = "NeuronCore(id=" + std::to_string(d->id) + ", chip=" + std::to_string(chip) +
                     ", core=" + std::to_string(core) + ")";
      d->debug_string = std::string(instance.core_generation) + " " + std::to_string(d->id) + " of " +
                        instance.name + " (chip " + std::to_string(chip) + ", core " + std::to_string(core) +
                        ", " + FormatBytes(instance.hbm_bytes_per_core) + " HBM, simulated)";
      d->attributes = {
          {"chip_index", int64_t{chip}},
          {"core_on_chip", int64_t{core}},
          {"hbm_bytes", instance.hbm_bytes_per_core},
          {"instance_type", std::string(instance.name)},
      };
      descriptions_.push_back(std::move(d));
    }
  }
  attributes_ = {
      {"instance_type", std::string(instance.name)},
      {"chips", int64_t{instance.chips}},
      {"cores_per_chip", int64_t{instance.cores_per_chip}},
      {"core_generation", std::string(instance.core_generation)},
  };
}

Memory::Memory(int id, std::string kind, int kind_id, Device* device)
    : id_(id), kind_(std::move(kind)), kind_id_(kind_id), device_(device) {
  to_string_ = "NeuronMemory(id=" + std::to_string(id_) + ", kind=" + kind_ + ", core=" +
               std::to_string(device->id()) + ")";
  debug_string_ = kind_ + " memory of NeuronCore " + std::to_string(device->id());
}

Device::Device(Client* client, const DeviceDescription* description, int core, int64_t hbm_bytes)
    : client_(client), description_(description), core_(core) {
  stats_.bytes_limit = hbm_bytes;
  memories_.push_back(std::make_unique<Memory>(description->id, "device", 0, this));
  for (const auto& m : memories_) memory_ptrs_.push_back(m.get());
}

MemoryStats Device::memory_stats() const {
  std::lock_guard<std::mutex> lock(stats_mutex_);
  return stats_;
}

void Device::Charge(int64_t bytes) {
  std::lock_guard<std::mutex> lock(stats_mutex_);
  stats_.bytes_in_use += bytes;
  stats_.num_allocs += 1;
  stats_.peak_bytes_in_use = std::max(stats_.peak_bytes_in_use, stats_.bytes_in_use);
  stats_.largest_alloc_size = std::max(stats_.largest_alloc_size, bytes);
}

void Device::Release(int64_t bytes) {
  std::lock_guard<std::mutex> lock(stats_mutex_);
  stats_.bytes_in_use -= bytes;
}

Buffer::Buffer(Device* device, std::unique_ptr<engine::Buffer> buffer)
    : device_(device), buffer_(std::move(buffer)) {
  auto size = buffer_->OnDeviceSizeInBytes();
  if (size.ok()) {
    charged_bytes_ = static_cast<int64_t>(size.value());
    device_->Charge(charged_bytes_);
  }
}

Buffer::~Buffer() { ReleaseCharge(); }

void Buffer::ReleaseCharge() {
  int64_t bytes = charged_bytes_.exchange(0);
  if (bytes != 0) device_->Release(bytes);
}

bool Buffer::IsDeleted() {
  if (!buffer_->IsDeleted()) return false;
  ReleaseCharge();
  return true;
}

void Buffer::Delete() {
  buffer_->Delete();
  ReleaseCharge();
}

Status Buffer::CheckUsable() const {
  if (buffer_->IsDeleted()) {
    return InvalidArgument("buffer on NeuronCore " + std::to_string(device_->id()) +
                           " has been deleted or donated");
  }
  return Status::Ok();
}

StatusOr<std::unique_ptr<Client>> Client::Create(const ClientOptions& options) {
  const InstanceType* instance = FindInstanceType(options.instance_type);
  if (instance == nullptr) return InvalidArgument("unknown instance type '" + options.instance_type + "'");
  std::unique_ptr<Client> client(new Client());
  client->topology_ = std::make_unique<Topology>(*instance);
  client->topology_->owned_by_client = true;
  const int num_cores = instance->chips * instance->cores_per_chip;

  engine::EngineOptions engine_options;
  engine_options.num_cores = num_cores;
  engine_options.library_path = options.engine_library_path;
  engine_options.passthrough = options.engine_passthrough;
  PN_ASSIGN_OR_RETURN(client->engine_, engine::CreateSimEngine(engine_options));

  for (int core = 0; core < num_cores; ++core) {
    const DeviceDescription* description = client->topology_->descriptions()[core].get();
    client->devices_.push_back(
        std::make_unique<Device>(client.get(), description, core, instance->hbm_bytes_per_core));
    client->device_ptrs_.push_back(client->devices_.back().get());
    for (Memory* m : client->devices_.back()->memories()) client->memory_ptrs_.push_back(m);
  }
  client->platform_version_ = std::string("pjrt-neuron ") + PluginVersion() + "; " + instance->name +
                              " (simulated NeuronCores); engine: " + client->engine_->description();
  return client;
}

Device* Client::LookupDevice(int id) const {
  for (Device* d : device_ptrs_) {
    if (d->id() == id) return d;
  }
  return nullptr;
}

Device* Client::LookupAddressableDevice(int local_hardware_id) const {
  for (Device* d : device_ptrs_) {
    if (d->local_hardware_id() == local_hardware_id) return d;
  }
  return nullptr;
}

Device* Client::DeviceForCore(int core) const {
  for (Device* d : device_ptrs_) {
    if (d->core() == core) return d;
  }
  return nullptr;
}

std::unique_ptr<Buffer> Client::Adopt(std::unique_ptr<engine::Buffer> buffer) {
  Device* device = DeviceForCore(buffer->core());
  if (device == nullptr) device = device_ptrs_.front();
  return std::make_unique<Buffer>(device, std::move(buffer));
}

StatusOr<std::unique_ptr<Buffer>> Client::BufferFromHost(Device* device, const engine::HostBufferSpec& spec,
                                                         std::unique_ptr<Event>* done_with_host_buffer) {
  PN_ASSIGN_OR_RETURN(engine::TransferResult transfer, engine_->BufferFromHost(device->core(), spec));
  if (done_with_host_buffer != nullptr) {
    *done_with_host_buffer = transfer.done_with_host_buffer ? std::make_unique<Event>(transfer.done_with_host_buffer)
                                                            : Event::Completed();
  }
  return std::make_unique<Buffer>(device, std::move(transfer.buffer));
}

StatusOr<std::unique_ptr<Buffer>> Client::CreateUninitializedBuffer(Device* device, PJRT_Buffer_Type type,
                                                                    const std::vector<int64_t>& dims) {
  PN_ASSIGN_OR_RETURN(auto buffer, engine_->CreateUninitializedBuffer(device->core(), type, dims));
  return std::make_unique<Buffer>(device, std::move(buffer));
}

StatusOr<std::unique_ptr<Buffer>> Client::CopyToDevice(Buffer& source, Device* destination) {
  PN_RETURN_IF_ERROR(source.CheckUsable());
  PN_ASSIGN_OR_RETURN(auto copy, source.engine_buffer().CopyToCore(destination->core()));
  return std::make_unique<Buffer>(destination, std::move(copy));
}

StatusOr<std::unique_ptr<LoadedExecutable>> Client::Compile(const engine::Program& program,
                                                            const std::string& options) {
  if (program.format != "hlo" && program.format != "hlo_with_config" && program.format != "mlir") {
    return InvalidArgument("unknown program format '" + program.format +
                           "'; expected 'hlo' (serialized HloModuleProto) or 'mlir' (StableHLO)");
  }
  if (program.code == nullptr || program.code_size == 0) return InvalidArgument("the program is empty");
  ReplicaLayout layout;
  PN_ASSIGN_OR_RETURN(std::string normalized, NormalizeCompileOptions(options, &layout));
  const size_t cores_needed = static_cast<size_t>(layout.num_replicas) * layout.num_partitions;
  if (cores_needed > devices_.size()) {
    return InvalidArgument("the program asks for " + std::to_string(layout.num_replicas) + " replicas x " +
                           std::to_string(layout.num_partitions) + " partitions = " + std::to_string(cores_needed) +
                           " NeuronCores, but " + topology_->instance().name + " has " +
                           std::to_string(devices_.size()));
  }
  auto compiled = engine_->Compile(program, normalized);
  if (!compiled.ok() && compiled.status().code() == ErrorCode::kUnknown) {
    // The engine reports unparsable programs as UNKNOWN; to the caller it is bad input.
    return InvalidArgument("the '" + program.format + "' program could not be compiled: " +
                           compiled.status().message());
  }
  PN_ASSIGN_OR_RETURN(auto executable, std::move(compiled));
  return Load(std::move(executable));
}

StatusOr<std::unique_ptr<LoadedExecutable>> Client::Deserialize(const std::string& bytes,
                                                                const std::string* overridden_options) {
  if (bytes.empty()) return InvalidArgument("the serialized executable is empty");
  std::string normalized;
  if (overridden_options != nullptr) {
    ReplicaLayout layout;
    PN_ASSIGN_OR_RETURN(normalized, NormalizeCompileOptions(*overridden_options, &layout));
  }
  PN_ASSIGN_OR_RETURN(auto executable, engine_->Deserialize(bytes, overridden_options ? &normalized : nullptr));
  return Load(std::move(executable));
}

StatusOr<std::unique_ptr<LoadedExecutable>> Client::Load(std::unique_ptr<engine::Executable> executable) {
  auto program = std::make_shared<CompiledProgram>();
  for (int core : executable->addressable_cores()) {
    Device* device = DeviceForCore(core);
    if (device == nullptr) return Internal("the engine placed a program on unknown core " + std::to_string(core));
    program->addressable_devices.push_back(device);
  }
  program->engine_executable = std::move(executable);
  return std::make_unique<LoadedExecutable>(this, std::move(program));
}

StatusOr<ExecuteResult> LoadedExecutable::Execute(const std::vector<std::vector<Buffer*>>& args,
                                                  const engine::ExecuteOptions& options, Device* only_device) {
  const auto& devices = addressable_devices();
  if (only_device == nullptr && args.size() != devices.size()) {
    return InvalidArgument("the program runs on " + std::to_string(devices.size()) + " NeuronCore(s) but " +
                           std::to_string(args.size()) + " argument lists were given");
  }
  if (only_device != nullptr && args.size() != 1) {
    return InvalidArgument("execute_device was given, so exactly one argument list is expected, got " +
                           std::to_string(args.size()));
  }
  std::vector<std::vector<engine::Buffer*>> engine_args(args.size());
  for (size_t d = 0; d < args.size(); ++d) {
    if (d > 0 && args[d].size() != args[0].size()) {
      return InvalidArgument("argument list " + std::to_string(d) + " has " + std::to_string(args[d].size()) +
                             " buffers, list 0 has " + std::to_string(args[0].size()));
    }
    Device* expected = only_device != nullptr ? only_device : devices[d];
    for (size_t i = 0; i < args[d].size(); ++i) {
      Buffer* b = args[d][i];
      if (b == nullptr || !b->valid()) return InvalidArgument("argument " + std::to_string(i) + " is not a live buffer");
      if (b->device()->client() != client_) {
        return InvalidArgument("argument " + std::to_string(i) + " belongs to another client");
      }
      Status usable = b->CheckUsable();
      if (!usable.ok()) return usable.WithContext("argument " + std::to_string(i));
      if (b->device() != expected) {
        return InvalidArgument("argument " + std::to_string(i) + " is on NeuronCore " +
                               std::to_string(b->device()->id()) + " but the program runs on NeuronCore " +
                               std::to_string(expected->id()) + "; copy it there first");
      }
      engine_args[d].push_back(&b->engine_buffer());
    }
  }
  PN_ASSIGN_OR_RETURN(engine::ExecuteResult run,
                      engine_executable().Execute(engine_args, options,
                                                  only_device != nullptr ? only_device->core() : -1));
  for (const auto& list : args) {
    for (Buffer* b : list) b->IsDeleted();  // donated inputs stop counting against HBM
  }
  ExecuteResult result;
  for (auto& outputs : run.outputs) {
    std::vector<std::unique_ptr<Buffer>> wrapped;
    for (auto& out : outputs) wrapped.push_back(client_->Adopt(std::move(out)));
    result.outputs.push_back(std::move(wrapped));
  }
  for (auto& event : run.completions) result.completions.push_back(std::make_unique<Event>(std::move(event)));
  return result;
}

}  // namespace pjrt_neuron::core
