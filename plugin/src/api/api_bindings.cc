// Fills the PJRT_Api table: one Bind call per object type, then the stubs.
#include <cstring>

#include "api/common.h"

namespace pjrt_neuron::api {
namespace {

#define PN_STUB(function, reason)                                                       \
  PJRT_Error* Stub_##function(function##_Args*) {                                        \
    return MakeError(Unimplemented(#function ": not implemented by pjrt-neuron: " reason)); \
  }
#include "api/stubs.inc"
#undef PN_STUB

#define PN_NEWER_STUB(function, reason)                                                 \
  PJRT_Error* Stub_##function(struct function##_Args*) {                                 \
    return MakeError(Unimplemented(#function ": not implemented by pjrt-neuron: " reason)); \
  }
#include "api/newer_stubs.inc"
#undef PN_NEWER_STUB

}  // namespace

void BindNewerStubs(PJRT_Api_Newer* api) {
#define PN_NEWER_STUB(function, reason) api->function = Stub_##function;
#include "api/newer_stubs.inc"
#undef PN_NEWER_STUB
}

void BindStubs(PJRT_Api* api) {
#define PN_STUB(function, reason) api->function = Stub_##function;
#include "api/stubs.inc"
#undef PN_STUB
}

// The 0.114 table: callers of older minor versions read the 0.81 prefix they know (every entry
// reads only the fields a caller's struct_size covers), newer callers the rest.
const PJRT_Api* BuildApi() {
  static PJRT_Api_Newer api = [] {
    PJRT_Api_Newer newer;
    std::memset(&newer, 0, sizeof(newer));
    PJRT_Api& table = newer.base;
    table.struct_size = sizeof(PJRT_Api_Newer);
    table.extension_start = ProfilerExtension(LayoutsExtension(MemoryDescriptionsExtension(FfiExtension(nullptr))));
    table.pjrt_api_version.struct_size = PJRT_Api_Version_STRUCT_SIZE;
    table.pjrt_api_version.major_version = PJRT_API_MAJOR;
    table.pjrt_api_version.minor_version = PN_NEWER_API_MINOR;
    core::Memory::SetHandleFunctionTable(MemoryFunctionTable());
    BindErrors(&table);
    BindPlugin(&table);
    BindEvents(&table);
    BindClient(&table);
    BindDevices(&table);
    BindMemories(&table);
    BindBuffers(&table);
    BindExecutables(&table);
    BindLoadedExecutables(&table);
    BindTopology(&table);
    BindExecuteContexts(&table);
    BindTransferManagers(&table);
    BindStubs(&table);
    BindNewerErrors(&newer);
    BindNewerDevices(&newer);
    BindNewerTopology(&newer);
    BindNewerLoadedExecutables(&newer);
    BindNewerStubs(&newer);
    return newer;
  }();
  return &api.base;
}

}  // namespace pjrt_neuron::api
