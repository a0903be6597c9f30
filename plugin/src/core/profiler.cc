// Execution spans recorded for profiling sessions (profiler.h).
#include "core/profiler.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <set>
#include <vector>

#include "hlo/wire_format.h"

namespace pjrt_neuron::core::profiler {

struct Span {
  int device_id;
  std::string program;
  int64_t start_ns;
  int64_t end_ns;
};

struct Session::State {
  std::mutex mutex;
  std::condition_variable settled;
  int pending = 0;  // executions recorded while running whose completion has not fired yet
  bool running = false;
  bool stopped = false;
  int64_t start_ns = 0;
  std::vector<Span> spans;
  std::string collected;
  bool has_collected = false;
};

namespace {

std::atomic<int> active_sessions{0};

std::mutex& RegistryMutex() {
  static std::mutex mutex;
  return mutex;
}
std::set<std::shared_ptr<Session::State>>& Running() {
  static std::set<std::shared_ptr<Session::State>> running;
  return running;
}

// XSpace field numbers (tsl/profiler/protobuf/xplane.proto).
constexpr uint32_t kSpacePlanes = 1, kSpaceHostnames = 4;
constexpr uint32_t kPlaneId = 1, kPlaneName = 2, kPlaneLines = 3, kPlaneEventMetadata = 4;
constexpr uint32_t kLineId = 1, kLineName = 2, kLineTimestampNs = 3, kLineEvents = 4, kLineDisplayName = 11;
constexpr uint32_t kEventMetadataId = 1, kEventOffsetPs = 2, kEventDurationPs = 3;
constexpr uint32_t kMetadataId = 1, kMetadataName = 2;
constexpr uint32_t kMapKey = 1, kMapValue = 2;

std::string Serialize(const std::vector<Span>& spans, int64_t session_start_ns) {
  std::map<int, std::vector<const Span*>> by_device;
  for (const Span& s : spans) by_device[s.device_id].push_back(&s);
  std::string space;
  int64_t plane_id = 1;
  for (const auto& [device_id, device_spans] : by_device) {
    std::map<std::string, int64_t> metadata_ids;
    std::string line;
    hlo::AppendVarintField(&line, kLineId, 1);
    hlo::AppendBytesField(&line, kLineName, "XLA Modules");
    hlo::AppendBytesField(&line, kLineDisplayName, "Program executions");
    hlo::AppendVarintField(&line, kLineTimestampNs, static_cast<uint64_t>(session_start_ns));
    for (const Span* s : device_spans) {
      auto [it, inserted] = metadata_ids.emplace(s->program, static_cast<int64_t>(metadata_ids.size()) + 1);
      std::string event;
      hlo::AppendVarintField(&event, kEventMetadataId, static_cast<uint64_t>(it->second));
      hlo::AppendVarintField(&event, kEventOffsetPs, static_cast<uint64_t>((s->start_ns - session_start_ns) * 1000));
      hlo::AppendVarintField(&event, kEventDurationPs, static_cast<uint64_t>((s->end_ns - s->start_ns) * 1000));
      hlo::AppendBytesField(&line, kLineEvents, event);
    }
    std::string plane;
    hlo::AppendVarintField(&plane, kPlaneId, static_cast<uint64_t>(plane_id++));
    hlo::AppendBytesField(&plane, kPlaneName, "/device:NEURON:" + std::to_string(device_id));
    hlo::AppendBytesField(&plane, kPlaneLines, line);
    for (const auto& [name, id] : metadata_ids) {
      std::string metadata, entry;
      hlo::AppendVarintField(&metadata, kMetadataId, static_cast<uint64_t>(id));
      hlo::AppendBytesField(&metadata, kMetadataName, name);
      hlo::AppendVarintField(&entry, kMapKey, static_cast<uint64_t>(id));
      hlo::AppendBytesField(&entry, kMapValue, metadata);
      hlo::AppendBytesField(&plane, kPlaneEventMetadata, entry);
    }
    hlo::AppendBytesField(&space, kSpacePlanes, plane);
  }
  (void)kSpaceHostnames;
  return space;
}

}  // namespace

bool Active() { return active_sessions.load(std::memory_order_relaxed) > 0; }

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

void NoteExecution(int device_id, const std::string& program, int64_t start_ns, const engine::EventRef& done) {
  std::vector<std::shared_ptr<Session::State>> sessions;
  {
    std::lock_guard<std::mutex> lock(RegistryMutex());
    sessions.assign(Running().begin(), Running().end());
  }
  if (sessions.empty() || done == nullptr) return;
  for (const auto& state : sessions) {
    std::lock_guard<std::mutex> lock(state->mutex);
    state->pending += 1;
  }
  done->OnReady([sessions, device_id, program, start_ns](Status) {
    const int64_t end_ns = std::max(NowNs(), start_ns);
    for (const auto& state : sessions) {
      std::lock_guard<std::mutex> lock(state->mutex);
      if (!state->stopped) state->spans.push_back({device_id, program, start_ns, end_ns});
      state->pending -= 1;
      state->settled.notify_all();
    }
  });
}

Session::Session() : state_(std::make_shared<State>()) {}

Session::~Session() {
  if (state_->running) Stop();
}

Status Session::Start() {
  {
    std::lock_guard<std::mutex> lock(state_->mutex);
    if (state_->running) return FailedPrecondition("the profiler session is already started");
    if (state_->stopped) return FailedPrecondition("the profiler session has been stopped; create a new one");
    state_->running = true;
    state_->start_ns = NowNs();
  }
  std::lock_guard<std::mutex> lock(RegistryMutex());
  Running().insert(state_);
  active_sessions.fetch_add(1);
  return Status::Ok();
}

Status Session::Stop() {
  {
    std::lock_guard<std::mutex> lock(RegistryMutex());
    if (Running().erase(state_) == 0) return FailedPrecondition("the profiler session is not started");
    active_sessions.fetch_sub(1);
  }
  std::unique_lock<std::mutex> lock(state_->mutex);
  state_->running = false;
  // An execution's completion can fire just after the framework saw its outputs; wait for
  // those that started inside the session, but not for a program that hangs.
  state_->settled.wait_for(lock, std::chrono::seconds(2), [this] { return state_->pending == 0; });
  state_->stopped = true;
  return Status::Ok();
}

StatusOr<const std::string*> Session::Collect() {
  std::lock_guard<std::mutex> lock(state_->mutex);
  if (state_->running) return FailedPrecondition("stop the profiler session before collecting its data");
  if (!state_->has_collected) {
    state_->collected = Serialize(state_->spans, state_->start_ns);
    state_->has_collected = true;
  }
  return &state_->collected;
}

}  // namespace pjrt_neuron::core::profiler
