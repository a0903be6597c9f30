// The libnrt.so.1 C interface as /work/shared/NEURON_RUNTIME.md describes it, declared here
// from that contract (not from AWS's headers). Where the contract gives no layout, the one
// chosen is listed in README.md ("Choices where the contract is silent").
#ifndef NEURON_STANDIN_NRT_API_H_
#define NEURON_STANDIN_NRT_API_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define NRT_EXPORT __attribute__((visibility("default")))

typedef int NRT_STATUS;
enum {
  NRT_SUCCESS = 0,
  NRT_FAILURE = 1,
  NRT_INVALID = 2,
  NRT_INVALID_HANDLE = 3,
  NRT_RESOURCE = 4,
  NRT_TIMEOUT = 5,
  NRT_HW_ERROR = 6,
  NRT_QUEUE_FULL = 7,
  NRT_LOAD_NOT_ENOUGH_NC = 9,
  NRT_UNSUPPORTED_NEFF_VERSION = 10,
  NRT_UNINITIALIZED = 13,
  NRT_CLOSED = 14,
  NRT_EXEC_UNIT_UNRECOVERABLE = 101,
  NRT_EXEC_BAD_INPUT = 1002,
  NRT_EXEC_COMPLETED_WITH_NUM_ERR = 1003,
  NRT_EXEC_COMPLETED_WITH_ERR = 1004,
  NRT_EXEC_NC_BUSY = 1005,
  NRT_EXEC_OOB = 1006,
  NRT_COLL_PENDING = 1100,
  NRT_EXEC_HW_ERR_COLLECTIVES = 1200,
  NRT_EXEC_HW_ERR_HBM_UE = 1201,
  NRT_EXEC_HW_ERR_NC_UE = 1202,
  NRT_EXEC_HW_ERR_DMA_ABORT = 1203,
  NRT_EXEC_SW_NQ_OVERFLOW = 1204,
  NRT_EXEC_HW_ERR_REPAIRABLE_HBM_UE = 1205,
  NRT_NETWORK_PROXY_FAILURE = 1206,
};

enum { NRT_FRAMEWORK_TYPE_NO_FW = 1 };

typedef enum {
  NRT_TENSOR_PLACEMENT_DEVICE = 0,
  NRT_TENSOR_PLACEMENT_HOST = 1,
  NRT_TENSOR_PLACEMENT_VIRTUAL = 2,
} nrt_tensor_placement_t;

typedef enum {
  NRT_TENSOR_USAGE_INPUT = 0,
  NRT_TENSOR_USAGE_OUTPUT = 1,
} nrt_tensor_usage_t;

// The sparse enum of the January 2026 header.
typedef enum {
  NRT_DTYPE_UINT64 = 1,
  NRT_DTYPE_INT8 = 2,
  NRT_DTYPE_UINT8 = 3,
  NRT_DTYPE_INT16 = 4,
  NRT_DTYPE_UINT16 = 5,
  NRT_DTYPE_BFLOAT16 = 6,
  NRT_DTYPE_FLOAT16 = 7,
  NRT_DTYPE_INT32 = 8,
  NRT_DTYPE_UINT32 = 9,
  NRT_DTYPE_FLOAT32 = 10,
  NRT_DTYPE_FP32R = 11,
  NRT_DTYPE_INT64 = 12,
  NRT_DTYPE_FP8_E3 = 13,
  NRT_DTYPE_FP8_E4 = 14,
  NRT_DTYPE_FP8_E5 = 15,
} nrt_dtype_t;

enum {
  NRT_INSTANCE_FAMILY_TRN1 = 2,
  NRT_INSTANCE_FAMILY_TRN1N = 3,
  NRT_INSTANCE_FAMILY_INF2 = 4,
  NRT_INSTANCE_FAMILY_TRN2 = 5,
};

typedef struct nrt_model nrt_model_t;
typedef struct nrt_tensor nrt_tensor_t;
typedef struct nrt_tensor_set nrt_tensor_set_t;

enum { NRT_TENSOR_NAME_MAX = 256 };

typedef struct nrt_tensor_info {
  char name[NRT_TENSOR_NAME_MAX];
  nrt_tensor_usage_t usage;
  size_t size;
  nrt_dtype_t dtype;
  uint32_t* shape;
  uint32_t ndim;
} nrt_tensor_info_t;

