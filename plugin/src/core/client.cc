#include <algorithm>
#include <chrono>
#include <ctime>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <utility>

#include "core/compat.h"
#include "core/collective_program.h"
#include "core/compile_cache.h"
#include "core/compile_options.h"
#include "core/precompile.h"
#include "core/core.h"
#include "engine/remote/remote.h"

namespace pjrt_neuron::core {

const char* PluginVersion() { return PJRT_NEURON_VERSION; }

namespace {

const std::string* StringValue(const engine::Attribute& a) { return std::get_if<std::string>(&a.value); }

std::string EnvOr(const char* name, const std::string& fallback) {
  const char* value = std::getenv(name);
  return value != nullptr && *value != '\0' ? value : fallback;
}

StatusOr<int> PositiveIntSetting(const std::string& name, const std::string& text) {
  char* end = nullptr;
  long value = std::strtol(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || value < 1 || value > 4096) {
    return InvalidArgument(name + "='" + text + "' is not a positive integer");
  }
  return static_cast<int>(value);
}

int ElementBits(PJRT_Buffer_Type type) {
  switch (type) {
    case PJRT_Buffer_Type_S2: case PJRT_Buffer_Type_U2: return 2;
    case PJRT_Buffer_Type_S4: case PJRT_Buffer_Type_U4: case PJRT_Buffer_Type_F4E2M1FN: return 4;
    case PJRT_Buffer_Type_S16: case PJRT_Buffer_Type_U16: case PJRT_Buffer_Type_F16: case PJRT_Buffer_Type_BF16:
      return 16;
    case PJRT_Buffer_Type_S32: case PJRT_Buffer_Type_U32: case PJRT_Buffer_Type_F32: return 32;
    case PJRT_Buffer_Type_S64: case PJRT_Buffer_Type_U64: case PJRT_Buffer_Type_F64: case PJRT_Buffer_Type_C64:
      return 64;
    case PJRT_Buffer_Type_C128: return 128;
    default: return 8;  // pred, 8-bit integers and every fp8 type
  }
}

}  // namespace

std::string FormatBytes(int64_t bytes) {
  char text[64];
  if (bytes > 0 && bytes % kGiB == 0) {
    std::snprintf(text, sizeof(text), "%lld GiB", static_cast<long long>(bytes / kGiB));
  } else if (bytes >= kGiB) {
    std::snprintf(text, sizeof(text), "%.2f GiB", static_cast<double>(bytes) / kGiB);
  } else if (bytes >= (1 << 20)) {
    std::snprintf(text, sizeof(text), "%.2f MiB", static_cast<double>(bytes) / (1 << 20));
  } else {
    std::snprintf(text, sizeof(text), "%lld bytes", static_cast<long long>(bytes));
  }
  return text;
}

int64_t DenseSizeInBytes(PJRT_Buffer_Type type, const std::vector<int64_t>& dims) {
  int64_t elements = 1;
  for (int64_t d : dims) elements *= d;
  return (elements * ElementBits(type) + 7) / 8;
}

StatusOr<ClientOptions> ResolveClientOptions(const engine::Attributes& create_options,
                                             const std::string& instance_type) {
  ClientOptions options;
  options.instance_type = EnvOr("PJRT_NEURON_INSTANCE_TYPE", options.instance_type);
  options.engine_library_path = EnvOr("PJRT_NEURON_ENGINE_LIBRARY", "");
  if (std::string visible = EnvOr("NEURON_RT_VISIBLE_CORES", ""); !visible.empty()) options.visible_cores = visible;
  if (std::string lnc = EnvOr("NEURON_LOGICAL_NC_CONFIG", ""); !lnc.empty()) {
    PN_ASSIGN_OR_RETURN(options.logical_nc_config, PositiveIntSetting("NEURON_LOGICAL_NC_CONFIG", lnc));
  }
  if (std::string num = EnvOr("NEURON_RT_NUM_CORES", ""); !num.empty()) {
    PN_ASSIGN_OR_RETURN(options.num_cores, PositiveIntSetting("NEURON_RT_NUM_CORES", num));
  }
  if (std::string index = EnvOr("NEURON_PJRT_PROCESS_INDEX", ""); !index.empty()) {
    if (index.size() > 6 || index.find_first_not_of("0123456789") != std::string::npos) {
      return InvalidArgument("NEURON_PJRT_PROCESS_INDEX='" + index + "' is not a process index");
    }
    options.process_index = std::atoi(index.c_str());
  }
  if (std::string counts = EnvOr("NEURON_PJRT_PROCESSES_NUM_DEVICES", ""); !counts.empty()) {
    std::stringstream parts(counts);
    std::string part;
    while (std::getline(parts, part, ',')) {
      PN_ASSIGN_OR_RETURN(int count, PositiveIntSetting("NEURON_PJRT_PROCESSES_NUM_DEVICES entry", part));
      options.processes_num_cores.push_back(count);
    }
    options.world_size = static_cast<int>(options.processes_num_cores.size());
  }
  if (std::string world = EnvOr("NEURON_PJRT_WORLD_SIZE", ""); !world.empty()) {
    PN_ASSIGN_OR_RETURN(options.world_size, PositiveIntSetting("NEURON_PJRT_WORLD_SIZE", world));
    options.processes_num_cores.clear();  // one core per process, as the Neuron runtime reads it
  }
  for (const engine::Attribute& option : create_options) {
    const std::string& name = option.name;
    if (name == "instance_type" || name == "engine_library_path" || name == "visible_cores") {
      const std::string* value = StringValue(option);
      if (value == nullptr) return InvalidArgument("create option '" + name + "' must be a string");
      if (name == "instance_type") options.instance_type = *value;
      if (name == "engine_library_path") options.engine_library_path = *value;
      if (name == "visible_cores") options.visible_cores = *value;
    } else if (name == "num_cores" || name == "logical_nc_config") {
      const int64_t* value = std::get_if<int64_t>(&option.value);
      if (value == nullptr || *value < 1) return InvalidArgument("create option '" + name + "' must be a positive integer");
      (name == "num_cores" ? options.num_cores : options.logical_nc_config) = static_cast<int>(*value);
    } else if (name == "node_id" || name == "num_nodes") {
      // jax.distributed's process id and count.
      const int64_t* value = std::get_if<int64_t>(&option.value);
      if (value == nullptr || *value < (name == "node_id" ? 0 : 1)) {
        return InvalidArgument("create option '" + name + "' must be a " +
                               (name == "node_id" ? "non-negative" : "positive") + " integer");
      }
      (name == "node_id" ? options.process_index : options.world_size) = static_cast<int>(*value);
      if (name == "num_nodes") options.processes_num_cores.clear();
    } else if (name == "asynchronous") {
      if (!std::holds_alternative<bool>(option.value)) return InvalidArgument("create option 'asynchronous' must be a bool");
      options.engine_passthrough.push_back(option);
    } else if (name == "max_inflight_computations") {
      if (!std::holds_alternative<int64_t>(option.value)) {
        return InvalidArgument("create option 'max_inflight_computations' must be an integer");
      }
      options.engine_passthrough.push_back(option);
    } else {
      return InvalidArgument("unknown create option '" + name +
                             "'; known options: instance_type, logical_nc_config, visible_cores, num_cores, "
                             "engine_library_path, node_id, num_nodes, asynchronous, max_inflight_computations");
    }
  }
  if (!instance_type.empty()) options.instance_type = instance_type;
  PN_RETURN_IF_ERROR(ShapeInstance(options.instance_type, options.logical_nc_config).status());
  if (options.process_index >= options.world_size) {
    return InvalidArgument("process index " + std::to_string(options.process_index) + " is not below the world size " +
                           std::to_string(options.world_size) +
                           " (NEURON_PJRT_PROCESS_INDEX, NEURON_PJRT_WORLD_SIZE / NEURON_PJRT_PROCESSES_NUM_DEVICES)");
  }
  return options;
}

Topology::Topology(const InstanceShape& shape) : shape_(shape) {
  const InstanceType& instance = *shape.type;
  for (int id = 0; id < shape.total_cores(); ++id) {
    auto d = std::make_unique<DeviceDescription>();
    d->id = id;
    d->chip = shape.chip_of(id);
    d->core_on_chip = id % shape.cores_per_chip;
    d->kind = instance.core_generation;
    d->to_string = "NeuronCore(id=" + std::to_string(id) + ", chip=" + std::to_string(d->chip) +
                   ", core=" + std::to_string(d->core_on_chip) + ")";
    d->debug_string = std::string(instance.core_generation) + " " + std::to_string(id) + " of " + instance.name +
                      " (chip " + std::to_string(d->chip) + ", core " + std::to_string(d->core_on_chip) + ", " +
                      FormatBytes(shape.hbm_bytes_per_core) + " HBM, simulated)";
    std::vector<int64_t> coords;
    for (int c : shape.chip_coordinates(d->chip)) coords.push_back(c);
    d->attributes = {
        {"chip_index", int64_t{d->chip}},
        {"core_on_chip", int64_t{d->core_on_chip}},
        {"chip_coords", coords},
        {"hbm_bytes", shape.hbm_bytes_per_core},
        {"instance_type", std::string(instance.name)},
        {"logical_nc_config", int64_t{shape.logical_nc_config}},
    };
    descriptions_.push_back(std::move(d));
  }
  attributes_ = {
      {"instance_type", std::string(instance.name)},
      {"chips", int64_t{instance.chips}},
      {"cores_per_chip", int64_t{shape.cores_per_chip}},
      {"logical_nc_config", int64_t{shape.logical_nc_config}},
      {"core_generation", std::string(instance.core_generation)},
      {"hbm_bytes_per_core", shape.hbm_bytes_per_core},
      {"chip_links", std::string(instance.links == ChipLinks::kTorus2D ? "2d-torus"
                                 : instance.links == ChipLinks::kRing ? "ring" : "none")},
  };
}

Memory::Memory(int id, std::string kind, int kind_id, Device* device)
    : id_(id), kind_(std::move(kind)), kind_id_(kind_id), device_(device) {
  to_string_ = "NeuronMemory(id=" + std::to_string(id_) + ", kind=" + kind_ + ", core=" +
               std::to_string(device->id()) + ")";
  debug_string_ = kind_ + " memory of NeuronCore " + std::to_string(device->id()) +
                  (is_hbm() ? " (HBM)" : " (host memory pinned for offload)");
}

Device::Device(Client* client, const DeviceDescription* description, int core, int64_t hbm_bytes)
    : client_(client), description_(description), core_(core) {
  stats_.bytes_limit = hbm_bytes;
  int kind_id = 0;
  for (const char* kind : engine::Engine::kMemoryKinds) {
    memories_.push_back(std::make_unique<Memory>(description->id * 2 + kind_id, kind, kind_id, this));
    ++kind_id;
  }
  for (const auto& m : memories_) memory_ptrs_.push_back(m.get());
}

Memory* Device::memory_of_kind(const std::string& kind) const {
  for (Memory* m : memory_ptrs_) {
    if (m->kind() == kind) return m;
  }
  return nullptr;
}

MemoryStats Device::memory_stats() const {
  std::lock_guard<std::mutex> lock(stats_mutex_);
  return stats_;
}

Status Device::FitsLocked(int64_t bytes, const std::string& purpose) const {
  if (stats_.bytes_in_use + bytes <= stats_.bytes_limit) return Status::Ok();
  return Status(ErrorCode::kResourceExhausted,
                "NeuronCore " + std::to_string(id()) + " is out of HBM: " + purpose + " needs " + FormatBytes(bytes) +
                    " but " + FormatBytes(stats_.bytes_in_use) + " of its " + FormatBytes(stats_.bytes_limit) +
                    " are in use by " + std::to_string(stats_.num_allocs) + " allocation(s) so far (largest " +
                    FormatBytes(stats_.largest_alloc_size) + ")");
}

Status Device::CheckFits(int64_t bytes, const std::string& purpose) const {
  std::lock_guard<std::mutex> lock(stats_mutex_);
  return FitsLocked(bytes, purpose);
}

Status Device::Charge(int64_t bytes, const std::string& purpose) {
  std::lock_guard<std::mutex> lock(stats_mutex_);
  PN_RETURN_IF_ERROR(FitsLocked(bytes, purpose));
  stats_.bytes_in_use += bytes;
  stats_.num_allocs += 1;
  stats_.peak_bytes_in_use = std::max(stats_.peak_bytes_in_use, stats_.bytes_in_use);
  stats_.largest_alloc_size = std::max(stats_.largest_alloc_size, bytes);
  return Status::Ok();
}

void Device::NotePeak(int64_t transient_bytes) {
  std::lock_guard<std::mutex> lock(stats_mutex_);
  stats_.peak_bytes_in_use = std::max(stats_.peak_bytes_in_use, stats_.bytes_in_use + transient_bytes);
}

void Device::Release(int64_t bytes) {
  std::lock_guard<std::mutex> lock(stats_mutex_);
  stats_.bytes_in_use -= bytes;
}

Buffer::Buffer(Device* device, std::unique_ptr<engine::Buffer> buffer, int64_t charged_bytes)
    : device_(device), buffer_(std::move(buffer)), charged_bytes_(charged_bytes) {
  memory_ = device_->memory_of_kind(buffer_->memory_kind());
  if (memory_ == nullptr) memory_ = device_->default_memory();
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
    return InvalidArgument("buffer on NeuronCore " + std::to_string(device_->id()) + " has been deleted or donated");
  }
  return Status::Ok();
}

