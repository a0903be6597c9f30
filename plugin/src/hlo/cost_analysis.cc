// Counts a program's work from the shapes in its HLO (cost_analysis.h).
#include "hlo/cost_analysis.h"

#include <set>
#include <tuple>
#include <unordered_map>

#include "common/element_sizes.h"
#include "common/json.h"
#include "hlo/hlo_fields.h"
#include "hlo/wire_format.h"

namespace pjrt_neuron::hlo {
namespace {

namespace fields = hlo_fields;

// Fields only the cost analysis reads (xla/service/hlo.proto, xla/xla_data.proto).
constexpr uint32_t kInstructionConvolutionDimensionNumbers = 16;
constexpr uint32_t kDotLhsBatch = 3;                // DotDimensionNumbers.lhs_batch_dimensions
constexpr uint32_t kConvKernelOutputFeature = 4;    // ConvolutionDimensionNumbers
constexpr uint32_t kReplicaGroupIds = 1;            // ReplicaGroup.replica_ids
constexpr uint32_t kDeviceListGroups = 1;           // CollectiveDeviceListProto.replica_groups
constexpr uint32_t kDeviceListIota = 2;             // CollectiveDeviceListProto.iota_replica_group_list
constexpr uint32_t kIotaDevicesPerGroup = 2;        // IotaReplicaGroupListProto.num_devices_per_group

struct Array {
  int type = 0;
  std::vector<int64_t> dims;
};

struct Shape {
  std::vector<Array> leaves;  // a tuple's arrays, or the one array
};

// A repeated int64 field, packed or not.
void ReadInts(const Field& f, std::vector<int64_t>* out) {
  if (f.wire_type == kVarint) {
    out->push_back(static_cast<int64_t>(f.varint));
  } else if (f.wire_type == kLengthDelimited) {
    WireReader packed(f.payload);
    uint64_t v;
    while (!packed.done() && packed.Varint(&v)) out->push_back(static_cast<int64_t>(v));
  }
}

void ReadShape(const std::string& bytes, Shape* shape) {
  WireReader reader(bytes);
  Field f;
  Array array;
  bool tuple = false;
  while (!reader.done() && reader.Next(&f)) {
    if (f.number == fields::kShapeElementType && f.wire_type == kVarint) {
      array.type = static_cast<int>(f.varint);
      tuple = array.type == kTupleElementType;
    } else if (f.number == fields::kShapeDimensions) {
      ReadInts(f, &array.dims);
    } else if (f.number == fields::kShapeTupleShapes && f.wire_type == kLengthDelimited) {
      ReadShape(f.payload, shape);
    }
  }
  if (!tuple) shape->leaves.push_back(array);
}

struct Instruction {
  int64_t id = 0;
  int64_t parameter_number = 0;
  std::string opcode;
  Shape shape;
  std::vector<int64_t> operands;
  std::vector<int64_t> called;
  std::vector<int64_t> dimensions;
  std::vector<int64_t> lhs_contracting;
  std::vector<int64_t> lhs_batch;
  int64_t kernel_output_feature = 0;
  std::string backend_config;
  int group_size = 0;
};

// Participants per group, from replica_groups or collective_device_list; 0 when every device.
int ReadGroupSize(const Field& f) {
  WireReader reader(f.payload);
  Field g;
  if (f.number == fields::kInstructionReplicaGroups) {
    std::vector<int64_t> ids;
    while (!reader.done() && reader.Next(&g)) {
      if (g.number == kReplicaGroupIds) ReadInts(g, &ids);
    }
    return static_cast<int>(ids.size());
  }
  while (!reader.done() && reader.Next(&g)) {
    if (g.number == kDeviceListGroups && g.wire_type == kLengthDelimited) {
      Field group;
      group.number = fields::kInstructionReplicaGroups;
      group.payload = g.payload;
      return ReadGroupSize(group);
    }
    if (g.number == kDeviceListIota && g.wire_type == kLengthDelimited) {
      WireReader iota(g.payload);
      Field h;
      while (!iota.done() && iota.Next(&h)) {
        if (h.number == kIotaDevicesPerGroup && h.wire_type == kVarint) return static_cast<int>(h.varint);
      }
    }
  }
  return 0;
}

bool ReadInstruction(const std::string& bytes, Instruction* i) {
  WireReader reader(bytes);
  Field f;
  while (!reader.done()) {
    if (!reader.Next(&f)) return false;
    switch (f.number) {
      case fields::kInstructionOpcode: i->opcode = f.payload; break;
      case fields::kInstructionShape: ReadShape(f.payload, &i->shape); break;
      case fields::kInstructionId: i->id = static_cast<int64_t>(f.varint); break;
      case fields::kInstructionParameterNumber: i->parameter_number = static_cast<int64_t>(f.varint); break;
      case fields::kInstructionOperandIds: ReadInts(f, &i->operands); break;
      case fields::kInstructionCalledComputations: ReadInts(f, &i->called); break;
      case fields::kInstructionDimensions: ReadInts(f, &i->dimensions); break;
      case fields::kInstructionBackendConfig: i->backend_config = f.payload; break;
      case fields::kInstructionDotDimensionNumbers: {
        WireReader dot(f.payload);
        Field g;
        while (!dot.done() && dot.Next(&g)) {
          if (g.number == fields::kDotLhsContracting) ReadInts(g, &i->lhs_contracting);
          if (g.number == kDotLhsBatch) ReadInts(g, &i->lhs_batch);
        }
        break;
      }
      case kInstructionConvolutionDimensionNumbers: {
        WireReader conv(f.payload);
        Field g;
        while (!conv.done() && conv.Next(&g)) {
          if (g.number == kConvKernelOutputFeature && g.wire_type == kVarint) {
            i->kernel_output_feature = static_cast<int64_t>(g.varint);
          }
        }
        break;
      }
      case fields::kInstructionReplicaGroups:
      case fields::kInstructionCollectiveDeviceList: {
        const int size = ReadGroupSize(f);
        if (size > 0 && i->group_size == 0) i->group_size = size;
        break;
      }
      default: break;
    }
  }
  return true;
}

struct Computation {
  int64_t id = 0;
  int64_t root_id = -1;
  std::vector<Instruction> instructions;
};

struct Module {
  int64_t entry_id = -1;
  std::vector<Computation> computations;
};

Status ReadModule(const std::string& bytes, Module* module) {
  const Status malformed = InvalidArgument("the program is not a valid HloModuleProto");
  WireReader reader(bytes);
  Field f;
  while (!reader.done()) {
    if (!reader.Next(&f)) return malformed;
    if (f.number == fields::kModuleEntryComputationId && f.wire_type == kVarint) module->entry_id = static_cast<int64_t>(f.varint);
    if (f.number != fields::kModuleComputations || f.wire_type != kLengthDelimited) continue;
    Computation computation;
    WireReader inner(f.payload);
    Field g;
    while (!inner.done()) {
      if (!inner.Next(&g)) return malformed;
      if (g.number == fields::kComputationId && g.wire_type == kVarint) computation.id = static_cast<int64_t>(g.varint);
      if (g.number == fields::kComputationRootId && g.wire_type == kVarint) computation.root_id = static_cast<int64_t>(g.varint);
      if (g.number == fields::kComputationInstructions && g.wire_type == kLengthDelimited) {
        Instruction instruction;
        if (!ReadInstruction(g.payload, &instruction)) return malformed;
        computation.instructions.push_back(std::move(instruction));
      }
    }
    module->computations.push_back(std::move(computation));
  }
  if (module->computations.empty()) return InvalidArgument("the program has no computations");
  return Status::Ok();
}

int64_t Elements(const Array& a) {
  int64_t n = 1;
  for (int64_t d : a.dims) n *= d;
  return n;
}

int64_t Elements(const Shape& s) {
  int64_t n = 0;
  for (const Array& a : s.leaves) n += Elements(a);
  return n;
}

int64_t Bytes(const Shape& s) {
  int64_t n = 0;
  for (const Array& a : s.leaves) n += Elements(a) * XlaElementBytes(a.type);
  return n;
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
  explicit Counter(const Module& module) {
    for (const Computation& c : module.computations) {
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
    if (n >= i.operands.size()) return nullptr;
    auto it = instructions_.find(i.operands[n]);
    return it == instructions_.end() ? nullptr : &it->second->shape;
  }

  const Instruction* Find(int64_t id) const {
    auto it = instructions_.find(id);
    return it == instructions_.end() ? nullptr : it->second;
  }

  const Computation* Called(const Instruction& i) const {
    if (i.called.empty()) return nullptr;
    auto it = computations_.find(i.called[0]);
    return it == computations_.end() ? nullptr : it->second;
  }

  // The type a matrix product's operand had before XLA's CPU compiler widened it: CPUs multiply
  // bf16 and fp8 in f32, so the engine's optimized program converts them first (often in a
  // fusion of its own, with a transpose or copy for the dot's layout), and a NeuronCore would
  // not. Follows converts, ops that only move elements, fusion parameters and fusion roots.
  int SourceType(const Instruction* at, const Frame* frame, int depth = 0) const {
    const int type = at->shape.leaves.empty() ? 0 : at->shape.leaves[0].type;
    if (depth > 32) return type;
    const Instruction* next = nullptr;
    const Frame* next_frame = frame;
    Frame inner{at, frame};
    if ((at->opcode == "convert" || MovesElementsOnly(at->opcode)) && !at->operands.empty()) {
      next = Find(at->operands[0]);
    } else if (at->opcode == "parameter" && frame != nullptr && frame->call != nullptr &&
               static_cast<size_t>(at->parameter_number) < frame->call->operands.size()) {
      next = Find(frame->call->operands[at->parameter_number]);
      next_frame = frame->caller;
    } else if (at->opcode == "fusion") {
      if (const Computation* body = Called(*at)) {
        next = Find(body->root_id);
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
      for (int64_t c : i.called) CountComputation(c, times, depth + 1, &inner);
    } else if (op == "while") {
      int64_t trips = KnownTripCount(i.backend_config);
      if (trips == 0) {
        trips = 1;
        cost_.unknown_trip_count = true;
      }
      for (int64_t c : i.called) CountComputation(c, times * static_cast<double>(trips), depth + 1);
    } else if (op == "conditional") {
      // Each run takes one branch: count their mean.
      for (int64_t c : i.called) CountComputation(c, times / static_cast<double>(i.called.size()), depth + 1);
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
      for (size_t n = 0; n < i.operands.size() / 2; ++n) {
        if (const Shape* s = OperandShape(i, n)) cost_.vector_ops += times * static_cast<double>(Elements(*s));
      }
    } else if (const std::string kind = CollectiveKind(op); !kind.empty()) {
      CountCollective(i, kind, times);
    }
  }

  bool ConvertsFloatToFloat(const Instruction& i) const {
    const Shape* from = OperandShape(i, 0);
    if (from == nullptr || from->leaves.empty() || i.shape.leaves.empty()) return false;
    return IsFloat(from->leaves[0].type) && IsFloat(i.shape.leaves[0].type);
  }

  void CountDot(const Instruction& i, double times, const Frame* frame) {
    const Shape* lhs = OperandShape(i, 0);
    if (lhs == nullptr || lhs->leaves.empty()) return;
    const std::vector<int64_t>& dims = lhs->leaves[0].dims;
    int64_t contracted = 1;
    for (int64_t d : i.lhs_contracting) {
      if (d >= 0 && static_cast<size_t>(d) < dims.size()) contracted *= dims[d];
    }
    int64_t batch = 1;
    for (int64_t d : i.lhs_batch) {
      if (d >= 0 && static_cast<size_t>(d) < dims.size()) batch *= dims[d];
    }
    const std::string type = MatmulClass(SourceType(Find(i.operands[0]), frame));
    cost_.matmul_flops[type] += times * 2.0 * Elements(i.shape) * contracted;
    const int64_t m = contracted * batch > 0 ? Elements(lhs->leaves[0]) / (contracted * batch) : 0;
    const int64_t n = m * batch > 0 ? Elements(i.shape) / (m * batch) : 0;
    AddMatmul(type, batch, m, contracted, n, times);
  }

  void AddMatmul(const std::string& type, int64_t batch, int64_t m, int64_t k, int64_t n, double times) {
    if (m > 0 && k > 0 && n > 0) matmul_counts_[{type, batch, m, k, n}] += times;
  }

  // Each output element sums over the kernel's input features and window: kernel size / outputs.
  void CountConvolution(const Instruction& i, double times, const Frame* frame) {
    const Shape* input = OperandShape(i, 0);
    const Shape* kernel = OperandShape(i, 1);
    if (input == nullptr || kernel == nullptr || input->leaves.empty() || kernel->leaves.empty()) return;
    const Array& k = kernel->leaves[0];
    if (i.kernel_output_feature < 0 || static_cast<size_t>(i.kernel_output_feature) >= k.dims.size()) return;
    const int64_t outputs = k.dims[i.kernel_output_feature];
    if (outputs <= 0) return;
    const double per_output = static_cast<double>(Elements(k)) / static_cast<double>(outputs);
    const std::string type = MatmulClass(SourceType(Find(i.operands[0]), frame));
    cost_.matmul_flops[type] += times * 2.0 * Elements(i.shape) * per_output;
    AddMatmul(type, 1, outputs, static_cast<int64_t>(per_output), Elements(i.shape) / outputs, times);
  }

  void CountCollective(const Instruction& i, const std::string& kind, double times) {
    // all-gather sends pieces of its result; the others send their operands.
    int64_t bytes = 0;
    if (kind == "all-gather") {
      bytes = Bytes(i.shape);
      if (i.opcode != kind && i.shape.leaves.size() > 1) bytes = Bytes(Shape{{i.shape.leaves.back()}});
    } else {
      for (size_t n = 0; n < i.operands.size(); ++n) {
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
  Module module;
  PN_RETURN_IF_ERROR(ReadModule(HloModuleBytes(bytes, with_config), &module));
  const Computation* entry = &module.computations.back();  // callees come before callers
  for (const Computation& c : module.computations) {
    if (c.id == module.entry_id) entry = &c;
  }
  Counter counter(module);
  counter.CountComputation(entry->id, 1.0, 0);
  ProgramCost cost = counter.Take(entry->root_id);
  for (const Instruction& i : entry->instructions) {
    if (i.opcode == "parameter") cost.parameter_bytes += Bytes(i.shape);
    if (i.id == entry->root_id) cost.output_bytes = Bytes(i.shape);
  }
  if (entry->root_id < 0 && !entry->instructions.empty()) cost.output_bytes = Bytes(entry->instructions.back().shape);
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
