// The Neuron runtime session and its handles (runtime.h).
#include "engine/neuron/runtime.h"

#include "engine/neuron/nrt_status.h"

namespace pjrt_neuron::engine::neuron {
namespace {

std::string Bytes(size_t size) { return std::to_string(size) + " bytes"; }

}  // namespace

DeviceTensor::DeviceTensor(std::shared_ptr<Runtime> runtime, nrt_tensor* tensor, int vnc, size_t size)
    : runtime_(std::move(runtime)), tensor_(tensor), vnc_(vnc), size_(size) {
  runtime_->Register(this);
}

DeviceTensor::~DeviceTensor() {
  if (!runtime_->Unregister(this) || tensor_ == nullptr) return;
  std::lock_guard<std::mutex> lock(runtime_->core_lock(vnc_));
  runtime_->api().tensor_free(&tensor_);
}

void DeviceTensor::ReleaseAtClose() {
  if (tensor_ != nullptr) runtime_->api().tensor_free(&tensor_);
  tensor_ = nullptr;
}

Status DeviceTensor::Write(const void* data, size_t offset, size_t size) {
  if (tensor_ == nullptr) return FailedPrecondition("the Neuron runtime session has ended (client destroyed)");
  std::lock_guard<std::mutex> lock(runtime_->core_lock(vnc_));
  NrtStatus s = runtime_->api().tensor_write(tensor_, data, offset, size);
  if (s != 0) return runtime_->Error("nrt_tensor_write", s, vnc_, "writing " + Bytes(size) + " at " + std::to_string(offset));
  return Status::Ok();
}

Status DeviceTensor::Read(void* data, size_t offset, size_t size) const {
  if (tensor_ == nullptr) return FailedPrecondition("the Neuron runtime session has ended (client destroyed)");
  std::lock_guard<std::mutex> lock(runtime_->core_lock(vnc_));
  NrtStatus s = runtime_->api().tensor_read(tensor_, data, offset, size);
  if (s != 0) return runtime_->Error("nrt_tensor_read", s, vnc_, "reading " + Bytes(size) + " at " + std::to_string(offset));
  return Status::Ok();
}

LoadedModel::LoadedModel(std::shared_ptr<Runtime> runtime, nrt_model* model, int vnc)
    : runtime_(std::move(runtime)), model_(model), vnc_(vnc) {
  runtime_->Register(this);
}

LoadedModel::~LoadedModel() {
  if (!runtime_->Unregister(this) || model_ == nullptr) return;
  std::lock_guard<std::mutex> lock(runtime_->core_lock(vnc_));
  runtime_->api().unload(model_);
}

void LoadedModel::ReleaseAtClose() {
  if (model_ != nullptr) runtime_->api().unload(model_);
  model_ = nullptr;
}

TensorSet::TensorSet(std::shared_ptr<Runtime> runtime) : runtime_(std::move(runtime)) {}

TensorSet::~TensorSet() {
  if (set_ != nullptr) runtime_->api().destroy_tensor_set(&set_);
}

Status TensorSet::Init(int core) {
  NrtStatus s = runtime_->api().allocate_tensor_set(&set_);
  if (s != 0 || set_ == nullptr) return runtime_->Error("nrt_allocate_tensor_set", s == 0 ? 1 : s, core, "");
  return Status::Ok();
}

Status TensorSet::Add(const std::string& name, const DeviceTensor& tensor, int core) {
  if (tensor.get() == nullptr) return FailedPrecondition("the Neuron runtime session has ended (client destroyed)");
  NrtStatus s = runtime_->api().add_tensor_to_tensor_set(set_, name.c_str(), tensor.get());
  if (s != 0) return runtime_->Error("nrt_add_tensor_to_tensor_set", s, core, "for tensor '" + name + "'");
  return Status::Ok();
}

StatusOr<std::shared_ptr<Runtime>> Runtime::Open(const std::string& library_path, int first_core) {
  static std::mutex mutex;
  static std::weak_ptr<Runtime> current;
  std::lock_guard<std::mutex> lock(mutex);
  if (auto session = current.lock()) {
    std::lock_guard<std::mutex> session_lock(session->mutex_);
    if (session->open_) {
      if (session->library_path() != library_path) {
        return FailedPrecondition("this process already runs the Neuron runtime from '" + session->library_path() +
                                  "'; cannot also use '" + library_path + "'");
      }
      if (session->first_core_ != first_core) {
        return FailedPrecondition("this process's Neuron runtime session numbers its cores from " +
                                  std::to_string(session->first_core_) + ", not " + std::to_string(first_core));
      }
      session->uses_ += 1;
      return session;
    }
  }
  std::shared_ptr<Runtime> runtime(new Runtime());
  runtime->first_core_ = first_core;
  PN_ASSIGN_OR_RETURN(runtime->library_, NrtLibrary::Open(library_path));
  const NrtApi& api = runtime->api();
  NrtStatus s = api.init(kNrtFrameworkNone, "", "");
  if (s != 0) {
    return runtime->Error("nrt_init", s, -1,
                          "(are the NeuronCores of NEURON_RT_VISIBLE_CORES free, and the Neuron driver loaded?)");
  }
  runtime->open_ = true;
  runtime->uses_ = 1;
  uint32_t count = 0;
  s = api.get_visible_vnc_count(&count);
  if (s != 0) {
    Status error = runtime->Error("nrt_get_visible_vnc_count", s, -1, "");
    runtime->Close();
    return error;
  }
  runtime->visible_cores_ = static_cast<int>(count);
  for (uint32_t i = 0; i < count; ++i) runtime->core_locks_.push_back(std::make_unique<std::mutex>());
  if (api.get_instance_info != nullptr) {
    NrtInstanceInfo info{};
    if (api.get_instance_info(&info, sizeof info) == 0) runtime->instance_family_ = info.family;
  }
  current = runtime;
  return runtime;
}

Runtime::~Runtime() { Close(); }

void Runtime::EndUse() {
  bool last = false;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    last = open_ && --uses_ == 0;
  }
  if (last) Close();
}

