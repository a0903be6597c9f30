// The simulated runtime's state: claimed cores, HBM accounting, tensors, sets, models, and
// execution (one at a time per core; the ranks of a collective meet in one XLA run, at the
// process that hosts the communicator's root).
#include "runtime.h"

#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <new>
#include <thread>

#include "communicator.h"
#include "element_types.h"
#include "log.h"

namespace standin {
namespace {

constexpr size_t kHostTensorLimit = 4u << 20;  // HOST placement is for small tensors only
constexpr uint8_t kUninitialisedByte = 0xA5;   // fresh tensors hold no zeros to rely on

std::string Quote(const std::string& text) { return "'" + text + "'"; }

// NEFF targets and instance families that run each other's NEFFs: trn1 and trn1n share a chip.
bool TargetRuns(uint32_t neff_family, uint32_t instance_family) {
  auto chip = [](uint32_t family) {
    return family == NRT_INSTANCE_FAMILY_TRN1N ? uint32_t{NRT_INSTANCE_FAMILY_TRN1} : family;
  };
  return chip(neff_family) == chip(instance_family);
}

bool ValidRootCommId(const std::string& id) {
  size_t colon = id.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == id.size()) return false;
  std::string port = id.substr(colon + 1);
  if (port.find_first_not_of("0123456789") != std::string::npos || port.size() > 5) return false;
  return std::atoi(port.c_str()) > 0 && std::atoi(port.c_str()) < 65536;
}

bool HasNanOrInf(const ElementType& type, const uint8_t* data, size_t size) {
  if (!type.is_floating) return false;
  for (size_t at = 0; at + type.byte_size <= size; at += type.byte_size) {
    uint32_t bits = 0;
    std::memcpy(&bits, data + at, type.byte_size);
    switch (type.xla_type) {
      case 11: if ((bits & 0x7F800000u) == 0x7F800000u) return true; break;  // f32
      case 10: if ((bits & 0x7C00u) == 0x7C00u) return true; break;          // f16
      case 16: if ((bits & 0x7F80u) == 0x7F80u) return true; break;          // bf16
      case 19: if ((bits & 0x7Cu) == 0x7Cu) return true; break;              // f8e5m2
      case 20: if ((bits & 0x7Fu) == 0x7Fu) return true; break;              // f8e4m3fn
      default: break;
    }
  }
  return false;
}

}  // namespace

struct Submission {
  std::vector<HostArray> arguments;
  std::vector<HostDestination> results;
  bool done = false;
  bool ok = false;
  std::string error;
};

// What one execution needs once the runtime's lock is released: the tensors stay alive even
// if the caller frees them meanwhile.
struct Runtime::Binding {
  std::vector<std::shared_ptr<nrt_tensor>> inputs;   // by parameter; null: zero elements
  std::vector<std::shared_ptr<nrt_tensor>> outputs;  // by result index; null: zero elements
  std::vector<HostArray> arguments;
  std::vector<HostDestination> results;
  // Copied under the runtime's lock, so the execution reads no shared state without it.
  std::shared_ptr<XlaCpuEngine> engine;
  double timeout_seconds = 0;
  uint64_t delay_ms = 0;
  bool report_numerical_errors = false;
};

Runtime& Runtime::Get() {
  static Runtime* runtime = new Runtime;
  return *runtime;
}

bool Runtime::InjectFault(const char* function, NRT_STATUS* status) {
  uint64_t call = 0;
  if (!faults_.Hit(function, status, &call)) return false;
  LogError(function, "NEURON_STANDIN_FAULT: call " + std::to_string(call) + " returns " +
                         std::to_string(*status));
  return true;
}

NRT_STATUS Runtime::RequireInitialized(const char* function) const {
  if (phase_ == Phase::kInitialized) return NRT_SUCCESS;
  if (phase_ == Phase::kUninitialized) {
    LogError(function, "the runtime is not initialised: call nrt_init first");
    return NRT_UNINITIALIZED;
  }
  LogError(function, "the runtime is closed: nrt_close was called");
  return NRT_CLOSED;
}

NRT_STATUS Runtime::CheckVnc(const char* function, int64_t vnc) const {
  if (vnc >= 0 && vnc < static_cast<int64_t>(cores_.size())) return NRT_SUCCESS;
  LogError(function, "NeuronCore " + std::to_string(vnc) + " is not visible to this process (" +
                         std::to_string(cores_.size()) + " visible: 0.." +
                         std::to_string(static_cast<int64_t>(cores_.size()) - 1) + ")");
  return NRT_INVALID;
}

NRT_STATUS Runtime::Init(int framework, const char*, const char*) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (phase_ == Phase::kInitialized || phase_ == Phase::kClosing) {
    LogError("nrt_init", "the runtime is already initialised in this process");
    return NRT_INVALID;  // and the running fault plan keeps its counts
  }
  std::string error;
  if (!ReadLogLevel(&error)) {
    LogError("nrt_init", error);
    return NRT_INVALID;
  }
  if (!faults_.Reset(std::getenv("NEURON_STANDIN_FAULT"), &error)) {
    LogError("nrt_init", error);
    return NRT_INVALID;
  }
  NRT_STATUS injected = NRT_SUCCESS;
  if (InjectFault("nrt_init", &injected)) return injected;
  if (framework < 1 || framework > 4) {
    LogError("nrt_init", "framework type " + std::to_string(framework) + " is not valid");
    return NRT_INVALID;
  }
  Settings settings;
  if (!ReadSettings(&settings, &error)) {
    LogError("nrt_init", error);
    return NRT_INVALID;
  }
  struct stat plugin_stat {};
  if (stat(settings.xla_cpu_plugin.c_str(), &plugin_stat) != 0) {
    LogError("nrt_init", "NEURON_STANDIN_XLA_CPU_PLUGIN=" + settings.xla_cpu_plugin +
                             ": no such file");
    return NRT_INVALID;
  }
  std::unique_ptr<CoreLocks> locks;
  switch (settings.cores.kind) {
    case CoreRequest::Kind::kAll:
      locks = CoreLocks::Claim(settings.lock_dir, 0, settings.total_vncs, settings.lnc, &error);
      break;
    case CoreRequest::Kind::kRange:
      locks = CoreLocks::Claim(settings.lock_dir, settings.cores.first, settings.cores.count,
                               settings.lnc, &error);
      break;
    case CoreRequest::Kind::kCount:
      locks = CoreLocks::ClaimAnyContiguous(settings.lock_dir, settings.cores.count,
                                            settings.total_vncs, settings.lnc, &error);
      break;
  }
  if (!locks) {
    LogError("nrt_init", "Logical NeuronCore(s) not available: " + error);
    return NRT_RESOURCE;
  }
  settings_ = settings;
  locks_ = std::move(locks);
  cores_.clear();
  cores_.resize(locks_->count());
  phase_ = Phase::kInitialized;
  Log(LogLevel::kInfo, "nrt_init",
      std::string(settings_.instance.name) + ": NeuronCores " + std::to_string(locks_->first()) +
          ".." + std::to_string(locks_->first() + locks_->count() - 1) + " of " +
          std::to_string(settings_.total_vncs) + " claimed");
  return NRT_SUCCESS;
}

