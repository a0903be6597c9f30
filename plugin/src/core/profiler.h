// Execution traces for the Profiler extension: while a profiling session runs, every execution
// is recorded as a span on its NeuronCore, and the session hands them out as a serialized
// tensorflow.profiler.XSpace (a plane per NeuronCore, one line of program executions).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "engine/engine.h"

namespace pjrt_neuron::core::profiler {

// Cheap check on the execution path: true while some session is started.
bool Active();
int64_t NowNs();  // wall clock, as the framework's host trace uses

// Records an execution of `program` on device `device_id` from `start_ns` until `done` fires.
void NoteExecution(int device_id, const std::string& program, int64_t start_ns, const engine::EventRef& done);

class Session {
 public:
  Session();
  ~Session();
  Status Start();
  Status Stop();
  // The serialized XSpace of what was recorded between Start and Stop.
  StatusOr<const std::string*> Collect();

  struct State;  // shared with the executions it records

 private:
  std::shared_ptr<State> state_;
};

}  // namespace pjrt_neuron::core::profiler
