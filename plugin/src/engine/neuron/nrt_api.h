// The Neuron runtime's C calls, bound at run time from libnrt.so.1 with dlopen. The
// prototypes are our own reading of the public contract (shared/NEURON_RUNTIME.md); no AWS
// header is used. One NrtLibrary per path per process; it stays loaded while anyone holds it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "common/status.h"

namespace pjrt_neuron::engine::neuron {

// Opaque runtime handles.
struct nrt_model;
struct nrt_tensor;
struct nrt_tensor_set;

using NrtStatus = int;

constexpr int kNrtFrameworkNone = 1;  // NO_FW: only the runtime's tools read it
constexpr int kNrtPlacementDevice = 0;
constexpr int kNrtPlacementHost = 1;
constexpr int kNrtUsageInput = 0;
constexpr int kNrtUsageOutput = 1;
constexpr size_t kNrtTensorNameMax = 256;

// One tensor of a loaded model (nrt_get_model_tensor_info).
struct NrtTensorInfo {
  char name[kNrtTensorNameMax];
  int usage;
  size_t size;
  int dtype;  // read, never trusted: the enum changed in 2026 (see the contract)
  uint32_t* shape;
  uint32_t ndim;
};

// The count is read as 64 bits; a 32-bit count followed by padding has the same offset of
// the array (8, for its size_t member), so TensorCount() takes the low half when the high half
// is not zero.
struct NrtTensorInfoArray {
  uint64_t tensor_count;
  // tensor_count NrtTensorInfo entries follow in place (a flexible array): TensorAt().
};
uint64_t TensorCount(const NrtTensorInfoArray& info);
const NrtTensorInfo& TensorAt(const NrtTensorInfoArray& info, uint64_t i);

struct NrtVncMemoryStats {
  size_t bytes_used;
  size_t bytes_limit;
};

// Only `family` is read (TRN1=2, TRN1N=3, INF2=4, TRN2=5); the rest is room for the runtime.
struct NrtInstanceInfo {
  uint32_t family;
  uint32_t size;
  uint8_t reserved[56];
};
constexpr uint32_t kFamilyTrn1 = 2, kFamilyTrn1n = 3, kFamilyInf2 = 4, kFamilyTrn2 = 5;

// The contract names nrt_get_version but not its struct; this is AWS's published nrt.h layout
// (four numbers, a detail text, a git hash). A first run on hardware must confirm it.
struct NrtVersion {
  uint64_t major;
  uint64_t minor;
  uint64_t patch;
  uint64_t maintenance;
  char detail[128];
  char git_hash[64];
};

struct NrtApi {
  // Required.
  NrtStatus (*init)(int framework, const char* fw_version, const char* fal_version) = nullptr;
  void (*close)() = nullptr;
  NrtStatus (*load)(const void* neff, size_t size, int32_t vnc, int32_t vnc_count, nrt_model** model) = nullptr;
  NrtStatus (*load_collectives)(const void* neff, size_t size, int32_t vnc, int32_t vnc_count, uint32_t rank,
                                uint32_t world, nrt_model** model) = nullptr;
  NrtStatus (*unload)(nrt_model* model) = nullptr;
  NrtStatus (*get_model_tensor_info)(nrt_model* model, NrtTensorInfoArray** info) = nullptr;
  NrtStatus (*free_model_tensor_info)(NrtTensorInfoArray* info) = nullptr;
  NrtStatus (*tensor_allocate)(int placement, int vnc, size_t size, const char* name, nrt_tensor** tensor) = nullptr;
  void (*tensor_free)(nrt_tensor** tensor) = nullptr;
  NrtStatus (*tensor_read)(const nrt_tensor* tensor, void* buf, size_t offset, size_t size) = nullptr;
  NrtStatus (*tensor_write)(nrt_tensor* tensor, const void* buf, size_t offset, size_t size) = nullptr;
  NrtStatus (*allocate_tensor_set)(nrt_tensor_set** set) = nullptr;
  void (*destroy_tensor_set)(nrt_tensor_set** set) = nullptr;
  NrtStatus (*add_tensor_to_tensor_set)(nrt_tensor_set* set, const char* name, nrt_tensor* tensor) = nullptr;
  NrtStatus (*execute)(nrt_model* model, const nrt_tensor_set* inputs, nrt_tensor_set* outputs) = nullptr;
  NrtStatus (*get_visible_vnc_count)(uint32_t* count) = nullptr;
  // Optional: older builds may lack them.
  size_t (*tensor_get_size)(const nrt_tensor* tensor) = nullptr;
  NrtStatus (*tensor_copy)(const nrt_tensor* src, size_t src_offset, nrt_tensor* dst, size_t dst_offset,
                           size_t size) = nullptr;
  NrtStatus (*get_vnc_memory_stats)(uint32_t vnc, NrtVncMemoryStats* stats, size_t size_in,
                                    size_t* size_out) = nullptr;
  NrtStatus (*get_total_vnc_count)(uint32_t* count) = nullptr;
  NrtStatus (*get_instance_info)(NrtInstanceInfo* info, size_t size) = nullptr;
  const char* (*get_status_as_str)(NrtStatus status) = nullptr;
  NrtStatus (*get_version)(NrtVersion* version, size_t size) = nullptr;
};

// A loaded libnrt; dlclose'd when the last holder lets go.
class NrtLibrary {
 public:
  ~NrtLibrary();
  NrtLibrary(const NrtLibrary&) = delete;
  NrtLibrary& operator=(const NrtLibrary&) = delete;
  const NrtApi& api() const { return api_; }
  const std::string& path() const { return path_; }

  // FAILED_PRECONDITION naming the path and the missing symbol when it cannot be used.
  static StatusOr<std::shared_ptr<NrtLibrary>> Open(const std::string& path);

  // The file behind the default name when that name already resolves, in this process, to a
  // library opened by an explicit path (a test's stand-in keeps the soname libnrt.so.1);
  // empty otherwise.
  static std::string DefaultNameTakenByExplicitPath();

 private:
  NrtLibrary() = default;
  void* handle_ = nullptr;
  std::string path_;
  NrtApi api_;
};

// The library name the runtime is installed under; auto-selection looks only at this.
constexpr char kDefaultNrtLibrary[] = "libnrt.so.1";

}  // namespace pjrt_neuron::engine::neuron