bool Runtime::open() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return open_;
}

std::mutex& Runtime::core_lock(int core) const {
  // Out-of-range cores share the last lock: callers check ranges, this only must not crash.
  static std::mutex fallback;
  const int vnc = Vnc(core);
  if (vnc < 0 || static_cast<size_t>(vnc) >= core_locks_.size()) return fallback;
  return *core_locks_[vnc];
}

Status Runtime::Error(const char* call, NrtStatus status, int core, const std::string& detail) const {
  const char* text = nullptr;
  if (library_ != nullptr && api().get_status_as_str != nullptr) text = api().get_status_as_str(status);
  return NrtError(call, status, core, detail, text);
}

StatusOr<std::shared_ptr<DeviceTensor>> Runtime::Allocate(int vnc, size_t size, const std::string& name) {
  if (size == 0) return Internal("a zero-byte device tensor was requested for '" + name + "'");
  if (!open()) return FailedPrecondition("the Neuron runtime session has ended (client destroyed)");
  nrt_tensor* tensor = nullptr;
  NrtStatus s;
  {
    std::lock_guard<std::mutex> lock(core_lock(vnc));
    s = api().tensor_allocate(kNrtPlacementDevice, Vnc(vnc), size, name.c_str(), &tensor);
  }
  if (s != 0 || tensor == nullptr) {
    return Error("nrt_tensor_allocate", s == 0 ? 1 : s, vnc, "for " + Bytes(size) + " of HBM (" + name + ")");
  }
  return std::make_shared<DeviceTensor>(shared_from_this(), tensor, vnc, size);
}

StatusOr<std::unique_ptr<LoadedModel>> Runtime::Load(const std::string& neff, int vnc, int rank, int world,
                                                     const std::string& what) {
  if (!open()) return FailedPrecondition("the Neuron runtime session has ended (client destroyed)");
  nrt_model* model = nullptr;
  NrtStatus s;
  // Not under the core lock: the ranks of one communicator may wait for each other here.
  if (world > 1) {
    s = api().load_collectives(neff.data(), neff.size(), Vnc(vnc), -1, static_cast<uint32_t>(rank),
                               static_cast<uint32_t>(world), &model);
  } else {
    s = api().load(neff.data(), neff.size(), Vnc(vnc), -1, &model);
  }
  if (s != 0 || model == nullptr) {
    const std::string detail = "loading " + what + " (" + Bytes(neff.size()) + " of NEFF" +
                               (world > 1 ? ", rank " + std::to_string(rank) + " of " + std::to_string(world) : "") + ")";
    return Error(world > 1 ? "nrt_load_collectives" : "nrt_load", s == 0 ? 1 : s, vnc, detail);
  }
  return std::make_unique<LoadedModel>(shared_from_this(), model, vnc);
}

StatusOr<CoreMemory> Runtime::MemoryStats(int vnc) const {
  if (api().get_vnc_memory_stats == nullptr) return Unimplemented("this Neuron runtime has no nrt_get_vnc_memory_stats");
  NrtVncMemoryStats stats{};
  size_t written = 0;
  NrtStatus s = api().get_vnc_memory_stats(static_cast<uint32_t>(Vnc(vnc)), &stats, sizeof stats, &written);
  if (s != 0) return Error("nrt_get_vnc_memory_stats", s, vnc, "");
  CoreMemory memory;
  memory.bytes_used = static_cast<int64_t>(stats.bytes_used);
  memory.bytes_limit = written >= sizeof stats ? static_cast<int64_t>(stats.bytes_limit) : 0;
  return memory;
}

void Runtime::Register(RuntimeHandle* handle) {
  std::lock_guard<std::mutex> lock(mutex_);
  handles_.insert(handle);
}

bool Runtime::Unregister(RuntimeHandle* handle) {
  std::lock_guard<std::mutex> lock(mutex_);
  return handles_.erase(handle) > 0;
}

void Runtime::Close() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!open_) return;
  // Models first: they may refer to tensors of their own.
  for (RuntimeHandle* handle : handles_) {
    if (dynamic_cast<LoadedModel*>(handle) != nullptr) handle->ReleaseAtClose();
  }
  for (RuntimeHandle* handle : handles_) handle->ReleaseAtClose();
  handles_.clear();
  api().close();
  open_ = false;
}

}  // namespace pjrt_neuron::engine::neuron
