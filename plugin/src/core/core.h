// The NeuronCore model: client, devices, memories, buffers, events, executables.
// It knows the simulated instance and the engine interface, nothing of XLA CPU or libnrt.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "core/core_selection.h"
#include "core/instance.h"
#include "engine/engine.h"

namespace pjrt_neuron::core {

class Client;
class Device;

// Every object handed out as an opaque PJRT handle carries a tag, so a stale or
// mistyped handle is reported instead of dereferenced blindly.
template <uint32_t kTag>
class Tagged {
 public:
  Tagged() : tag_(kTag) {}
  ~Tagged() { tag_ = 0; }
  bool valid() const { return tag_ == kTag; }

 private:
  volatile uint32_t tag_;
};

struct ClientOptions {
  std::string instance_type = "trn1.2xlarge";
  int logical_nc_config = 0;    // 0: the instance's default
  std::optional<std::string> visible_cores;  // NEURON_RT_VISIBLE_CORES syntax
  int num_cores = 0;            // NEURON_RT_NUM_CORES; 0: not set
  std::string engine_library_path;
  engine::Attributes engine_passthrough;
  // Multi-process jobs (torchrun, xmp.spawn, jax.distributed): this process's place in the job.
  int process_index = 0;
  int world_size = 1;
  std::vector<int> processes_num_cores;  // NEURON_PJRT_PROCESSES_NUM_DEVICES; empty: not given
};

// Parses PJRT create options and the environment; errors name the option and value.
// A non-empty `instance_type` (a topology's name) overrides both.
StatusOr<ClientOptions> ResolveClientOptions(const engine::Attributes& create_options,
                                             const std::string& instance_type = "");

class DeviceDescription : public Tagged<0x4e444453> {
 public:
  int id = 0;
  int process_index = 0;
  int chip = 0;
  int core_on_chip = 0;
  std::string kind;
  std::string to_string;
  std::string debug_string;
  engine::Attributes attributes;
  mutable std::shared_ptr<const void> api_cache;  // the C API's view of `attributes`
};

class Memory : public Tagged<0x4e4d454d> {
 public:
  Memory(int id, std::string kind, int kind_id, Device* device);
  bool is_hbm() const { return kind_id_ == 0; }  // only HBM counts against the core's limit
  int id() const { return id_; }
  const std::string& kind() const { return kind_; }
  int kind_id() const { return kind_id_; }
  Device* device() const { return device_; }
  Device* const* device_slot() const { return &device_; }
  const std::string& to_string() const { return to_string_; }
  const std::string& debug_string() const { return debug_string_; }

 private:
  int id_;
  std::string kind_;
  int kind_id_;
  Device* device_;
  std::string to_string_;
  std::string debug_string_;
};

struct MemoryStats {
  int64_t bytes_in_use = 0;
  int64_t peak_bytes_in_use = 0;
  int64_t num_allocs = 0;
  int64_t largest_alloc_size = 0;
  int64_t bytes_limit = 0;
};

class Device : public Tagged<0x4e444556> {
 public:
  Device(Client* client, const DeviceDescription* description, int core, int64_t hbm_bytes);
  Memory* memory_of_kind(const std::string& kind) const;
  Client* client() const { return client_; }
  const DeviceDescription& description() const { return *description_; }
  int id() const { return description_->id; }
  int local_hardware_id() const { return description_->id; }  // the physical core, as the runtime numbers it
  int core() const { return core_; }  // the engine's core index
  // False for another process's core in a multi-process job: listed, never used from here.
  bool addressable() const { return addressable_; }
  void set_addressable(bool addressable) { addressable_ = addressable; }
  Memory* default_memory() const { return memories_.front().get(); }
  const std::vector<Memory*>& memories() const { return memory_ptrs_; }
  MemoryStats memory_stats() const;
  // Charges `bytes` of HBM, or fails with RESOURCE_EXHAUSTED saying what is in use.
  Status Charge(int64_t bytes, const std::string& purpose);
  // Checks that `bytes` more would fit, without charging them.
  Status CheckFits(int64_t bytes, const std::string& purpose) const;
  // Counts transient memory (an execution's temporaries) in the peak only.
  void NotePeak(int64_t transient_bytes);
  void Release(int64_t bytes);

