// The arithmetic of the simulated cores: XLA's CPU engine (xla_cpu_pjrt.so) through the PJRT C
// API, so results are real. Its own small PJRT client, shared with nothing in plugin/.
#ifndef NEURON_STANDIN_XLA_CPU_H_
#define NEURON_STANDIN_XLA_CPU_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "pjrt_c_api.h"

namespace standin {

struct HostArray {
  const void* data;  // may be null when there are no elements
  int pjrt_type;
  std::vector<int64_t> dims;
};

struct HostDestination {
  void* data;  // null: the result is dropped (a zero-element output)
  size_t size;
  size_t rank;
};

class XlaCpuEngine;

class XlaProgram {
 public:
  ~XlaProgram();
  XlaProgram(const XlaProgram&) = delete;
  XlaProgram& operator=(const XlaProgram&) = delete;
  int replicas() const { return replicas_; }
  size_t output_count() const { return output_count_; }

 private:
  friend class XlaCpuEngine;
  XlaProgram() = default;
  std::shared_ptr<XlaCpuEngine> engine_;  // outlives the executable it compiled
  PJRT_LoadedExecutable* executable_ = nullptr;
  int replicas_ = 1;
  size_t output_count_ = 0;
};

class XlaCpuEngine : public std::enable_shared_from_this<XlaCpuEngine> {
 public:
  // Loads the plugin (once a process) and creates a client with `devices` CPU devices.
  static std::shared_ptr<XlaCpuEngine> Create(const std::string& plugin_path, int devices,
                                              std::string* error);
  ~XlaCpuEngine();
  XlaCpuEngine(const XlaCpuEngine&) = delete;
  XlaCpuEngine& operator=(const XlaCpuEngine&) = delete;

  // Compiles a serialized HloModuleProto for `replicas` replicas, one partition each.
  std::unique_ptr<XlaProgram> Compile(const std::string& hlo_module_proto, int replicas,
                                      std::string* error);
  // arguments[r] and results[r] belong to replica r.
  bool Execute(const XlaProgram& program, const std::vector<std::vector<HostArray>>& arguments,
               const std::vector<std::vector<HostDestination>>& results, std::string* error);

 private:
  friend class XlaProgram;
  XlaCpuEngine() = default;
  std::string TakeError(PJRT_Error* error) const;
  bool Await(PJRT_Event* event, std::string* error) const;
  void DestroyBuffer(PJRT_Buffer* buffer) const;

  const PJRT_Api* api_ = nullptr;
  PJRT_Client* client_ = nullptr;
};

}  // namespace standin

#endif  // NEURON_STANDIN_XLA_CPU_H_
