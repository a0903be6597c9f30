// torch-xla lowers upsampling (F.interpolate nearest/bilinear, nn.Upsample) for NEURON devices
// to custom calls that only TPU and Neuron compilers know: ResizeNearest, ResizeBilinear and
// their ...Grad forms, on NHWC-ordered operands with backend_config "\"<align_corners><half_pixel>\"".
// XLA's CPU engine has no implementation, so they are rewritten into ordinary HLO first: each
// spatial axis is a matrix of interpolation weights (computed like torch-xla's own CPU lowering),
// applied with two dots, and a gradient is the transposed weights.
#pragma once

#include <string>

#include "common/status.h"

namespace pjrt_neuron::hlo {

// True for the custom-call targets rewritten here.
bool IsResizeTarget(const std::string& target);

// The program (a serialized HloModuleProto, or HloModuleProtoWithConfig when `with_config`) with
// every Resize* custom call replaced; `*changed` says whether any was. INVALID_ARGUMENT naming
// the instruction when one has a shape or config this cannot serve.
StatusOr<std::string> LowerResizeCustomCalls(const std::string& program, bool with_config, bool* changed);

}  // namespace pjrt_neuron::hlo
