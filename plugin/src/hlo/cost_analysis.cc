// Counts a program's work from the shapes in its HLO (cost_analysis.h).
#include "hlo/cost_analysis.h"

#include <set>
#include <tuple>
#include <unordered_map>

#include "common/element_sizes.h"
#include "common/json.h"
#include "hlo/module_view.h"

namespace pjrt_neuron::hlo {
namespace {

using Shape = ShapeView;
using Instruction = InstructionView;
using Computation = ComputationView;

// The root's id; -1 when the computation names none.
int64_t RootId(const Computation& c) { return c.has_root_id ? c.root_id : -1; }

int64_t ArrayElements(const Shape& array) {
  int64_t n = 1;
  for (int64_t d : array.dims) n *= d;
  return n;
}

int64_t Elements(const Shape& s) {
  int64_t n = 0;
  for (const Shape* a : s.Leaves()) n += ArrayElements(*a);
  return n;
}

int64_t Bytes(const Shape& s) {
  int64_t n = 0;
  for (const Shape* a : s.Leaves()) n += ArrayElements(*a) * XlaElementBytes(a->element_type);
  return n;
}

// The first array of a shape; null for an empty tuple.
const Shape* FirstArray(const Shape& s) {
  std::vector<const Shape*> leaves = s.Leaves();
  return leaves.empty() ? nullptr : leaves[0];
}

// The matrix engine's rate class of an operand type.
const char* MatmulClass(int type) {
  switch (type) {
    case 11: return "fp32";
    case 16: return "bf16";
    case 10: return "fp16";
    case 19: case 20: case 23: case 24: case 25: case 28: case 29: return "fp8";
    default: return "int";
  }
}

const std::set<std::string>& VectorOpcodes() {
  static const std::set<std::string> kOps = {
      "add", "subtract", "multiply", "divide", "maximum", "minimum", "negate", "abs", "compare", "select",
      "clamp", "convert", "and", "or", "xor", "not", "remainder", "sign", "floor", "ceil", "round-nearest-afz",
      "round-nearest-even", "shift-left", "shift-right-arithmetic", "shift-right-logical", "is-finite",
      "reduce-precision", "stochastic-convert", "popcnt", "count-leading-zeros", "real", "imag", "map"};
  return kOps;
}

const std::set<std::string>& TranscendentalOpcodes() {
  static const std::set<std::string> kOps = {
      "exponential", "exponential-minus-one", "log", "log-plus-one", "tanh", "logistic", "rsqrt", "sqrt", "cbrt",
      "power", "sine", "cosine", "tan", "atan2", "erf"};
  return kOps;
}

// The collective's kind without -start (async pairs count at their start; -done moves nothing).
std::string CollectiveKind(const std::string& opcode) {
  static const std::set<std::string> kKinds = {"all-reduce", "all-gather", "reduce-scatter", "all-to-all",
                                               "collective-permute", "collective-broadcast"};
  std::string kind = opcode;
  const std::string start = "-start";
  if (kind.size() > start.size() && kind.compare(kind.size() - start.size(), start.size(), start) == 0) {
    kind.resize(kind.size() - start.size());
  }
  return kKinds.count(kind) ? kind : "";
}

// known_trip_count in a while loop's backend config ({"known_trip_count":{"n":"5"}}); 0 if none.
int64_t KnownTripCount(const std::string& config) {
  const size_t at = config.find("known_trip_count");
  if (at == std::string::npos) return 0;
  const size_t n = config.find("\"n\"", at);
  if (n == std::string::npos) return 0;
  size_t digit = config.find_first_of("0123456789", n + 3);
  if (digit == std::string::npos) return 0;
  int64_t count = 0;
  while (digit < config.size() && config[digit] >= '0' && config[digit] <= '9') count = count * 10 + (config[digit++] - '0');
  return count;
}

bool IsFloat(int type) { return type == 12 || std::string(MatmulClass(type)) != "int"; }  // 12: F64

bool IsNarrowFloat(int type) {
  const std::string c = MatmulClass(type);
  return c == "bf16" || c == "fp16" || c == "fp8";
}

// Where a fused computation was called from, to follow its parameters out to their values.
struct Frame {
  const Instruction* call = nullptr;
  const Frame* caller = nullptr;
};

class Counter {
 public:
  explicit Counter(const ModuleView& module) {
    for (const Computation& c : module.computations()) {
      computations_[c.id] = &c;
      for (const Instruction& i : c.instructions) instructions_[i.id] = &i;
    }
  }

