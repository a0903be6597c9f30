// The buffers and executables a session holds, by the ids its process knows them by.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>

#include "daemon/served_program.h"
#include "engine/engine.h"

namespace pjrt_neuron::daemon {

class SessionObjects {
 public:
  int64_t KeepBuffer(std::unique_ptr<engine::Buffer> buffer) { return Keep(&buffers_, std::move(buffer)); }
  int64_t KeepExecutable(std::shared_ptr<ServedExecutable> executable) {
    return Keep(&executables_, std::move(executable));
  }
  std::shared_ptr<engine::Buffer> FindBuffer(int64_t id) { return Find(buffers_, id); }
  std::shared_ptr<ServedExecutable> FindExecutable(int64_t id) { return Find(executables_, id); }
  // The process dropped its handle; the object goes once no execution uses it.
  void ReleaseBuffer(int64_t id) { Release(&buffers_, id); }
  void ReleaseExecutable(int64_t id) { Release(&executables_, id); }

  // The session ended: everything goes, and whatever a request still running makes later.
  void Clear() {
    std::map<int64_t, std::shared_ptr<engine::Buffer>> buffers;
    std::map<int64_t, std::shared_ptr<ServedExecutable>> executables;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      closed_ = true;
      buffers.swap(buffers_);
      executables.swap(executables_);
    }
  }  // the engine objects are destroyed here, outside the lock

 private:
  template <typename T, typename Owned>
  int64_t Keep(std::map<int64_t, std::shared_ptr<T>>* objects, Owned object) {
    std::lock_guard<std::mutex> lock(mutex_);
    int64_t id = next_id_++;
    if (!closed_) (*objects)[id] = std::shared_ptr<T>(std::move(object));
    return id;
  }
  template <typename T>
  std::shared_ptr<T> Find(const std::map<int64_t, std::shared_ptr<T>>& objects, int64_t id) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = objects.find(id);
    return it == objects.end() ? nullptr : it->second;
  }
  template <typename T>
  void Release(std::map<int64_t, std::shared_ptr<T>>* objects, int64_t id) {
    std::shared_ptr<T> released;
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = objects->find(id);
    if (it == objects->end()) return;
    released = std::move(it->second);
    objects->erase(it);
  }

  std::mutex mutex_;
  int64_t next_id_ = 1;  // one sequence for buffers and executables
  bool closed_ = false;
  std::map<int64_t, std::shared_ptr<engine::Buffer>> buffers_;
  std::map<int64_t, std::shared_ptr<ServedExecutable>> executables_;
};

}  // namespace pjrt_neuron::daemon