namespace {

// Without NEURON_RT_VISIBLE_CORES, each process of a job takes its own share of the instance,
// in process order: the counts NEURON_PJRT_PROCESSES_NUM_DEVICES gives, or an equal split.
StatusOr<std::vector<int>> DefaultCoresOfProcess(const ClientOptions& options, int total_cores) {
  int first = 0;
  int count = 0;
  if (!options.processes_num_cores.empty()) {
    for (int p = 0; p < options.process_index; ++p) first += options.processes_num_cores[p];
    count = options.processes_num_cores[options.process_index];
  } else {
    count = std::max(1, total_cores / options.world_size);
    first = options.process_index * count;
  }
  if (first + count > total_cores) {
    return InvalidArgument("process " + std::to_string(options.process_index) + " of " +
                           std::to_string(options.world_size) + " would need NeuronCores " + std::to_string(first) +
                           "-" + std::to_string(first + count - 1) + " but the instance has " +
                           std::to_string(total_cores) + "; set NEURON_RT_VISIBLE_CORES per process");
  }
  std::vector<int> cores;
  for (int c = first; c < first + count; ++c) cores.push_back(c);
  return cores;
}

}  // namespace

StatusOr<std::unique_ptr<Client>> Client::Create(const ClientOptions& options) {
  PN_ASSIGN_OR_RETURN(InstanceShape shape, ShapeInstance(options.instance_type, options.logical_nc_config));
  std::unique_ptr<Client> client(new Client());
  client->topology_ = std::make_unique<Topology>(shape);
  client->topology_->owned_by_client = true;
  const std::string instance = shape.type->name;
  const bool multi_process = options.world_size > 1;

  if (options.visible_cores.has_value()) {
    PN_ASSIGN_OR_RETURN(std::vector<int> cores, ParseVisibleCores(*options.visible_cores, shape.total_cores()));
    if (options.num_cores != 0 && options.num_cores != static_cast<int>(cores.size())) {
      return InvalidArgument("NEURON_RT_NUM_CORES=" + std::to_string(options.num_cores) +
                             " disagrees with NEURON_RT_VISIBLE_CORES='" + *options.visible_cores + "' (" +
                             std::to_string(cores.size()) + " cores); set one of them");
    }
    PN_ASSIGN_OR_RETURN(client->lease_, CoreLease::Claim(instance, cores));
  } else if (options.num_cores != 0) {
    PN_ASSIGN_OR_RETURN(client->lease_, CoreLease::ClaimAny(instance, options.num_cores, shape.total_cores()));
  } else if (multi_process) {
    PN_ASSIGN_OR_RETURN(std::vector<int> cores, DefaultCoresOfProcess(options, shape.total_cores()));
    PN_ASSIGN_OR_RETURN(client->lease_, CoreLease::Claim(instance, cores));
  } else {
    std::vector<int> all(shape.total_cores());
    for (int i = 0; i < shape.total_cores(); ++i) all[i] = i;
    PN_ASSIGN_OR_RETURN(client->lease_, CoreLease::Claim(instance, all));
  }

  if (multi_process) {
    PN_RETURN_IF_ERROR(client->CreateMultiProcess(options, shape));
  } else {
    engine::EngineOptions engine_options;
    engine_options.num_cores = static_cast<int>(client->lease_->cores().size());
    engine_options.library_path = options.engine_library_path;
    engine_options.passthrough = options.engine_passthrough;
    PN_ASSIGN_OR_RETURN(client->engine_, engine::CreateSimEngine(engine_options));
    for (size_t position = 0; position < client->lease_->cores().size(); ++position) {
      client->AddDevice(shape, client->lease_->cores()[position], static_cast<int>(position), true);
    }
  }
  client->platform_version_ = std::string("pjrt-neuron ") + PluginVersion() + "; " + instance +
                              " (simulated NeuronCores); engine: " + client->engine_->description();
  return client;
}

