// PJRT_TopologyDescription: the simulated instance's cores, without a client.
#include <cstring>
#include <mutex>

#include "api/common.h"
#include "common/version.h"

namespace pjrt_neuron::api {
namespace {

StatusOr<core::Topology*> UnwrapTopology(const PJRT_TopologyDescription* t) {
  return Unwrap<core::Topology>(t, "topology");
}

// Topologies made by TopologyDescription_Create are the caller's; a client's are the client's.
PN_ENTRY(PJRT_TopologyDescription_Create) {
  PN_REQUIRE_ARGS(args, PJRT_TopologyDescription_Create_Args, topology);
  PN_ASSIGN_OR_RETURN(engine::Attributes options, ReadNamedValues(args->create_options, args->num_options));
  std::string name = args->topology_name != nullptr ? std::string(args->topology_name, args->topology_name_size) : "";
  if (name == "neuron") name.clear();  // the platform's name: the configured instance
  PN_ASSIGN_OR_RETURN(core::ClientOptions resolved, core::ResolveClientOptions(options, name));
  PN_ASSIGN_OR_RETURN(core::InstanceShape shape, core::ShapeInstance(resolved.instance_type, resolved.logical_nc_config));
  args->topology = Wrap<PJRT_TopologyDescription>(new core::Topology(shape));
  return Status::Ok();
}

PN_ENTRY(PJRT_TopologyDescription_Destroy) {
  PN_REQUIRE_ARGS(args, PJRT_TopologyDescription_Destroy_Args, topology);
  PN_ASSIGN_OR_RETURN(core::Topology * topology, UnwrapTopology(args->topology));
  if (topology->owned_by_client) return InvalidArgument("this topology belongs to its client and lives as long as it");
  ForgetAttributeViews(*topology);
  delete topology;
  return Status::Ok();
}

PN_ENTRY(PJRT_TopologyDescription_PlatformName) {
  PN_REQUIRE_ARGS(args, PJRT_TopologyDescription_PlatformName_Args, platform_name_size);
  PN_ASSIGN_OR_RETURN(core::Topology * topology, UnwrapTopology(args->topology));
  (void)topology;
  static const char kName[] = "neuron";
  args->platform_name = kName;
  args->platform_name_size = sizeof(kName) - 1;
  return Status::Ok();
}

PN_ENTRY(PJRT_TopologyDescription_PlatformVersion) {
  PN_REQUIRE_ARGS(args, PJRT_TopologyDescription_PlatformVersion_Args, platform_version_size);
  PN_ASSIGN_OR_RETURN(core::Topology * topology, UnwrapTopology(args->topology));
  (void)topology;
  static const std::string kVersion = std::string("pjrt-neuron ") + PluginVersion();
  args->platform_version = kVersion.c_str();
  args->platform_version_size = kVersion.size();
  return Status::Ok();
}

PN_ENTRY(PJRT_TopologyDescription_GetDeviceDescriptions) {
  PN_REQUIRE_ARGS(args, PJRT_TopologyDescription_GetDeviceDescriptions_Args, num_descriptions);
  PN_ASSIGN_OR_RETURN(core::Topology * topology, UnwrapTopology(args->topology));
  static_assert(sizeof(std::unique_ptr<core::DeviceDescription>) == sizeof(PJRT_DeviceDescription*),
                "unique_ptr holds a plain pointer");
  args->descriptions = reinterpret_cast<PJRT_DeviceDescription* const*>(topology->descriptions().data());
  args->num_descriptions = topology->descriptions().size();
  return Status::Ok();
}

PN_ENTRY(PJRT_TopologyDescription_Attributes) {
  PN_REQUIRE_ARGS(args, PJRT_TopologyDescription_Attributes_Args, num_attributes);
  PN_ASSIGN_OR_RETURN(core::Topology * topology, UnwrapTopology(args->topology));
  const NamedValues& values = AttributeViews(*topology);
  args->attributes = values.data();
  args->num_attributes = values.size();
  return Status::Ok();
}

PN_ENTRY(PJRT_TopologyDescription_Serialize) {
  PN_REQUIRE_ARGS(args, PJRT_TopologyDescription_Serialize_Args, serialized_topology_deleter);
  PN_ASSIGN_OR_RETURN(core::Topology * topology, UnwrapTopology(args->topology));
  auto* bytes = new std::string(core::SerializeTopology(*topology));
  args->serialized_bytes = bytes->data();
  args->serialized_bytes_size = bytes->size();
  args->serialized_topology = reinterpret_cast<PJRT_SerializedTopology*>(bytes);
  args->serialized_topology_deleter = [](PJRT_SerializedTopology* t) { delete reinterpret_cast<std::string*>(t); };
  return Status::Ok();
}

PN_ENTRY(PJRT_TopologyDescription_Deserialize) {
  PN_REQUIRE_ARGS(args, PJRT_TopologyDescription_Deserialize_Args, topology);
  if (args->serialized_topology == nullptr) return InvalidArgument("`serialized_topology` is null");
  PN_ASSIGN_OR_RETURN(auto topology,
                      core::DeserializeTopology(std::string(args->serialized_topology, args->serialized_topology_size)));
  args->topology = Wrap<PJRT_TopologyDescription>(topology.release());
  return Status::Ok();
}

// Equal for topologies that compile alike: the same instance shape and plugin version.
PN_ENTRY(PJRT_TopologyDescription_Fingerprint) {
  PN_REQUIRE_ARGS(args, PJRT_TopologyDescription_Fingerprint_Args, fingerprint);
  PN_ASSIGN_OR_RETURN(core::Topology * topology, UnwrapTopology(args->topology));
  uint64_t hash = 0xcbf29ce484222325ull;  // FNV-1a
  for (unsigned char byte : core::SerializeTopology(*topology) + '\n' + PluginVersion()) {
    hash = (hash ^ byte) * 0x100000001b3ull;
  }
  args->fingerprint = hash;
  return Status::Ok();
}

PN_ENTRY(PJRT_TopologyDescription_GetMemorySpaceKindIds) {
  PN_REQUIRE_ARGS(args, PJRT_TopologyDescription_GetMemorySpaceKindIds_Args, num_memory_space_kind_ids);
  PN_ASSIGN_OR_RETURN(core::Topology * topology, UnwrapTopology(args->topology));
  (void)topology;
  // Every core has one memory of each kind, numbered by its place in the list.
  static const std::vector<int> kKindIds = [] {
    std::vector<int> ids;
    for (size_t i = 0; i < std::size(engine::Engine::kMemoryKinds); ++i) ids.push_back(static_cast<int>(i));
    return ids;
  }();
  args->memory_space_kind_ids = kKindIds.data();
  args->num_memory_space_kind_ids = kKindIds.size();
  return Status::Ok();
}

// Ahead-of-time: compiles for the topology's cores without claiming them.
PN_ENTRY(PJRT_Compile) {
  PN_REQUIRE_ARGS(args, PJRT_Compile_Args, executable);
  PN_ASSIGN_OR_RETURN(core::Topology * topology, UnwrapTopology(args->topology));
  std::string options;
  PN_ASSIGN_OR_RETURN(engine::Program program,
                      ReadProgram(args->program, args->compile_options, args->compile_options_size, &options));
  PN_ASSIGN_OR_RETURN(core::ClientOptions settings, core::ResolveClientOptions({}));
  PN_ASSIGN_OR_RETURN(auto compiled,
                      core::CompileForTopology(*topology, program, options, settings.engine_library_path));
  args->executable = Wrap<PJRT_Executable>(new core::Executable(std::move(compiled)));
  return Status::Ok();
}

}  // namespace

void BindNewerTopology(PJRT_Api_Newer* api) {
  api->PJRT_TopologyDescription_Fingerprint = PJRT_TopologyDescription_Fingerprint;
  api->PJRT_TopologyDescription_GetMemorySpaceKindIds = PJRT_TopologyDescription_GetMemorySpaceKindIds;
}

void BindTopology(PJRT_Api* api) {
  api->PJRT_TopologyDescription_Serialize = PJRT_TopologyDescription_Serialize;
  api->PJRT_TopologyDescription_Deserialize = PJRT_TopologyDescription_Deserialize;
  api->PJRT_Compile = PJRT_Compile;
  api->PJRT_TopologyDescription_Create = PJRT_TopologyDescription_Create;
  api->PJRT_TopologyDescription_Destroy = PJRT_TopologyDescription_Destroy;
  api->PJRT_TopologyDescription_PlatformName = PJRT_TopologyDescription_PlatformName;
  api->PJRT_TopologyDescription_PlatformVersion = PJRT_TopologyDescription_PlatformVersion;
  api->PJRT_TopologyDescription_GetDeviceDescriptions = PJRT_TopologyDescription_GetDeviceDescriptions;
  api->PJRT_TopologyDescription_Attributes = PJRT_TopologyDescription_Attributes;
}

}  // namespace pjrt_neuron::api
