// Reads the stand-in's private NEFF container (layout: README.md, "The NEFF container").
#ifndef NEURON_STANDIN_NEFF_H_
#define NEURON_STANDIN_NEFF_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace standin {

struct NeffTensor {
  std::string name;
  uint32_t usage = 0;     // NRT_TENSOR_USAGE_*
  uint32_t position = 0;  // parameter number, or index in the result tuple
  int32_t alias_output = -1;
  uint32_t nrt_dtype = 0;
  uint32_t xla_element_type = 0;
  std::vector<uint32_t> shape;
  uint64_t byte_size = 0;  // 0: a zero-element tensor, absent from the tensor info
};

struct Neff {
  uint32_t target_family = 0;
  uint32_t lnc = 0;
  std::string program;  // serialized HloModuleProto
  std::vector<NeffTensor> tensors;
  uint32_t input_count = 0;
  uint32_t output_count = 0;

  // In position order: every parameter, every result element.
  std::vector<const NeffTensor*> Inputs() const;
  std::vector<const NeffTensor*> Outputs() const;
};

enum class NeffProblem { kNone, kMalformed, kUnsupportedVersion };

// Checks magic, version, sizes, checksum and that the table is complete and consistent.
NeffProblem ReadNeff(const void* data, size_t size, Neff* neff, std::string* error);

}  // namespace standin

#endif  // NEURON_STANDIN_NEFF_H_