  void CountComputation(int64_t id, double times, int depth, const Frame* frame = nullptr) {
    auto it = computations_.find(id);
    if (it == computations_.end() || depth > 64) return;
    for (const Instruction& i : it->second->instructions) CountInstruction(i, times, depth, frame);
  }

  ProgramCost Take(int64_t root_id) {
    for (const auto& [key, count] : collective_counts_) {
      cost_.collectives.push_back({std::get<0>(key), std::get<1>(key), std::get<2>(key), count});
    }
    for (const auto& [key, count] : matmul_counts_) {
      const auto& [type, batch, m, k, n] = key;
      cost_.matmuls.push_back({type, batch, m, k, n, count});
    }
    for (const auto& [id, entry] : intermediate_counts_) {
      if (id != root_id) intermediate_sizes_[entry.first] += entry.second;
    }
    for (const auto& [bytes, count] : intermediate_sizes_) cost_.intermediates.push_back({bytes, count});
    return std::move(cost_);
  }

 private:
  const Shape* OperandShape(const Instruction& i, size_t n) const {
    if (n >= i.operand_ids.size()) return nullptr;
    auto it = instructions_.find(i.operand_ids[n]);
    return it == instructions_.end() ? nullptr : &it->second->shape;
  }

  const Instruction* Find(int64_t id) const {
    auto it = instructions_.find(id);
    return it == instructions_.end() ? nullptr : it->second;
  }

  const Computation* Called(const Instruction& i) const {
    if (i.called_computation_ids.empty()) return nullptr;
    auto it = computations_.find(i.called_computation_ids[0]);
    return it == computations_.end() ? nullptr : it->second;
  }

  // The type a matrix product's operand had before XLA's CPU compiler widened it: CPUs multiply
  // bf16 and fp8 in f32, so the engine's optimized program converts them first (often in a
  // fusion of its own, with a transpose or copy for the dot's layout), and a NeuronCore would
  // not. Follows converts, ops that only move elements, fusion parameters and fusion roots.
  int SourceType(const Instruction* at, const Frame* frame, int depth = 0) const {
    const Shape* first = FirstArray(at->shape);
    const int type = first == nullptr ? 0 : first->element_type;
    if (depth > 32) return type;
    const Instruction* next = nullptr;
    const Frame* next_frame = frame;
    Frame inner{at, frame};
    if ((at->opcode == "convert" || MovesElementsOnly(at->opcode)) && !at->operand_ids.empty()) {
      next = Find(at->operand_ids[0]);
    } else if (at->opcode == "parameter" && frame != nullptr && frame->call != nullptr &&
               static_cast<size_t>(at->parameter_number) < frame->call->operand_ids.size()) {
      next = Find(frame->call->operand_ids[at->parameter_number]);
      next_frame = frame->caller;
    } else if (at->opcode == "fusion") {
      if (const Computation* body = Called(*at)) {
        next = Find(RootId(*body));
        next_frame = &inner;
      }
    }
    if (next == nullptr) return type;
    const int source = SourceType(next, next_frame, depth + 1);
    return IsNarrowFloat(source) && !IsNarrowFloat(type) ? source : type;
  }

  static bool MovesElementsOnly(const std::string& opcode) {
    static const std::set<std::string> kMoves = {"copy", "transpose", "reshape", "bitcast", "broadcast",
                                                 "slice", "dynamic-slice", "pad", "reverse"};
    return kMoves.count(opcode) > 0;
  }

  // Unfused results (frame is null outside fusions and calls) that occupy memory of their own.
  void CountIntermediate(const Instruction& i, double times, const Frame* frame) {
    static const std::set<std::string> kNoBuffer = {"parameter", "tuple", "get-tuple-element", "bitcast",
                                                    "constant", "while", "call", "conditional",
                                                    "after-all", "partition-id", "replica-id", "iota"};
    if (frame != nullptr || kNoBuffer.count(i.opcode)) return;
    const int64_t bytes = Bytes(i.shape);
    if (bytes > 0) {
      auto& entry = intermediate_counts_[i.id];
      entry.first = bytes;
      entry.second += times;
    }
  }

