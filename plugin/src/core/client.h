// The PJRT client: the NeuronCores this process holds (claimed under OS locks), their devices
// and memories, the engine behind them, and the buffers and programs made on them.
#pragma once

#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "common/status.h"
#include "core/buffer.h"
#include "core/client_options.h"
#include "core/core_selection.h"
#include "core/device.h"
#include "core/executable.h"
#include "core/tagged.h"
#include "core/topology.h"
#include "core/transfer_manager.h"
#include "engine/engine.h"

namespace pjrt_neuron::core {

class Client : public Tagged<0x4e434c49> {
 public:
  static StatusOr<std::unique_ptr<Client>> Create(const ClientOptions& options);

  const std::string& platform_name() const { return platform_name_; }
  const std::string& platform_version() const { return platform_version_; }
  int process_index() const { return process_index_; }
  double collective_timeout_seconds() const { return collective_timeout_seconds_; }  // PJRT_NEURON_COLLECTIVE_TIMEOUT
  const std::vector<Device*>& devices() const { return device_ptrs_; }
  const std::vector<Device*>& addressable_devices() const { return addressable_ptrs_; }
  const std::vector<Memory*>& memories() const { return memory_ptrs_; }
  Device* LookupDevice(int id) const;
  Device* LookupAddressableDevice(int local_hardware_id) const;
  Device* DeviceForCore(int core) const;
  const Topology& topology() const { return *topology_; }
  bool Owns(const Device* device) const { return device != nullptr && device->client() == this; }

  StatusOr<std::unique_ptr<Buffer>> BufferFromHost(Memory* memory, engine::HostBufferSpec spec,
                                                   std::unique_ptr<Event>* done_with_host_buffer);
  StatusOr<std::unique_ptr<Buffer>> CreateUninitializedBuffer(Device* device, PJRT_Buffer_Type type,
                                                              const std::vector<int64_t>& dims);
  StatusOr<std::unique_ptr<Buffer>> CopyToMemory(Buffer& source, Memory* destination);
  // An alias buffer (PJRT_Client_CreateAliasBuffer) and the handle that fulfills it once; it
  // shares its target's memory, so it charges no HBM of its own.
  StatusOr<std::pair<std::unique_ptr<Buffer>, void*>> CreateAliasBuffer(Memory* memory, PJRT_Buffer_Type type,
                                                                         const std::vector<int64_t>& dims);
  // `target` null: the alias fails with `code` and `message`.
  Status FulfillAliasBuffer(void* fulfill, Buffer* target, ErrorCode code, const std::string& message);
  // Buffers of `shapes` on `memory`, to be filled piecewise; HBM is charged here.
  StatusOr<std::unique_ptr<TransferManager>> CreateTransferManager(Memory* memory,
                                                                   const std::vector<engine::ShapeSpec>& shapes);
  StatusOr<std::unique_ptr<LoadedExecutable>> Compile(const engine::Program& program, const std::string& options);
  StatusOr<std::unique_ptr<LoadedExecutable>> Deserialize(const std::string& bytes,
                                                          const std::string* overridden_options);
  // The engine's device ids for `num_replicas` x `num_partitions`, as our device ids.
  StatusOr<std::vector<int>> DefaultDeviceAssignment(int num_replicas, int num_partitions);
  // Wraps (and charges) an engine buffer the engine produced on one of our cores.
  // Takes over an execution's outputs, their HBM charged first (all or none).
  Status AdoptOutputs(engine::OutputList<std::unique_ptr<engine::Buffer>>& outputs,
                      engine::OutputList<std::unique_ptr<Buffer>>* adopted);
  // Our device ids <-> the engine's core numbering, for programs' device assignments.
  StatusOr<int64_t> EngineIdOf(int64_t device_id) const;
  StatusOr<int64_t> DeviceIdOf(int64_t engine_core) const;
  const std::vector<int>& physical_cores() const { return lease_->cores(); }
  // For the api layer's forwarded extensions (engine::Native).
  engine::Engine& engine() { return *engine_; }

 private:
  Client() = default;
  StatusOr<std::unique_ptr<LoadedExecutable>> Load(std::unique_ptr<engine::Executable> executable);
  Status CreateEngine(const ClientOptions& options, const InstanceShape& shape);
  Status CreateNeuronJobEngine(const ClientOptions& options, const InstanceShape& shape);
  void AddDevice(const InstanceShape& shape, int physical_core, int engine_core, bool addressable);

  std::mutex alias_mutex_;
  std::set<void*> unfulfilled_aliases_;  // handles handed out and not used yet
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
  double collective_timeout_seconds_ = 300;
};

}  // namespace pjrt_neuron::core
