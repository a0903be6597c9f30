"""Which plugin holds torch-xla's NEURON slot, for each registration order and setting.

Run with XLA_REGISTER_INSTALLED_PLUGINS=0 so this script alone drives registration, and
without PJRT_NEURON_TORCH_PLUGIN (it sets the variable itself). Nothing here starts a
runtime. Prints a JSON object on the last line.
"""

import json
import os

import torch_xla  # noqa: F401
from torch_xla._internal import neuron as aws_neuron
from torch_xla.experimental import plugins

out = {"registry_at_start": sorted(plugins._plugin_registry)}


def holder():
    entry = plugins._plugin_registry.get("NEURON")
    return None if entry is None else f"{type(entry).__module__}.{type(entry).__qualname__}"


def reset():
    plugins._plugin_registry.pop("NEURON", None)


# AWS's plugin registers before pjrt_neuron.torch_plugin is imported, i.e. before the guard exists.
plugins.register_plugin("NEURON", aws_neuron.NeuronPlugin())
out["aws_registered_unguarded"] = holder()
from pjrt_neuron import torch_plugin  # noqa: E402  (installs the guard)

out["guard_installed"] = bool(getattr(plugins.register_plugin, "_pjrt_neuron_guard", False))
plugins.register_plugin("NEURON", torch_plugin.NeuronPlugin())
out["default:aws_then_ours"] = holder()

reset()
plugins.register_plugin("NEURON", torch_plugin.NeuronPlugin())
plugins.register_plugin("NEURON", aws_neuron.NeuronPlugin())
out["default:ours_then_aws"] = holder()

# torch-xla's own loop over the installed entry points, in the order metadata gives and reversed.
real_entry_points = plugins.importlib_metadata.entry_points
neuron_eps = [ep for ep in real_entry_points(group="torch_xla.plugins") if ep.name == "neuron"]
out["neuron_entry_points"] = [ep.value for ep in neuron_eps]


def register_installed(order):
    reset()
    plugins.importlib_metadata.entry_points = lambda group: list(order)
    try:
        plugins.register_installed_plugins()
    finally:
        plugins.importlib_metadata.entry_points = real_entry_points
    return holder()


out["default:entry_points"] = register_installed(neuron_eps)
out["default:entry_points_reversed"] = register_installed(neuron_eps[::-1])

# PJRT_NEURON_TORCH_PLUGIN=aws leaves the slot to AWS's plugin, in either order.
os.environ["PJRT_NEURON_TORCH_PLUGIN"] = "aws"
reset()
plugins.register_plugin("NEURON", aws_neuron.NeuronPlugin())
plugins.register_plugin("NEURON", torch_plugin.NeuronPlugin())
out["aws:aws_then_ours"] = holder()
reset()
plugins.register_plugin("NEURON", torch_plugin.NeuronPlugin())
plugins.register_plugin("NEURON", aws_neuron.NeuronPlugin())
out["aws:ours_then_aws"] = holder()
out["aws:entry_points"] = register_installed(neuron_eps)
out["aws:entry_points_reversed"] = register_installed(neuron_eps[::-1])

# An explicit "pjrt-neuron" behaves like the default.
os.environ["PJRT_NEURON_TORCH_PLUGIN"] = "pjrt-neuron"
out["explicit:entry_points"] = register_installed(neuron_eps)

# A bad value is an error naming the variable, whichever plugin registers.
os.environ["PJRT_NEURON_TORCH_PLUGIN"] = "bogus"
for label, make in (("ours", torch_plugin.NeuronPlugin), ("aws", aws_neuron.NeuronPlugin)):
    try:
        plugins.register_plugin("NEURON", make())
        out[f"invalid:{label}"] = {"raised": None}
    except Exception as e:  # noqa: BLE001 - the type is part of the result
        out[f"invalid:{label}"] = {"raised": type(e).__name__, "is_value_error": isinstance(e, ValueError),
                                   "message": str(e)}
# Other device names are none of the guard's business, even with a bad value set.
plugins.register_plugin("PJRTNEURONTEST", aws_neuron.NeuronPlugin())
out["other_name_registered"] = "PJRTNEURONTEST" in plugins._plugin_registry
print(json.dumps(out))
