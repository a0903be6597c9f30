// The simulated runtime's state: claimed cores, HBM accounting, tensors, sets, models, and
// execution (one at a time per core; collective ranks of one process meet in one XLA run).
#ifndef NEURON_STANDIN_RUNTIME_H_
#define NEURON_STANDIN_RUNTIME_H_

#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "core_locks.h"
#include "faults.h"
#include "neff.h"
#include "nrt_api.h"
#include "settings.h"
#include "xla_cpu.h"

struct nrt_tensor {
  uint64_t id = 0;
  nrt_tensor_placement_t placement = NRT_TENSOR_PLACEMENT_DEVICE;
  uint32_t vnc = 0;
  size_t size = 0;
  std::string name;
  std::unique_ptr<uint8_t[]> storage;  // device and host tensors
  void* attached = nullptr;            // virtual tensors, once a buffer is attached

  uint8_t* data() { return storage ? storage.get() : static_cast<uint8_t*>(attached); }
};

struct nrt_tensor_set {
  struct Entry {
    nrt_tensor* tensor;
    uint64_t id;  // tells a freed tensor from a new one at the same address
  };
  std::map<std::string, Entry> entries;
};

namespace standin {
struct CollectiveGroup;
}

struct nrt_model {
  uint64_t id = 0;
  uint32_t vnc = 0;
  size_t hbm_bytes = 0;
  standin::Neff neff;
  std::shared_ptr<standin::XlaProgram> program;  // single-core models
  std::shared_ptr<standin::CollectiveGroup> group;  // collective models whose group is here
  int root_connection = -1;  // collective models whose group is at another process's root
  uint32_t rank = 0;
};

namespace standin {

struct Submission;

struct CollectiveGroup {
  std::string program;  // the HLO every rank runs
  uint32_t world = 0;
  std::vector<uint64_t> member_ids;  // by rank; 0 while a rank has not loaded
  std::vector<uint32_t> member_vncs;
  std::shared_ptr<XlaProgram> compiled;
  std::shared_ptr<XlaCpuEngine> engine;  // compiled's: a world wider than this host has its own

  std::mutex mutex;
  std::condition_variable changed;
  std::vector<Submission*> pending;  // by rank: the ranks waiting in this round
  size_t pending_count = 0;
};

class Runtime {
 public:
  // Never destroyed: XLA's threads may outlive static destructors at exit.
  static Runtime& Get();

  // Counts a call for NEURON_STANDIN_FAULT; true if it must return *status instead.
  bool InjectFault(const char* function, NRT_STATUS* status);

  NRT_STATUS Init(int framework, const char* fw_version, const char* fal_version);
  void Close();

  NRT_STATUS GetVisibleVncCount(uint32_t* count);
  NRT_STATUS GetTotalVncCount(uint32_t* count);
  NRT_STATUS GetInstanceInfo(nrt_instance_info_t* info, size_t size);
  NRT_STATUS GetMemoryStats(uint32_t vnc, nrt_vnc_memory_stats_t* stats, size_t size_in,
                            size_t* size_out);

  NRT_STATUS Load(const char* function, const void* neff, size_t size, int32_t vnc,
                  int32_t vnc_count, bool collective, uint32_t rank, uint32_t world,
                  nrt_model_t** model);
  NRT_STATUS Unload(nrt_model_t* model);
  NRT_STATUS GetTensorInfo(nrt_model_t* model, nrt_tensor_info_array_t** info);
  NRT_STATUS FreeTensorInfo(nrt_tensor_info_array_t* info);

  NRT_STATUS AllocateTensor(nrt_tensor_placement_t placement, int vnc, size_t size,
                            const char* name, nrt_tensor_t** tensor);
  void FreeTensor(nrt_tensor_t** tensor);
  NRT_STATUS AttachBuffer(nrt_tensor_t* tensor, void* buffer, size_t size);
  NRT_STATUS ReadTensor(const nrt_tensor_t* tensor, void* buffer, size_t offset, size_t size);
  NRT_STATUS WriteTensor(nrt_tensor_t* tensor, const void* buffer, size_t offset, size_t size);
  size_t TensorSize(const nrt_tensor_t* tensor);
  NRT_STATUS CopyTensor(const nrt_tensor_t* source, size_t source_offset,
                        nrt_tensor_t* destination, size_t destination_offset, size_t size);

