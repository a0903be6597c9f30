// Rewrites torch-xla's Resize* custom calls into dots with constant weights (resize_calls.h).
#include "hlo/resize_calls.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <vector>

#include "hlo/module_view.h"
#include "hlo/wire_format.h"

namespace pjrt_neuron::hlo {
namespace {

namespace fields = hlo_fields;

constexpr int kF16 = 10, kF32 = 11, kBF16 = 16;

// A dense array shape with the default (major-to-minor) layout.
std::string ShapeBytes(int element_type, const std::vector<int64_t>& dims) {
  std::string out;
  AppendVarintField(&out, fields::kShapeElementType, static_cast<uint64_t>(element_type));
  AppendBytesField(&out, fields::kShapeDimensions, PackedVarints(dims));
  std::vector<int64_t> minor_to_major;
  for (int64_t d = static_cast<int64_t>(dims.size()) - 1; d >= 0; --d) minor_to_major.push_back(d);
  std::string layout;
  AppendBytesField(&layout, fields::kLayoutMinorToMajor, PackedVarints(minor_to_major));
  AppendBytesField(&out, fields::kShapeLayout, layout);
  return out;
}

struct Instruction {
  std::string name;
  std::string opcode;
  std::string shape;  // serialized ShapeProto
  int64_t id = 0;
  std::vector<int64_t> operands;
  std::string extra;  // further fields, already serialized
};

std::string InstructionBytes(const Instruction& i) {
  std::string out;
  AppendBytesField(&out, fields::kInstructionName, i.name);
  AppendBytesField(&out, fields::kInstructionOpcode, i.opcode);
  AppendBytesField(&out, fields::kInstructionShape, i.shape);
  out += i.extra;
  AppendVarintField(&out, fields::kInstructionId, static_cast<uint64_t>(i.id));
  if (!i.operands.empty()) AppendBytesField(&out, fields::kInstructionOperandIds, PackedVarints(i.operands));
  return out;
}

// weights[r * sources + s]: how much source pixel s contributes to result pixel r along one
// axis resized from `in` to `out` pixels. Computed in float in the order torch-xla's CPU
// lowering (resize_ops.cpp, BuildResize) computes it, so the weights are the same numbers.
std::vector<float> ForwardWeights(int64_t in, int64_t out, bool align_corners, bool half_pixel, bool bilinear) {
  std::vector<float> w(static_cast<size_t>(out * in), 0.0f);
  const float scale = (align_corners && out > 1) ? static_cast<float>(in - 1) / static_cast<float>(out - 1)
                                                 : static_cast<float>(in) / static_cast<float>(out);
  for (int64_t r = 0; r < out; ++r) {
    float start = static_cast<float>(r);
    if (half_pixel) start += 0.5f;
    const float sample = start * scale;
    if (bilinear) {
      const int64_t span = std::min<int64_t>(3, in);
      float first = sample - 1.0f;
      if (half_pixel) first -= 0.5f;
      first = std::min(std::max(std::ceil(first), 0.0f), static_cast<float>(in - span));
      float k[3] = {0, 0, 0};
      float sum = 0.0f;
      for (int64_t j = 0; j < span; ++j) {
        float pos = (first - sample) + static_cast<float>(j);
        if (half_pixel) pos += 0.5f;
        k[j] = std::max(0.0f, 1.0f - std::fabs(pos));
        sum += k[j];
      }
      for (int64_t j = 0; j < span; ++j) w[r * in + static_cast<int64_t>(first) + j] = k[j] / sum;
    } else {
      float index = align_corners ? std::round(sample) : std::floor(sample);
      index = half_pixel ? std::min(std::max(index, 0.0f), static_cast<float>(in - 1))
                         : std::min(index, static_cast<float>(in - 1));
      w[r * in + static_cast<int64_t>(index)] = 1.0f;
    }
  }
  return w;
}

// The weights as an f32[rows, cols] constant literal.
std::string WeightsLiteral(const std::vector<float>& w, int64_t rows, int64_t cols) {
  std::string floats(w.size() * sizeof(float), '\0');
  std::memcpy(floats.data(), w.data(), floats.size());  // little-endian, as protobuf packs floats
  std::string literal;
  AppendBytesField(&literal, fields::kLiteralShape, ShapeBytes(kF32, {rows, cols}));
  AppendBytesField(&literal, fields::kLiteralF32s, floats);
  std::string extra;
  AppendBytesField(&extra, fields::kInstructionLiteral, literal);
  return extra;
}

std::string DotOverAxis1() {
  std::string numbers, extra;
  AppendBytesField(&numbers, fields::kDotLhsContracting, PackedVarints({1}));
  AppendBytesField(&numbers, fields::kDotRhsContracting, PackedVarints({1}));
  AppendBytesField(&extra, fields::kInstructionDotDimensionNumbers, numbers);
  return extra;
}

struct ResizeCall {
  bool bilinear = false;
  bool grad = false;
};

bool ParseTarget(const std::string& target, ResizeCall* call) {
  if (target == "ResizeNearest") *call = {false, false};
  else if (target == "ResizeBilinear") *call = {true, false};
  else if (target == "ResizeNearestGrad") *call = {false, true};
  else if (target == "ResizeBilinearGrad") *call = {true, true};
  else return false;
  return true;
}

// The replacement of one custom call: instructions in dependency order, the last one under
// the call's own name, id and shape.
StatusOr<std::vector<std::string>> Lower(const ResizeCall& call, const InstructionView& instruction,
                                         const ShapeView& operand_shape, int64_t* next_id) {
  const std::string& name = instruction.name;
  const std::string& backend_config = instruction.backend_config;
  const ShapeView& result = instruction.shape;
  const int64_t id = instruction.id, operand = instruction.operand_ids[0];
  const std::string what = "custom call '" + name + "'";
  if (result.dims.size() != 4 || operand_shape.dims.size() != 4) {
    return InvalidArgument(what + ": only 4-dimensional (NHWC) operands and results are supported");
  }
  if (result.dims[0] != operand_shape.dims[0] || result.dims[3] != operand_shape.dims[3]) {
    return InvalidArgument(what + ": batch and channel sizes of operand and result differ");
  }
  const int type = result.element_type;
  if (operand_shape.element_type != type || (type != kF32 && type != kBF16 && type != kF16)) {
    return InvalidArgument(what + ": only f32, bf16 and f16 values are supported");
  }
  std::string config = backend_config;
  config.erase(std::remove(config.begin(), config.end(), '"'), config.end());
  if (config.size() != 2 || (config[0] != '0' && config[0] != '1') || (config[1] != '0' && config[1] != '1')) {
    return InvalidArgument(what + ": backend_config '" + backend_config +
                           "' is not torch-xla's \"<align_corners><half_pixel_centers>\"");
  }
  const bool align_corners = config[0] == '1', half_pixel = config[1] == '1';
  const int64_t n = operand_shape.dims[0], c = operand_shape.dims[3];
  const int64_t s1 = operand_shape.dims[1], s2 = operand_shape.dims[2];
  const int64_t r1 = result.dims[1], r2 = result.dims[2];
  if (s1 <= 0 || s2 <= 0 || r1 <= 0 || r2 <= 0) return InvalidArgument(what + ": spatial sizes must be positive");

  // Weights [result pixels, operand pixels] per axis; a gradient runs the forward map backwards.
  auto axis_weights = [&](int64_t operand_size, int64_t result_size) {
    if (!call.grad) return ForwardWeights(operand_size, result_size, align_corners, half_pixel, call.bilinear);
    std::vector<float> forward = ForwardWeights(result_size, operand_size, align_corners, half_pixel, call.bilinear);
    std::vector<float> transposed(forward.size());
    for (int64_t o = 0; o < operand_size; ++o) {
      for (int64_t r = 0; r < result_size; ++r) transposed[r * operand_size + o] = forward[o * result_size + r];
    }
    return transposed;
  };

  std::vector<std::string> out;
  auto emit = [&](Instruction i) {
    out.push_back(InstructionBytes(i));
    return i.id;
  };
  int64_t input = operand;
  if (type != kF32) {
    input = emit({name + ".resize_in", "convert", ShapeBytes(kF32, operand_shape.dims), (*next_id)++, {operand}, ""});
  }
  int64_t w1 = emit({name + ".resize_w1", "constant", ShapeBytes(kF32, {r1, s1}), (*next_id)++, {},
                     WeightsLiteral(axis_weights(s1, r1), r1, s1)});
  int64_t w2 = emit({name + ".resize_w2", "constant", ShapeBytes(kF32, {r2, s2}), (*next_id)++, {},
                     WeightsLiteral(axis_weights(s2, r2), r2, s2)});
  // [N, S1, S2, C] . [R1, S1] -> [N, S2, C, R1];  . [R2, S2] -> [N, C, R1, R2].
  int64_t d1 = emit({name + ".resize_axis1", "dot", ShapeBytes(kF32, {n, s2, c, r1}), (*next_id)++, {input, w1},
                     DotOverAxis1()});
  int64_t d2 = emit({name + ".resize_axis2", "dot", ShapeBytes(kF32, {n, c, r1, r2}), (*next_id)++, {d1, w2},
                     DotOverAxis1()});
  std::string permutation;
  AppendBytesField(&permutation, fields::kInstructionDimensions, PackedVarints({0, 2, 3, 1}));
  if (type == kF32) {
    emit({name, "transpose", result.bytes, id, {d2}, permutation});
  } else {
    int64_t t = emit({name + ".resize_out", "transpose", ShapeBytes(kF32, {n, r1, r2, c}), (*next_id)++, {d2},
                      permutation});
    emit({name, "convert", result.bytes, id, {t}, ""});
  }
  return out;
}

StatusOr<std::string> LowerInModule(const std::string& module, bool* changed);

}  // namespace

bool IsResizeTarget(const std::string& target) {
  ResizeCall call;
  return ParseTarget(target, &call);
}

StatusOr<std::string> LowerResizeCustomCalls(const std::string& program, bool with_config, bool* changed) {
  *changed = false;
  if (program.find("Resize") == std::string::npos) return program;
  PN_ASSIGN_OR_RETURN(std::string module, LowerInModule(HloModuleBytes(program, with_config), changed));
  return *changed && with_config ? WithHloModule(program, module) : module;
}

namespace {

StatusOr<std::string> LowerInModule(const std::string& module, bool* changed) {
  *changed = false;
  // Cheap test first: most programs have none.
  if (module.find("Resize") == std::string::npos) return module;
  StatusOr<ModuleView> view = ModuleView::Read(module);
  if (!view.ok()) return module;
  int64_t next_id = view->LargestInstructionId() + 1;
  ModuleEditor editor(view.value());
  for (const ComputationView& computation : view->computations()) {
    std::map<int64_t, const ShapeView*> shapes;  // of the instructions before this one
    for (const InstructionView& instruction : computation.instructions) {
      shapes[instruction.id] = &instruction.shape;
      ResizeCall call;
      if (instruction.opcode != "custom-call" || !ParseTarget(instruction.custom_call_target, &call)) continue;
      const std::vector<int64_t>& operands = instruction.operand_ids;
      if (operands.size() != 1 || shapes.count(operands[0]) == 0) {
        return InvalidArgument("custom call '" + instruction.name + "' (" + instruction.custom_call_target +
                               ") must have one operand defined before it");
      }
      PN_ASSIGN_OR_RETURN(std::vector<std::string> replacement,
                          Lower(call, instruction, *shapes[operands[0]], &next_id));
      editor.Replace(instruction, std::move(replacement));
    }
  }
  *changed = editor.changed();
  // A replaced root keeps its id, so the computation's root_id stays right.
  return *changed ? editor.Write() : module;
}

}  // namespace
}  // namespace pjrt_neuron::hlo
