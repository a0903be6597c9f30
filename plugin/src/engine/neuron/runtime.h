// One Neuron runtime session of this process (nrt_init .. nrt_close), shared by the engines
// that use it, and RAII owners of what lives in it: device tensors, loaded models, tensor sets.
// When the last engine ends the session, every model still loaded is unloaded and every tensor
// still allocated is freed before nrt_close, so a leaked buffer cannot keep the cores claimed.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "common/status.h"
#include "engine/neuron/nrt_api.h"

namespace pjrt_neuron::engine::neuron {

class Runtime;

// A runtime-owned handle, released by its owner or, at the session's end, by the runtime.
class RuntimeHandle {
 public:
  virtual ~RuntimeHandle() = default;

 protected:
  friend class Runtime;
  virtual void ReleaseAtClose() = 0;  // with the runtime's registry lock held
};

class DeviceTensor : public RuntimeHandle {
 public:
  DeviceTensor(std::shared_ptr<Runtime> runtime, nrt_tensor* tensor, int vnc, size_t size);
  ~DeviceTensor() override;
  nrt_tensor* get() const { return tensor_; }  // null once the session ended
  int vnc() const { return vnc_; }
  size_t size() const { return size_; }
  // Serialised per core: the runtime promises no thread safety.
  Status Write(const void* data, size_t offset, size_t size);
  Status Read(void* data, size_t offset, size_t size) const;

 private:
  void ReleaseAtClose() override;
  std::shared_ptr<Runtime> runtime_;
  nrt_tensor* tensor_;
  int vnc_;
  size_t size_;
};

class LoadedModel : public RuntimeHandle {
 public:
  LoadedModel(std::shared_ptr<Runtime> runtime, nrt_model* model, int vnc);
  ~LoadedModel() override;
  nrt_model* get() const { return model_; }
  int vnc() const { return vnc_; }

 private:
  void ReleaseAtClose() override;
  std::shared_ptr<Runtime> runtime_;
  nrt_model* model_;
  int vnc_;
};

// Tensors are added by name; they must outlive the set, which only refers to them.
class TensorSet {
 public:
  explicit TensorSet(std::shared_ptr<Runtime> runtime);
  ~TensorSet();
  TensorSet(const TensorSet&) = delete;
  TensorSet& operator=(const TensorSet&) = delete;
  Status Init(int core);
  Status Add(const std::string& name, const DeviceTensor& tensor, int core);
  nrt_tensor_set* get() const { return set_; }

 private:
  std::shared_ptr<Runtime> runtime_;
  nrt_tensor_set* set_ = nullptr;
};

struct CoreMemory {
  int64_t bytes_used = 0;
  int64_t bytes_limit = 0;
};

class Runtime : public std::enable_shared_from_this<Runtime> {
 public:
  // The process's session, opened with nrt_init when none is open; each call is one use, to be
  // ended with EndUse(). FAILED_PRECONDITION when the library cannot be used. Cores are
  // numbered from `first_core` (the runtime's vnc 0): a process of a multi-process job keeps
  // the job's numbers; every call below takes and reports cores in that numbering.
  static StatusOr<std::shared_ptr<Runtime>> Open(const std::string& library_path, int first_core = 0);
  ~Runtime();
  void EndUse();

  const NrtApi& api() const { return library_->api(); }
  const std::string& library_path() const { return library_->path(); }
  bool open() const;
  int visible_cores() const { return visible_cores_; }
  uint32_t instance_family() const { return instance_family_; }  // 0: the runtime does not say
  std::mutex& core_lock(int vnc) const;

  // A failed call's Status, with the runtime's own text for the status when it has one.
  Status Error(const char* call, NrtStatus status, int core, const std::string& detail) const;

  // `size` must not be 0 (the runtime refuses those); RESOURCE_EXHAUSTED names core and size.
  StatusOr<std::shared_ptr<DeviceTensor>> Allocate(int vnc, size_t size, const std::string& name);
  // nrt_load, or nrt_load_collectives when world > 1.
  StatusOr<std::unique_ptr<LoadedModel>> Load(const std::string& neff, int vnc, int rank, int world,
                                              const std::string& what);
  StatusOr<CoreMemory> MemoryStats(int vnc) const;

 private:
  friend class DeviceTensor;
  friend class LoadedModel;
  Runtime() = default;
  void Register(RuntimeHandle* handle);
  // False when the session already released it.
  bool Unregister(RuntimeHandle* handle);
  void Close();

  int Vnc(int core) const { return core - first_core_; }

  std::shared_ptr<NrtLibrary> library_;
  int first_core_ = 0;
  int visible_cores_ = 0;
  uint32_t instance_family_ = 0;
  std::vector<std::unique_ptr<std::mutex>> core_locks_;
  mutable std::mutex mutex_;  // guards what follows
  bool open_ = false;
  int uses_ = 0;
  std::set<RuntimeHandle*> handles_;
};

}  // namespace pjrt_neuron::engine::neuron
