// An executable whose outputs go to host memory (hlo/output_placement.h) says which in a
// trailer after the engine's serialized bytes, so cached and deserialized copies keep it.
#pragma once

#include <string>
#include <vector>

namespace pjrt_neuron::engine::sim {

// `bytes` with a trailer naming each output's memory kind ("" for the default).
std::string WithHostOutputs(std::string bytes, const std::vector<std::string>& kinds);

// The engine's bytes of `bytes`, and the output memory kinds of its trailer if it has one.
std::string SplitHostOutputs(const std::string& bytes, std::vector<std::string>* kinds);

}  // namespace pjrt_neuron::engine::sim
