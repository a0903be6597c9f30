"""The settings the Python package reads, validated by the plugin library's one table of settings.

Every variable, its default and what it allows is in the library (`settings()`, from
plugin/src/common/settings.cc); only finding the library itself (PJRT_NEURON_LIBRARY_PATH) and
the engine wheel are Python's own.
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

from pjrt_neuron import _native
# Found here too (config.library_path, config.ConfigurationError): _library is where they live
# so that _native, below config, can raise and load without importing config.
from pjrt_neuron._library import LIBRARY_NAME, ConfigurationError, library_path  # noqa: F401
from pjrt_neuron.estimation.hook import report_at_exit

# The simulator's engine builds: (PJRT_NEURON_SIM_ENGINE value, module, file beside it, install hint).
ENGINE_BUILDS = (
    ("xla-cpu-pjrt", "xla_plugins.xla_cpu_pjrt", "xla_cpu_pjrt.so", "pip install xla-cpu-pjrt==0.0.1"),
    ("lammps-jax-pjrt-cpu", "lammps_jax_pjrt_cpu", "pjrt_c_api_cpu_plugin.so",
     "pip install 'pjrt-neuron[engine-jax]' (or lammps-jax-pjrt-cpu==0.11.2)"),
)
FRAMEWORKS = ("jax", "torch-xla", "capi")
# prepare_environment's own PJRT_NEURON_ENGINE_LIBRARY, marked so that this process and its
# children do not take it for the user's override.
_AUTO_MARK = "_PJRT_NEURON_ENGINE_LIBRARY_AUTO"


def engine_builds() -> dict[str, str | None]:
    """Each engine build's library path, None where its wheel is not installed."""
    found = {}
    for name, module, filename, _ in ENGINE_BUILDS:
        spec = importlib.util.find_spec(module)
        path = Path(spec.origin).with_name(filename) if spec is not None and spec.origin else None
        found[name] = str(path) if path is not None and path.is_file() else None
    return found


def engine_build_for(framework: str = "capi") -> str:
    """Which engine build serves `framework` ("jax", "torch-xla" or "capi": the C API and the native device).

    auto: JAX runs on lammps-jax-pjrt-cpu where the engine-jax extra installed it (unreduced and
    reduced shardings, host offload and FFI are right only there, and the whole suite passes on
    it), else on xla-cpu-pjrt. torch-xla and the C API run on xla-cpu-pjrt: on the newer build
    torch-xla's collective helpers across processes (each rank its own program) are refused
    (README, "Engine builds").
    """
    if framework not in FRAMEWORKS:
        raise ValueError(f"engine_build_for: framework {framework!r} is not one of {', '.join(FRAMEWORKS)}")
    choice = _value("PJRT_NEURON_SIM_ENGINE")
    if choice != "auto":
        return choice
    if framework == "jax" and engine_builds()["lammps-jax-pjrt-cpu"] is not None:
        return "lammps-jax-pjrt-cpu"
    return "xla-cpu-pjrt"


def engine_library_path(framework: str = "capi") -> str:
    """Path of the simulator engine for `framework`: $PJRT_NEURON_ENGINE_LIBRARY, else the build
    PJRT_NEURON_SIM_ENGINE picks (engine_build_for)."""
    override = os.environ.get("PJRT_NEURON_ENGINE_LIBRARY")
    if override and override != os.environ.get(_AUTO_MARK):
        if not os.path.isfile(override):
            raise ConfigurationError(f"PJRT_NEURON_ENGINE_LIBRARY={override!r} does not exist")
        return override
    build = engine_build_for(framework)
    path = engine_builds()[build]
    if path is None:
        hint = next(h for name, _, _, h in ENGINE_BUILDS if name == build)
        raise ConfigurationError(f"the simulator engine {build} (PJRT_NEURON_SIM_ENGINE) is not installed; run `{hint}`")
    return path


def settings() -> tuple[dict, ...]:
    """Every setting pjrt-neuron reads: name, kind, default, default_text, meaning, allowed, choices, read_by."""
    return _native.settings()


def _value(name: str) -> str:
    """The environment's value of setting `name`, checked by the library; else its default ("" when none)."""
    _native.check_settings(name)
    return os.environ.get(name) or (_native.setting(name)["default"] or "")


def instance_types() -> tuple[str, ...]:
    """The simulated instance types, in the library's table order."""
    return tuple(t["name"] for t in _native.instance_types())


def instance_type() -> str:
    return _value("PJRT_NEURON_INSTANCE_TYPE")


def logical_nc_config() -> int:
    """NEURON_LOGICAL_NC_CONFIG, or 0 for the instance's default."""
    return int(_value("NEURON_LOGICAL_NC_CONFIG") or 0)


def lock_directory() -> str:
    """Where processes claim NeuronCores (PJRT_NEURON_LOCK_DIR)."""
    return _value("PJRT_NEURON_LOCK_DIR")


def torch_plugin_choice() -> str:
    return _value("PJRT_NEURON_TORCH_PLUGIN")


_estimate_at_exit_registered = False  # PJRT_NEURON_ESTIMATE=1: once per process


def client_create_options(framework: str) -> dict:
    """Create options that give `framework`'s client its engine build."""
    return {"engine_library_path": engine_library_path(framework)}


def prepare_environment() -> None:
    """Validates the settings and tells the plugin library where its engine is.

    The plugin reads the engine path from the environment because frameworks ask it for
    plugin attributes before any client (and so any create option) exists.
    """
    instance_type()
    # Read before any client exists (plugin attributes); each framework's client then gets its
    # own build through the create option engine_library_path (client_create_options).
    current = os.environ.get("PJRT_NEURON_ENGINE_LIBRARY")
    if not current or current == os.environ.get(_AUTO_MARK):
        path = engine_library_path("capi")
        os.environ["PJRT_NEURON_ENGINE_LIBRARY"] = os.environ[_AUTO_MARK] = path
    global _estimate_at_exit_registered
    _native.check_settings("PJRT_NEURON_ESTIMATE")
    if os.environ.get("PJRT_NEURON_ESTIMATE") == "1" and not _estimate_at_exit_registered:
        _estimate_at_exit_registered = True
        report_at_exit()
