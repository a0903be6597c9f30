// An engine PJRT_Event as an Event (sim_event.h).
#include "engine/sim/sim_event.h"

#include <atomic>
#include <memory>

#include "common/block_pool.h"
#include "engine/sim/engine_library.h"

namespace pjrt_neuron::engine::sim {
namespace {

class SimEvent : public Event {
 public:
  SimEvent(const PJRT_Api* api, PJRT_Event* event) : api_(api), event_(event) {}
  ~SimEvent() override {
    INNER_ARGS(PJRT_Event_Destroy_Args, args);
    args.event = event_;
    TakeError(api_, api_->PJRT_Event_Destroy(&args));
  }
  // An execution's event is shared by its outputs and asked about once per output, so once
  // the engine has said how it ended, the answer is kept and given without asking again.
  bool IsReady() override {
    if (ready_.load(std::memory_order_acquire)) return true;
    INNER_ARGS(PJRT_Event_IsReady_Args, args);
    args.event = event_;
    if (!TakeError(api_, api_->PJRT_Event_IsReady(&args)).ok()) return true;
    if (args.is_ready) ready_.store(true, std::memory_order_release);
    return args.is_ready;
  }
  Status Await() override {
    if (outcome_known_.load(std::memory_order_acquire)) return outcome_;
    INNER_ARGS(PJRT_Event_Await_Args, args);
    args.event = event_;
    Status outcome = TakeError(api_, api_->PJRT_Event_Await(&args));
    bool unclaimed = false;
    if (outcome_claimed_.compare_exchange_strong(unclaimed, true)) {
      outcome_ = outcome;
      outcome_known_.store(true, std::memory_order_release);
    }
    return outcome;
  }
  void OnReady(std::function<void(Status)> done) override {
    if (IsReady()) {
      done(Await());
      return;
    }
    struct Pending {
      const PJRT_Api* api;
      std::function<void(Status)> done;
    };
    auto* pending = new Pending{api_, std::move(done)};
    INNER_ARGS(PJRT_Event_OnReady_Args, args);
    args.event = event_;
    args.user_arg = pending;
    args.callback = [](PJRT_Error* error, void* user_arg) {
      std::unique_ptr<Pending> p(static_cast<Pending*>(user_arg));
      p->done(TakeError(p->api, error));
    };
    // The callback may run at once and destroy this event (found by AddressSanitizer: JAX
    // destroys its event in the callback), so nothing of `this` is read after the call.
    const PJRT_Api* api = api_;
    Status registered = TakeError(api, api->PJRT_Event_OnReady(&args));
    if (!registered.ok()) {
      std::unique_ptr<Pending> p(pending);
      p->done(registered);
    }
  }

 private:
  const PJRT_Api* api_;
  PJRT_Event* event_;
  std::atomic<bool> ready_{false};
  std::atomic<bool> outcome_claimed_{false};  // one Await writes outcome_
  std::atomic<bool> outcome_known_{false};
  Status outcome_;
};

}  // namespace

EventRef WrapEvent(const PJRT_Api* api, PJRT_Event* event) {
  if (event == nullptr) return std::make_shared<CompletedEvent>();
  return std::allocate_shared<SimEvent>(PoolAllocator<SimEvent>(), api, event);
}

}  // namespace pjrt_neuron::engine::sim
