// Multi-process mode: framework processes reach the instance's NeuronCores through one daemon.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "engine/remote/message.h"

namespace pjrt_neuron::engine::remote {

struct DaemonOptions {
  std::string address;
  int num_cores = 0;
  std::string engine_library_path;
  double idle_seconds = 10;
};

// Runs the daemon until no process has used it for `idle_seconds`; the exit status.
int ServeInstance(const DaemonOptions& options);

struct WorldMember {
  int process_index = 0;
  int pid = 0;
  std::vector<int> cores;
};

struct ConnectOptions {
  std::string instance_key;   // instance, LNC, lock directory: one daemon per distinct key
  std::string lock_directory;
  int num_cores = 0;          // of the whole instance
  std::string engine_library_path;
  int process_index = 0;
  int world_size = 1;
  std::vector<int> cores;     // this process's
  double peer_timeout_seconds = 300;
};

// Attaches to the instance daemon (starting it if needed) and waits for the whole world.
StatusOr<std::unique_ptr<Engine>> ConnectInstanceEngine(const ConnectOptions& options,
                                                        std::vector<WorldMember>* world);

inline void WriteAttributes(Writer& w, const Attributes& attributes) {
  w.i64(static_cast<int64_t>(attributes.size()));
  for (const Attribute& a : attributes) {
    w.str(a.name).u8(static_cast<uint8_t>(a.value.index()));
    if (auto* s = std::get_if<std::string>(&a.value)) w.str(*s);
    if (auto* i = std::get_if<int64_t>(&a.value)) w.i64(*i);
    if (auto* v = std::get_if<std::vector<int64_t>>(&a.value)) w.ints(*v);
    if (auto* f = std::get_if<float>(&a.value)) w.f64(*f);
    if (auto* b = std::get_if<bool>(&a.value)) w.u8(*b ? 1 : 0);
  }
}

inline Attributes ReadAttributes(Reader& r) {
  Attributes attributes;
  int64_t n = r.i64();
  for (int64_t k = 0; k < n && r.ok(); ++k) {
    Attribute a;
    a.name = r.str();
    switch (r.u8()) {
      case 0: a.value = r.str(); break;
      case 1: a.value = r.i64(); break;
      case 2: a.value = r.ints(); break;
      case 3: a.value = static_cast<float>(r.f64()); break;
      default: a.value = r.u8() != 0; break;
    }
    attributes.push_back(std::move(a));
  }
  return attributes;
}

}  // namespace pjrt_neuron::engine::remote
