// The exported nrt_* entry points: each counts itself for fault injection, then asks the runtime.
#include <cstring>

#include "nrt_api.h"
#include "runtime.h"

namespace {

using standin::Runtime;

// Returns from the calling entry point with the injected status, if one is due.
#define RETURN_IF_FAULT(function)                                        \
  do {                                                                   \
    NRT_STATUS injected_status = NRT_SUCCESS;                            \
    if (Runtime::Get().InjectFault(function, &injected_status)) {        \
      return injected_status;                                            \
    }                                                                    \
  } while (0)

constexpr uint64_t kVersionMajor = 2, kVersionMinor = 26, kVersionPatch = 0;

}  // namespace

extern "C" {

NRT_STATUS nrt_init(int framework, const char* fw_version, const char* fal_version) {
  return Runtime::Get().Init(framework, fw_version, fal_version);  // counts itself: it resets
}

void nrt_close(void) { Runtime::Get().Close(); }

NRT_STATUS nrt_get_version(nrt_version_t* version, size_t size) {
  RETURN_IF_FAULT("nrt_get_version");
  if (!version || size < offsetof(nrt_version_t, rt_detail)) return NRT_INVALID;
  nrt_version_t full{};
  full.rt_major = kVersionMajor;
  full.rt_minor = kVersionMinor;
  full.rt_patch = kVersionPatch;
  full.rt_maintenance = 0;
  std::strncpy(full.rt_detail, "neuron-standin: a test double, not AWS's runtime",
               sizeof full.rt_detail - 1);
  std::strncpy(full.git_hash, "standin", sizeof full.git_hash - 1);
  std::memcpy(version, &full, size < sizeof full ? size : sizeof full);
  return NRT_SUCCESS;
}

NRT_STATUS nrt_get_visible_vnc_count(uint32_t* vnc_count) {
  RETURN_IF_FAULT("nrt_get_visible_vnc_count");
  return Runtime::Get().GetVisibleVncCount(vnc_count);
}

NRT_STATUS nrt_get_total_vnc_count(uint32_t* vnc_count) {
  RETURN_IF_FAULT("nrt_get_total_vnc_count");
  return Runtime::Get().GetTotalVncCount(vnc_count);
}

NRT_STATUS nrt_get_instance_info(nrt_instance_info_t* info, size_t size) {
  RETURN_IF_FAULT("nrt_get_instance_info");
  return Runtime::Get().GetInstanceInfo(info, size);
}

const char* nrt_get_status_as_str(NRT_STATUS status) {
  switch (status) {
    case NRT_SUCCESS: return "NRT_SUCCESS: success";
    case NRT_FAILURE: return "NRT_FAILURE: non-specific failure";
    case NRT_INVALID: return "NRT_INVALID: invalid argument or NEFF";
    case NRT_INVALID_HANDLE: return "NRT_INVALID_HANDLE: invalid handle";
    case NRT_RESOURCE: return "NRT_RESOURCE: out of resources (memory or NeuronCores)";
    case NRT_TIMEOUT: return "NRT_TIMEOUT: timed out";
    case NRT_HW_ERROR: return "NRT_HW_ERROR: hardware error";
    case NRT_QUEUE_FULL: return "NRT_QUEUE_FULL: execution queue full";
    case NRT_LOAD_NOT_ENOUGH_NC: return "NRT_LOAD_NOT_ENOUGH_NC: not enough NeuronCores";
    case NRT_UNSUPPORTED_NEFF_VERSION: return "NRT_UNSUPPORTED_NEFF_VERSION: NEFF version not supported";
    case NRT_UNINITIALIZED: return "NRT_UNINITIALIZED: nrt_init was not called";
    case NRT_CLOSED: return "NRT_CLOSED: nrt_close was called";
    case NRT_EXEC_UNIT_UNRECOVERABLE: return "NRT_EXEC_UNIT_UNRECOVERABLE: execution unit unrecoverable";
    case NRT_EXEC_BAD_INPUT: return "NRT_EXEC_BAD_INPUT: bad input or output tensors";
    case NRT_EXEC_COMPLETED_WITH_NUM_ERR: return "NRT_EXEC_COMPLETED_WITH_NUM_ERR: completed, NaN or Inf produced";
    case NRT_EXEC_COMPLETED_WITH_ERR: return "NRT_EXEC_COMPLETED_WITH_ERR: completed with errors";
    case NRT_EXEC_NC_BUSY: return "NRT_EXEC_NC_BUSY: NeuronCore busy";
    case NRT_EXEC_OOB: return "NRT_EXEC_OOB: out-of-bounds access";
    case NRT_COLL_PENDING: return "NRT_COLL_PENDING: collective pending";
    case NRT_EXEC_HW_ERR_COLLECTIVES: return "NRT_EXEC_HW_ERR_COLLECTIVES: collectives hardware error";
    case NRT_EXEC_HW_ERR_HBM_UE: return "NRT_EXEC_HW_ERR_HBM_UE: uncorrectable HBM error";
    case NRT_EXEC_HW_ERR_NC_UE: return "NRT_EXEC_HW_ERR_NC_UE: uncorrectable NeuronCore error";
    case NRT_EXEC_HW_ERR_DMA_ABORT: return "NRT_EXEC_HW_ERR_DMA_ABORT: DMA aborted";
    case NRT_EXEC_SW_NQ_OVERFLOW: return "NRT_EXEC_SW_NQ_OVERFLOW: notification queue overflow";
    case NRT_EXEC_HW_ERR_REPAIRABLE_HBM_UE: return "NRT_EXEC_HW_ERR_REPAIRABLE_HBM_UE: repairable HBM error";
    case NRT_NETWORK_PROXY_FAILURE: return "NRT_NETWORK_PROXY_FAILURE: network proxy failure";
    default: return "unknown NRT_STATUS";
  }
}

NRT_STATUS nrt_get_vnc_memory_stats(uint32_t vnc, nrt_vnc_memory_stats_t* stats,
                                    size_t stats_size_in, size_t* stats_size_out) {
  RETURN_IF_FAULT("nrt_get_vnc_memory_stats");
  return Runtime::Get().GetMemoryStats(vnc, stats, stats_size_in, stats_size_out);
}

NRT_STATUS nrt_load(const void* neff, size_t size, int32_t vnc, int32_t vnc_count,
                    nrt_model_t** model) {
  RETURN_IF_FAULT("nrt_load");
  return Runtime::Get().Load("nrt_load", neff, size, vnc, vnc_count, false, 0, 1, model);
}

NRT_STATUS nrt_load_collectives(const void* neff, size_t size, int32_t vnc, int32_t vnc_count,
                                uint32_t ctx_device_id, uint32_t ctx_device_count,
                                nrt_model_t** model) {
  RETURN_IF_FAULT("nrt_load_collectives");
  return Runtime::Get().Load("nrt_load_collectives", neff, size, vnc, vnc_count, true,
                             ctx_device_id, ctx_device_count, model);
}

NRT_STATUS nrt_unload(nrt_model_t* model) {
  RETURN_IF_FAULT("nrt_unload");
  return Runtime::Get().Unload(model);
}

NRT_STATUS nrt_get_model_tensor_info(nrt_model_t* model, nrt_tensor_info_array_t** info) {
  RETURN_IF_FAULT("nrt_get_model_tensor_info");
  return Runtime::Get().GetTensorInfo(model, info);
}

NRT_STATUS nrt_free_model_tensor_info(nrt_tensor_info_array_t* info) {
  RETURN_IF_FAULT("nrt_free_model_tensor_info");
  return Runtime::Get().FreeTensorInfo(info);
}

NRT_STATUS nrt_tensor_allocate(nrt_tensor_placement_t placement, int vnc, size_t size,
                               const char* name, nrt_tensor_t** tensor) {
  RETURN_IF_FAULT("nrt_tensor_allocate");
  return Runtime::Get().AllocateTensor(placement, vnc, size, name, tensor);
}

void nrt_tensor_free(nrt_tensor_t** tensor) { Runtime::Get().FreeTensor(tensor); }

NRT_STATUS nrt_tensor_attach_buffer(nrt_tensor_t* tensor, void* buffer, size_t size) {
  RETURN_IF_FAULT("nrt_tensor_attach_buffer");
  return Runtime::Get().AttachBuffer(tensor, buffer, size);
}

NRT_STATUS nrt_tensor_read(const nrt_tensor_t* tensor, void* buffer, size_t offset,
                           size_t size) {
  RETURN_IF_FAULT("nrt_tensor_read");
  return Runtime::Get().ReadTensor(tensor, buffer, offset, size);
}

NRT_STATUS nrt_tensor_write(nrt_tensor_t* tensor, const void* buffer, size_t offset,
                            size_t size) {
  RETURN_IF_FAULT("nrt_tensor_write");
  return Runtime::Get().WriteTensor(tensor, buffer, offset, size);
}

size_t nrt_tensor_get_size(const nrt_tensor_t* tensor) {
  return Runtime::Get().TensorSize(tensor);
}

NRT_STATUS nrt_tensor_copy(const nrt_tensor_t* source, size_t source_offset,
                           nrt_tensor_t* destination, size_t destination_offset, size_t size) {
  RETURN_IF_FAULT("nrt_tensor_copy");
  return Runtime::Get().CopyTensor(source, source_offset, destination, destination_offset, size);
}

NRT_STATUS nrt_allocate_tensor_set(nrt_tensor_set_t** set) {
  RETURN_IF_FAULT("nrt_allocate_tensor_set");
  return Runtime::Get().AllocateSet(set);
}

void nrt_destroy_tensor_set(nrt_tensor_set_t** set) { Runtime::Get().DestroySet(set); }

NRT_STATUS nrt_add_tensor_to_tensor_set(nrt_tensor_set_t* set, const char* name,
                                        nrt_tensor_t* tensor) {
  RETURN_IF_FAULT("nrt_add_tensor_to_tensor_set");
  return Runtime::Get().AddToSet(set, name, tensor);
}

NRT_STATUS nrt_get_tensor_from_tensor_set(nrt_tensor_set_t* set, const char* name,
                                          nrt_tensor_t** tensor) {
  RETURN_IF_FAULT("nrt_get_tensor_from_tensor_set");
  return Runtime::Get().GetFromSet(set, name, tensor);
}

NRT_STATUS nrt_execute(nrt_model_t* model, const nrt_tensor_set_t* input_set,
                       nrt_tensor_set_t* output_set) {
  RETURN_IF_FAULT("nrt_execute");
  return Runtime::Get().Execute(model, input_set, output_set);
}

}  // extern "C"
