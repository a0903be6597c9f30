// The XLA CPU plugin's client under the simulator engine: one CPU device per NeuronCore, and
// each device's memories by kind. Buffers, executables and transfer managers find their cores
// and memories here.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "engine/engine.h"

namespace pjrt_neuron::engine::sim {

class CpuClient {
 public:
  CpuClient() = default;
  ~CpuClient();
  CpuClient(const CpuClient&) = delete;
  CpuClient& operator=(const CpuClient&) = delete;

  // Loads the engine library and creates its client: options.num_cores devices, and the
  // engine options of options.passthrough.
  Status Init(const EngineOptions& options);

  const PJRT_Api* api() const { return api_; }
  PJRT_Client* client() const { return client_; }
  int num_cores() const { return static_cast<int>(devices_.size()); }
  PJRT_Device* device(int core) const { return devices_.at(core); }
  // -1 for a device that is not one of the client's.
  int CoreOf(PJRT_Device* device) const;
  StatusOr<PJRT_Memory*> memory(int core, const std::string& kind) const;
  std::string MemoryKind(PJRT_Memory* memory) const;

  // Whether a launch of a multi-core program waits for all its cores (SimExecutable::SingleCoreCopy):
  // not on PJRT 0.81 (xla-cpu-pjrt 0.0.1), so on PJRT 0.115 (lammps-jax-pjrt-cpu 0.11.2).
  bool gates_multi_core_launches() const { return api_->pjrt_api_version.minor_version >= 100; }
  // Measured: PJRT 0.81 (xla-cpu-pjrt 0.0.1) accepts FFI handlers and its compiler never finds
  // them; PJRT 0.115 (lammps-jax-pjrt-cpu 0.11.2) runs them.
  bool runs_ffi_handlers() const { return api_->pjrt_api_version.minor_version >= 100; }

 private:
  const PJRT_Api* api_ = nullptr;
  PJRT_Client* client_ = nullptr;
  std::vector<PJRT_Device*> devices_;
  std::vector<std::vector<std::pair<std::string, PJRT_Memory*>>> memories_;  // [core] -> (kind, memory)
};

}  // namespace pjrt_neuron::engine::sim
