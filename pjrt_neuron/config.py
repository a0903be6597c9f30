"""All pjrt-neuron settings, read and validated in one place.

Environment variables:
  PJRT_NEURON_LIBRARY_PATH    the plugin library to load (default: the one shipped in this package)
  PJRT_NEURON_ENGINE_LIBRARY  the simulator's engine, xla_cpu_pjrt.so (default: from the xla-cpu-pjrt wheel)
  PJRT_NEURON_INSTANCE_TYPE   the simulated Trainium instance (default trn1.2xlarge)
  PJRT_NEURON_LOCK_DIR        where processes claim NeuronCores (default /tmp/pjrt-neuron-locks)
  PJRT_NEURON_TORCH_PLUGIN    which plugin PJRT_DEVICE=NEURON selects in torch-xla when AWS's
                              libneuronxla is installed too: "pjrt-neuron" (default) or "aws"
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
from pathlib import Path

LIBRARY_NAME = "libpjrt_neuron.so"
INSTANCE_TYPES = (
    "trn1.2xlarge",
    "trn1.32xlarge",
    "trn1n.32xlarge",
    "trn2.48xlarge",
    "inf2.xlarge",
    "inf2.8xlarge",
    "inf2.24xlarge",
    "inf2.48xlarge",
)
TORCH_PLUGIN_CHOICES = ("pjrt-neuron", "aws")


class ConfigurationError(ValueError):
    """A pjrt-neuron setting has a value that cannot work; the message says which and why."""


def _installed_library() -> Path | None:
    # A source checkout on sys.path can shadow the installed package; look in the install too.
    try:
        files = importlib.metadata.files("pjrt-neuron") or []
    except importlib.metadata.PackageNotFoundError:
        return None
    for f in files:
        if f.name == LIBRARY_NAME:
            return Path(f.locate())
    return None


def library_path() -> str:
    """Path of libpjrt_neuron.so: $PJRT_NEURON_LIBRARY_PATH, else the copy installed with this package."""
    override = os.environ.get("PJRT_NEURON_LIBRARY_PATH")
    if override:
        if not os.path.isfile(override):
            raise ConfigurationError(
                f"PJRT_NEURON_LIBRARY_PATH={override!r} does not exist; unset it to use the installed plugin")
        return override
    for candidate in (Path(__file__).with_name(LIBRARY_NAME), _installed_library()):
        if candidate is not None and candidate.is_file():
            return str(candidate)
    raise ConfigurationError(
        f"{LIBRARY_NAME} is not installed; run `pip install .` in the pjrt-neuron checkout "
        "(or set PJRT_NEURON_LIBRARY_PATH to a built library)")


def engine_library_path() -> str:
    """Path of the simulator engine (xla_cpu_pjrt.so from the xla-cpu-pjrt wheel)."""
    override = os.environ.get("PJRT_NEURON_ENGINE_LIBRARY")
    if override:
        if not os.path.isfile(override):
            raise ConfigurationError(f"PJRT_NEURON_ENGINE_LIBRARY={override!r} does not exist")
        return override
    spec = importlib.util.find_spec("xla_plugins.xla_cpu_pjrt")
    if spec is None or spec.origin is None:
        raise ConfigurationError("the simulator engine is missing; run `pip install xla-cpu-pjrt==0.0.1`")
    return str(Path(spec.origin).with_name("xla_cpu_pjrt.so"))


def instance_type() -> str:
    value = os.environ.get("PJRT_NEURON_INSTANCE_TYPE", "trn1.2xlarge")
    if value not in INSTANCE_TYPES:
        raise ConfigurationError(
            f"PJRT_NEURON_INSTANCE_TYPE={value!r} is not a known instance type; use one of {', '.join(INSTANCE_TYPES)}")
    return value


def logical_nc_config() -> int:
    """NEURON_LOGICAL_NC_CONFIG, or 0 for the instance's default."""
    value = os.environ.get("NEURON_LOGICAL_NC_CONFIG", "")
    if not value:
        return 0
    if value not in ("1", "2"):
        raise ConfigurationError(f"NEURON_LOGICAL_NC_CONFIG={value!r}; use 1 or 2")
    return int(value)


def torch_plugin_choice() -> str:
    value = os.environ.get("PJRT_NEURON_TORCH_PLUGIN", "pjrt-neuron")
    if value not in TORCH_PLUGIN_CHOICES:
        raise ConfigurationError(
            f"PJRT_NEURON_TORCH_PLUGIN={value!r}; use 'pjrt-neuron' (this plugin) or 'aws' (AWS's libneuronxla)")
    return value


def prepare_environment() -> None:
    """Validates the settings and tells the plugin library where its engine is.

    The plugin reads the engine path from the environment because frameworks ask it for
    plugin attributes before any client (and so any create option) exists.
    """
    instance_type()
    os.environ.setdefault("PJRT_NEURON_ENGINE_LIBRARY", engine_library_path())