 private:
  Client* client_;
  const DeviceDescription* description_;
  int core_;
  bool addressable_ = true;
  std::vector<std::unique_ptr<Memory>> memories_;
  std::vector<Memory*> memory_ptrs_;
  mutable std::mutex stats_mutex_;
  MemoryStats stats_;
  Status FitsLocked(int64_t bytes, const std::string& purpose) const;
};

class Topology : public Tagged<0x4e544f50> {
 public:
  explicit Topology(const InstanceShape& shape);
  const InstanceShape& shape() const { return shape_; }
  const InstanceType& instance() const { return *shape_.type; }
  const std::vector<std::unique_ptr<DeviceDescription>>& descriptions() const { return descriptions_; }
  const engine::Attributes& attributes() const { return attributes_; }
  mutable std::shared_ptr<const void> api_cache;  // the C API's view of `attributes`
  bool owned_by_client = false;

 private:
  InstanceShape shape_;
  std::vector<std::unique_ptr<DeviceDescription>> descriptions_;
  engine::Attributes attributes_;
};

class Event : public Tagged<0x4e455654> {
 public:
  explicit Event(engine::EventRef event) : event_(std::move(event)) {}
  static std::unique_ptr<Event> Completed(Status status = Status::Ok()) {
    return std::make_unique<Event>(std::make_shared<engine::CompletedEvent>(std::move(status)));
  }
  engine::Event& engine_event() { return *event_; }

 private:
  engine::EventRef event_;
};

class Buffer : public Tagged<0x4e425546> {
 public:
  // Takes over an engine buffer whose HBM the caller has already charged (`charged_bytes`).
  Buffer(Device* device, std::unique_ptr<engine::Buffer> buffer, int64_t charged_bytes);
  ~Buffer();
  Device* device() const { return device_; }
  Memory* memory() const { return memory_; }
  engine::Buffer& engine_buffer() { return *buffer_; }
  // The engine frees donated inputs itself; this keeps the HBM accounting in step.
  bool IsDeleted();
  void Delete();
  // Fails with INVALID_ARGUMENT when the buffer was deleted or donated.
  Status CheckUsable() const;

 private:
  void ReleaseCharge();
  Device* device_;
  Memory* memory_;
  std::unique_ptr<engine::Buffer> buffer_;
  std::atomic<int64_t> charged_bytes_{0};
};

struct CompiledProgram {
  std::shared_ptr<engine::Engine> engine;  // set when no client keeps the engine alive
  std::unique_ptr<engine::Executable> engine_executable;
  std::vector<Device*> addressable_devices;
  std::mutex api_cache_mutex;
  std::shared_ptr<const void> api_cache;  // the C API's arrays describing outputs
};

// Shared by a PJRT_LoadedExecutable and every PJRT_Executable taken from it.
class Executable : public Tagged<0x4e455845> {
 public:
  explicit Executable(std::shared_ptr<CompiledProgram> program) : program_(std::move(program)) {}
  engine::Executable& engine_executable() { return *program_->engine_executable; }
  const std::shared_ptr<CompiledProgram>& program() const { return program_; }

 private:
  std::shared_ptr<CompiledProgram> program_;
};

// Dense size of an array: what a buffer of this shape takes in HBM (sub-byte types rounded up).
int64_t DenseSizeInBytes(PJRT_Buffer_Type type, const std::vector<int64_t>& dims);
std::string FormatBytes(int64_t bytes);

struct ExecuteResult {
  std::vector<std::vector<std::unique_ptr<Buffer>>> outputs;
  std::vector<std::unique_ptr<Event>> completions;
};

class LoadedExecutable : public Tagged<0x4e4c4558> {
 public:
  LoadedExecutable(Client* client, std::shared_ptr<CompiledProgram> program)
      : client_(client), program_(std::move(program)) {}
  Client* client() const { return client_; }
  engine::Executable& engine_executable() { return *program_->engine_executable; }
  const std::shared_ptr<CompiledProgram>& program() const { return program_; }
  const std::vector<Device*>& addressable_devices() const { return program_->addressable_devices; }
  // args[d][i]; `only_device` runs a single-device program on that device.
  StatusOr<ExecuteResult> Execute(const std::vector<std::vector<Buffer*>>& args,
                                  const engine::ExecuteOptions& options, Device* only_device);
  // After Delete only IsDeleted and destruction are allowed; the engine may not track it.
  void Delete();
  bool IsDeleted() const { return deleted_; }
  // Graph collection mode: executions produce uninitialized outputs instead of running.
  void set_record_only(bool record_only) { record_only_ = record_only; }

