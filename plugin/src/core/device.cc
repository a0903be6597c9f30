// Devices and memories: each core's HBM accounting.
#include "core/device.h"

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <type_traits>

#include "core/sizes.h"

namespace pjrt_neuron::core {

namespace {
std::atomic<const void*> handle_function_table{nullptr};
}  // namespace

void Memory::SetHandleFunctionTable(const void* table) { handle_function_table.store(table); }

Memory::~Memory() {
  for (UserData& entry : user_data_) {
    if (entry.destructor != nullptr) entry.destructor(entry.data);
  }
}

void* Memory::user_data(const void* key) const {
  std::lock_guard<std::mutex> lock(user_data_mutex_);
  for (const UserData& entry : user_data_) {
    if (entry.key == key) return entry.data;
  }
  return nullptr;
}

void Memory::set_user_data(const void* key, void* data, void (*destructor)(void*)) {
  UserData replaced{nullptr, nullptr, nullptr};
  {
    std::lock_guard<std::mutex> lock(user_data_mutex_);
    auto it = std::find_if(user_data_.begin(), user_data_.end(), [&](const UserData& e) { return e.key == key; });
    if (it != user_data_.end()) {
      replaced = *it;
      user_data_.erase(it);
    }
    if (data != nullptr) user_data_.push_back({key, data, destructor});
  }
  // Outside the lock: a destructor may call back into this memory.
  if (replaced.destructor != nullptr && replaced.data != data) replaced.destructor(replaced.data);
}

Memory::Memory(int id, std::string kind, int kind_id, Device* device)
    : handle_function_table_(handle_function_table.load()),
      id_(id), kind_(std::move(kind)), kind_id_(kind_id), device_(device) {
  static_assert(std::is_standard_layout_v<Memory>, "the handle is the object's address");
  static_assert(offsetof(Memory, handle_function_table_) == 0, "the function table leads the handle");
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

void Device::ResetPeak() {
  std::lock_guard<SpinLock> lock(stats_mutex_);
  stats_.peak_bytes_in_use = stats_.bytes_in_use;
}

MemoryStats Device::memory_stats() const {
  std::lock_guard<SpinLock> lock(stats_mutex_);
  return stats_;
}

Status Device::FitsLocked(int64_t bytes, std::string_view purpose) const {
  if (stats_.bytes_in_use + bytes <= stats_.bytes_limit) return Status::Ok();
  return Status(ErrorCode::kResourceExhausted,
                "NeuronCore " + std::to_string(id()) + " is out of HBM: " + std::string(purpose) + " needs " +
                    FormatBytes(bytes) +
                    " but " + FormatBytes(stats_.bytes_in_use) + " of its " + FormatBytes(stats_.bytes_limit) +
                    " are in use by " + std::to_string(stats_.num_allocs) + " allocation(s) so far (largest " +
                    FormatBytes(stats_.largest_alloc_size) + ")");
}

Status Device::CheckFits(int64_t bytes, std::string_view purpose) const {
  std::lock_guard<SpinLock> lock(stats_mutex_);
  return FitsLocked(bytes, purpose);
}

Status Device::Charge(int64_t bytes, std::string_view purpose) { return ChargeMany(bytes, 1, bytes, purpose); }

Status Device::ChargeMany(int64_t total_bytes, int64_t count, int64_t largest_bytes, std::string_view purpose) {
  if (count == 0) return Status::Ok();
  std::lock_guard<SpinLock> lock(stats_mutex_);
  PN_RETURN_IF_ERROR(FitsLocked(total_bytes, purpose));
  stats_.bytes_in_use += total_bytes;
  stats_.num_allocs += count;
  stats_.peak_bytes_in_use = std::max(stats_.peak_bytes_in_use, stats_.bytes_in_use);
  stats_.largest_alloc_size = std::max(stats_.largest_alloc_size, largest_bytes);
  return Status::Ok();
}

void Device::NotePeak(int64_t transient_bytes) {
  std::lock_guard<SpinLock> lock(stats_mutex_);
  stats_.peak_bytes_in_use = std::max(stats_.peak_bytes_in_use, stats_.bytes_in_use + transient_bytes);
}

void Device::Release(int64_t bytes) {
  std::lock_guard<SpinLock> lock(stats_mutex_);
  stats_.bytes_in_use -= bytes;
}

}  // namespace pjrt_neuron::core
