// PyTorch's device guard for the `neuron` device (PrivateUse1). PyTorch's Python-registered guard
// answers one device and index 0 whatever is asked, so autograd's backward of a tensor on neuron:1
// failed; this one keeps the current core per thread, the process's core count, logical streams
// and events. Built against the installed torch's headers at first use (its vtable is torch's).
#include <c10/core/impl/DeviceGuardImplInterface.h>

#include <atomic>
#include <chrono>
#include <cstdint>

namespace {

using c10::Device;
using c10::DeviceIndex;
using c10::DeviceType;
using c10::Stream;

constexpr int kMaxCores = 128;  // trn2.48xlarge has 128 NeuronCores

std::atomic<int> core_count{1};
// In a job, `neuron:LOCAL_RANK` names the process's own core (as the Python runtime's aliases do).
std::atomic<int> alias_of[kMaxCores];
// Waits for the work launched on one core so far (the Python runtime's synchronize).
std::atomic<void (*)(int)> synchronize_core{nullptr};
std::atomic<int64_t> next_stream_id{1};
thread_local DeviceIndex current_core = 0;
thread_local int64_t current_stream[kMaxCores] = {};

struct Event {
  DeviceIndex core;
  std::chrono::steady_clock::time_point recorded_at;
};

DeviceIndex Canonical(DeviceIndex index) {
  if (index >= 0 && index < kMaxCores) {
    int own = alias_of[index].load();
    if (own >= 0) return static_cast<DeviceIndex>(own);
  }
  return index;
}

void CheckCore(DeviceIndex index) {
  TORCH_CHECK(index >= 0 && index < core_count.load(), "neuron:", static_cast<int>(index),
              " does not exist: this process has ", core_count.load(),
              " NeuronCore(s); torch.neuron.device_count() says how many");
}

void Synchronize(DeviceIndex index) {
  if (auto wait = synchronize_core.load()) wait(index);
}

struct NeuronGuard final : public c10::impl::DeviceGuardImplInterface {
  DeviceType type() const override { return DeviceType::PrivateUse1; }

  Device exchangeDevice(Device device) const override {
    Device previous = getDevice();
    if (device.index() != previous.index()) setDevice(device);
    return previous;
  }
  Device getDevice() const override { return Device(DeviceType::PrivateUse1, current_core); }
  void setDevice(Device device) const override {
    DeviceIndex index = Canonical(device.index());
    CheckCore(index);
    current_core = index;
  }
  void uncheckedSetDevice(Device device) const noexcept override {
    DeviceIndex index = Canonical(device.index());
    if (index >= 0 && index < core_count.load()) current_core = index;
  }

  Stream getStream(Device device) const override {
    DeviceIndex index = device.index() < 0 ? current_core : Canonical(device.index());
    CheckCore(index);
    return Stream::unpack3(current_stream[index], index, DeviceType::PrivateUse1);
  }
  Stream getDefaultStream(Device device) const override {
    DeviceIndex index = device.index() < 0 ? current_core : Canonical(device.index());
    return Stream(Stream::DEFAULT, Device(DeviceType::PrivateUse1, index));
  }
  Stream getStreamFromGlobalPool(Device device, bool /*high_priority*/) const override {
    return getNewStream(device, 0);
  }
  // A NeuronCore runs one program at a time in launch order, so every stream is the same queue;
  // distinct ids keep PyTorch's stream bookkeeping (FSDP, DDP) apart.
  Stream getNewStream(Device device, int /*priority*/) const override {
    DeviceIndex index = device.index() < 0 ? current_core : Canonical(device.index());
    CheckCore(index);
    return Stream::unpack3(next_stream_id.fetch_add(1), index, DeviceType::PrivateUse1);
  }
  Stream exchangeStream(Stream stream) const noexcept override {
    DeviceIndex index = stream.device_index();
    if (index < 0 || index >= kMaxCores) return stream;
    Stream previous = Stream::unpack3(current_stream[index], index, DeviceType::PrivateUse1);
    current_stream[index] = stream.id();
    return previous;
  }

  void record(void** event, const Stream& stream, const DeviceIndex device_index,
              const c10::EventFlag flag) const override {
    TORCH_CHECK(device_index == -1 || device_index == stream.device_index(), "neuron: event on neuron:",
                static_cast<int>(device_index), " recorded on a stream of neuron:",
                static_cast<int>(stream.device_index()));
    auto* recorded = static_cast<Event*>(*event);
    if (recorded == nullptr) {
      recorded = new Event{};
      *event = recorded;
    }
    recorded->core = stream.device_index();
    // A timing event marks when the work launched before it has run, not when it was launched.
    if (flag == c10::EventFlag::BACKEND_DEFAULT) Synchronize(recorded->core);
    recorded->recorded_at = std::chrono::steady_clock::now();
  }
  void block(void* /*event*/, const Stream& /*stream*/) const override {}  // one queue per core
  bool queryEvent(void* event) const override {
    if (event != nullptr) Synchronize(static_cast<Event*>(event)->core);
    return true;
  }
  void synchronizeEvent(void* event) const override {
    if (event != nullptr) Synchronize(static_cast<Event*>(event)->core);
  }
  void destroyEvent(void* event, const DeviceIndex /*device_index*/) const noexcept override {
    delete static_cast<Event*>(event);
  }
  double elapsedTime(void* start, void* end, const DeviceIndex /*device_index*/) const override {
    TORCH_CHECK(start != nullptr && end != nullptr,
                "neuron: elapsed_time needs both events recorded (Event(enable_timing=True).record())");
    auto* first = static_cast<Event*>(start);
    auto* last = static_cast<Event*>(end);
    return std::chrono::duration<double, std::milli>(last->recorded_at - first->recorded_at).count();
  }

  DeviceIndex deviceCount() const noexcept override { return static_cast<DeviceIndex>(core_count.load()); }
  bool queryStream(const Stream& stream) const override {
    Synchronize(stream.device_index());
    return true;
  }
  void synchronizeStream(const Stream& stream) const override { Synchronize(stream.device_index()); }
  void synchronizeDevice(const DeviceIndex index) const override { Synchronize(index); }
};

NeuronGuard guard;

}  // namespace

extern "C" {

// Installs the guard unless one is registered for PrivateUse1 already; 1 when this one is in place.
int pjrt_neuron_guard_install() {
  for (auto& own : alias_of) own.store(-1);
  if (c10::impl::hasDeviceGuardImpl(DeviceType::PrivateUse1)) {
    return c10::impl::getDeviceGuardImpl(DeviceType::PrivateUse1) == &guard ? 1 : 0;
  }
  c10::impl::registerDeviceGuard(DeviceType::PrivateUse1, &guard);
  return 1;
}

void pjrt_neuron_guard_set_core_count(int count) { core_count.store(count < 1 ? 1 : (count > kMaxCores ? kMaxCores : count)); }

void pjrt_neuron_guard_set_alias(int place, int own) {
  if (place >= 0 && place < kMaxCores) alias_of[place].store(own);
}

void pjrt_neuron_guard_set_synchronize(void (*wait)(int)) { synchronize_core.store(wait); }

int pjrt_neuron_guard_current_core() { return current_core; }

int pjrt_neuron_guard_set_current_core(int index) {
  index = Canonical(static_cast<DeviceIndex>(index));
  if (index < 0 || index >= core_count.load()) return 0;
  current_core = static_cast<DeviceIndex>(index);
  return 1;
}

}  // extern "C"
