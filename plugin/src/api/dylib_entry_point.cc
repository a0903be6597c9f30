// The plugin's only exported symbol.
#include "pjrt_c_api.h"

namespace pjrt_neuron::api {
const PJRT_Api* BuildApi();
}

extern "C" __attribute__((visibility("default"))) const PJRT_Api* GetPjrtApi() {
  return pjrt_neuron::api::BuildApi();
}
