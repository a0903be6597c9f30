// Resolves a client's options: the environment's settings (common/settings.h), then the PJRT
// create options over them, then the checks that need both.
#include "core/client_options.h"

#include "common/settings.h"
#include "core/instance.h"

namespace pjrt_neuron::core {
namespace {

using settings::Id;

const std::string* StringValue(const engine::Attribute& a) { return std::get_if<std::string>(&a.value); }

}  // namespace

StatusOr<ClientOptions> ResolveClientOptions(const engine::Attributes& create_options,
                                             const std::string& instance_type) {
  ClientOptions options;
  // Checked against the instance table below, after a create option or topology may replace it.
  options.instance_type = settings::Text(Id::kInstanceType);
  options.engine_library_path = settings::Text(Id::kEngineLibrary);
  if (settings::IsSet(Id::kVisibleCores)) options.visible_cores = settings::Text(Id::kVisibleCores);
  PN_ASSIGN_OR_RETURN(options.logical_nc_config, settings::PositiveInt(Id::kLogicalNcConfig));
  PN_ASSIGN_OR_RETURN(options.num_cores, settings::PositiveInt(Id::kNumCores));
  PN_ASSIGN_OR_RETURN(options.process_index, settings::ProcessIndex(Id::kProcessIndex));
  PN_ASSIGN_OR_RETURN(options.processes_num_cores, settings::PositiveIntList(Id::kProcessesNumDevices));
  if (!options.processes_num_cores.empty()) options.world_size = static_cast<int>(options.processes_num_cores.size());
  if (settings::IsSet(Id::kWorldSize)) {
    PN_ASSIGN_OR_RETURN(options.world_size, settings::PositiveInt(Id::kWorldSize));
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
  // Peers: of a multi-process job, and the cores of one client launched one at a time.
  PN_ASSIGN_OR_RETURN(options.peer_timeout_seconds, settings::Seconds(Id::kCollectiveTimeout));
  if (options.world_size > 1) {
    // Read by the daemon a multi-process job may start, where a bad value would stop it at once.
    PN_RETURN_IF_ERROR(settings::Seconds(Id::kDaemonIdleSeconds).status());
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
