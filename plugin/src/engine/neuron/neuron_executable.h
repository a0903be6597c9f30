// A compiled NEFF and its executions: one model per NeuronCore it runs on (nrt_load, or
// nrt_load_collectives for replicas that meet), its tensors bound by name, and executions that
// feed it our buffers and wrap its outputs.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "engine/neuron/neff_program.h"
#include "engine/neuron/runtime.h"
#include "engine/neuron/tensor_binding.h"

namespace pjrt_neuron::engine::neuron {

class NeuronExecutable : public Executable {
 public:
  // Models are loaded on first use; with a null `runtime` (a compile-only engine) it only
  // describes and serialises.
  // `local_cores`: the cores this process drives; in a multi-process job the program's other
  // cores are ranks that the job's other processes run.
  static StatusOr<std::unique_ptr<NeuronExecutable>> Create(std::shared_ptr<Runtime> runtime, NeffProgram program,
                                                            std::vector<int> local_cores);

  std::string name() override { return program_.name; }
  int num_replicas() override { return program_.num_replicas; }
  int num_partitions() override { return program_.num_partitions; }
  const std::vector<OutputShape>& outputs() override { return outputs_; }
  std::vector<int> addressable_cores() override;
  StatusOr<std::string> Fingerprint() override;
  StatusOr<Attributes> CostAnalysis() override { return Attributes{}; }
  StatusOr<int64_t> SizeOfGeneratedCodeInBytes() override { return static_cast<int64_t>(program_.neff.size()); }
  StatusOr<CompiledMemoryStats> MemoryStats() override { return memory_stats_; }
  StatusOr<std::string> Serialize() override { return SerializeNeffProgram(program_); }
  // As XLA's engines report it (torch-xla accepts only hlo_with_config or mlir here).
  StatusOr<ProgramText> OptimizedProgram() override;
  StatusOr<std::string> SerializedDeviceAssignment() override;
  Status Execute(const ArgumentTable& args, const ExecuteOptions& options, int only_core,
                 ExecuteResult* result) override;
  void Delete() override;
  bool IsDeleted() override;

 private:
  struct CoreModel {
    std::unique_ptr<LoadedModel> model;
    TensorBinding binding;
  };
  struct Run;  // one core's part of an execution

  NeuronExecutable(std::shared_ptr<Runtime> runtime, NeffProgram program, std::vector<int> local_cores);
  bool IsLocal(int core) const;
  Status Init();
  Status LoadRanks();
  StatusOr<std::shared_ptr<CoreModel>> LoadOn(int core, int rank, int world);
  StatusOr<std::shared_ptr<CoreModel>> ModelOn(int core);
  Status Prepare(const CoreModel& model, int core, const ArgumentRow& args, const ExecuteOptions& options,
                 Run* run);

  std::shared_ptr<Runtime> runtime_;
  NeffProgram program_;
  std::vector<int> local_cores_;
  std::vector<OutputShape> outputs_;
  std::vector<size_t> parameter_bytes_;
  std::vector<size_t> output_bytes_;
  std::vector<bool> donated_;  // per parameter: the program aliases it to an output
  bool ranks_ = false;         // the replicas meet (collectives, replica ids): one communicator
  CompiledMemoryStats memory_stats_;
  std::mutex load_mutex_;  // held while loading
  std::mutex mutex_;       // guards what follows
  std::map<int, std::shared_ptr<CoreModel>> models_;  // by core
  bool deleted_ = false;
};

}  // namespace pjrt_neuron::engine::neuron
