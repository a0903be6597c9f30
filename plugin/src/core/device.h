// A NeuronCore as a PJRT device: its memories (HBM and pinned host) and the HBM accounting
// that makes an over-large request fail before any memory is touched.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "common/spin_lock.h"
#include "common/status.h"
#include "core/tagged.h"
#include "core/topology.h"

namespace pjrt_neuron::core {

class Client;
class Device;

class Memory : public Tagged<0x4e4d454d> {
 public:
  // Set once by the C API layer before any client exists: the table that leads every memory, for
  // callers of PJRT 0.112 and later, which call through it directly.
  static void SetHandleFunctionTable(const void* table);

  Memory(int id, std::string kind, int kind_id, Device* device);
  ~Memory();
  Memory(const Memory&) = delete;
  Memory& operator=(const Memory&) = delete;
  bool is_hbm() const { return kind_id_ == 0; }  // only HBM counts against the core's limit
  int id() const { return id_; }
  const std::string& kind() const { return kind_; }
  int kind_id() const { return kind_id_; }
  Device* device() const { return device_; }
  Device* const* device_slot() const { return &device_; }
  const std::string& to_string() const { return to_string_; }
  const std::string& debug_string() const { return debug_string_; }

  // A caller's data kept under its key until replaced or the memory goes (then `destructor` runs).
  void* user_data(const void* key) const;
  void set_user_data(const void* key, void* data, void (*destructor)(void*));

 private:
  struct UserData {
    const void* key;
    void* data;
    void (*destructor)(void*);
  };
  const void* handle_function_table_;  // first, where PJRT 0.112 callers look for it
  mutable std::mutex user_data_mutex_;
  std::vector<UserData> user_data_;
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
  Status Charge(int64_t bytes, std::string_view purpose);
  // `count` allocations of `total_bytes` in all (the largest `largest_bytes`), all or none.
  Status ChargeMany(int64_t total_bytes, int64_t count, int64_t largest_bytes, std::string_view purpose);
  // Checks that `bytes` more would fit, without charging them.
  Status CheckFits(int64_t bytes, std::string_view purpose) const;
  // Counts transient memory (an execution's temporaries) in the peak only.
  void NotePeak(int64_t transient_bytes);
  // Starts the peak over from what is in use now.
  void ResetPeak();
  void Release(int64_t bytes);

 private:
  Client* client_;
  const DeviceDescription* description_;
  int core_;
  bool addressable_ = true;
  std::vector<std::unique_ptr<Memory>> memories_;
  std::vector<Memory*> memory_ptrs_;
  mutable SpinLock stats_mutex_;  // taken several times per execution
  MemoryStats stats_;
  Status FitsLocked(int64_t bytes, std::string_view purpose) const;
};

}  // namespace pjrt_neuron::core