  void CountInstruction(const Instruction& i, double times, int depth, const Frame* frame) {
    const std::string& op = i.opcode;
    CountIntermediate(i, times, frame);
    if (op == "fusion" || op == "call" || op == "async-start") {
      const Frame inner{&i, frame};
      for (int64_t c : i.called_computation_ids) CountComputation(c, times, depth + 1, &inner);
    } else if (op == "while") {
      int64_t trips = KnownTripCount(i.backend_config);
      if (trips == 0) {
        trips = 1;
        cost_.unknown_trip_count = true;
      }
      for (int64_t c : i.called_computation_ids) CountComputation(c, times * static_cast<double>(trips), depth + 1);
    } else if (op == "conditional") {
      // Each run takes one branch: count their mean.
      const double branches = static_cast<double>(i.called_computation_ids.size());
      for (int64_t c : i.called_computation_ids) CountComputation(c, times / branches, depth + 1);
    } else if (op == "dot") {
      CountDot(i, times, frame);
    } else if (op == "convolution") {
      CountConvolution(i, times, frame);
    } else if (op == "convert" && ConvertsFloatToFloat(i)) {
      // Free: the engines convert on their read and write paths. XLA's CPU compiler wraps every
      // bf16 operation in such converts, which a NeuronCore program would not have.
    } else if (VectorOpcodes().count(op)) {
      cost_.vector_ops += times * static_cast<double>(Elements(i.shape));
    } else if (TranscendentalOpcodes().count(op)) {
      cost_.transcendental_ops += times * static_cast<double>(Elements(i.shape));
    } else if (op == "reduce" || op == "reduce-window") {
      // Every input element is combined once (the first half of the operands are the inputs).
      for (size_t n = 0; n < i.operand_ids.size() / 2; ++n) {
        if (const Shape* s = OperandShape(i, n)) cost_.vector_ops += times * static_cast<double>(Elements(*s));
      }
    } else if (const std::string kind = CollectiveKind(op); !kind.empty()) {
      CountCollective(i, kind, times);
    }
  }

  bool ConvertsFloatToFloat(const Instruction& i) const {
    const Shape* from = OperandShape(i, 0);
    const Shape* from_array = from == nullptr ? nullptr : FirstArray(*from);
    const Shape* to_array = FirstArray(i.shape);
    if (from_array == nullptr || to_array == nullptr) return false;
    return IsFloat(from_array->element_type) && IsFloat(to_array->element_type);
  }

  void CountDot(const Instruction& i, double times, const Frame* frame) {
    const Shape* lhs_shape = OperandShape(i, 0);
    const Shape* lhs = lhs_shape == nullptr ? nullptr : FirstArray(*lhs_shape);
    if (lhs == nullptr) return;
    const std::vector<int64_t>& dims = lhs->dims;
    int64_t contracted = 1;
    for (int64_t d : i.dot_lhs_contracting) {
      if (d >= 0 && static_cast<size_t>(d) < dims.size()) contracted *= dims[d];
    }
    int64_t batch = 1;
    for (int64_t d : i.dot_lhs_batch) {
      if (d >= 0 && static_cast<size_t>(d) < dims.size()) batch *= dims[d];
    }
    const std::string type = MatmulClass(SourceType(Find(i.operand_ids[0]), frame));
    cost_.matmul_flops[type] += times * 2.0 * Elements(i.shape) * contracted;
    const int64_t m = contracted * batch > 0 ? ArrayElements(*lhs) / (contracted * batch) : 0;
    const int64_t n = m * batch > 0 ? Elements(i.shape) / (m * batch) : 0;
    AddMatmul(type, batch, m, contracted, n, times);
  }

  void AddMatmul(const std::string& type, int64_t batch, int64_t m, int64_t k, int64_t n, double times) {
    if (m > 0 && k > 0 && n > 0) matmul_counts_[{type, batch, m, k, n}] += times;
  }

  // Each output element sums over the kernel's input features and window: kernel size / outputs.
  void CountConvolution(const Instruction& i, double times, const Frame* frame) {
    const Shape* input = OperandShape(i, 0);
    const Shape* kernel_shape = OperandShape(i, 1);
    const Shape* kernel = kernel_shape == nullptr ? nullptr : FirstArray(*kernel_shape);
    if (input == nullptr || kernel == nullptr || FirstArray(*input) == nullptr) return;
    const int64_t feature = i.convolution_kernel_output_feature;
    if (feature < 0 || static_cast<size_t>(feature) >= kernel->dims.size()) return;
    const int64_t outputs = kernel->dims[feature];
    if (outputs <= 0) return;
    const double per_output = static_cast<double>(ArrayElements(*kernel)) / static_cast<double>(outputs);
    const std::string type = MatmulClass(SourceType(Find(i.operand_ids[0]), frame));
    cost_.matmul_flops[type] += times * 2.0 * Elements(i.shape) * per_output;
    AddMatmul(type, 1, outputs, static_cast<int64_t>(per_output), Elements(i.shape) / outputs, times);
  }

