// Just enough of the protobuf wire format of xla.CompileOptionsProto to check and adjust
// what callers send, without linking protobuf:
// - the XLA CPU engine aborts the process on a replica count of 0, which is what an empty
//   options message means, so unset counts become 1;
// - device assignments name our device ids, which the engine numbers differently.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "common/status.h"

namespace pjrt_neuron::hlo {

struct ReplicaLayout {
  int num_replicas = 0;    // 0: not set
  int num_partitions = 0;  // 0: not set
  bool placed = false;     // a device assignment or device ordinal was given
};

// Maps one device id to another, or fails naming the id.
using DeviceIdMap = std::function<StatusOr<int64_t>(int64_t)>;

// Returns the options with unset replica and partition counts set to 1 and every device id
// (device_ordinal, device_assignment) passed through `to_engine_id`. Options that place the
// program nowhere get an assignment onto `default_engine_cores` when it is given and big enough.
StatusOr<std::string> NormalizeCompileOptions(const std::string& serialized_options, const DeviceIdMap& to_engine_id,
                                              ReplicaLayout* layout,
                                              const std::vector<int64_t>* default_engine_cores = nullptr);

// Appends an env_option_overrides entry (a DebugOptions flag: a string `text`, or `flag_value`
// when `text` is null) to a serialized CompileOptionsProto; map entries parse in order, so the
// last entry of a flag wins.
void AppendOptionOverride(std::string* options, const std::string& flag, const std::string* text, bool flag_value);

// The options of a portable single-core copy of a program compiled with `serialized_options`:
// one replica, one partition, no device placement, compile_portable_executable set (it then runs
// on whichever core a launch names); every other field kept. Empty when malformed.
std::string PortableSingleCoreOptions(const std::string& serialized_options);

// The CompileOptionsProto inside an XLA CPU serialized executable (ExecutableAndOptionsProto
// field 2); empty when there is none.
std::string CompileOptionsOfSerializedExecutable(const std::string& serialized_executable);

// Rewrites the ids in a serialized xla.DeviceAssignmentProto.
StatusOr<std::string> MapDeviceAssignment(const std::string& serialized_assignment, const DeviceIdMap& map);

}  // namespace pjrt_neuron::hlo
