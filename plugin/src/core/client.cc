// The client: claims the cores, builds the engine and devices, creates buffers, compiles and loads.
#include "core/client.h"

#include <algorithm>
#include <cstdlib>
#include <utility>

#include "common/version.h"
#include "core/compile_pipeline.h"
#include "core/estimate_report.h"
#include "core/precompile.h"
#include "core/sizes.h"
#include "engine/factory.h"
#include "hlo/compile_options.h"

namespace pjrt_neuron::core {

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
  client->collective_timeout_seconds_ = options.peer_timeout_seconds;
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

  PN_RETURN_IF_ERROR(client->CreateEngine(options, shape));
  const char* cores = client->engine_->simulated() ? " (simulated NeuronCores)" : " (the Neuron runtime's NeuronCores)";
  client->platform_version_ = std::string("pjrt-neuron ") + PluginVersion() + "; " + instance + cores +
                              "; engine: " + client->engine_->description();
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

// In one process the engine drives the claimed cores, numbered from 0. In a multi-process job
// the instance daemon owns every core's engine; this process lists the whole job's cores and
// uses its own, and engine cores are physical cores there.
Status Client::CreateEngine(const ClientOptions& options, const InstanceShape& shape) {
  engine::EngineRequest request;
  request.options.num_cores = static_cast<int>(lease_->cores().size());
  request.options.library_path = options.engine_library_path;
  request.options.passthrough = options.engine_passthrough;
  if (options.world_size <= 1) {
    PN_ASSIGN_OR_RETURN(engine_, engine::CreateEngine(request, nullptr));
    for (size_t position = 0; position < lease_->cores().size(); ++position) {
      AddDevice(shape, lease_->cores()[position], static_cast<int>(position), true);
    }
    return Status::Ok();
  }
  auto choice = engine::ReadEngineChoice();
  if (choice.ok() && engine::ResolveEngineChoice(choice.value()) == engine::EngineChoice::kNeuron) {
    return CreateNeuronJobEngine(options, shape);
  }
  engine::JobPlacement job;
  job.lock_directory = LockDirectory(shape.type->name);
  job.logical_nc_config = shape.logical_nc_config;
  job.instance_cores = shape.total_cores();
  job.process_index = options.process_index;
  job.world_size = options.world_size;
  job.cores = lease_->cores();
  job.peer_timeout_seconds = options.peer_timeout_seconds;
  request.job = job;
  std::vector<engine::JobMember> world;
  PN_ASSIGN_OR_RETURN(engine_, engine::CreateEngine(request, &world));
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

// On the Neuron runtime each process of a job drives the cores it holds on its host (its lease)
// through a runtime session of its own. The job's devices are numbered in process order, as
// AWS's plugin numbers them, so a job may span hosts: one instance's cores follow another's.
Status Client::CreateNeuronJobEngine(const ClientOptions& options, const InstanceShape& shape) {
  const int held = static_cast<int>(lease_->cores().size());
  const int me = options.process_index;
  std::vector<int> counts;
  for (int p = 0; p < options.world_size; ++p) {
    // Without NEURON_PJRT_PROCESSES_NUM_DEVICES every process holds as many cores as this one.
    counts.push_back(options.processes_num_cores.empty() ? held : options.processes_num_cores[p]);
  }
  if (counts[me] != held) {
    return InvalidArgument("NEURON_PJRT_PROCESSES_NUM_DEVICES gives process " + std::to_string(me) + " " +
                           std::to_string(counts[me]) + " NeuronCore(s), but it holds " + std::to_string(held) +
                           " (NEURON_RT_VISIBLE_CORES)");
  }
  engine::JobPlacement job;
  job.logical_nc_config = shape.logical_nc_config;
  job.instance_cores = shape.total_cores();
  job.process_index = me;
  job.world_size = options.world_size;
  job.physical_cores = lease_->cores();
  job.peer_timeout_seconds = options.peer_timeout_seconds;
  job.kv_store = options.kv_store;
  int next = 0;
  for (int p = 0; p < options.world_size; ++p) {
    std::vector<int> positions;
    for (int i = 0; i < counts[p]; ++i) positions.push_back(next++);
    if (p == me) job.cores = positions;
    job.process_cores.push_back(std::move(positions));
  }
  const int instances = (next + shape.total_cores() - 1) / shape.total_cores();
  topology_ = std::make_unique<Topology>(shape, instances);
  topology_->owned_by_client = true;
  engine::EngineRequest request;
  request.options.num_cores = held;
  request.options.library_path = options.engine_library_path;
  request.options.passthrough = options.engine_passthrough;
  request.job = job;
  PN_ASSIGN_OR_RETURN(engine_, engine::CreateEngine(request, nullptr));
  process_index_ = me;
  for (int p = 0; p < options.world_size; ++p) {
    for (int position : job.process_cores[p]) {
      topology_->descriptions()[position]->process_index = p;
      AddDevice(shape, position, position, p == me);
    }
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

Status Client::AdoptOutputs(engine::OutputList<std::unique_ptr<engine::Buffer>>& outputs,
                            engine::OutputList<std::unique_ptr<Buffer>>* adopted) {
  struct Placement {
    Device* device;
    Memory* memory;
    int64_t bytes;  // charged to HBM
  };
  InlineVector<Placement, 8> placements;
  placements.reserve(outputs.size());
  for (auto& out : outputs) {
    Device* device = DeviceForCore(out->core());
    if (device == nullptr) return Internal("the engine produced a buffer on unknown core " + std::to_string(out->core()));
    Memory* memory = device->memory_of_kind(out->memory_kind());
    int64_t bytes = 0;
    if (memory != nullptr && memory->is_hbm()) {
      PN_ASSIGN_OR_RETURN(size_t size, out->OnDeviceSizeInBytes());
      bytes = static_cast<int64_t>(size);
    }
    placements.push_back(Placement{device, memory, bytes});
  }
  // One charge per core for all its outputs, so an execution takes each core's lock once.
  InlineVector<std::pair<Device*, int64_t>, 2> charged;  // undone if a later core is full
  for (size_t first = 0; first < placements.size(); ++first) {
    Device* device = placements[first].device;
    bool seen = false;
    for (const auto& done : charged) seen = seen || done.first == device;
    if (seen) continue;
    int64_t total = 0, largest = 0, count = 0;
    for (size_t i = first; i < placements.size(); ++i) {
      if (placements[i].device != device || placements[i].bytes == 0) continue;
      total += placements[i].bytes;
      largest = std::max(largest, placements[i].bytes);
      ++count;
    }
    Status fits = device->ChargeMany(total, count, largest, "the execution's output buffers");
    if (!fits.ok()) {
      for (const auto& done : charged) done.first->Release(done.second);
      return fits;
    }
    charged.emplace_back(device, total);
  }
  adopted->reserve(outputs.size());
  for (size_t i = 0; i < outputs.size(); ++i) {
    const Placement& p = placements[i];
    adopted->push_back(std::make_unique<Buffer>(p.device, std::move(outputs[i]), p.bytes, p.memory));
  }
  return Status::Ok();
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

StatusOr<std::unique_ptr<TransferManager>> Client::CreateTransferManager(
    Memory* memory, const std::vector<engine::ShapeSpec>& shapes) {
  Device* device = memory->device();
  PN_RETURN_IF_ERROR(CheckAddressable(*device));
  std::vector<int64_t> charges;
  int64_t total = 0;
  for (const engine::ShapeSpec& shape : shapes) {
    for (int64_t d : shape.dims) {
      if (d < 0) return InvalidArgument("shape dimensions must not be negative");
    }
    charges.push_back(memory->is_hbm() ? DenseSizeInBytes(shape.type, shape.dims) : 0);
    total += charges.back();
  }
  PN_RETURN_IF_ERROR(device->Charge(total, "a transfer manager's " + std::to_string(shapes.size()) + " buffer(s)"));
  auto engine_manager = engine_->CreateTransferManager(device->core(), shapes, memory->kind());
  if (!engine_manager.ok()) {
    device->Release(total);
    return engine_manager.status();
  }
  return std::make_unique<TransferManager>(this, memory, std::move(engine_manager.value()), std::move(charges));
}

StatusOr<std::pair<std::unique_ptr<Buffer>, void*>> Client::CreateAliasBuffer(Memory* memory, PJRT_Buffer_Type type,
                                                                                const std::vector<int64_t>& dims) {
  Device* device = memory->device();
  PN_RETURN_IF_ERROR(CheckAddressable(*device));
  PN_ASSIGN_OR_RETURN(engine::Engine::AliasBuffer alias,
                      engine_->CreateAliasBuffer(device->core(), memory->kind(), type, dims));
  {
    std::lock_guard<std::mutex> lock(alias_mutex_);
    unfulfilled_aliases_.insert(alias.fulfill);
  }
  return std::make_pair(std::make_unique<Buffer>(device, std::move(alias.buffer), 0), alias.fulfill);
}

Status Client::FulfillAliasBuffer(void* fulfill, Buffer* target, ErrorCode code, const std::string& message) {
  if (target != nullptr && target->device()->client() != this) return InvalidArgument("`buffer` belongs to another client");
  {
    std::lock_guard<std::mutex> lock(alias_mutex_);
    if (unfulfilled_aliases_.erase(fulfill) == 0) {
      return InvalidArgument("fulfill_alias_buffer_cb was not handed out by this client's "
                             "PJRT_Client_CreateAliasBuffer, or was used already");
    }
  }
  if (target != nullptr) PN_RETURN_IF_ERROR(target->CheckUsableSeen());
  return engine_->FulfillAliasBuffer(fulfill, target != nullptr ? &target->engine_buffer() : nullptr, code, message);
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


StatusOr<std::unique_ptr<LoadedExecutable>> Client::Deserialize(const std::string& serialized,
                                                                const std::string* overridden_options) {
  const std::string magic = kSerializedExecutableMagic;
  if (serialized.compare(0, magic.size(), magic) != 0) {
    return InvalidArgument("the bytes are not a pjrt-neuron executable (made by PJRT_Executable_Serialize of this plugin)");
  }
  const std::string bytes = serialized.substr(magic.size());
  if (bytes.empty()) return InvalidArgument("the serialized executable is empty");
  std::string normalized;
  if (overridden_options != nullptr) {
    hlo::ReplicaLayout layout;
    PN_ASSIGN_OR_RETURN(normalized, hlo::NormalizeCompileOptions(
                                        *overridden_options, [this](int64_t id) { return EngineIdOf(id); }, &layout));
  }
  auto load = [&]() -> StatusOr<std::unique_ptr<engine::Executable>> {
    PN_RETURN_IF_ERROR(engine_->CheckDeserializable(bytes, overridden_options ? &normalized : nullptr));
    return engine_->Deserialize(bytes, overridden_options ? &normalized : nullptr);
  };
  auto executable = load();
  if (!executable.ok() &&
      (executable.status().code() == ErrorCode::kUnknown || executable.status().code() == ErrorCode::kInternal)) {
    return InvalidArgument("the serialized executable could not be loaded: " + executable.status().message());
  }
  PN_RETURN_IF_ERROR(executable.status());
  return Load(std::move(executable.value()));
}

StatusOr<std::unique_ptr<LoadedExecutable>> Client::Load(std::unique_ptr<engine::Executable> executable) {
  std::vector<Device*> devices;
  for (int core : executable->addressable_cores()) {
    Device* device = DeviceForCore(core);
    if (device == nullptr) return Internal("the engine placed a program on unknown core " + std::to_string(core));
    devices.push_back(device);
  }
  auto program = std::make_shared<CompiledProgram>(std::move(executable), std::move(devices));
  return std::make_unique<LoadedExecutable>(this, std::move(program));
}


StatusOr<std::unique_ptr<LoadedExecutable>> Client::Compile(const engine::Program& program,
                                                            const std::string& options) {
  // In a multi-process job, a program placed nowhere runs on this process's cores when they
  // suffice, else on the job's, never on cores of the instance that the job does not hold.
  const bool multi_process = addressable_ptrs_.size() != device_ptrs_.size();
  std::vector<int64_t> default_cores;
  for (Device* d : addressable_ptrs_) default_cores.push_back(d->core());
  hlo::ReplicaLayout requested;
  auto same_ids = [](int64_t id) -> StatusOr<int64_t> { return id; };
  if (multi_process && hlo::NormalizeCompileOptions(options, same_ids, &requested).ok() &&
      static_cast<size_t>(requested.num_replicas) * requested.num_partitions > default_cores.size()) {
    default_cores.clear();
    for (Device* d : device_ptrs_) default_cores.push_back(d->core());
  }
  CompileTarget target;
  target.engine = engine_.get();
  target.topology = topology_.get();
  target.to_engine_id = [this](int64_t id) { return EngineIdOf(id); };
  target.cores_available = devices_.size();
  target.where = std::string(multi_process ? "this job (" : "this process (") + topology_->instance().name + ")";
  target.default_engine_cores = multi_process ? &default_cores : nullptr;
  PN_ASSIGN_OR_RETURN(std::string normalized, NormalizeForCompile(target, program, options));
  PN_ASSIGN_OR_RETURN(CacheSettings cache_settings, ReadCacheSettings());
  const std::string collection = GraphCollectionDirectory();
  if (!collection.empty()) {
    // Precompile's first pass: record the program; the workers compile it into the cache.
    // Recorded with engine-numbered devices, as the client's cache key has them.
    RecordProgram(collection, *topology_, program, normalized);
  }
  const CacheUse cache_use = collection.empty() && cache_settings.enabled ? CacheUse::kLoadOrCompile : CacheUse::kNone;
  PN_ASSIGN_OR_RETURN(CompileOutcome outcome, CompileNormalized(target, program, normalized, cache_use, cache_settings));
  PN_RETURN_IF_ERROR(CheckTrainiumCompatibility(program, *outcome.executable, engine().description()));
  const std::string estimate_id = ReportProgramCost(program, *outcome.executable, *topology_);
  PN_ASSIGN_OR_RETURN(auto loaded, Load(std::move(outcome.executable)));
  loaded->set_record_only(!collection.empty());
  loaded->set_estimate_id(estimate_id);
  return loaded;
}

StatusOr<std::vector<int>> Client::DefaultDeviceAssignment(int num_replicas, int num_partitions) {
  PN_ASSIGN_OR_RETURN(std::vector<int> assignment, engine_->DefaultDeviceAssignment(num_replicas, num_partitions));
  for (int& id : assignment) {
    if (Device* device = DeviceForCore(id)) id = device->id();
  }
  return assignment;
}

}  // namespace pjrt_neuron::core