void Runtime::Close() {
  std::unique_lock<std::mutex> lock(mutex_);
  if (phase_ != Phase::kInitialized) {
    LogWarning("nrt_close", "the runtime is not initialised; nothing to close");
    return;
  }
  phase_ = Phase::kClosing;
  idle_.wait(lock, [this] { return executions_in_flight_ == 0; });
  {
    // Ranks elsewhere see the connection end at once rather than wait for a round.
    std::lock_guard<std::mutex> communicator(communicator_mutex_);
    if (listener_ >= 0) {
      shutdown(listener_, SHUT_RDWR);
      close(listener_);
      listener_ = -1;
    }
    for (int connection : served_connections_) shutdown(connection, SHUT_RDWR);
    served_connections_.clear();
  }
  for (auto& entry : models_) {
    if (entry.second->root_connection >= 0) close(entry.second->root_connection);
  }
  groups_.clear();
  models_.clear();
  sets_.clear();
  tensors_.clear();
  engine_.reset();  // the last program went with the models
  wide_engines_.clear();
  cores_.clear();
  locks_.reset();
  phase_ = Phase::kClosed;
}

NRT_STATUS Runtime::GetVisibleVncCount(uint32_t* count) {
  if (!count) return NRT_INVALID;
  std::lock_guard<std::mutex> lock(mutex_);
  if (phase_ == Phase::kInitialized) {
    *count = static_cast<uint32_t>(cores_.size());
    return NRT_SUCCESS;
  }
  Settings settings;
  std::string error;
  if (!ReadHostSettings(&settings, &error)) {
    LogError("nrt_get_visible_vnc_count", error);
    return NRT_INVALID;
  }
  *count = settings.RequestedVncCount();
  return NRT_SUCCESS;
}

NRT_STATUS Runtime::GetTotalVncCount(uint32_t* count) {
  if (!count) return NRT_INVALID;
  std::lock_guard<std::mutex> lock(mutex_);
  Settings settings;
  std::string error;
  if (phase_ == Phase::kInitialized) {
    settings = settings_;
  } else if (!ReadHostSettings(&settings, &error)) {
    LogError("nrt_get_total_vnc_count", error);
    return NRT_INVALID;
  }
  *count = settings.total_vncs;
  return NRT_SUCCESS;
}

NRT_STATUS Runtime::GetInstanceInfo(nrt_instance_info_t* info, size_t size) {
  if (!info || size < offsetof(nrt_instance_info_t, size) + sizeof(info->size)) {
    LogError("nrt_get_instance_info", "needs a buffer of at least " +
                                          std::to_string(sizeof(nrt_instance_info_t)) + " bytes");
    return NRT_INVALID;
  }
  std::lock_guard<std::mutex> lock(mutex_);
  Settings settings;
  std::string error;
  if (phase_ == Phase::kInitialized) {
    settings = settings_;
  } else if (!ReadHostSettings(&settings, &error)) {
    LogError("nrt_get_instance_info", error);
    return NRT_INVALID;
  }
  info->family = settings.instance.family;
  info->size = settings.instance.size;
  return NRT_SUCCESS;
}

NRT_STATUS Runtime::GetMemoryStats(uint32_t vnc, nrt_vnc_memory_stats_t* stats, size_t size_in,
                                   size_t* size_out) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (NRT_STATUS status = RequireInitialized("nrt_get_vnc_memory_stats")) return status;
  if (NRT_STATUS status = CheckVnc("nrt_get_vnc_memory_stats", vnc)) return status;
  if (!stats || size_in == 0) {
    LogError("nrt_get_vnc_memory_stats", "no stats buffer");
    return NRT_INVALID;
  }
  nrt_vnc_memory_stats_t full{cores_[vnc].hbm_used, settings_.hbm_per_vnc};
  size_t written = std::min(size_in, sizeof full);
  std::memcpy(stats, &full, written);
  if (size_out) *size_out = written;
  return NRT_SUCCESS;
}

NRT_STATUS Runtime::EnsureEngine(std::string* error) {
  if (engine_) return NRT_SUCCESS;
  // One CPU device per core of the host: the root runs every rank of a collective, its own
  // and other processes', as replicas.
  const size_t devices = std::max<size_t>(cores_.size(), settings_.total_vncs);
  engine_ = XlaCpuEngine::Create(settings_.xla_cpu_plugin, static_cast<int>(devices), error);
  engine_devices_ = devices;
  return engine_ ? NRT_SUCCESS : NRT_FAILURE;
}

