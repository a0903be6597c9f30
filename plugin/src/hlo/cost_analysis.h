// Work counts of one program, read from its HLO: matrix-engine FLOPs by element type, vector
// and scalar element operations, the bytes it must read from and write to HBM, and what each
// collective moves. Counted from shapes only; the estimate's model (pjrt_neuron/estimator.py)
// turns them into time on a NeuronCore generation.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "common/status.h"
#include "hlo/module_view.h"

namespace pjrt_neuron::hlo {

struct CollectiveCost {
  std::string kind;     // all-reduce, all-gather, reduce-scatter, all-to-all, collective-permute
  int64_t bytes = 0;    // the data of one participant: all-reduce's operand, all-gather's result, ...
  int group_size = 0;   // participants in each group; 0: every device of the program
  int64_t count = 0;    // executions of this collective per run of the program
};

// One shape of matrix product, as the TensorEngine tiles it: `batch` independent products of an
// [m x k] by [k x n]. A convolution counts as the matrix product it is lowered to (m = output
// features, k = input features x window, n = output positions).
struct MatmulShape {
  std::string type;  // the rate class, as in matmul_flops
  int64_t batch = 1;
  int64_t m = 0;
  int64_t k = 0;
  int64_t n = 0;
  double count = 0;  // executions per run of the program
};

// Results of unfused instructions that are neither the program's parameters nor its result:
// the activations a compiler must keep on chip or spill to HBM.
struct IntermediateSize {
  int64_t bytes = 0;
  double count = 0;
};

struct ProgramCost {
  // Dot and convolution FLOPs (a multiply-add is 2) by the operands' type: "fp32", "bf16",
  // "fp16", "fp8", "int" (anything else).
  std::map<std::string, double> matmul_flops;
  double vector_ops = 0;         // element-wise arithmetic, compares, converts, reduction inputs
  double transcendental_ops = 0; // exp, log, tanh, logistic, rsqrt, sqrt, power, sin, cos, erf, ...
  int64_t parameter_bytes = 0;   // what the program reads: its parameters
  int64_t output_bytes = 0;      // what it writes: its result
  std::vector<CollectiveCost> collectives;  // one per distinct (kind, bytes, group size)
  bool unknown_trip_count = false;  // a while loop without a known trip count was counted once
  std::vector<MatmulShape> matmuls;        // one per distinct (type, batch, m, k, n)
  std::vector<IntermediateSize> intermediates;  // one per distinct size
};

// `module` is a serialized HloModuleProto, or HloModuleProtoWithConfig when `with_config`.
StatusOr<ProgramCost> AnalyzeProgramCost(const std::string& module, bool with_config);
StatusOr<ProgramCost> AnalyzeProgramCost(const ModuleView& module);

// The cost as one JSON object (the estimate report's "cost" field).
std::string ProgramCostJson(const ProgramCost& cost);

}  // namespace pjrt_neuron::hlo
