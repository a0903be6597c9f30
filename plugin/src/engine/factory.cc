#include "engine/factory.h"

#include "common/version.h"
#include "engine/remote/remote.h"
#include "engine/sim/sim_engine.h"

namespace pjrt_neuron::engine {

StatusOr<std::unique_ptr<Engine>> CreateEngine(const EngineRequest& request, std::vector<JobMember>* members) {
  if (!request.job.has_value()) return CreateSimEngine(request.options);
  const JobPlacement& job = *request.job;
  remote::ConnectOptions connect;
  connect.lock_directory = job.lock_directory;
  connect.num_cores = job.instance_cores;
  connect.engine_library_path = request.options.library_path;
  // A daemon of another plugin version may speak another protocol: it gets its own address.
  connect.instance_key = job.lock_directory + "|" + std::to_string(job.logical_nc_config) + "|" +
                         request.options.library_path + "|" + PluginVersion();
  connect.process_index = job.process_index;
  connect.world_size = job.world_size;
  connect.cores = job.cores;
  connect.peer_timeout_seconds = job.peer_timeout_seconds;
  std::vector<JobMember> ignored;
  return remote::ConnectInstanceEngine(connect, members != nullptr ? members : &ignored);
}

StatusOr<Attributes> EnginePluginAttributes(const std::string& library_path) {
  return SimEnginePluginAttributes(library_path);
}

}  // namespace pjrt_neuron::engine
