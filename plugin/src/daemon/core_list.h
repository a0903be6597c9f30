// How the daemon's messages and keys print a list of NeuronCores: "0,1,3".
#pragma once

#include <string>
#include <vector>

namespace pjrt_neuron::daemon {

inline std::string CoreList(const std::vector<int>& cores) {
  std::string out;
  for (int c : cores) out += (out.empty() ? "" : ",") + std::to_string(c);
  return out;
}

}  // namespace pjrt_neuron::daemon
