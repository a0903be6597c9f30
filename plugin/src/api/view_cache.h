// The arrays and strings the C API hands out about core objects (named values, output shapes)
// must outlive the call that returns them. They are built once per object and kept here, on
// the C API's side, so core objects carry nothing for the C API.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <mutex>

namespace pjrt_neuron::api {

// Views of objects owned through shared_ptr: an entry lives as long as its object.
template <typename Object, typename View>
class ViewCache {
 public:
  const View& Get(const std::shared_ptr<Object>& object, const std::function<std::unique_ptr<View>(Object&)>& build) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = entries_.find(object.get());
    // An expired entry at this address belonged to an object that is gone.
    if (it == entries_.end() || it->second.owner.expired()) {
      DropExpired();
      it = entries_.insert_or_assign(object.get(), Entry{object, build(*object)}).first;
    }
    return *it->second.view;
  }

 private:
  struct Entry {
    std::weak_ptr<Object> owner;
    std::unique_ptr<View> view;
  };
  void DropExpired() {
    for (auto it = entries_.begin(); it != entries_.end();) {
      it = it->second.owner.expired() ? entries_.erase(it) : std::next(it);
    }
  }
  std::mutex mutex_;
  std::map<const Object*, Entry> entries_;
};

// Views of objects whose owner says when they go: Forget is called before they are destroyed.
template <typename Object, typename View>
class OwnedViewCache {
 public:
  const View& Get(const Object* object, const std::function<std::unique_ptr<View>()>& build) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto& view = entries_[object];
    if (view == nullptr) view = build();
    return *view;
  }
  void Forget(const Object* object) {
    std::lock_guard<std::mutex> lock(mutex_);
    entries_.erase(object);
  }

 private:
  std::mutex mutex_;
  std::map<const Object*, std::unique_ptr<View>> entries_;
};

}  // namespace pjrt_neuron::api
