"""torch-xla entry point (group ``torch_xla.plugins``): ``PJRT_DEVICE=NEURON`` selects this plugin.

torch_xla 2.9 itself registers an entry point of the same name for AWS's libneuronxla, and
entry points register in no defined order. At import this module guards torch-xla's
registry so the NEURON slot keeps the plugin chosen by PJRT_NEURON_TORCH_PLUGIN, whichever
registers last.
"""

from __future__ import annotations

from torch_xla._internal import neuron as torch_xla_neuron
from torch_xla.experimental import plugins

from pjrt_neuron import config


class NeuronPlugin(plugins.DevicePlugin):
    """NeuronCores for torch-xla; process setup is torch-xla's own Neuron setup."""

    def library_path(self) -> str:
        config.prepare_environment()
        return config.library_path()

    def client_create_options(self) -> dict:
        config.prepare_environment()
        return config.client_create_options("torch-xla")

    def configure_single_process(self) -> None:
        torch_xla_neuron.configure_pjrt_environment()
        torch_xla_neuron.initialize_env(0, 1)

    def configure_multiprocess(self, local_rank: int, local_world_size: int) -> None:
        # Under torchrun this sets the job's NEURON_PJRT_* variables and each rank's core, as
        # AWS's libneuronxla does at import; under xmp.spawn, initialize_env does it.
        torch_xla_neuron.configure_pjrt_environment()
        torch_xla_neuron.initialize_env(local_rank, local_world_size)

    def physical_chip_count(self) -> int:
        return torch_xla_neuron.num_local_processes()


def _keeps_slot(name: str, device_plugin) -> bool:
    """Whether registering `device_plugin` under `name` is allowed to take the NEURON slot."""
    if name.upper() != "NEURON":
        return True
    ours = isinstance(device_plugin, NeuronPlugin)
    return ours == (config.torch_plugin_choice() == "pjrt-neuron")


def _guard_registry() -> None:
    register = plugins.register_plugin
    if getattr(register, "_pjrt_neuron_guard", False):
        return

    def register_plugin(name: str, device_plugin) -> None:
        if _keeps_slot(name, device_plugin):
            register(name, device_plugin)

    register_plugin._pjrt_neuron_guard = True
    register_plugin.__wrapped__ = register
    plugins.register_plugin = register_plugin


_guard_registry()