 private:
  StatusOr<ExecuteResult> RecordOnlyResult(const std::vector<std::vector<Buffer*>>& args, Device* only_device);
  Client* client_;
  std::shared_ptr<CompiledProgram> program_;
  std::atomic<bool> deleted_{false};
  bool record_only_ = false;
};

class CompileCache;

class Client : public Tagged<0x4e434c49> {
 public:
  static StatusOr<std::unique_ptr<Client>> Create(const ClientOptions& options);

  const std::string& platform_name() const { return platform_name_; }
  const std::string& platform_version() const { return platform_version_; }
  int process_index() const { return process_index_; }
  const std::vector<Device*>& devices() const { return device_ptrs_; }
  const std::vector<Device*>& addressable_devices() const { return addressable_ptrs_; }
  const std::vector<Memory*>& memories() const { return memory_ptrs_; }
  Device* LookupDevice(int id) const;
  Device* LookupAddressableDevice(int local_hardware_id) const;
  Device* DeviceForCore(int core) const;
  const Topology& topology() const { return *topology_; }
  engine::Engine& engine() { return *engine_; }
  bool Owns(const Device* device) const { return device != nullptr && device->client() == this; }

  StatusOr<std::unique_ptr<Buffer>> BufferFromHost(Memory* memory, engine::HostBufferSpec spec,
                                                   std::unique_ptr<Event>* done_with_host_buffer);
  StatusOr<std::unique_ptr<Buffer>> CreateUninitializedBuffer(Device* device, PJRT_Buffer_Type type,
                                                              const std::vector<int64_t>& dims);
  StatusOr<std::unique_ptr<Buffer>> CopyToMemory(Buffer& source, Memory* destination);
  StatusOr<std::unique_ptr<LoadedExecutable>> Compile(const engine::Program& program, const std::string& options);
  StatusOr<std::unique_ptr<LoadedExecutable>> Deserialize(const std::string& bytes,
                                                          const std::string* overridden_options);
  // Wraps (and charges) an engine buffer the engine produced on one of our cores.
  StatusOr<std::unique_ptr<Buffer>> Adopt(std::unique_ptr<engine::Buffer> buffer);
  // Our device ids <-> the engine's core numbering, for programs' device assignments.
  StatusOr<int64_t> EngineIdOf(int64_t device_id) const;
  StatusOr<int64_t> DeviceIdOf(int64_t engine_core) const;
  const std::vector<int>& physical_cores() const { return lease_->cores(); }

 private:
  Client() = default;
  StatusOr<std::unique_ptr<LoadedExecutable>> Load(std::unique_ptr<engine::Executable> executable);
  std::optional<std::unique_ptr<engine::Executable>> LoadCached(CompileCache& cache, const std::string& key);
  StatusOr<std::unique_ptr<engine::Executable>> CompileThroughCache(CompileCache& cache, const std::string& key,
                                                                    const engine::Program& program,
                                                                    const std::string& normalized);

  std::string platform_name_ = "neuron";
  std::string platform_version_;
  std::shared_ptr<CoreLease> lease_;
  std::unique_ptr<Topology> topology_;
  std::unique_ptr<engine::Engine> engine_;
  std::vector<std::unique_ptr<Device>> devices_;
  std::vector<Device*> device_ptrs_;
  std::vector<Device*> addressable_ptrs_;
  std::vector<Memory*> memory_ptrs_;  // of addressable devices
  int process_index_ = 0;
  Status CreateMultiProcess(const ClientOptions& options, const InstanceShape& shape);
  void AddDevice(const InstanceShape& shape, int physical_core, int engine_core, bool addressable);
};

const char* PluginVersion();

// Compiles for a topology without claiming its cores (ahead-of-time compilation); the result
// is loaded later with Client::Deserialize.
StatusOr<std::shared_ptr<CompiledProgram>> CompileForTopology(const Topology& topology, const engine::Program& program,
                                                              const std::string& options,
                                                              const std::string& engine_library_path);

struct CacheSettings;
// Compiles for a topology into the compile cache; false when the cache already had it.
StatusOr<bool> CompileForTopologyCached(const Topology& topology, const engine::Program& program,
                                        const std::string& options, const std::string& engine_library_path,
                                        const CacheSettings& cache_settings);

// A topology as bytes and back ("pjrt-neuron-topology/1 <instance> <logical NC config>").
std::string SerializeTopology(const Topology& topology);
StatusOr<std::unique_ptr<Topology>> DeserializeTopology(const std::string& bytes);

}  // namespace pjrt_neuron::core
