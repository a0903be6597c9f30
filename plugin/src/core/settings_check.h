// Checks the environment's settings against everything they name, the instance table included,
// for the Python package (PjrtNeuron_CheckSettings), which then keeps no rules of its own.
#pragma once

#include <string>
#include <vector>

#include "common/status.h"

namespace pjrt_neuron::core {

// Checks the named settings (all of the table when `names` is empty); the first bad value's
// error names the variable and what is allowed. An unknown name is an error too.
Status CheckSettings(const std::vector<std::string>& names);

}  // namespace pjrt_neuron::core