NRT_STATUS Runtime::Load(const char* function, const void* neff_bytes, size_t size, int32_t vnc,
                         int32_t vnc_count, bool collective, uint32_t rank, uint32_t world,
                         nrt_model_t** result) {
  int root_connection = -1;
  if (collective) {
    std::string root;
    double timeout_seconds = 0;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (NRT_STATUS status = RequireInitialized(function)) return status;
      if (!ValidRootCommId(settings_.root_comm_id)) {
        LogError(function, "NEURON_RT_ROOT_COMM_ID='" + settings_.root_comm_id +
                               "': collectives need host:port of rank 0");
        return NRT_INVALID;
      }
      if (world == 0 || rank >= world) {
        LogError(function, "rank " + std::to_string(rank) + " of world " + std::to_string(world));
        return NRT_INVALID;
      }
      root = settings_.root_comm_id;
      timeout_seconds = settings_.exec_timeout_seconds;
    }
    // Not under the runtime's lock: a rank may wait here for rank 0 of this very process.
    if (NRT_STATUS status = RouteRank(function, root, rank, timeout_seconds, &root_connection)) {
      return status;
    }
  }
  struct ConnectionGuard {
    int* fd;
    ~ConnectionGuard() {
      if (*fd >= 0) close(*fd);
    }
  } connection_guard{&root_connection};
  std::lock_guard<std::mutex> lock(mutex_);
  if (NRT_STATUS status = RequireInitialized(function)) return status;
  if (!result || !neff_bytes) {
    LogError(function, "null NEFF or model pointer");
    return NRT_INVALID;
  }
  if (vnc_count != -1 && vnc_count != 1) {
    LogError(function, "vnc_count " + std::to_string(vnc_count) +
                           ": a model loads on one NeuronCore here; pass -1");
    return NRT_INVALID;
  }
  auto model = std::make_shared<nrt_model>();
  std::string error;
  switch (ReadNeff(neff_bytes, size, &model->neff, &error)) {
    case NeffProblem::kNone: break;
    case NeffProblem::kMalformed: LogError(function, "invalid NEFF: " + error); return NRT_INVALID;
    case NeffProblem::kUnsupportedVersion: LogError(function, error); return NRT_UNSUPPORTED_NEFF_VERSION;
  }
  if (!TargetRuns(model->neff.target_family, settings_.instance.family)) {
    LogError(function, "the NEFF was compiled for instance family " +
                           std::to_string(model->neff.target_family) + ", this is " +
                           settings_.instance.name);
    return NRT_INVALID;
  }
  if (model->neff.lnc != settings_.lnc) {
    LogError(function, "the NEFF was compiled for --lnc " + std::to_string(model->neff.lnc) +
                           ", the runtime runs NEURON_LOGICAL_NC_CONFIG=" +
                           std::to_string(settings_.lnc));
    return NRT_INVALID;
  }
  if (vnc == -1) {
    for (size_t core = 0; core < cores_.size() && vnc == -1; ++core) {
      bool busy = std::any_of(models_.begin(), models_.end(),
                              [&](const auto& entry) { return entry.second->vnc == core; });
      if (!busy) vnc = static_cast<int32_t>(core);
    }
    if (vnc == -1) {
      LogError(function, "vnc -1: every visible NeuronCore already has a model");
      return NRT_LOAD_NOT_ENOUGH_NC;
    }
  } else if (NRT_STATUS status = CheckVnc(function, vnc)) {
    return status;
  }
  model->vnc = static_cast<uint32_t>(vnc);
  model->hbm_bytes = size;
  Core& core = cores_[model->vnc];
  if (core.hbm_used + size > settings_.hbm_per_vnc) {
    LogError(function, "out of HBM on NeuronCore " + std::to_string(vnc) + ": the model needs " +
                           std::to_string(size) + " bytes, " +
                           std::to_string(settings_.hbm_per_vnc - core.hbm_used) + " are free");
    return NRT_RESOURCE;
  }
  if (root_connection < 0) {
    if (NRT_STATUS status = EnsureEngine(&error)) {
      LogError(function, error);
      return status;
    }
  }
  model->id = next_id_++;
  model->rank = rank;
  if (collective && root_connection >= 0) {
    model->root_connection = root_connection;
    if (NRT_STATUS status = JoinAtRoot(function, model.get(), world, neff_bytes, size)) {
      model->root_connection = -1;
      return status;
    }
    root_connection = -1;  // the model's now
  } else if (collective) {
    if (NRT_STATUS status = JoinGroup(function, model.get(), world)) return status;
  } else {
    std::unique_ptr<XlaProgram> program = engine_->Compile(model->neff.program, 1, &error);
    if (!program) {
      LogError(function, error);
      return NRT_FAILURE;
    }
    model->program = std::move(program);
  }
  const XlaProgram* program = model->group ? model->group->compiled.get() : model->program.get();
  if (program != nullptr && program->output_count() != model->neff.output_count) {
    LogError(function, "the NEFF lists " + std::to_string(model->neff.output_count) +
                           " outputs, its program has " + std::to_string(program->output_count()));
    LeaveGroup(*model);
    return NRT_INVALID;
  }
  core.hbm_used += size;
  *result = model.get();
  models_.emplace(model.get(), model);
  return NRT_SUCCESS;
}

NRT_STATUS Runtime::JoinGroup(const char* function, nrt_model* model, uint32_t world) {
  std::shared_ptr<CollectiveGroup> group;
  for (const auto& candidate : groups_) {
    if (candidate->world != world || candidate->program != model->neff.program ||
        candidate->member_ids[model->rank] != 0) {
      continue;
    }
    bool core_taken = false;
    for (uint32_t r = 0; r < world; ++r) {
      core_taken |= candidate->member_ids[r] != 0 && candidate->member_vncs[r] == model->vnc;
    }
    if (!core_taken) {
      group = candidate;
      break;
    }
  }
  if (!group) {
    std::string error;
    // A job across hosts has more ranks than this host has cores: the root runs them all.
    std::shared_ptr<XlaCpuEngine> engine = engine_;
    if (world > engine_devices_) {
      auto& wide = wide_engines_[world];
      if (!wide) wide = XlaCpuEngine::Create(settings_.xla_cpu_plugin, static_cast<int>(world), &error);
      if (!wide) {
        LogError(function, error);
        return NRT_FAILURE;
      }
      engine = wide;
    }
    auto compiled = engine->Compile(model->neff.program, static_cast<int>(world), &error);
    if (!compiled) {
      LogError(function, error);
      return NRT_FAILURE;
    }
    group = std::make_shared<CollectiveGroup>();
    group->program = model->neff.program;
    group->world = world;
    group->member_ids.assign(world, 0);
    group->member_vncs.assign(world, 0);
    group->pending.assign(world, nullptr);
    group->compiled = std::move(compiled);
    group->engine = engine;
    groups_.push_back(group);
  }
  group->member_ids[model->rank] = model->id;
  group->member_vncs[model->rank] = model->vnc;
  model->group = group;
  return NRT_SUCCESS;
}

void Runtime::LeaveGroup(const nrt_model& model) {
  if (!model.group) return;
  CollectiveGroup& group = *model.group;
  if (group.member_ids[model.rank] == model.id) group.member_ids[model.rank] = 0;
  if (std::all_of(group.member_ids.begin(), group.member_ids.end(),
                  [](uint64_t id) { return id == 0; })) {
    groups_.erase(std::remove(groups_.begin(), groups_.end(), model.group), groups_.end());
  }
}

