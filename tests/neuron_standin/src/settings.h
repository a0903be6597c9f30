// The simulated host and the runtime's environment variables, each parsed once and strictly.
#ifndef NEURON_STANDIN_SETTINGS_H_
#define NEURON_STANDIN_SETTINGS_H_

#include <cstdint>
#include <string>

namespace standin {

struct InstanceType {
  const char* name;
  uint32_t family;         // NRT_INSTANCE_FAMILY_*
  uint32_t size;           // the stand-in's size code, see README.md
  uint32_t physical_cores;
  uint64_t hbm_per_physical_core;
  bool supports_lnc2;
};

// Which logical cores this process asks for.
struct CoreRequest {
  enum class Kind { kAll, kRange, kCount } kind = Kind::kAll;
  uint32_t first = 0;  // kRange
  uint32_t count = 0;  // kRange and kCount
};

struct Settings {
  InstanceType instance{};
  uint32_t lnc = 1;
  uint32_t physical_cores = 0;
  uint32_t total_vncs = 0;
  uint64_t hbm_per_vnc = 0;
  CoreRequest cores;
  std::string lock_dir;
  std::string xla_cpu_plugin;
  std::string root_comm_id;  // may be empty; checked by nrt_load_collectives
  double exec_timeout_seconds = 30.0;
  uint64_t exec_delay_ms = 0;
  bool report_numerical_errors = false;

  // How many logical cores the request yields, before any are claimed.
  uint32_t RequestedVncCount() const;
};

// Reads the host description only (what count queries need before nrt_init).
bool ReadHostSettings(Settings* settings, std::string* error);
// Reads everything nrt_init needs; false with a message naming the variable and its value.
bool ReadSettings(Settings* settings, std::string* error);

}  // namespace standin

#endif  // NEURON_STANDIN_SETTINGS_H_
