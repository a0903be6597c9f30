// Executables held by the instance daemon (remote_executable.h).
#include "engine/remote/remote_executable.h"

#include <algorithm>
#include <atomic>
#include <mutex>
#include <optional>

#include "engine/remote/filled_buffer.h"
#include "engine/remote/remote_buffer.h"

namespace pjrt_neuron::engine::remote {
namespace {

class RemoteExecutable : public Executable {
 public:
  RemoteExecutable(std::shared_ptr<Channel> channel, ExecutableInfo info, const std::vector<int>& own_cores,
                   double peer_timeout_seconds)
      : channel_(std::move(channel)), info_(std::move(info)), peer_timeout_seconds_(peer_timeout_seconds) {
    for (int core : info_.cores) {
      if (std::find(own_cores.begin(), own_cores.end(), core) != own_cores.end()) local_cores_.push_back(core);
    }
  }
  ~RemoteExecutable() override {
    ReleaseExecutableRequest release;
    release.id = info_.id;
    channel_->Send(release);
  }

  std::string name() override { return info_.name; }
  int num_replicas() override { return info_.replicas; }
  int num_partitions() override { return info_.partitions; }
  const std::vector<OutputShape>& outputs() override { return info_.outputs; }
  // Only this process's cores: the others' arguments come from their own processes.
  std::vector<int> addressable_cores() override { return local_cores_; }

  StatusOr<std::string> Fingerprint() override { return QueryString(Query::kFingerprint); }
  StatusOr<std::string> Serialize() override { return QueryString(Query::kSerialize); }
  StatusOr<std::string> SerializedDeviceAssignment() override {
    return QueryString(Query::kSerializedDeviceAssignment);
  }
  StatusOr<Attributes> CostAnalysis() override {
    PN_ASSIGN_OR_RETURN(CostAnalysisReply reply, Ask<CostAnalysisReply>(Query::kCostAnalysis));
    return std::move(reply.attributes);
  }
  StatusOr<int64_t> SizeOfGeneratedCodeInBytes() override {
    PN_ASSIGN_OR_RETURN(CodeSizeReply reply, Ask<CodeSizeReply>(Query::kSizeOfGeneratedCode));
    return reply.bytes;
  }
  StatusOr<CompiledMemoryStats> MemoryStats() override {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!memory_stats_.has_value()) {
      PN_ASSIGN_OR_RETURN(MemoryStatsReply reply, Ask<MemoryStatsReply>(Query::kMemoryStats));
      memory_stats_ = reply.stats;
    }
    return *memory_stats_;
  }
  StatusOr<ProgramText> OptimizedProgram() override {
    PN_ASSIGN_OR_RETURN(OptimizedProgramReply reply, Ask<OptimizedProgramReply>(Query::kOptimizedProgram));
    return std::move(reply.program);
  }

  Status Execute(const ArgumentTable& args, const ExecuteOptions& options, int only_core,
                 ExecuteResult* result) override {
    if (options.num_send_ops > 0 || options.num_recv_ops > 0) {
      return Unimplemented("host send/recv callbacks are not available in multi-process mode");
    }
    std::vector<int> cores = only_core >= 0 ? std::vector<int>{only_core} : local_cores_;
    if (cores.size() != args.size()) return InvalidArgument("one argument list per NeuronCore is expected");
    ExecuteRequest request;
    request.executable = info_.id;
    request.launch_id = options.launch_id;
    request.non_donatable_input_indices.assign(options.non_donatable_input_indices.begin(),
                                               options.non_donatable_input_indices.end());
    request.timeout_seconds = peer_timeout_seconds_;
    request.cores = cores;
    std::vector<std::vector<RemoteBuffer*>> remote_args;
    for (size_t d = 0; d < args.size(); ++d) {
      const ArgumentRow list = args[d];
      std::vector<int64_t> ids;
      std::vector<RemoteBuffer*> buffers;
      for (Buffer* b : list) {
        PN_ASSIGN_OR_RETURN(RemoteBuffer * remote, RemoteBufferOf(b));
        ids.push_back(remote->id());
        buffers.push_back(remote);
      }
      request.args.push_back(std::move(ids));
      remote_args.push_back(std::move(buffers));
    }
    PN_ASSIGN_OR_RETURN(ExecuteReply reply, channel_->Call<ExecuteReply>(request));
    if (reply.cores.size() != cores.size()) return Internal(ExecuteReply::kMalformed);
    for (size_t d = 0; d < cores.size(); ++d) {
      OutputList<std::unique_ptr<Buffer>> outputs;
      for (BufferInfo& info : reply.cores[d].outputs) {
        outputs.push_back(std::make_unique<RemoteBuffer>(channel_, std::move(info)));
      }
      for (int64_t donated : reply.cores[d].donated) {
        if (donated >= 0 && donated < static_cast<int64_t>(remote_args[d].size())) remote_args[d][donated]->MarkDeleted();
      }
      result->outputs.push_back(std::move(outputs));
      result->completions.push_back(std::make_shared<CompletedEvent>());
    }
    return Status::Ok();
  }

  void Delete() override {
    deleted_ = true;
    DeleteExecutableRequest request;
    request.id = info_.id;
    channel_->Call<EmptyReply>(request);
  }
  bool IsDeleted() override { return deleted_; }

 private:
  template <typename Reply>
  StatusOr<Reply> Ask(Query what) {
    ExecutableQueryRequest request;
    request.executable = info_.id;
    request.what = what;
    return channel_->Call<Reply>(request);
  }
  StatusOr<std::string> QueryString(Query what) {
    PN_ASSIGN_OR_RETURN(QueryBytesReply reply, Ask<QueryBytesReply>(what));
    return std::move(reply.value);
  }

  std::shared_ptr<Channel> channel_;
  const ExecutableInfo info_;
  const double peer_timeout_seconds_;  // as the client was created with
  std::vector<int> local_cores_;
  std::mutex mutex_;
  std::optional<CompiledMemoryStats> memory_stats_;
  std::atomic<bool> deleted_{false};
};

}  // namespace

std::unique_ptr<Executable> NewRemoteExecutable(std::shared_ptr<Channel> channel, ExecutableInfo info,
                                                const std::vector<int>& own_cores, double peer_timeout_seconds) {
  return std::make_unique<RemoteExecutable>(std::move(channel), std::move(info), own_cores, peer_timeout_seconds);
}

}  // namespace pjrt_neuron::engine::remote