  void CountCollective(const Instruction& i, const std::string& kind, double times) {
    // all-gather sends pieces of its result; the others send their operands.
    int64_t bytes = 0;
    if (kind == "all-gather") {
      bytes = Bytes(i.shape);
      const std::vector<const Shape*> leaves = i.shape.Leaves();
      if (i.opcode != kind && leaves.size() > 1) bytes = Bytes(*leaves.back());
    } else {
      for (size_t n = 0; n < i.operand_ids.size(); ++n) {
        if (const Shape* s = OperandShape(i, n)) bytes += Bytes(*s);
      }
    }
    collective_counts_[{kind, bytes, i.group_size}] += static_cast<int64_t>(times);
  }

  std::unordered_map<int64_t, const Computation*> computations_;
  std::unordered_map<int64_t, const Instruction*> instructions_;
  std::map<std::tuple<std::string, int64_t, int>, int64_t> collective_counts_;
  std::map<std::tuple<std::string, int64_t, int64_t, int64_t, int64_t>, double> matmul_counts_;
  std::map<int64_t, std::pair<int64_t, double>> intermediate_counts_;  // by instruction id: bytes, runs
  std::map<int64_t, double> intermediate_sizes_;
  ProgramCost cost_;
};

}  // namespace

StatusOr<ProgramCost> AnalyzeProgramCost(const std::string& bytes, bool with_config) {
  StatusOr<ModuleView> module = ModuleView::ReadProgram(bytes, with_config);
  if (!module.ok()) return InvalidArgument("the program is not a valid HloModuleProto");
  return AnalyzeProgramCost(module.value());
}

StatusOr<ProgramCost> AnalyzeProgramCost(const ModuleView& module) {
  const Computation* entry = module.entry();  // callees come before callers: the last, unless named
  if (entry == nullptr) return InvalidArgument("the program has no computations");
  Counter counter(module);
  counter.CountComputation(entry->id, 1.0, 0);
  const int64_t root_id = RootId(*entry);
  ProgramCost cost = counter.Take(root_id);
  for (const Instruction& i : entry->instructions) {
    if (i.opcode == "parameter") cost.parameter_bytes += Bytes(i.shape);
    if (i.id == root_id) cost.output_bytes = Bytes(i.shape);
  }
  if (root_id < 0 && !entry->instructions.empty()) cost.output_bytes = Bytes(entry->instructions.back().shape);
  return cost;
}

std::string ProgramCostJson(const ProgramCost& cost) {
  json::Writer out;
  out.BeginObject().Key("matmul_flops").BeginObject();
  for (const auto& [type, flops] : cost.matmul_flops) out.Key(type).Number(flops, 0);
  out.EndObject()
      .Key("vector_ops").Number(cost.vector_ops, 0)
      .Key("transcendental_ops").Number(cost.transcendental_ops, 0)
      .Field("parameter_bytes", cost.parameter_bytes)
      .Field("output_bytes", cost.output_bytes)
      .Field("unknown_trip_count", cost.unknown_trip_count);
  out.Key("collectives").BeginArray();
  for (const CollectiveCost& c : cost.collectives) {
    out.BeginObject()
        .Field("kind", c.kind)
        .Field("bytes", c.bytes)
        .Field("group_size", c.group_size)
        .Field("count", c.count)
        .EndObject();
  }
  out.EndArray().Key("matmuls").BeginArray();
  for (const MatmulShape& m : cost.matmuls) {
    out.BeginObject()
        .Field("type", m.type)
        .Field("batch", m.batch)
        .Field("m", m.m)
        .Field("k", m.k)
        .Field("n", m.n)
        .Key("count").Number(m.count, 0)
        .EndObject();
  }
  out.EndArray().Key("intermediates").BeginArray();
  for (const IntermediateSize& i : cost.intermediates) {
    out.BeginObject().Field("bytes", i.bytes).Key("count").Number(i.count, 0).EndObject();
  }
  return out.EndArray().EndObject().text();
}

}  // namespace pjrt_neuron::hlo
