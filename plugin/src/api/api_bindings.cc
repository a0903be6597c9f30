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

}  // namespace

void BindStubs(PJRT_Api* api) {
#define PN_STUB(function, reason) api->function = Stub_##function;
#include "api/stubs.inc"
#undef PN_STUB
}

const PJRT_Api* BuildApi() {
  static PJRT_Api api = [] {
    PJRT_Api table;
    std::memset(&table, 0, sizeof(table));
    table.struct_size = PJRT_Api_STRUCT_SIZE;
    table.extension_start = ProfilerExtension(LayoutsExtension(MemoryDescriptionsExtension(FfiExtension(nullptr))));
    table.pjrt_api_version.struct_size = PJRT_Api_Version_STRUCT_SIZE;
    table.pjrt_api_version.major_version = PJRT_API_MAJOR;
    table.pjrt_api_version.minor_version = PJRT_API_MINOR;
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
    return table;
  }();
  return &api;
}

}  // namespace pjrt_neuron::api