NRT_STATUS Runtime::Unload(nrt_model_t* handle) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (NRT_STATUS status = RequireInitialized("nrt_unload")) return status;
  auto found = models_.find(handle);
  if (found == models_.end()) {
    LogError("nrt_unload", "not a loaded model");
    return NRT_INVALID_HANDLE;
  }
  cores_[found->second->vnc].hbm_used -= found->second->hbm_bytes;
  LeaveGroup(*found->second);
  if (found->second->root_connection >= 0) close(found->second->root_connection);  // the root lets go
  models_.erase(found);
  return NRT_SUCCESS;
}

NRT_STATUS Runtime::GetTensorInfo(nrt_model_t* handle, nrt_tensor_info_array_t** info) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (NRT_STATUS status = RequireInitialized("nrt_get_model_tensor_info")) return status;
  auto found = models_.find(handle);
  if (found == models_.end()) {
    LogError("nrt_get_model_tensor_info", "not a loaded model");
    return NRT_INVALID_HANDLE;
  }
  if (!info) return NRT_INVALID;
  // Reverse program order (outputs last to first, then inputs): binding by position fails.
  std::vector<const NeffTensor*> listed;
  for (const NeffTensor* t : found->second->neff.Inputs()) listed.push_back(t);
  for (const NeffTensor* t : found->second->neff.Outputs()) listed.push_back(t);
  listed.erase(std::remove_if(listed.begin(), listed.end(),
                              [](const NeffTensor* t) { return t->byte_size == 0; }),
               listed.end());
  std::reverse(listed.begin(), listed.end());
  size_t dims = 0;
  for (const NeffTensor* t : listed) dims += t->shape.size();
  size_t array_bytes = offsetof(nrt_tensor_info_array_t, tensor_array) +
                       listed.size() * sizeof(nrt_tensor_info_t);
  // One malloc block, freed by nrt_free_model_tensor_info: the shapes follow the array.
  auto* block = static_cast<uint8_t*>(std::calloc(1, array_bytes + dims * sizeof(uint32_t) + 1));
  if (!block) return NRT_RESOURCE;
  auto* array = reinterpret_cast<nrt_tensor_info_array_t*>(block);
  auto* shapes = reinterpret_cast<uint32_t*>(block + array_bytes);
  array->tensor_count = listed.size();
  for (size_t i = 0; i < listed.size(); ++i) {
    const NeffTensor& t = *listed[i];
    nrt_tensor_info_t& entry = array->tensor_array[i];
    std::strncpy(entry.name, t.name.c_str(), sizeof entry.name - 1);
    entry.usage = static_cast<nrt_tensor_usage_t>(t.usage);
    entry.size = t.byte_size;
    entry.dtype = static_cast<nrt_dtype_t>(t.nrt_dtype);
    entry.shape = shapes;
    entry.ndim = static_cast<uint32_t>(t.shape.size());
    std::copy(t.shape.begin(), t.shape.end(), shapes);
    shapes += t.shape.size();
  }
  tensor_infos_.insert(array);
  *info = array;
  return NRT_SUCCESS;
}

NRT_STATUS Runtime::FreeTensorInfo(nrt_tensor_info_array_t* info) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (tensor_infos_.erase(info) == 0) {
    LogError("nrt_free_model_tensor_info", "not a tensor info from nrt_get_model_tensor_info");
    return NRT_INVALID_HANDLE;
  }
  std::free(info);
  return NRT_SUCCESS;
}

std::shared_ptr<nrt_tensor> Runtime::LiveTensor(const nrt_tensor* tensor) const {
  auto found = tensors_.find(tensor);
  return found == tensors_.end() ? nullptr : found->second;
}

NRT_STATUS Runtime::AllocateTensor(nrt_tensor_placement_t placement, int vnc, size_t size,
                                   const char* name, nrt_tensor_t** result) {
  const char* fn = "nrt_tensor_allocate";
  std::lock_guard<std::mutex> lock(mutex_);
  if (NRT_STATUS status = RequireInitialized(fn)) return status;
  if (!result) return NRT_INVALID;
  if (placement != NRT_TENSOR_PLACEMENT_DEVICE && placement != NRT_TENSOR_PLACEMENT_HOST &&
      placement != NRT_TENSOR_PLACEMENT_VIRTUAL) {
    LogError(fn, "placement " + std::to_string(placement) + " is not DEVICE, HOST or VIRTUAL");
    return NRT_INVALID;
  }
  if (NRT_STATUS status = CheckVnc(fn, vnc)) return status;
  if (size == 0) {
    LogError(fn, "a tensor of 0 bytes cannot be allocated");
    return NRT_INVALID;
  }
  std::string tensor_name = name ? name : "";
  Core& core = cores_[vnc];
  if (placement == NRT_TENSOR_PLACEMENT_DEVICE && size > settings_.hbm_per_vnc - core.hbm_used) {
    LogError(fn, "out of HBM on NeuronCore " + std::to_string(vnc) + ": " + Quote(tensor_name) +
                     " needs " + std::to_string(size) + " bytes, " +
                     std::to_string(settings_.hbm_per_vnc - core.hbm_used) + " of " +
                     std::to_string(settings_.hbm_per_vnc) + " are free");
    return NRT_RESOURCE;
  }
  if (placement == NRT_TENSOR_PLACEMENT_HOST && size > kHostTensorLimit) {
    LogError(fn, "HOST tensors are limited to " + std::to_string(kHostTensorLimit) + " bytes; " +
                     Quote(tensor_name) + " asks " + std::to_string(size));
    return NRT_RESOURCE;
  }
  auto tensor = std::make_shared<nrt_tensor>();
  if (placement != NRT_TENSOR_PLACEMENT_VIRTUAL) {
    tensor->storage.reset(new (std::nothrow) uint8_t[size]);
    if (!tensor->storage) {
      LogError(fn, "the host has no " + std::to_string(size) + " bytes for " + Quote(tensor_name));
      return NRT_RESOURCE;
    }
    std::memset(tensor->storage.get(), kUninitialisedByte, size);
  }
  tensor->id = next_id_++;
  tensor->placement = placement;
  tensor->vnc = static_cast<uint32_t>(vnc);
  tensor->size = size;
  tensor->name = tensor_name;
  if (placement == NRT_TENSOR_PLACEMENT_DEVICE) core.hbm_used += size;
  *result = tensor.get();
  tensors_.emplace(tensor.get(), std::move(tensor));
  return NRT_SUCCESS;
}

