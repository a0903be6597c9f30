// Daemon frames: every request type the daemon decodes, from any bytes. A decode may fail; it
// must not read past the message or allocate what the message could not hold.
#include <cstddef>
#include <cstdint>
#include <string>

#include "engine/remote/protocol.h"

namespace remote = pjrt_neuron::engine::remote;

template <typename Request>
void Decode(const std::string& bytes) {
  Request request;
  if (remote::DecodeRequest(bytes, &request).ok()) {
    std::string again = remote::EncodeRequest(request);
    Request twice;
    if (!remote::DecodeRequest(again, &twice).ok()) __builtin_trap();  // what decodes re-encodes
  }
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  Decode<remote::HelloRequest>(bytes);
  Decode<remote::AttachRequest>(bytes);
  Decode<remote::BufferFromHostRequest>(bytes);
  Decode<remote::CreateUninitializedRequest>(bytes);
  Decode<remote::ToHostRequest>(bytes);
  Decode<remote::CopyRawToHostRequest>(bytes);
  Decode<remote::CopyToRequest>(bytes);
  Decode<remote::ReleaseBufferRequest>(bytes);
  Decode<remote::DeleteBufferRequest>(bytes);
  Decode<remote::CompileRequest>(bytes);
  Decode<remote::DeserializeRequest>(bytes);
  Decode<remote::ExecutableQueryRequest>(bytes);
  Decode<remote::ExecuteRequest>(bytes);
  Decode<remote::DefaultDeviceAssignmentRequest>(bytes);
  // The process reads the daemon's replies the same way.
  (void)remote::DecodeReply<remote::HelloReply>(bytes);
  (void)remote::DecodeReply<remote::ExecuteReply>(bytes);
  (void)remote::DecodeReply<remote::ToHostReply>(bytes);
  (void)remote::DecodeReply<remote::CostAnalysisReply>(bytes);
  (void)remote::DecodeReply<remote::OptimizedProgramReply>(bytes);
  (void)remote::DecodeReply<remote::MemoryStatsReply>(bytes);
  return 0;
}
