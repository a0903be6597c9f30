"""Finding libpjrt_neuron.so, and the error every setting problem raises: the bottom of the
package, so that `_native` (which loads the library) and `config` (which reads settings through
it) both import it and neither imports the other's importers."""

from __future__ import annotations

import importlib.metadata
import os
from pathlib import Path

LIBRARY_NAME = "libpjrt_neuron.so"


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