void Runtime::FreeTensor(nrt_tensor_t** tensor) {
  if (!tensor || !*tensor) return;
  std::lock_guard<std::mutex> lock(mutex_);
  auto found = tensors_.find(*tensor);
  if (found == tensors_.end()) {
    LogError("nrt_tensor_free", phase_ == Phase::kInitialized
                                    ? "not a live tensor (freed twice?)"
                                    : "the runtime is not initialised; tensors ended at nrt_close");
  } else {
    if (found->second->placement == NRT_TENSOR_PLACEMENT_DEVICE) {
      cores_[found->second->vnc].hbm_used -= found->second->size;
    }
    tensors_.erase(found);
  }
  *tensor = nullptr;
}

NRT_STATUS Runtime::AttachBuffer(nrt_tensor_t* handle, void* buffer, size_t size) {
  const char* fn = "nrt_tensor_attach_buffer";
  std::lock_guard<std::mutex> lock(mutex_);
  if (NRT_STATUS status = RequireInitialized(fn)) return status;
  std::shared_ptr<nrt_tensor> tensor = LiveTensor(handle);
  if (!tensor) return NRT_INVALID_HANDLE;
  if (tensor->placement != NRT_TENSOR_PLACEMENT_VIRTUAL || !buffer || size != tensor->size) {
    LogError(fn, "needs a VIRTUAL tensor and a buffer of its size (" +
                     std::to_string(tensor->size) + " bytes)");
    return NRT_INVALID;
  }
  tensor->attached = buffer;
  return NRT_SUCCESS;
}

NRT_STATUS Runtime::ReadTensor(const nrt_tensor_t* handle, void* buffer, size_t offset,
                               size_t size) {
  std::shared_ptr<nrt_tensor> tensor;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (NRT_STATUS status = RequireInitialized("nrt_tensor_read")) return status;
    tensor = LiveTensor(handle);
  }
  if (!tensor) {
    LogError("nrt_tensor_read", "not a live tensor");
    return NRT_INVALID_HANDLE;
  }
  if (!buffer || offset > tensor->size || size > tensor->size - offset || !tensor->data()) {
    LogError("nrt_tensor_read", "bytes " + std::to_string(offset) + "+" + std::to_string(size) +
                                    " of " + Quote(tensor->name) + " (" +
                                    std::to_string(tensor->size) + " bytes) cannot be read");
    return NRT_INVALID;
  }
  std::memcpy(buffer, tensor->data() + offset, size);
  return NRT_SUCCESS;
}

NRT_STATUS Runtime::WriteTensor(nrt_tensor_t* handle, const void* buffer, size_t offset,
                                size_t size) {
  std::shared_ptr<nrt_tensor> tensor;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (NRT_STATUS status = RequireInitialized("nrt_tensor_write")) return status;
    tensor = LiveTensor(handle);
  }
  if (!tensor) {
    LogError("nrt_tensor_write", "not a live tensor");
    return NRT_INVALID_HANDLE;
  }
  if (!buffer || offset > tensor->size || size > tensor->size - offset || !tensor->data()) {
    LogError("nrt_tensor_write", "bytes " + std::to_string(offset) + "+" + std::to_string(size) +
                                     " of " + Quote(tensor->name) + " (" +
                                     std::to_string(tensor->size) + " bytes) cannot be written");
    return NRT_INVALID;
  }
  std::memcpy(tensor->data() + offset, buffer, size);
  return NRT_SUCCESS;
}

size_t Runtime::TensorSize(const nrt_tensor_t* handle) {
  std::lock_guard<std::mutex> lock(mutex_);
  std::shared_ptr<nrt_tensor> tensor = LiveTensor(handle);
  if (!tensor) {
    LogError("nrt_tensor_get_size", "not a live tensor");
    return 0;
  }
  return tensor->size;
}

NRT_STATUS Runtime::CopyTensor(const nrt_tensor_t* source_handle, size_t source_offset,
                               nrt_tensor_t* destination_handle, size_t destination_offset,
                               size_t size) {
  const char* fn = "nrt_tensor_copy";
  std::shared_ptr<nrt_tensor> source, destination;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (NRT_STATUS status = RequireInitialized(fn)) return status;
    source = LiveTensor(source_handle);
    destination = LiveTensor(destination_handle);
  }
  if (!source || !destination) {
    LogError(fn, "not a live tensor");
    return NRT_INVALID_HANDLE;
  }
  if (source->placement != NRT_TENSOR_PLACEMENT_DEVICE ||
      destination->placement != NRT_TENSOR_PLACEMENT_DEVICE || source->vnc != destination->vnc) {
    LogError(fn, "copies run between DEVICE tensors of one NeuronCore; " + Quote(source->name) +
                     " is on " + std::to_string(source->vnc) + ", " + Quote(destination->name) +
                     " on " + std::to_string(destination->vnc));
    return NRT_INVALID;
  }
  if (source_offset > source->size || size > source->size - source_offset ||
      destination_offset > destination->size || size > destination->size - destination_offset) {
    LogError(fn, "the copy of " + std::to_string(size) + " bytes runs past a tensor's end");
    return NRT_INVALID;
  }
  std::memmove(destination->data() + destination_offset, source->data() + source_offset, size);
  return NRT_SUCCESS;
}

NRT_STATUS Runtime::AllocateSet(nrt_tensor_set_t** set) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (NRT_STATUS status = RequireInitialized("nrt_allocate_tensor_set")) return status;
  if (!set) return NRT_INVALID;
  auto created = std::make_unique<nrt_tensor_set>();
  *set = created.get();
  sets_.emplace(created.get(), std::move(created));
  return NRT_SUCCESS;
}

void Runtime::DestroySet(nrt_tensor_set_t** set) {
  if (!set || !*set) return;
  std::lock_guard<std::mutex> lock(mutex_);
  if (sets_.erase(*set) == 0) {
    LogError("nrt_destroy_tensor_set", "not a live tensor set");
  }
  *set = nullptr;
}