void Client::AddDevice(const InstanceShape& shape, int physical_core, int engine_core, bool addressable) {
  const DeviceDescription* description = topology_->descriptions()[physical_core].get();
  devices_.push_back(std::make_unique<Device>(this, description, engine_core, shape.hbm_bytes_per_core));
  Device* device = devices_.back().get();
  device->set_addressable(addressable);
  device_ptrs_.push_back(device);
  if (!addressable) return;
  addressable_ptrs_.push_back(device);
  for (Memory* m : device->memories()) memory_ptrs_.push_back(m);
}

// Multi-process: the instance daemon owns every core's engine; this process lists the whole
// job's cores and uses its own. Engine cores are physical cores there.
Status Client::CreateMultiProcess(const ClientOptions& options, const InstanceShape& shape) {
  engine::remote::ConnectOptions connect;
  connect.lock_directory = LockDirectory(shape.type->name);
  connect.num_cores = shape.total_cores();
  connect.engine_library_path = options.engine_library_path;
  // A daemon of another plugin version may speak another protocol: it gets its own address.
  connect.instance_key = connect.lock_directory + "|" + std::to_string(shape.logical_nc_config) + "|" +
                         options.engine_library_path + "|" + PluginVersion();
  connect.process_index = options.process_index;
  connect.world_size = options.world_size;
  connect.cores = lease_->cores();
  if (const char* timeout = std::getenv("PJRT_NEURON_COLLECTIVE_TIMEOUT"); timeout != nullptr && *timeout != '\0') {
    char* end = nullptr;
    double seconds = std::strtod(timeout, &end);
    if (*end != '\0' || !(seconds > 0)) {
      return InvalidArgument(std::string("PJRT_NEURON_COLLECTIVE_TIMEOUT='") + timeout + "' is not a positive number of seconds");
    }
    connect.peer_timeout_seconds = seconds;
  }
  // Read by the daemon this process may start; a bad value there would stop it at once.
  if (const char* idle = std::getenv("PJRT_NEURON_DAEMON_IDLE_SECONDS"); idle != nullptr && *idle != '\0') {
    char* end = nullptr;
    double seconds = std::strtod(idle, &end);
    if (*end != '\0' || !(seconds >= 0)) {
      return InvalidArgument(std::string("PJRT_NEURON_DAEMON_IDLE_SECONDS='") + idle +
                             "' is not a non-negative number of seconds");
    }
  }
  std::vector<engine::remote::WorldMember> world;
  PN_ASSIGN_OR_RETURN(engine_, engine::remote::ConnectInstanceEngine(connect, &world));
  process_index_ = options.process_index;
  std::vector<std::pair<int, int>> core_owner;  // (physical core, process index)
  for (const auto& member : world) {
    for (int core : member.cores) core_owner.emplace_back(core, member.process_index);
  }
  std::sort(core_owner.begin(), core_owner.end());
  for (size_t i = 1; i < core_owner.size(); ++i) {
    if (core_owner[i].first == core_owner[i - 1].first) {
      return InvalidArgument("processes " + std::to_string(core_owner[i - 1].second) + " and " +
                             std::to_string(core_owner[i].second) + " both hold NeuronCore " +
                             std::to_string(core_owner[i].first));
    }
  }
  for (auto [core, owner] : core_owner) {
    topology_->descriptions()[core]->process_index = owner;
    AddDevice(shape, core, core, owner == process_index_);
  }
  return Status::Ok();
}

