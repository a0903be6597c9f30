// What `pjrt-neuron estimate` reads: with PJRT_NEURON_ESTIMATE_REPORT set, each compiled
// program's work counts (hlo/cost_analysis.h) and each execution, with its cores and times,
// appended as JSON lines to that file.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/engine.h"

namespace pjrt_neuron::core {

class Topology;

// The program's counts as a "program" line; returns the id later executions name, or "" when
// the setting is unset or the program cannot be read (nothing to estimate, nothing to fail).
std::string ReportProgramCost(const engine::Program& program, engine::Executable& executable,
                              const Topology& topology);

// An "execution" line: `program_id` ran on NeuronCores `devices` from `start_us` to `end_us`
// (microseconds since the epoch, as the host saw them).
void ReportExecution(const std::string& program_id, const std::vector<int>& devices, int64_t start_us,
                     int64_t end_us);

// Microseconds since the epoch, comparable between processes.
int64_t NowMicros();

}  // namespace pjrt_neuron::core