NRT_STATUS Runtime::AddToSet(nrt_tensor_set_t* set, const char* name, nrt_tensor_t* tensor) {
  const char* fn = "nrt_add_tensor_to_tensor_set";
  std::lock_guard<std::mutex> lock(mutex_);
  if (NRT_STATUS status = RequireInitialized(fn)) return status;
  if (sets_.find(set) == sets_.end() || !LiveTensor(tensor)) {
    LogError(fn, "not a live tensor set or tensor");
    return NRT_INVALID_HANDLE;
  }
  if (!name || !*name || std::strlen(name) >= NRT_TENSOR_NAME_MAX) {
    LogError(fn, "a tensor name must have 1.." + std::to_string(NRT_TENSOR_NAME_MAX - 1) +
                     " bytes");
    return NRT_INVALID;
  }
  set->entries[name] = {tensor, tensor->id};
  return NRT_SUCCESS;
}

NRT_STATUS Runtime::GetFromSet(nrt_tensor_set_t* set, const char* name, nrt_tensor_t** tensor) {
  const char* fn = "nrt_get_tensor_from_tensor_set";
  std::lock_guard<std::mutex> lock(mutex_);
  if (NRT_STATUS status = RequireInitialized(fn)) return status;
  if (sets_.find(set) == sets_.end()) {
    LogError(fn, "not a live tensor set");
    return NRT_INVALID_HANDLE;
  }
  if (!name || !tensor) return NRT_INVALID;
  auto found = set->entries.find(name);
  if (found == set->entries.end()) {
    LogError(fn, "no tensor named " + Quote(name) + " in the set");
    return NRT_INVALID;
  }
  std::shared_ptr<nrt_tensor> live = LiveTensor(found->second.tensor);
  if (!live || live->id != found->second.id) {
    LogError(fn, "the tensor named " + Quote(name) + " was freed");
    return NRT_INVALID_HANDLE;
  }
  *tensor = live.get();
  return NRT_SUCCESS;
}

NRT_STATUS Runtime::Bind(const nrt_model& model, const nrt_tensor_set& inputs,
                         const nrt_tensor_set& outputs, Binding* binding) const {
  std::vector<std::string> problems;
  auto bind = [&](const NeffTensor& t, const nrt_tensor_set& set, const char* which) {
    std::shared_ptr<nrt_tensor> tensor;
    auto entry = set.entries.find(t.name);
    if (entry == set.entries.end()) {
      problems.push_back(std::string(which) + " tensor " + Quote(t.name) + " is not in the " +
                         which + " set");
      return tensor;
    }
    tensor = LiveTensor(entry->second.tensor);
    if (!tensor || tensor->id != entry->second.id) {
      problems.push_back("the tensor bound as " + Quote(t.name) + " was freed");
      return std::shared_ptr<nrt_tensor>();
    }
    if (tensor->size != t.byte_size) {
      problems.push_back(Quote(t.name) + " is bound to a tensor of " +
                         std::to_string(tensor->size) + " bytes; the model needs " +
                         std::to_string(t.byte_size));
    } else if (tensor->placement == NRT_TENSOR_PLACEMENT_DEVICE && tensor->vnc != model.vnc) {
      problems.push_back(Quote(t.name) + " is on NeuronCore " + std::to_string(tensor->vnc) +
                         ", the model on " + std::to_string(model.vnc));
    } else if (!tensor->data()) {
      problems.push_back(Quote(t.name) + " is a VIRTUAL tensor with no buffer attached");
    }
    return tensor;
  };
  const std::vector<const NeffTensor*> neff_inputs = model.neff.Inputs();
  const std::vector<const NeffTensor*> neff_outputs = model.neff.Outputs();
  for (const NeffTensor* t : neff_inputs) {
    binding->inputs.push_back(t->byte_size ? bind(*t, inputs, "input") : nullptr);
  }
  for (const NeffTensor* t : neff_outputs) {
    binding->outputs.push_back(t->byte_size ? bind(*t, outputs, "output") : nullptr);
  }
  for (const NeffTensor* t : neff_inputs) {
    if (t->alias_output < 0 || !t->byte_size) continue;
    const auto& input = binding->inputs[t->position];
    const auto& output = binding->outputs[t->alias_output];
    if (input && output && input != output) {
      problems.push_back(Quote(t->name) + " must be the very tensor bound as output " +
                         Quote(neff_outputs[t->alias_output]->name));
    }
  }
  if (!problems.empty()) {
    for (const std::string& problem : problems) LogError("nrt_execute", problem);
    return NRT_EXEC_BAD_INPUT;
  }
  for (const NeffTensor* t : neff_inputs) {
    const auto& tensor = binding->inputs[t->position];
    binding->arguments.push_back(
        {tensor ? tensor->data() : nullptr, FindElementType(t->xla_element_type)->pjrt_type,
         std::vector<int64_t>(t->shape.begin(), t->shape.end())});
  }
  for (const NeffTensor* t : neff_outputs) {
    const auto& tensor = binding->outputs[t->position];
    binding->results.push_back({tensor ? tensor->data() : nullptr, t->byte_size, t->shape.size()});
  }
  return NRT_SUCCESS;
}

void Runtime::EndExecution() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (--executions_in_flight_ == 0) idle_.notify_all();
}

NRT_STATUS Runtime::RunCollective(const nrt_model& model, Binding* binding) {
  Submission mine;
  mine.arguments = binding->arguments;
  mine.results = binding->results;
  return JoinRound(*model.group, model.rank, &mine, binding->timeout_seconds);
}

NRT_STATUS Runtime::JoinRound(CollectiveGroup& group, uint32_t rank, Submission* mine,
                              double timeout_seconds) {
  std::unique_lock<std::mutex> lock(group.mutex);
  group.pending[rank] = mine;
  ++group.pending_count;
  if (group.pending_count == group.world) {
    // The last rank to arrive runs every rank's replica in one XLA execution.
    std::vector<std::vector<HostArray>> arguments;
    std::vector<std::vector<HostDestination>> results;
    for (Submission* s : group.pending) {
      arguments.push_back(s->arguments);
      results.push_back(s->results);
    }
    std::string error;
    bool ok = group.engine->Execute(*group.compiled, arguments, results, &error);
    for (Submission* s : group.pending) {
      s->done = true;
      s->ok = ok;
      s->error = error;
    }
    std::fill(group.pending.begin(), group.pending.end(), nullptr);
    group.pending_count = 0;
    group.changed.notify_all();
  } else {
    auto timeout = std::chrono::duration<double>(timeout_seconds);
    if (!group.changed.wait_for(lock, timeout, [&] { return mine->done; })) {
      group.pending[rank] = nullptr;
      --group.pending_count;
      mine->error = "rank " + std::to_string(rank) + " of " + std::to_string(group.world) +
                    " waited " + std::to_string(timeout_seconds) +
                    " s (NEURON_RT_EXEC_TIMEOUT) for the other ranks";
      LogError("nrt_execute", mine->error);
      return NRT_TIMEOUT;
    }
  }
  if (!mine->ok) {
    LogError("nrt_execute", mine->error);
    return NRT_FAILURE;
  }
  return NRT_SUCCESS;
}