Device* Client::LookupDevice(int id) const {
  for (Device* d : device_ptrs_) {
    if (d->id() == id) return d;
  }
  return nullptr;
}

Device* Client::LookupAddressableDevice(int local_hardware_id) const {
  for (Device* d : addressable_ptrs_) {
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

namespace {

Status CheckAddressable(const Device& device) {
  if (device.addressable()) return Status::Ok();
  return InvalidArgument("NeuronCore " + std::to_string(device.id()) + " belongs to process " +
                         std::to_string(device.description().process_index) +
                         " of this job; only that process can place data on it");
}

}  // namespace

StatusOr<int64_t> Client::EngineIdOf(int64_t device_id) const {
  Device* device = LookupDevice(static_cast<int>(device_id));
  if (device == nullptr) {
    std::string ids;
    for (Device* d : device_ptrs_) ids += (ids.empty() ? "" : ", ") + std::to_string(d->id());
    return InvalidArgument("the program names device id " + std::to_string(device_id) +
                           ", which is not one of this process's NeuronCores (" + ids + ")");
  }
  return device->core();
}

StatusOr<int64_t> Client::DeviceIdOf(int64_t engine_core) const {
  Device* device = DeviceForCore(static_cast<int>(engine_core));
  if (device == nullptr) return Internal("the engine named unknown core " + std::to_string(engine_core));
  return device->id();
}

StatusOr<std::unique_ptr<Buffer>> Client::Adopt(std::unique_ptr<engine::Buffer> buffer) {
  Device* device = DeviceForCore(buffer->core());
  if (device == nullptr) return Internal("the engine produced a buffer on unknown core " + std::to_string(buffer->core()));
  int64_t charged = 0;
  if (buffer->memory_kind() == "device") {
    PN_ASSIGN_OR_RETURN(size_t size, buffer->OnDeviceSizeInBytes());
    charged = static_cast<int64_t>(size);
    PN_RETURN_IF_ERROR(device->Charge(charged, "an output buffer"));
  }
  return std::make_unique<Buffer>(device, std::move(buffer), charged);
}

StatusOr<std::unique_ptr<Buffer>> Client::BufferFromHost(Memory* memory, engine::HostBufferSpec spec,
                                                         std::unique_ptr<Event>* done_with_host_buffer) {
  Device* device = memory->device();
  PN_RETURN_IF_ERROR(CheckAddressable(*device));
  int64_t charged = 0;
  if (memory->is_hbm()) {
    // Check before allocating: the simulator's HBM is host RAM, too big a request must not touch it.
    charged = DenseSizeInBytes(spec.type, spec.dims);
    PN_RETURN_IF_ERROR(device->Charge(charged, "a host-to-device transfer"));
  }
  spec.memory_kind = memory->kind();
  auto transfer = engine_->BufferFromHost(device->core(), spec);
  if (!transfer.ok()) {
    device->Release(charged);
    return transfer.status();
  }
  if (done_with_host_buffer != nullptr) {
    *done_with_host_buffer = transfer->done_with_host_buffer ? std::make_unique<Event>(transfer->done_with_host_buffer)
                                                             : Event::Completed();
  }
  return std::make_unique<Buffer>(device, std::move(transfer->buffer), charged);
}

StatusOr<std::unique_ptr<Buffer>> Client::CreateUninitializedBuffer(Device* device, PJRT_Buffer_Type type,
                                                                    const std::vector<int64_t>& dims) {
  PN_RETURN_IF_ERROR(CheckAddressable(*device));
  int64_t charged = DenseSizeInBytes(type, dims);
  PN_RETURN_IF_ERROR(device->Charge(charged, "an uninitialized buffer"));
  auto buffer = engine_->CreateUninitializedBuffer(device->core(), type, dims);
  if (!buffer.ok()) {
    device->Release(charged);
    return buffer.status();
  }
  return std::make_unique<Buffer>(device, std::move(buffer.value()), charged);
}

StatusOr<std::unique_ptr<Buffer>> Client::CopyToMemory(Buffer& source, Memory* destination) {
  PN_RETURN_IF_ERROR(source.CheckUsable());
  Device* device = destination->device();
  PN_RETURN_IF_ERROR(CheckAddressable(*device));
  int64_t charged = 0;
  if (destination->is_hbm()) {
    charged = DenseSizeInBytes(source.engine_buffer().element_type(), source.engine_buffer().dims());
    PN_RETURN_IF_ERROR(device->Charge(charged, "a copy from " + source.memory()->to_string()));
  }
  auto copy = source.engine_buffer().CopyTo(device->core(), destination->kind());
  if (!copy.ok()) {
    device->Release(charged);
    return copy.status();
  }
  return std::make_unique<Buffer>(device, std::move(copy.value()), charged);
}

namespace {

// Checks the program and its options; returns the options with device ids mapped to the engine's.
StatusOr<std::string> PrepareCompile(const engine::Program& program, const std::string& options,
                                     const DeviceIdMap& to_engine_id, size_t cores_available, const std::string& where,
                                     const std::vector<int64_t>* default_engine_cores = nullptr) {
  if (program.format != "hlo" && program.format != "hlo_with_config" && program.format != "mlir") {
    return InvalidArgument("unknown program format '" + program.format +
                           "'; expected 'hlo' (serialized HloModuleProto) or 'mlir' (StableHLO)");
  }
  if (program.code == nullptr || program.code_size == 0) return InvalidArgument("the program is empty");
  ReplicaLayout layout;
  PN_ASSIGN_OR_RETURN(std::string normalized,
                      NormalizeCompileOptions(options, to_engine_id, &layout, default_engine_cores));
  const size_t cores_needed = static_cast<size_t>(layout.num_replicas) * layout.num_partitions;
  if (cores_needed > cores_available) {
    return InvalidArgument("the program asks for " + std::to_string(layout.num_replicas) + " replicas x " +
                           std::to_string(layout.num_partitions) + " partitions = " + std::to_string(cores_needed) +
                           " NeuronCores, but " + where + " has " + std::to_string(cores_available));
  }
  return normalized;
}

// Programs of several replicas in one partition get a channel id on each collective that lacks
// one (collective_program.h), so ranks whose torch-xla programs differ can meet. Every compile
// goes through here, in every mode, so an executable from the cache is always rewritten; with
// one partition the channel ids change nothing else.
engine::Program WithCollectiveChannels(const engine::Program& program, const std::string& normalized_options,
                                       std::string* storage) {
  ReplicaLayout layout;
  auto same_id = [](int64_t id) -> StatusOr<int64_t> { return id; };
  if (program.format != "hlo" || !NormalizeCompileOptions(normalized_options, same_id, &layout).ok() ||
      layout.num_replicas <= 1 || layout.num_partitions > 1) {
    return program;
  }
  *storage = core::WithCollectiveChannels(std::string(program.code, program.code_size));
  engine::Program rewritten = program;
  rewritten.code = storage->data();
  rewritten.code_size = storage->size();
  return rewritten;
}

StatusOr<std::unique_ptr<engine::Executable>> TimedCompile(engine::Engine& engine, const engine::Program& program,
                                                           const std::string& normalized_options) {
  std::string rewritten_code;
  const engine::Program to_compile = WithCollectiveChannels(program, normalized_options, &rewritten_code);
  auto start = std::chrono::steady_clock::now();
  auto compiled = engine.Compile(to_compile, normalized_options);
  std::chrono::duration<double> elapsed = std::chrono::steady_clock::now() - start;
  CountMetrics([&](CacheMetrics& m) {
    m.compiles += 1;
    m.compile_seconds += elapsed.count();
  });
  if (!compiled.ok() && compiled.status().code() == ErrorCode::kUnknown) {
    // The engine reports unparsable programs as UNKNOWN; to the caller it is bad input.
    return InvalidArgument("the '" + program.format + "' program could not be compiled: " +
                           compiled.status().message());
  }
  return compiled;
}

std::string EntryHeader(const std::string& program_name, const std::string& format, const std::string& engine) {
  return "{\"program\": \"" + program_name + "\", \"format\": \"" + format + "\", \"created\": " +
         std::to_string(std::time(nullptr)) + ", \"engine\": \"" + engine + "\", \"plugin\": \"" +
         PluginVersion() + "\"}";
}

constexpr char kTopologyMagic[] = "pjrt-neuron-topology/1";

}  // namespace

// What Trainium would reject in the program: torch-xla's HLO as sent, JAX's as compiled.
Status CheckTrainiumCompatibility(const engine::Program& program, engine::Executable& executable) {
  PN_ASSIGN_OR_RETURN(CompatSettings settings, ReadCompatSettings());
  if (settings.mode == CompatMode::kOff) return Status::Ok();
  StatusOr<std::vector<CompatFinding>> findings = Status::Ok();
  if (program.format == "mlir") {
    auto optimized = executable.OptimizedProgram();
    if (!optimized.ok()) return Status::Ok();  // nothing to analyse; the program itself is fine
    findings = AnalyzeHloModule(optimized->code, optimized->format == "hlo_with_config", /*from_jax=*/true);
  } else {
    findings = AnalyzeHloModule(std::string(program.code, program.code_size), program.format == "hlo_with_config",
                                /*from_jax=*/false);
  }
  if (!findings.ok()) return Status::Ok();  // an unreadable module compiled anyway: nothing to say
  return ReportCompatFindings(settings, executable.name(), findings.value());
}

std::optional<std::unique_ptr<engine::Executable>> Client::LoadCached(CompileCache& cache, const std::string& key) {
  std::optional<std::string> payload = cache.Load(key);
  if (!payload.has_value()) return std::nullopt;
  auto executable = engine_->Deserialize(*payload, nullptr);
  if (!executable.ok()) {
    // Written by another engine version: not ours to use.
    cache.Remove(key);
    return std::nullopt;
  }
  CountMetrics([](CacheMetrics& m) { m.hits += 1; });
  return std::move(executable.value());
}

StatusOr<std::unique_ptr<engine::Executable>> Client::CompileThroughCache(CompileCache& cache, const std::string& key,
                                                                          const engine::Program& program,
                                                                          const std::string& normalized) {
  auto remembered = [&]() -> std::optional<Status> {
    std::optional<Status> failure = cache.RememberedFailure(key);
    if (failure.has_value()) CountMetrics([](CacheMetrics& m) { m.failures_remembered += 1; });
    return failure;
  };
  if (auto hit = LoadCached(cache, key)) return std::move(*hit);
  if (auto failure = remembered()) return *failure;
  // One process compiles; the others wait here, then find its result.
  PN_ASSIGN_OR_RETURN(CompileCache::KeyLock lock, cache.Lock(key));
  if (auto hit = LoadCached(cache, key)) return std::move(*hit);
  if (auto failure = remembered()) return *failure;
  CountMetrics([](CacheMetrics& m) { m.misses += 1; });
  auto compiled = TimedCompile(*engine_, program, normalized);
  if (!compiled.ok()) {
    if (compiled.status().code() == ErrorCode::kInvalidArgument) cache.RememberFailure(key, compiled.status());
    return compiled.status();
  }
  auto bytes = compiled.value()->Serialize();
  if (bytes.ok()) cache.Store(key, EntryHeader(compiled.value()->name(), program.format, engine_->description()), *bytes);
  cache.ForgetFailure(key);
  return compiled;
}

StatusOr<std::unique_ptr<LoadedExecutable>> Client::Compile(const engine::Program& program,
                                                            const std::string& options) {
  // In a multi-process job, a program placed nowhere runs on this process's cores when they
  // suffice, else on the job's, never on cores of the instance that the job does not hold.
  const bool multi_process = addressable_ptrs_.size() != device_ptrs_.size();
  std::vector<int64_t> default_cores;
  for (Device* d : addressable_ptrs_) default_cores.push_back(d->core());
  ReplicaLayout requested;
  if (multi_process && NormalizeCompileOptions(options, [](int64_t id) -> StatusOr<int64_t> { return id; }, &requested).ok() &&
      static_cast<size_t>(requested.num_replicas) * requested.num_partitions > default_cores.size()) {
    default_cores.clear();
    for (Device* d : device_ptrs_) default_cores.push_back(d->core());
  }
  PN_ASSIGN_OR_RETURN(std::string normalized,
                      PrepareCompile(program, options, [this](int64_t id) { return EngineIdOf(id); }, devices_.size(),
                                     std::string(multi_process ? "this job (" : "this process (") +
                                         topology_->instance().name + ")",
                                     multi_process ? &default_cores : nullptr));
  PN_ASSIGN_OR_RETURN(CacheSettings cache_settings, ReadCacheSettings());
  const std::string collection = GraphCollectionDirectory();
  std::unique_ptr<engine::Executable> executable;
  if (!collection.empty()) {
    // Precompile's first pass: record the program; the workers compile it into the cache.
    // Recorded with engine-numbered devices, as the client's cache key has them.
    RecordProgram(collection, *topology_, program, normalized);
    PN_ASSIGN_OR_RETURN(executable, TimedCompile(*engine_, program, normalized));
  } else if (cache_settings.enabled) {
    CompileCache cache(cache_settings);
    const std::string key = CompileCacheKey(engine_->description(), *topology_, program, normalized);
    PN_ASSIGN_OR_RETURN(executable, CompileThroughCache(cache, key, program, normalized));
  } else {
    PN_ASSIGN_OR_RETURN(executable, TimedCompile(*engine_, program, normalized));
  }
  PN_RETURN_IF_ERROR(CheckTrainiumCompatibility(program, *executable));
  PN_ASSIGN_OR_RETURN(auto loaded, Load(std::move(executable)));
  loaded->set_record_only(!collection.empty());
  return loaded;
}

namespace {

// An engine with one core per core of the topology, and options whose device ids are the topology's.
struct TopologyCompile {
  std::unique_ptr<engine::Engine> engine;
  std::string normalized_options;
};

StatusOr<TopologyCompile> PrepareTopologyCompile(const Topology& topology, const engine::Program& program,
                                                 const std::string& options, const std::string& engine_library_path) {
  const int64_t total = topology.shape().total_cores();
  auto same_ids = [total](int64_t id) -> StatusOr<int64_t> {
    if (id < 0 || id >= total) return InvalidArgument("the program names device id " + std::to_string(id) +
                                                      ", which the topology does not have");
    return id;
  };
  TopologyCompile prepared;
  PN_ASSIGN_OR_RETURN(prepared.normalized_options,
                      PrepareCompile(program, options, same_ids, total, std::string(topology.instance().name)));
  engine::EngineOptions engine_options;
  engine_options.num_cores = static_cast<int>(total);
  engine_options.library_path = engine_library_path;
  PN_ASSIGN_OR_RETURN(prepared.engine, engine::CreateSimEngine(engine_options));
  return prepared;
}

}  // namespace

StatusOr<std::shared_ptr<CompiledProgram>> CompileForTopology(const Topology& topology, const engine::Program& program,
                                                              const std::string& options,
                                                              const std::string& engine_library_path) {
  PN_ASSIGN_OR_RETURN(TopologyCompile prepared, PrepareTopologyCompile(topology, program, options, engine_library_path));
  std::unique_ptr<engine::Engine>& engine = prepared.engine;
  const std::string& normalized = prepared.normalized_options;
  PN_ASSIGN_OR_RETURN(auto executable, TimedCompile(*engine, program, normalized));
  auto compiled = std::make_shared<CompiledProgram>();
  compiled->engine_executable = std::move(executable);
  compiled->engine = std::move(engine);  // declared first, so destroyed after the executable
  return compiled;
}

StatusOr<bool> CompileForTopologyCached(const Topology& topology, const engine::Program& program,
                                        const std::string& options, const std::string& engine_library_path,
                                        const CacheSettings& cache_settings) {
  PN_ASSIGN_OR_RETURN(TopologyCompile prepared, PrepareTopologyCompile(topology, program, options, engine_library_path));
  std::unique_ptr<engine::Engine>& engine = prepared.engine;
  const std::string& normalized = prepared.normalized_options;
  CompileCache cache(cache_settings);
  const std::string key = CompileCacheKey(engine->description(), topology, program, normalized);
  if (cache.Load(key).has_value()) return false;
  PN_ASSIGN_OR_RETURN(CompileCache::KeyLock lock, cache.Lock(key));
  if (cache.Load(key).has_value()) return false;
  if (auto failure = cache.RememberedFailure(key)) return *failure;
  auto compiled = TimedCompile(*engine, program, normalized);
  if (!compiled.ok()) {
    if (compiled.status().code() == ErrorCode::kInvalidArgument) cache.RememberFailure(key, compiled.status());
    return compiled.status();
  }
  PN_ASSIGN_OR_RETURN(std::string bytes, compiled.value()->Serialize());
  cache.Store(key, EntryHeader(compiled.value()->name(), program.format, engine->description()), bytes);
  cache.ForgetFailure(key);
  return true;
}

std::string SerializeTopology(const Topology& topology) {
  return std::string(kTopologyMagic) + " " + topology.instance().name + " " +
         std::to_string(topology.shape().logical_nc_config);
}

StatusOr<std::unique_ptr<Topology>> DeserializeTopology(const std::string& bytes) {
  char name[64] = {0};
  int lnc = 0;
  const std::string prefix = std::string(kTopologyMagic) + " ";
  if (bytes.compare(0, prefix.size(), prefix) != 0 ||
      std::sscanf(bytes.c_str() + prefix.size(), "%63s %d", name, &lnc) != 2) {
    return InvalidArgument("the bytes are not a pjrt-neuron topology (made by PJRT_TopologyDescription_Serialize)");
  }
  PN_ASSIGN_OR_RETURN(InstanceShape shape, ShapeInstance(name, lnc));
  return std::make_unique<Topology>(shape);
}

StatusOr<std::unique_ptr<LoadedExecutable>> Client::Deserialize(const std::string& bytes,
                                                                const std::string* overridden_options) {
  if (bytes.empty()) return InvalidArgument("the serialized executable is empty");
  std::string normalized;
  if (overridden_options != nullptr) {
    ReplicaLayout layout;
    PN_ASSIGN_OR_RETURN(normalized, NormalizeCompileOptions(
                                        *overridden_options, [this](int64_t id) { return EngineIdOf(id); }, &layout));
  }
  auto executable = engine_->Deserialize(bytes, overridden_options ? &normalized : nullptr);
  if (!executable.ok() &&
      (executable.status().code() == ErrorCode::kUnknown || executable.status().code() == ErrorCode::kInternal)) {
    return InvalidArgument("the serialized executable could not be loaded: " + executable.status().message());
  }
  PN_RETURN_IF_ERROR(executable.status());
  return Load(std::move(executable.value()));
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

// Graph collection: outputs of the right shapes, never computed.
StatusOr<ExecuteResult> LoadedExecutable::RecordOnlyResult(const std::vector<std::vector<Buffer*>>& args,
                                                           Device* only_device) {
  ExecuteResult result;
  for (size_t d = 0; d < args.size(); ++d) {
    Device* device = only_device != nullptr ? only_device : addressable_devices().at(d);
    std::vector<std::unique_ptr<Buffer>> outputs;
    for (const engine::OutputShape& shape : engine_executable().outputs()) {
      PN_ASSIGN_OR_RETURN(auto buffer, client_->CreateUninitializedBuffer(device, shape.type, shape.dims));
      outputs.push_back(std::move(buffer));
    }
    result.outputs.push_back(std::move(outputs));
    result.completions.push_back(Event::Completed());
  }
  return result;
}

void LoadedExecutable::Delete() {
  deleted_ = true;
  engine_executable().Delete();
}

StatusOr<ExecuteResult> LoadedExecutable::Execute(const std::vector<std::vector<Buffer*>>& args,
                                                  const engine::ExecuteOptions& options, Device* only_device) {
  if (deleted_) return FailedPrecondition("the executable has been deleted (PJRT_LoadedExecutable_Delete)");
  if (record_only_) return RecordOnlyResult(args, only_device);
  const auto& devices = addressable_devices();
  if (only_device == nullptr && args.size() != devices.size()) {
    return InvalidArgument("the program runs on " + std::to_string(devices.size()) + " NeuronCore(s) but " +
                           std::to_string(args.size()) + " argument lists were given");
  }
  if (only_device != nullptr && args.size() != 1) {
    return InvalidArgument("execute_device was given, so exactly one argument list is expected, got " +
                           std::to_string(args.size()));
  }
  std::vector<Device*> targets;
  std::vector<std::vector<engine::Buffer*>> engine_args(args.size());
  for (size_t d = 0; d < args.size(); ++d) {
    if (d > 0 && args[d].size() != args[0].size()) {
      return InvalidArgument("argument list " + std::to_string(d) + " has " + std::to_string(args[d].size()) +
                             " buffers, list 0 has " + std::to_string(args[0].size()));
    }
    Device* expected = only_device != nullptr ? only_device : devices[d];
    targets.push_back(expected);
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
  // Outputs and temporaries must fit in each core's HBM before anything runs.
  auto stats = engine_executable().MemoryStats();
  int64_t transient = 0;
  if (stats.ok()) {
    transient = stats->temp_size_in_bytes + stats->output_size_in_bytes - stats->alias_size_in_bytes;
    for (Device* target : targets) {
      PN_RETURN_IF_ERROR(target->CheckFits(transient, "running '" + engine_executable().name() + "' (" +
                                                          FormatBytes(stats->output_size_in_bytes) + " of outputs, " +
                                                          FormatBytes(stats->temp_size_in_bytes) + " of temporaries)"));
    }
  }
  PN_ASSIGN_OR_RETURN(engine::ExecuteResult run,
                      engine_executable().Execute(engine_args, options,
                                                  only_device != nullptr ? only_device->core() : -1));
  for (Device* target : targets) target->NotePeak(transient);
  if (!stats.ok() || stats->alias_size_in_bytes > 0) {
    for (const auto& list : args) {
      for (Buffer* b : list) b->IsDeleted();  // donated inputs stop counting against HBM
    }
  }
  ExecuteResult result;
  for (auto& outputs : run.outputs) {
    std::vector<std::unique_ptr<Buffer>> wrapped;
    for (auto& out : outputs) {
      PN_ASSIGN_OR_RETURN(auto buffer, client_->Adopt(std::move(out)));
      wrapped.push_back(std::move(buffer));
    }
    result.outputs.push_back(std::move(wrapped));
  }
  for (auto& event : run.completions) result.completions.push_back(std::make_unique<Event>(std::move(event)));
  return result;
}

}  // namespace pjrt_neuron::core
