// The framework-process side of multi-process mode: an Engine whose cores, buffers and programs
// live in the instance daemon. Every call is a request on the channel (channel.h).
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <string_view>
#include <thread>

#include "common/element_sizes.h"
#include "engine/remote/channel.h"
#include "engine/remote/daemon_spawn.h"
#include "engine/remote/protocol.h"
#include "engine/remote/remote.h"
#include "engine/remote/remote_buffer.h"
#include "engine/remote/remote_executable.h"
#include "engine/remote/transfer_manager.h"

namespace pjrt_neuron::engine::remote {
namespace {

// Bytes of one element of an array sent to the daemon; token and invalid count a byte.
StatusOr<int64_t> ElementSize(PJRT_Buffer_Type type) {
  const int bits = ElementBits(type);
  if (bits % 8 != 0) return Unimplemented("sub-byte element types are not available in multi-process mode");
  return bits == 0 ? 1 : bits / 8;
}

class RemoteEngine : public Engine {
 public:
  RemoteEngine(std::shared_ptr<Channel> channel, std::string description, int num_cores, std::vector<int> own_cores,
               double peer_timeout_seconds)
      : channel_(std::move(channel)),
        description_(std::move(description)),
        num_cores_(num_cores),
        own_cores_(std::move(own_cores)),
        peer_timeout_seconds_(peer_timeout_seconds) {}

  std::string description() override { return description_; }
  int num_cores() override { return num_cores_; }

  StatusOr<TransferResult> BufferFromHost(int core, const HostBufferSpec& spec) override {
    if (spec.device_layout != nullptr) {
      return Unimplemented("a custom device layout is not available in multi-process mode");
    }
    // The bytes the strides reach; dense when no strides are given.
    int64_t element_bytes = 0;
    {
      int64_t elements = 1;
      for (int64_t d : spec.dims) elements *= d;
      PN_ASSIGN_OR_RETURN(element_bytes, ElementSize(spec.type));
      if (elements == 0) element_bytes = 0;
    }
    size_t span = element_bytes;
    if (spec.byte_strides != nullptr && spec.num_byte_strides == spec.dims.size()) {
      for (size_t i = 0; i < spec.dims.size() && span > 0; ++i) {
        if (spec.byte_strides[i] < 0) return Unimplemented("negative byte strides are not available in multi-process mode");
        span += static_cast<size_t>((spec.dims[i] - 1) * spec.byte_strides[i]);
      }
    } else {
      for (int64_t d : spec.dims) span *= d;
    }
    BufferFromHostRequest request;
    request.core = core;
    request.type = spec.type;
    request.dims = spec.dims;
    if (spec.byte_strides != nullptr) request.byte_strides.assign(spec.byte_strides, spec.byte_strides + spec.num_byte_strides);
    request.memory_kind = spec.memory_kind;
    PN_ASSIGN_OR_RETURN(std::unique_ptr<Connection> c, channel_->Lease());
    char* window = span >= kSharedTransferBytes ? c->WindowFor(span) : nullptr;
    request.bytes.placement = PlacementOf(window);
    if (window != nullptr) {
      std::memcpy(window, spec.data, span);
      request.bytes.window_bytes = static_cast<int64_t>(span);
    } else {
      request.bytes.data = std::string_view(static_cast<const char*>(spec.data), span);
    }
    auto bytes = channel_->CallOn(*c, EncodeRequest(request));
    channel_->Return(std::move(c));
    PN_RETURN_IF_ERROR(bytes.status());
    PN_ASSIGN_OR_RETURN(BufferInfo info, DecodeReply<BufferInfo>(*bytes));
    TransferResult result;
    result.buffer = std::make_unique<RemoteBuffer>(channel_, std::move(info));
    return result;  // the bytes were copied before the call returned: the caller's buffer is free now
  }

  StatusOr<std::unique_ptr<Buffer>> CreateUninitializedBuffer(int core, PJRT_Buffer_Type type,
                                                              const std::vector<int64_t>& dims) override {
    CreateUninitializedRequest request;
    request.core = core;
    request.type = type;
    request.dims = dims;
    PN_ASSIGN_OR_RETURN(BufferInfo info, channel_->Call<BufferInfo>(request));
    return std::unique_ptr<Buffer>(new RemoteBuffer(channel_, std::move(info)));
  }

