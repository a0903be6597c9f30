// Compiled programs: the executable shared by a PJRT_LoadedExecutable and the
// PJRT_Executables taken from it, and its execution on the NeuronCores it was loaded onto.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "common/status.h"
#include "core/buffer.h"
#include "core/device.h"
#include "core/launch_gate.h"
#include "core/tagged.h"
#include "engine/engine.h"

namespace pjrt_neuron::core {

class Client;

// A program compiled by the engine, with the NeuronCores it runs on; what the C API asks of
// an executable is answered here.
class CompiledProgram {
 public:
  // `engine` is set when no client keeps the engine alive (ahead-of-time compilation).
  CompiledProgram(std::unique_ptr<engine::Executable> executable, std::vector<Device*> addressable_devices,
                  std::shared_ptr<engine::Engine> engine = nullptr)
      : engine_(std::move(engine)),
        executable_(std::move(executable)),
        addressable_devices_(std::move(addressable_devices)) {}
  std::string name() { return executable_->name(); }
  int num_replicas() { return executable_->num_replicas(); }
  int num_partitions() { return executable_->num_partitions(); }
  const std::vector<engine::OutputShape>& outputs() { return executable_->outputs(); }
  const std::vector<Device*>& addressable_devices() const { return addressable_devices_; }
  StatusOr<std::string> Fingerprint() { return executable_->Fingerprint(); }
  StatusOr<engine::Attributes> CostAnalysis() { return executable_->CostAnalysis(); }
  StatusOr<int64_t> SizeOfGeneratedCodeInBytes() { return executable_->SizeOfGeneratedCodeInBytes(); }
  StatusOr<engine::CompiledMemoryStats> MemoryStats() { return executable_->MemoryStats(); }
  StatusOr<engine::ProgramText> OptimizedProgram() { return executable_->OptimizedProgram(); }
  // The bytes PJRT_Executable_Serialize hands out; Client::Deserialize reads them back.
  StatusOr<std::string> Serialize();
  // For core: executions run the engine's executable.
  engine::Executable& engine_executable() { return *executable_; }

 private:
  std::shared_ptr<engine::Engine> engine_;  // declared first, so destroyed after the executable
  std::unique_ptr<engine::Executable> executable_;
  std::vector<Device*> addressable_devices_;
};

// Serialized executables start with this line, so foreign bytes are refused before the engine sees them.
inline constexpr char kSerializedExecutableMagic[] = "pjrt-neuron-executable/1\n";

// Shared by a PJRT_LoadedExecutable and every PJRT_Executable taken from it.
class Executable : public Tagged<0x4e455845> {
 public:
  explicit Executable(std::shared_ptr<CompiledProgram> program) : program_(std::move(program)) {}
  CompiledProgram& compiled() { return *program_; }
  const std::shared_ptr<CompiledProgram>& program() const { return program_; }

 private:
  std::shared_ptr<CompiledProgram> program_;
};

// Argument lists as the C API passes them, not copied: at(d, i) is argument i on device d.
struct ArgumentLists {
  Buffer* const* const* lists = nullptr;  // may be null when num_args is 0
  size_t num_lists = 0;
  size_t num_args = 0;
  size_t size() const { return num_lists; }
  Buffer* at(size_t d, size_t i) const { return lists[d][i]; }
};

struct ExecuteResult {
  engine::DeviceList<engine::OutputList<std::unique_ptr<Buffer>>> outputs;  // [device][output]
  engine::DeviceList<std::unique_ptr<Event>> completions;                  // [device]
};

class LoadedExecutable : public Tagged<0x4e4c4558> {
 public:
  LoadedExecutable(Client* client, std::shared_ptr<CompiledProgram> program)
      : client_(client), program_(std::move(program)) {}
  Client* client() const { return client_; }
  CompiledProgram& compiled() { return *program_; }
  const std::shared_ptr<CompiledProgram>& program() const { return program_; }
  const std::vector<Device*>& addressable_devices() const { return program_->addressable_devices(); }
  // The program's device assignment with our device ids (not the engine's).
  StatusOr<std::string> SerializedDeviceAssignment();
  // (replica, partition) of each addressable device, in addressable_devices() order; worked out
  // once from the device assignment.
  struct LogicalId {
    int replica;
    int partition;
  };
  StatusOr<const std::vector<LogicalId>*> AddressableLogicalIds();
  // `only_device` runs a single-device program on that device.
  // Fills `result`, empty on entry.
  Status Execute(const ArgumentLists& args, const engine::ExecuteOptions& options, Device* only_device,
                 ExecuteResult* result);
  // After Delete only IsDeleted and destruction are allowed; the engine may not track it.
  void Delete();
  bool IsDeleted() const { return deleted_; }
  // Graph collection mode: executions produce uninitialized outputs instead of running.
  void set_record_only(bool record_only) { record_only_ = record_only; }
  // Executions are appended to the estimate report under this id (core/estimate_report.h).
  void set_estimate_id(std::string id) { estimate_id_ = std::move(id); }

 private:
  // What every execution checks against each core's HBM; worked out once, at the first run.
  struct HbmPlan {
    bool known = false;      // the engine reported the program's memory figures
    int64_t transient = 0;   // outputs and temporaries, less what aliases the inputs
    bool may_donate = true;  // the run may free inputs (aliasing, or figures unknown)
    std::string purpose;     // names the run in an out-of-HBM message
  };
  const HbmPlan& hbm_plan();
  // Whether one-core launches must meet the program's other cores first (launch_gate.h): it
  // runs on several of this client's cores and has collectives. Worked out at the first.
  bool LaunchesMeet();
  Status RecordOnlyResult(const ArgumentLists& args, Device* only_device, ExecuteResult* result);
  engine::Executable& engine_executable() { return program_->engine_executable(); }
  Client* client_;
  std::shared_ptr<CompiledProgram> program_;
  std::atomic<bool> deleted_{false};
  bool record_only_ = false;
  std::string estimate_id_;
  std::mutex hbm_plan_mutex_;
  std::atomic<bool> hbm_plan_ready_{false};
  HbmPlan hbm_plan_;
  std::mutex launches_meet_mutex_;
  std::atomic<bool> launches_meet_known_{false};
  bool launches_meet_ = false;
  std::vector<int> device_ids_;  // the program's, for the gate
  std::mutex logical_ids_mutex_;
  std::unique_ptr<std::vector<LogicalId>> logical_ids_;
  LaunchGate launch_gate_;
};

}  // namespace pjrt_neuron::core