  NRT_STATUS AllocateSet(nrt_tensor_set_t** set);
  void DestroySet(nrt_tensor_set_t** set);
  NRT_STATUS AddToSet(nrt_tensor_set_t* set, const char* name, nrt_tensor_t* tensor);
  NRT_STATUS GetFromSet(nrt_tensor_set_t* set, const char* name, nrt_tensor_t** tensor);

  NRT_STATUS Execute(nrt_model_t* model, const nrt_tensor_set_t* inputs,
                     nrt_tensor_set_t* outputs);

 private:
  enum class Phase { kUninitialized, kInitialized, kClosing, kClosed };
  struct Core {
    uint64_t hbm_used = 0;
    std::shared_ptr<std::mutex> execution = std::make_shared<std::mutex>();
  };
  struct Binding;

  Runtime() = default;
  NRT_STATUS RequireInitialized(const char* function) const;
  NRT_STATUS CheckVnc(const char* function, int64_t vnc) const;
  std::shared_ptr<nrt_tensor> LiveTensor(const nrt_tensor* tensor) const;
  NRT_STATUS Bind(const nrt_model& model, const nrt_tensor_set& inputs,
                  const nrt_tensor_set& outputs, Binding* binding) const;
  NRT_STATUS EnsureEngine(std::string* error);
  NRT_STATUS JoinGroup(const char* function, nrt_model* model, uint32_t world);
  NRT_STATUS RunCollective(const nrt_model& model, Binding* binding);
  void LeaveGroup(const nrt_model& model);
  // Every rank's submission of one round meets; the last to arrive runs them all.
  static NRT_STATUS JoinRound(CollectiveGroup& group, uint32_t rank, Submission* mine,
                              double timeout_seconds);

  // Cross-process collectives (communicator.h).
  NRT_STATUS RouteRank(const char* function, const std::string& root, uint32_t rank,
                       double timeout_seconds, int* root_connection);
  NRT_STATUS JoinAtRoot(const char* function, nrt_model* model, uint32_t world,
                        const void* neff_bytes, size_t size);
  NRT_STATUS RunAtRoot(const nrt_model& model, Binding* binding);
  void AcceptRanks(int listener);
  void ServeRank(int connection);
  void EndExecution();

  mutable std::mutex mutex_;
  std::condition_variable idle_;
  Phase phase_ = Phase::kUninitialized;
  Settings settings_;
  std::unique_ptr<CoreLocks> locks_;
  std::vector<Core> cores_;  // by visible index
  std::unordered_map<const nrt_tensor*, std::shared_ptr<nrt_tensor>> tensors_;
  std::unordered_map<const nrt_tensor_set*, std::unique_ptr<nrt_tensor_set>> sets_;
  std::unordered_map<const nrt_model*, std::shared_ptr<nrt_model>> models_;
  std::unordered_set<const void*> tensor_infos_;
  std::vector<std::shared_ptr<CollectiveGroup>> groups_;
  std::shared_ptr<XlaCpuEngine> engine_;
  std::map<uint32_t, std::shared_ptr<XlaCpuEngine>> wide_engines_;  // by world, for worlds past engine_'s
  size_t engine_devices_ = 0;
  uint64_t next_id_ = 1;
  int executions_in_flight_ = 0;
  FaultPlan faults_;

  std::mutex communicator_mutex_;  // guards what follows
  int listener_ = -1;  // this process is the communicator's root while >= 0
  std::vector<int> served_connections_;
};

}  // namespace standin

#endif  // NEURON_STANDIN_RUNTIME_H_
