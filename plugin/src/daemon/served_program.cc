// The program key, gang key and collectives of an executable, from its optimized program.
#include "daemon/served_program.h"

#include "common/sha256.h"
#include "daemon/core_list.h"
#include "hlo/collective_program.h"

namespace pjrt_neuron::daemon {

std::shared_ptr<ServedExecutable> ServeExecutable(std::unique_ptr<engine::Executable> executable) {
  auto served = std::make_shared<ServedExecutable>();
  served->executable = std::move(executable);
  engine::Executable& e = *served->executable;
  // The sim engine reports the CPU plugin's optimized program, a serialized
  // HloModuleProtoWithConfig ("hlo_with_config"); one it cannot report may have collectives.
  auto optimized = e.OptimizedProgram();
  StatusOr<hlo::ModuleView> module =
      optimized.ok() ? hlo::ModuleView::ReadHloProgram(optimized->code, optimized->format) : optimized.status();
  served->has_collectives = !module.ok() || hlo::HasCollectives(module.value());
  auto fingerprint = e.Fingerprint();
  Sha256 hash;
  hash.Update(fingerprint.ok() && !fingerprint->empty() ? *fingerprint : optimized.ok() ? optimized->code : e.name());
  served->program_key = hash.Digest();
  served->gang_key = served->program_key;
  served->cores = e.addressable_cores();
  if (served->has_collectives && module.ok()) {
    bool matchable = false;
    std::string signature = hlo::CollectiveSignature(module.value(), &matchable);
    if (matchable) {
      Sha256 collectives;
      collectives.Update("collectives " + CoreList(served->cores) + " " + std::to_string(e.num_replicas()) + "x" +
                         std::to_string(e.num_partitions()) + " " + signature);
      served->gang_key = collectives.Digest();
    }
  }
  return served;
}

}  // namespace pjrt_neuron::daemon