typedef struct nrt_tensor_info_array {
  uint64_t tensor_count;
  nrt_tensor_info_t tensor_array[];
} nrt_tensor_info_array_t;

typedef struct nrt_version {
  uint64_t rt_major;
  uint64_t rt_minor;
  uint64_t rt_patch;
  uint64_t rt_maintenance;
  char rt_detail[128];
  char git_hash[64];
} nrt_version_t;

typedef struct nrt_instance_info {
  uint32_t family;
  uint32_t size;
} nrt_instance_info_t;

typedef struct nrt_vnc_memory_stats {
  size_t bytes_used;
  size_t bytes_limit;
} nrt_vnc_memory_stats_t;

NRT_EXPORT NRT_STATUS nrt_init(int framework, const char* fw_version, const char* fal_version);
NRT_EXPORT void nrt_close(void);

NRT_EXPORT NRT_STATUS nrt_get_version(nrt_version_t* version, size_t size);
NRT_EXPORT NRT_STATUS nrt_get_visible_vnc_count(uint32_t* vnc_count);
NRT_EXPORT NRT_STATUS nrt_get_total_vnc_count(uint32_t* vnc_count);
NRT_EXPORT NRT_STATUS nrt_get_instance_info(nrt_instance_info_t* info, size_t size);
NRT_EXPORT const char* nrt_get_status_as_str(NRT_STATUS status);
NRT_EXPORT NRT_STATUS nrt_get_vnc_memory_stats(uint32_t vnc, nrt_vnc_memory_stats_t* stats,
                                               size_t stats_size_in, size_t* stats_size_out);

NRT_EXPORT NRT_STATUS nrt_load(const void* neff, size_t size, int32_t vnc, int32_t vnc_count,
                               nrt_model_t** model);
NRT_EXPORT NRT_STATUS nrt_load_collectives(const void* neff, size_t size, int32_t vnc,
                                           int32_t vnc_count, uint32_t ctx_device_id,
                                           uint32_t ctx_device_count, nrt_model_t** model);
NRT_EXPORT NRT_STATUS nrt_unload(nrt_model_t* model);
NRT_EXPORT NRT_STATUS nrt_get_model_tensor_info(nrt_model_t* model,
                                                nrt_tensor_info_array_t** info);
NRT_EXPORT NRT_STATUS nrt_free_model_tensor_info(nrt_tensor_info_array_t* info);

NRT_EXPORT NRT_STATUS nrt_tensor_allocate(nrt_tensor_placement_t placement, int vnc, size_t size,
                                          const char* name, nrt_tensor_t** tensor);
NRT_EXPORT void nrt_tensor_free(nrt_tensor_t** tensor);
NRT_EXPORT NRT_STATUS nrt_tensor_attach_buffer(nrt_tensor_t* tensor, void* buffer, size_t size);
NRT_EXPORT NRT_STATUS nrt_tensor_read(const nrt_tensor_t* tensor, void* buffer, size_t offset,
                                      size_t size);
NRT_EXPORT NRT_STATUS nrt_tensor_write(nrt_tensor_t* tensor, const void* buffer, size_t offset,
                                       size_t size);
NRT_EXPORT size_t nrt_tensor_get_size(const nrt_tensor_t* tensor);
NRT_EXPORT NRT_STATUS nrt_tensor_copy(const nrt_tensor_t* source, size_t source_offset,
                                      nrt_tensor_t* destination, size_t destination_offset,
                                      size_t size);

NRT_EXPORT NRT_STATUS nrt_allocate_tensor_set(nrt_tensor_set_t** set);
NRT_EXPORT void nrt_destroy_tensor_set(nrt_tensor_set_t** set);
NRT_EXPORT NRT_STATUS nrt_add_tensor_to_tensor_set(nrt_tensor_set_t* set, const char* name,
                                                   nrt_tensor_t* tensor);
NRT_EXPORT NRT_STATUS nrt_get_tensor_from_tensor_set(nrt_tensor_set_t* set, const char* name,
                                                     nrt_tensor_t** tensor);

NRT_EXPORT NRT_STATUS nrt_execute(nrt_model_t* model, const nrt_tensor_set_t* input_set,
                                  nrt_tensor_set_t* output_set);

#ifdef __cplusplus
}
#endif

#endif  // NEURON_STANDIN_NRT_API_H_
