// The simulator engine's executables: the XLA CPU plugin's loaded executable behind the
// Executable interface, with the outputs it moves to host memory and its single-core copy.
#pragma once

#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "engine/sim/cpu_client.h"
#include "engine/sim/output_table.h"

namespace pjrt_neuron::engine::sim {

class SimExecutable : public Executable {
 public:
  // Takes ownership of `loaded`; Init reads what the engine says of it.
  SimExecutable(const CpuClient* client, PJRT_LoadedExecutable* loaded);
  ~SimExecutable() override;
  Status Init();

  // Loads `bytes` (Serialize's, host-outputs trailer and all) with `overridden_options` when not null.
  static StatusOr<std::unique_ptr<Executable>> Deserialize(const CpuClient* client, const std::string& bytes,
                                                           const std::string* overridden_options);

  std::string name() override { return name_; }
  int num_replicas() override { return num_replicas_; }
  int num_partitions() override { return num_partitions_; }
  const std::vector<OutputShape>& outputs() override {
    return placed_outputs_.empty() ? outputs_->shapes : placed_outputs_;
  }
  std::vector<int> addressable_cores() override { return addressable_cores_; }
  Native<PJRT_Executable> NativeExecutable() override { return {api_, executable_}; }

  StatusOr<std::string> Fingerprint() override;
  StatusOr<Attributes> CostAnalysis() override;
  StatusOr<int64_t> SizeOfGeneratedCodeInBytes() override;
  // Asked on every execution (HBM check), so computed once.
  StatusOr<CompiledMemoryStats> MemoryStats() override;
  StatusOr<std::string> Serialize() override;
  StatusOr<ProgramText> OptimizedProgram() override;
  StatusOr<std::string> SerializedDeviceAssignment() override;
  Status Execute(const ArgumentTable& args, const ExecuteOptions& options, int only_core,
                 ExecuteResult* result) override;
  bool CollectivesMeetAcrossPrograms() override { return !client_->gates_multi_core_launches(); }
  void Delete() override;
  bool IsDeleted() override;

  // XLA CPU cannot serialize an executable it deserialized (the object code is gone), so a
  // loaded executable hands back the bytes it was loaded from.
  void set_serialized(std::string bytes) { serialized_ = std::move(bytes); }

  // Outputs of `kinds` "pinned_host" are moved to host memory after each execution.
  void PlaceOutputs(const std::vector<std::string>& kinds);

 private:
  StatusOr<CompiledMemoryStats> ComputeMemoryStats();
  StatusOr<std::string> EngineBytes();

  // Newer engine builds hold every launch of a program of several cores until all its cores have
  // launched it (a per-launch barrier); a launch on one core (torch-xla's execute_device, a
  // process of a multi-process job) never fills it, and the engine's next launch never starts.
  // Such a launch of a program that computes alike on every core runs a copy instead: the same
  // code loaded as a portable single-core executable (null when it cannot be made).
  SimExecutable* SingleCoreCopy();
  // Otherwise, when the program has no collectives, every core runs it on copies of the one
  // core's arguments and only that core's results are kept: correct at the cost of the others'
  // work. (A collective program's one-core launches meet first: core::LaunchGate.)
  // Where `only_core` is in the device assignment, for a launch of one argument list.
  StatusOr<size_t> PositionOfOnlyCore(const ArgumentTable& args, int only_core);
  Status ExecuteOnEveryCoreForOne(const ArgumentTable& args, const ExecuteOptions& options, int only_core,
                                  ExecuteResult* result);
  // A collective program's one-core launches (each core's thread, after core::LaunchGate) meet
  // here, and the last to come runs one launch of every core: this engine build runs a
  // collective only among the cores of one launch.
  Status ExecuteWhenEveryCoreComes(const ArgumentTable& args, const ExecuteOptions& options, int only_core,
                                   ExecuteResult* result);
  bool HasCollectives();

  const CpuClient* client_;
  const PJRT_Api* api_;
  PJRT_LoadedExecutable* loaded_;
  PJRT_Executable* executable_ = nullptr;
  std::string name_;
  int num_replicas_ = 1;
  int num_partitions_ = 1;
  std::shared_ptr<OutputTable> outputs_ = std::make_shared<OutputTable>(std::vector<OutputShape>{});
  std::vector<int> addressable_cores_;
  std::optional<std::string> serialized_;
  std::vector<bool> host_outputs_;
  std::vector<OutputShape> placed_outputs_;  // what outputs() reports then
  std::mutex memory_stats_mutex_;
  bool memory_stats_computed_ = false;
  StatusOr<CompiledMemoryStats> memory_stats_ = Status::Ok();
  std::mutex single_core_mutex_;
  bool single_core_tried_ = false;
  std::unique_ptr<Executable> single_core_;
  int has_collectives_ = -1;  // unknown until asked

  struct Meeting {
    std::map<int, std::vector<Buffer*>> args;  // by core
    bool done = false;
    Status status;
    ExecuteResult all;  // a row per core, in addressable_cores_ order
  };
  std::mutex meetings_mutex_;
  std::condition_variable meetings_changed_;
  std::map<std::pair<int, int64_t>, std::shared_ptr<Meeting>> meetings_;  // (launch id, number) ->
  std::map<std::pair<int, int>, int64_t> next_meeting_;                   // (launch id, core) -> number
};

}  // namespace pjrt_neuron::engine::sim
