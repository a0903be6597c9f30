#include "core/client_options.h"

#include <cstdlib>
#include <sstream>

#include "core/instance.h"

namespace pjrt_neuron::core {
namespace {

const std::string* StringValue(const engine::Attribute& a) { return std::get_if<std::string>(&a.value); }

std::string EnvOr(const char* name, const std::string& fallback) {
  const char* value = std::getenv(name);
  return value != nullptr && *value != '\0' ? value : fallback;
}

StatusOr<int> PositiveIntSetting(const std::string& name, const std::string& text) {
  char* end = nullptr;
  long value = std::strtol(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || value < 1 || value > 4096) {
    return InvalidArgument(name + "='" + text + "' is not a positive integer");
  }
  return static_cast<int>(value);
}

}  // namespace

StatusOr<ClientOptions> ResolveClientOptions(const engine::Attributes& create_options,
                                             const std::string& instance_type) {
  ClientOptions options;
  options.instance_type = EnvOr("PJRT_NEURON_INSTANCE_TYPE", options.instance_type);
  options.engine_library_path = EnvOr("PJRT_NEURON_ENGINE_LIBRARY", "");
  if (std::string visible = EnvOr("NEURON_RT_VISIBLE_CORES", ""); !visible.empty()) options.visible_cores = visible;
  if (std::string lnc = EnvOr("NEURON_LOGICAL_NC_CONFIG", ""); !lnc.empty()) {
    PN_ASSIGN_OR_RETURN(options.logical_nc_config, PositiveIntSetting("NEURON_LOGICAL_NC_CONFIG", lnc));
  }
  if (std::string num = EnvOr("NEURON_RT_NUM_CORES", ""); !num.empty()) {
    PN_ASSIGN_OR_RETURN(options.num_cores, PositiveIntSetting("NEURON_RT_NUM_CORES", num));
  }
  if (std::string index = EnvOr("NEURON_PJRT_PROCESS_INDEX", ""); !index.empty()) {
    if (index.size() > 6 || index.find_first_not_of("0123456789") != std::string::npos) {
      return InvalidArgument("NEURON_PJRT_PROCESS_INDEX='" + index + "' is not a process index");
    }
    options.process_index = std::atoi(index.c_str());
  }
  if (std::string counts = EnvOr("NEURON_PJRT_PROCESSES_NUM_DEVICES", ""); !counts.empty()) {
    std::stringstream parts(counts);
    std::string part;
    while (std::getline(parts, part, ',')) {
      PN_ASSIGN_OR_RETURN(int count, PositiveIntSetting("NEURON_PJRT_PROCESSES_NUM_DEVICES entry", part));
      options.processes_num_cores.push_back(count);
    }
    options.world_size = static_cast<int>(options.processes_num_cores.size());
  }
  if (std::string world = EnvOr("NEURON_PJRT_WORLD_SIZE", ""); !world.empty()) {
    PN_ASSIGN_OR_RETURN(options.world_size, PositiveIntSetting("NEURON_PJRT_WORLD_SIZE", world));
    options.processes_num_cores.clear();  // one core per process, as the Neuron runtime reads it
  }
  for (const engine::Attribute& option : create_options) {
    const std::string& name = option.name;
    if (name == "instance_type" || name == "engine_library_path" || name == "visible_cores") {
      const std::string* value = StringValue(option);
      if (value == nullptr) return InvalidArgument("create option '" + name + "' must be a string");
      if (name == "instance_type") options.instance_type = *value;
      if (name == "engine_library_path") options.engine_library_path = *value;
      if (name == "visible_cores") options.visible_cores = *value;
    } else if (name == "num_cores" || name == "logical_nc_config") {
      const int64_t* value = std::get_if<int64_t>(&option.value);
      if (value == nullptr || *value < 1) return InvalidArgument("create option '" + name + "' must be a positive integer");
      (name == "num_cores" ? options.num_cores : options.logical_nc_config) = static_cast<int>(*value);
    } else if (name == "node_id" || name == "num_nodes") {
      // jax.distributed's process id and count.
      const int64_t* value = std::get_if<int64_t>(&option.value);
      if (value == nullptr || *value < (name == "node_id" ? 0 : 1)) {
        return InvalidArgument("create option '" + name + "' must be a " +
                               (name == "node_id" ? "non-negative" : "positive") + " integer");
      }
      (name == "node_id" ? options.process_index : options.world_size) = static_cast<int>(*value);
      if (name == "num_nodes") options.processes_num_cores.clear();
    } else if (name == "asynchronous") {
      if (!std::holds_alternative<bool>(option.value)) return InvalidArgument("create option 'asynchronous' must be a bool");
      options.engine_passthrough.push_back(option);
    } else if (name == "max_inflight_computations") {
      if (!std::holds_alternative<int64_t>(option.value)) {
        return InvalidArgument("create option 'max_inflight_computations' must be an integer");
      }
      options.engine_passthrough.push_back(option);
    } else {
      return InvalidArgument("unknown create option '" + name +
                             "'; known options: instance_type, logical_nc_config, visible_cores, num_cores, "
                             "engine_library_path, node_id, num_nodes, asynchronous, max_inflight_computations");
    }
  }
  if (options.world_size > 1) {
    // Only a multi-process job reads these; the second is read by the daemon it may start,
    // where a bad value would stop it at once.
    if (std::string timeout = EnvOr("PJRT_NEURON_COLLECTIVE_TIMEOUT", ""); !timeout.empty()) {
      char* end = nullptr;
      double seconds = std::strtod(timeout.c_str(), &end);
      if (*end != '\0' || !(seconds > 0)) {
        return InvalidArgument("PJRT_NEURON_COLLECTIVE_TIMEOUT='" + timeout + "' is not a positive number of seconds");
      }
      options.peer_timeout_seconds = seconds;
    }
    if (std::string idle = EnvOr("PJRT_NEURON_DAEMON_IDLE_SECONDS", ""); !idle.empty()) {
      char* end = nullptr;
      double seconds = std::strtod(idle.c_str(), &end);
      if (*end != '\0' || !(seconds >= 0)) {
        return InvalidArgument("PJRT_NEURON_DAEMON_IDLE_SECONDS='" + idle + "' is not a non-negative number of seconds");
      }
    }
  }
  if (!instance_type.empty()) options.instance_type = instance_type;
  PN_RETURN_IF_ERROR(ShapeInstance(options.instance_type, options.logical_nc_config).status());
  if (options.process_index >= options.world_size) {
    return InvalidArgument("process index " + std::to_string(options.process_index) + " is not below the world size " +
                           std::to_string(options.world_size) +
                           " (NEURON_PJRT_PROCESS_INDEX, NEURON_PJRT_WORLD_SIZE / NEURON_PJRT_PROCESSES_NUM_DEVICES)");
  }
  return options;
}

}  // namespace pjrt_neuron::core