NRT_STATUS Runtime::Execute(nrt_model_t* handle, const nrt_tensor_set_t* inputs,
                            nrt_tensor_set_t* outputs) {
  std::shared_ptr<nrt_model> model;
  std::shared_ptr<std::mutex> core_execution;
  Binding binding;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (NRT_STATUS status = RequireInitialized("nrt_execute")) return status;
    auto found = models_.find(handle);
    if (found == models_.end()) {
      LogError("nrt_execute", "not a loaded model");
      return NRT_INVALID_HANDLE;
    }
    model = found->second;
    if (!inputs || !outputs || sets_.find(inputs) == sets_.end() ||
        sets_.find(outputs) == sets_.end()) {
      LogError("nrt_execute", "the input or output set is not a live tensor set");
      return NRT_INVALID_HANDLE;
    }
    if (NRT_STATUS status = Bind(*model, *inputs, *outputs, &binding)) return status;
    core_execution = cores_[model->vnc].execution;
    binding.engine = engine_;
    binding.timeout_seconds = settings_.exec_timeout_seconds;
    binding.delay_ms = settings_.exec_delay_ms;
    binding.report_numerical_errors = settings_.report_numerical_errors;
    ++executions_in_flight_;
  }
  struct EndGuard {
    Runtime* runtime;
    ~EndGuard() { runtime->EndExecution(); }
  } end_guard{this};

  // One execution at a time on a core; later callers queue here.
  std::lock_guard<std::mutex> core_lock(*core_execution);
  if (binding.delay_ms > 0) {
    double timeout_ms = binding.timeout_seconds * 1000.0;
    if (binding.delay_ms > timeout_ms) {
      std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(timeout_ms));
      LogError("nrt_execute", "the execution on NeuronCore " + std::to_string(model->vnc) +
                                  " ran past NEURON_RT_EXEC_TIMEOUT (" +
                                  std::to_string(binding.timeout_seconds) + " s)");
      return NRT_TIMEOUT;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(binding.delay_ms));
  }
  if (model->group) {
    if (NRT_STATUS status = RunCollective(*model, &binding)) return status;
  } else if (model->root_connection >= 0) {
    if (NRT_STATUS status = RunAtRoot(*model, &binding)) return status;
  } else {
    std::string error;
    if (!binding.engine->Execute(*model->program, {binding.arguments}, {binding.results}, &error)) {
      LogError("nrt_execute", error);
      return NRT_FAILURE;
    }
  }
  if (binding.report_numerical_errors) {
    for (const NeffTensor* t : model->neff.Outputs()) {
      const auto& tensor = binding.outputs[t->position];
      if (tensor && HasNanOrInf(*FindElementType(t->xla_element_type), tensor->data(), t->byte_size)) {
        LogError("nrt_execute", "output " + Quote(t->name) + " holds NaN or Inf");
        return NRT_EXEC_COMPLETED_WITH_NUM_ERR;
      }
    }
  }
  return NRT_SUCCESS;
}

// ---------------------------------------------------------------------------------------------
// The global communicator: ranks in other processes (communicator.h)
// ---------------------------------------------------------------------------------------------

