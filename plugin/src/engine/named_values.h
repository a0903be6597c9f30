// PJRT_NamedValue lists to and from engine attributes: what the C API hands its callers and
// what the simulator engine hands XLA's CPU plugin are built here.
#pragma once

#include <cstddef>
#include <vector>

#include "engine/engine.h"

namespace pjrt_neuron::engine {

// A PJRT_NamedValue list of `attributes`; owns the strings and lists the values point at.
class NamedValues {
 public:
  explicit NamedValues(const Attributes& attributes);
  NamedValues(const NamedValues&) = delete;
  NamedValues& operator=(const NamedValues&) = delete;
  const PJRT_NamedValue* data() const { return values_.data(); }
  size_t size() const { return values_.size(); }

 private:
  Attributes attributes_;
  std::vector<PJRT_NamedValue> values_;
};

// The attributes of a list a PJRT plugin made (so well formed: an unknown type reads as 0).
Attributes AttributesOf(const PJRT_NamedValue* values, size_t count);

}  // namespace pjrt_neuron::engine