  // Parts gather here; each buffer goes to the daemon in one transfer at its last part.
  StatusOr<std::unique_ptr<TransferManager>> CreateTransferManager(int core, const std::vector<ShapeSpec>& shapes,
                                                                    const std::string& memory_kind) override {
    std::vector<size_t> bytes;
    for (const ShapeSpec& shape : shapes) {
      PN_ASSIGN_OR_RETURN(int64_t size, ElementSize(shape.type));
      for (int64_t d : shape.dims) size *= d;
      bytes.push_back(static_cast<size_t>(size));
    }
    UploadFn upload = [this](int target, const HostBufferSpec& spec) { return BufferFromHost(target, spec); };
    return CreateRemoteTransferManager(std::move(upload), core, memory_kind, shapes, bytes);
  }

  StatusOr<std::unique_ptr<Executable>> Compile(const Program& program, const std::string& options) override {
    CompileRequest request;
    request.format = program.format;
    request.code = std::string_view(program.code, program.code_size);
    request.options = options;
    return Loaded(channel_->Call<ExecutableInfo>(request));
  }

  StatusOr<std::unique_ptr<Executable>> Deserialize(const std::string& bytes,
                                                    const std::string* overridden_options) override {
    DeserializeRequest request;
    request.bytes = bytes;
    if (overridden_options != nullptr) request.options = *overridden_options;
    return Loaded(channel_->Call<ExecutableInfo>(request));
  }

  StatusOr<std::vector<int>> DefaultDeviceAssignment(int num_replicas, int num_partitions) override {
    DefaultDeviceAssignmentRequest request;
    request.replicas = num_replicas;
    request.partitions = num_partitions;
    PN_ASSIGN_OR_RETURN(DefaultDeviceAssignmentReply reply, channel_->Call<DefaultDeviceAssignmentReply>(request));
    return std::move(reply.cores);
  }

 private:
  StatusOr<std::unique_ptr<Executable>> Loaded(StatusOr<ExecutableInfo> info) {
    PN_RETURN_IF_ERROR(info.status());
    return NewRemoteExecutable(channel_, std::move(info.value()), own_cores_, peer_timeout_seconds_);
  }

  std::shared_ptr<Channel> channel_;
  std::string description_;
  int num_cores_;
  std::vector<int> own_cores_;
  double peer_timeout_seconds_;
};

}  // namespace

StatusOr<std::unique_ptr<Engine>> ConnectInstanceEngine(const ConnectOptions& options,
                                                        std::vector<JobMember>* world) {
  const std::string address = DaemonAddress(options.instance_key);
  std::string log_path = options.lock_directory + "/daemon-uid" + std::to_string(geteuid()) + "/daemon.log";
  // A daemon that is shutting down refuses the hello; the next attempt starts a fresh one.
  for (int attempt = 0; attempt < 5; ++attempt) {
    PN_ASSIGN_OR_RETURN(int fd, ConnectOrSpawn(options, address, &log_path));
    HelloRequest hello;
    hello.pid = getpid();
    hello.process_index = options.process_index;
    hello.world_size = options.world_size;
    hello.cores = options.cores;
    hello.timeout_seconds = options.peer_timeout_seconds;
    std::string bytes;
    if (!SendFrame(fd, EncodeRequest(hello)) || !ReceiveReply(fd, &bytes)) {
      close(fd);
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      continue;
    }
    StatusOr<HelloReply> reply = DecodeReply<HelloReply>(bytes);
    if (!reply.ok()) {
      close(fd);
      return reply.status();
    }
    *world = std::move(reply->world);
    auto channel = std::make_shared<Channel>(address, fd, reply->session, log_path);
    return std::unique_ptr<Engine>(new RemoteEngine(channel, std::move(reply->description), reply->num_cores,
                                                    options.cores, options.peer_timeout_seconds));
  }
  return Unavailable("could not attach to the instance daemon; see " + log_path);
}

}  // namespace pjrt_neuron::engine::remote