NRT_STATUS Runtime::RouteRank(const char* function, const std::string& root, uint32_t rank,
                              double timeout_seconds, int* root_connection) {
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                            std::chrono::duration<double>(timeout_seconds));
  std::string error;
  while (true) {
    {
      std::lock_guard<std::mutex> lock(communicator_mutex_);
      if (listener_ >= 0) return NRT_SUCCESS;  // this process is the root
      if (rank == 0) {
        int listener = ListenOn(root, &error);
        if (listener >= 0) {
          listener_ = listener;
          std::thread([this, listener] { AcceptRanks(listener); }).detach();
          return NRT_SUCCESS;
        }
      }
      // Another process is the root (for rank 0 too: its address is taken by one).
      int connection = ConnectTo(root, &error);
      if (connection >= 0) {
        *root_connection = connection;
        return NRT_SUCCESS;
      }
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      LogError(function, "rank " + std::to_string(rank) + ": no communicator root at " + root +
                             " within " + std::to_string(timeout_seconds) +
                             " s (NEURON_RT_EXEC_TIMEOUT); rank 0 hosts it: " + error);
      return NRT_TIMEOUT;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

NRT_STATUS Runtime::JoinAtRoot(const char* function, nrt_model* model, uint32_t world,
                               const void* neff_bytes, size_t size) {
  FrameWriter join;
  join.U32(model->rank).U32(world).Bytes(neff_bytes, size);
  uint32_t kind = 0;
  std::string reply;
  if (!SendFrame(model->root_connection, kFrameJoin, join.data()) ||
      !ReceiveFrame(model->root_connection, &kind, &reply, settings_.exec_timeout_seconds + 60) ||
      kind != kFrameReply) {
    LogError(function, "rank " + std::to_string(model->rank) + ": the communicator root at " +
                           settings_.root_comm_id + " did not answer");
    return NRT_FAILURE;
  }
  FrameReader reader(reply);
  uint32_t status = NRT_FAILURE;
  const char* message = nullptr;
  size_t message_size = 0;
  if (!reader.U32(&status) || !reader.Bytes(&message, &message_size)) return NRT_FAILURE;
  if (status != NRT_SUCCESS) {
    LogError(function, "the communicator root: " + std::string(message, message_size));
  }
  return static_cast<NRT_STATUS>(status);
}

NRT_STATUS Runtime::RunAtRoot(const nrt_model& model, Binding* binding) {
  const std::vector<const NeffTensor*> inputs = model.neff.Inputs();
  const std::vector<const NeffTensor*> outputs = model.neff.Outputs();
  FrameWriter request;
  for (size_t i = 0; i < inputs.size(); ++i) {
    request.Bytes(binding->arguments[i].data, binding->arguments[i].data ? inputs[i]->byte_size : 0);
  }
  uint32_t kind = 0;
  std::string reply;
  const std::string lost = "rank " + std::to_string(model.rank) +
                           " lost its connection to the communicator root at " + settings_.root_comm_id;
  if (!SendFrame(model.root_connection, kFrameExecute, request.data()) ||
      !ReceiveFrame(model.root_connection, &kind, &reply, binding->timeout_seconds + 60) ||
      kind != kFrameReply) {
    LogError("nrt_execute", lost);
    return NRT_EXEC_HW_ERR_COLLECTIVES;
  }
  FrameReader reader(reply);
  uint32_t status = NRT_FAILURE;
  const char* data = nullptr;
  size_t size = 0;
  if (!reader.U32(&status) || !reader.Bytes(&data, &size)) {
    LogError("nrt_execute", lost);
    return NRT_EXEC_HW_ERR_COLLECTIVES;
  }
  if (status != NRT_SUCCESS) {
    LogError("nrt_execute", "the communicator root: " + std::string(data, size));
    return static_cast<NRT_STATUS>(status);
  }
  for (size_t k = 0; k < outputs.size(); ++k) {
    if (!reader.Bytes(&data, &size)) {
      LogError("nrt_execute", lost);
      return NRT_EXEC_HW_ERR_COLLECTIVES;
    }
    HostDestination& destination = binding->results[k];
    if (destination.data != nullptr && size == outputs[k]->byte_size) std::memcpy(destination.data, data, size);
  }
  return NRT_SUCCESS;
}

void Runtime::AcceptRanks(int listener) {
  while (true) {
    int connection = accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
    if (connection < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      return;  // closed by nrt_close
    }
    {
      std::lock_guard<std::mutex> lock(communicator_mutex_);
      served_connections_.push_back(connection);
    }
    std::thread([this, connection] { ServeRank(connection); }).detach();
  }
}

// One remote rank: its join, then each of its executions, until its process unloads or exits.
void Runtime::ServeRank(int connection) {
  auto reply = [connection](NRT_STATUS status, const std::string& message, const std::vector<std::string>* results) {
    FrameWriter w;
    w.U32(static_cast<uint32_t>(status)).Bytes(message.data(), message.size());
    if (results != nullptr) {
      for (const std::string& r : *results) w.Bytes(r.data(), r.size());
    }
    return SendFrame(connection, kFrameReply, w.data());
  };
  auto member = std::make_shared<nrt_model>();
  uint32_t kind = 0;
  std::string frame;
  bool joined = false;
  if (ReceiveFrame(connection, &kind, &frame, -1) && kind == kFrameJoin) {
    FrameReader reader(frame);
    uint32_t rank = 0, world = 0;
    const char* neff = nullptr;
    size_t size = 0;
    std::string error;
    NRT_STATUS status = NRT_INVALID;
    if (!reader.U32(&rank) || !reader.U32(&world) || !reader.Bytes(&neff, &size)) {
      error = "a malformed join";
    } else if (ReadNeff(neff, size, &member->neff, &error) != NeffProblem::kNone) {
      error = "invalid NEFF: " + error;
    } else if (world == 0 || rank >= world) {
      error = "rank " + std::to_string(rank) + " of world " + std::to_string(world);
    } else {
      std::lock_guard<std::mutex> lock(mutex_);
      status = RequireInitialized("nrt_load_collectives");
      if (status == NRT_SUCCESS) status = EnsureEngine(&error);
      if (status == NRT_SUCCESS) {
        member->id = next_id_++;
        member->rank = rank;
        member->vnc = 0x80000000u + rank;  // no core here: never taken by a local rank
        status = JoinGroup("nrt_load_collectives", member.get(), world);
        if (status != NRT_SUCCESS) error = "its program does not compile here";
      }
      if (status == NRT_SUCCESS && member->group->compiled->output_count() != member->neff.output_count) {
        LeaveGroup(*member);
        status = NRT_INVALID;
        error = "the NEFF lists " + std::to_string(member->neff.output_count) + " outputs, its program has " +
                std::to_string(member->group->compiled->output_count());
      }
      if (status != NRT_SUCCESS && error.empty()) error = "the root's runtime is not initialised";
    }
    joined = status == NRT_SUCCESS;
    if (!joined && status == NRT_SUCCESS) status = NRT_INVALID;
    reply(joined ? NRT_SUCCESS : status, error, nullptr);
  }
  while (joined && ReceiveFrame(connection, &kind, &frame, -1) && kind == kFrameExecute) {
    const std::vector<const NeffTensor*> inputs = member->neff.Inputs();
    const std::vector<const NeffTensor*> outputs = member->neff.Outputs();
    FrameReader reader(frame);
    Submission mine;
    std::vector<std::string> results(outputs.size());
    bool well_formed = true;
    for (const NeffTensor* t : inputs) {
      const char* data = nullptr;
      size_t size = 0;
      well_formed &= reader.Bytes(&data, &size) && (size == t->byte_size || size == 0);
      mine.arguments.push_back({size ? data : nullptr, FindElementType(t->xla_element_type)->pjrt_type,
                                std::vector<int64_t>(t->shape.begin(), t->shape.end())});
    }
    for (size_t k = 0; k < outputs.size(); ++k) {
      results[k].resize(outputs[k]->byte_size);
      mine.results.push_back({results[k].empty() ? nullptr : results[k].data(), results[k].size(),
                              outputs[k]->shape.size()});
    }
    if (!well_formed) {
      reply(NRT_EXEC_BAD_INPUT, "a malformed execution request", nullptr);
      break;
    }
    std::shared_ptr<XlaCpuEngine> engine;
    double timeout_seconds = 0;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      engine = engine_;
      timeout_seconds = settings_.exec_timeout_seconds;
    }
    NRT_STATUS status = engine ? JoinRound(*member->group, member->rank, &mine, timeout_seconds) : NRT_CLOSED;
    if (status != NRT_SUCCESS) {
      if (!reply(status, engine ? mine.error : "the root's runtime is closed", nullptr)) break;
    } else if (!reply(NRT_SUCCESS, "", &results)) {
      break;
    }
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    LeaveGroup(*member);
  }
  {
    std::lock_guard<std::mutex> lock(communicator_mutex_);
    served_connections_.erase(std::remove(served_connections_.begin(), served_connections_.end(), connection),
                              served_connections_.end());
  }
  close(connection);
}

}  // namespace standin
