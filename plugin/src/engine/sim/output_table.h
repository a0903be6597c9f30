// A program's outputs: their shapes, and their on-device sizes once the engine has told one
// execution's (the same for every execution). Shared by an executable and its output buffers,
// which may outlive it.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "engine/engine.h"

namespace pjrt_neuron::engine::sim {

struct OutputTable {
  explicit OutputTable(std::vector<OutputShape> output_shapes)
      : shapes(std::move(output_shapes)), sizes(new std::atomic<int64_t>[shapes.size()]) {
    for (size_t i = 0; i < shapes.size(); ++i) sizes[i].store(-1, std::memory_order_relaxed);
  }
  const std::vector<OutputShape> shapes;
  std::unique_ptr<std::atomic<int64_t>[]> sizes;  // -1: not asked yet
};

}  // namespace pjrt_neuron::engine::sim
