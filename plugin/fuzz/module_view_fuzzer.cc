// Program bytes ("hlo" and "hlo_with_config") through the one reader of programs (hlo/module_view.h):
// whatever the bytes, reading must not crash, every span must lie in the bytes, a module written
// back unedited must be the bytes read, and one rewritten instruction by instruction must read
// back alike. On modules that read, the passes run too: their logic, not their decoding, which
// is the view's.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "hlo/collective_program.h"
#include "hlo/compat_analysis.h"
#include "hlo/cost_analysis.h"
#include "hlo/module_view.h"
#include "hlo/neff_names.h"
#include "hlo/output_placement.h"
#include "hlo/partitions_as_replicas.h"
#include "hlo/resize_calls.h"

namespace hlo = pjrt_neuron::hlo;

namespace {

void Check(bool condition) {
  if (!condition) std::abort();
}

void CheckSpan(const hlo::ModuleView& view, const hlo::Span& span) {
  Check(span.offset <= view.bytes().size() && span.size <= view.bytes().size() - span.offset);
}

void CheckView(const hlo::ModuleView& view) {
  for (const hlo::FieldSpan& f : view.fields()) CheckSpan(view, f.raw);
  hlo::ModuleEditor same(view);
  Check(same.Write() == view.bytes());
  hlo::ModuleEditor copied(view);
  for (const hlo::ComputationView& computation : view.computations()) {
    CheckSpan(view, computation.field);
    for (const hlo::InstructionView& instruction : computation.instructions) {
      CheckSpan(view, instruction.field);
      CheckSpan(view, instruction.bytes);
      for (size_t user : instruction.users) Check(user < computation.instructions.size());
      copied.Replace(instruction, {std::string(view.Bytes(instruction.bytes))});
    }
  }
  auto again = hlo::ModuleView::Read(copied.Write());
  Check(again.ok() && again->computations().size() == view.computations().size());
  for (size_t c = 0; c < view.computations().size(); ++c) {
    const auto& before = view.computations()[c].instructions;
    const auto& after = again->computations()[c].instructions;
    Check(before.size() == after.size());
    for (size_t i = 0; i < before.size(); ++i) Check(before[i].opcode == after[i].opcode && before[i].id == after[i].id);
  }
}

void RunPasses(const std::string& bytes, bool with_config) {
  const char* format = with_config ? "hlo_with_config" : "hlo";
  (void)hlo::HasCollectives(bytes, format);
  bool matchable = false;
  (void)hlo::CollectiveSignature(bytes, format, &matchable);
  (void)hlo::AnalyzeHloModule(bytes, with_config, true);
  (void)hlo::AnalyzeProgramCost(bytes, with_config);
  bool changed = false;
  (void)hlo::LowerResizeCustomCalls(bytes, with_config, &changed);
  if (with_config) return;
  (void)hlo::WithCollectiveChannels(bytes);
  (void)hlo::WithNeffNames(bytes);
  (void)hlo::StripOutputPlacements(bytes);
  (void)hlo::PartitionsAsReplicas(bytes);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  for (bool with_config : {false, true}) {
    auto view = hlo::ModuleView::ReadProgram(bytes, with_config);
    if (!view.ok()) continue;
    CheckView(view.value());
    RunPasses(bytes, with_config);
  }
  return 0;
}
