"""Builds the Neuron runtime and compiler stand-in for a test session (tests only).

`build()` compiles libnrt.so.1 with CMake into a cache directory keyed by the sources, writes
a `neuronx-cc` launcher that runs the compiler stand-in with this Python, and returns the paths.
A second session with the same sources reuses the build; concurrent sessions wait on a lock.
"""

from __future__ import annotations

import fcntl
import hashlib
import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

SOURCE_DIR = Path(__file__).resolve().parent
_CPU_PLUGIN_PACKAGE = "xla_plugins.xla_cpu_pjrt"


class BuildError(RuntimeError):
    pass


@dataclass(frozen=True)
class StandIn:
    libnrt: Path          # libnrt.so.1
    neuronx_cc: Path      # the launcher; its directory goes first on PATH
    xla_cpu_plugin: Path  # xla_cpu_pjrt.so, which runs the programs

    @property
    def bin_dir(self) -> Path:
        return self.neuronx_cc.parent

    def environment(self, lock_dir: str | os.PathLike) -> dict[str, str]:
        """The variables a process needs to use the stand-in (see README.md)."""
        return {
            "NEURON_STANDIN_XLA_CPU_PLUGIN": str(self.xla_cpu_plugin),
            "NEURON_STANDIN_LOCK_DIR": str(lock_dir),
            "PATH": f"{self.bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
        }


def xla_cpu_plugin_dir() -> Path:
    spec = importlib.util.find_spec(_CPU_PLUGIN_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise BuildError(f"{_CPU_PLUGIN_PACKAGE} (the xla-cpu-pjrt wheel) is not installed")
    return Path(list(spec.submodule_search_locations)[0])


def _source_key(header: Path) -> str:
    digest = hashlib.sha256()
    files = [SOURCE_DIR / "CMakeLists.txt", *sorted((SOURCE_DIR / "src").iterdir()), header]
    for path in files:
        digest.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    digest.update(sys.executable.encode())
    return digest.hexdigest()[:16]


def _default_cache_root() -> Path:
    override = os.environ.get("NEURON_STANDIN_BUILD_DIR")
    if override:
        return Path(override)
    return Path(tempfile.gettempdir()) / f"neuron-standin-{os.getuid()}"


def _run(command: list[str], log: Path) -> None:
    with open(log, "ab") as out:
        result = subprocess.run(command, stdout=out, stderr=subprocess.STDOUT)
    if result.returncode != 0:
        tail = log.read_text(errors="replace")[-4000:]
        raise BuildError(f"{' '.join(command)} failed ({result.returncode}):\n{tail}")


def _write_launcher(path: Path) -> None:
    script = SOURCE_DIR / "neuronx_cc.py"
    path.write_text(f"#!/bin/sh\n# The neuronx-cc stand-in (tests only).\n"
                    f"exec '{sys.executable}' '{script}' \"$@\"\n")
    path.chmod(0o755)


def build(cache_root: Path | None = None) -> StandIn:
    plugin_dir = xla_cpu_plugin_dir()
    header = plugin_dir / "include" / "pjrt_c_api.h"
    plugin = plugin_dir / "xla_cpu_pjrt.so"
    for needed in (header, plugin):
        if not needed.exists():
            raise BuildError(f"{needed} is missing from the xla-cpu-pjrt wheel")
    cmake = shutil.which("cmake")
    if not cmake:
        raise BuildError("cmake is not on PATH")

    root = Path(cache_root) if cache_root else _default_cache_root()
    out = root / _source_key(header)
    out.mkdir(parents=True, exist_ok=True)
    libnrt = out / "build" / "libnrt.so.1"
    launcher = out / "bin" / "neuronx-cc"
    done = out / "complete"
    with open(out / "lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another session may be building the same key
        if not done.exists():
            log = out / "build.log"
            log.write_text("")
            generator = ["-G", "Ninja"] if shutil.which("ninja") else []
            _run([cmake, "-S", str(SOURCE_DIR), "-B", str(out / "build"), *generator,
                  "-DCMAKE_BUILD_TYPE=Release", f"-DPJRT_C_API_INCLUDE_DIR={header.parent}"],
                 log)
            _run([cmake, "--build", str(out / "build"), "-j", "2"], log)
            if not libnrt.exists():
                raise BuildError(f"the build made no {libnrt}")
            (out / "bin").mkdir(exist_ok=True)
            _write_launcher(launcher)
            done.write_text("")
    return StandIn(libnrt=libnrt, neuronx_cc=launcher, xla_cpu_plugin=plugin)


if __name__ == "__main__":
    built = build()
    print(f"libnrt:     {built.libnrt}\nneuronx-cc: {built.neuronx_cc}\n"
          f"xla cpu:    {built.xla_cpu_plugin}")
