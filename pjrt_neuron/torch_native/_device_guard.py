"""The C++ device guard of the `neuron` device (`_device_guard.cc`), built with the machine's C++
compiler against the installed torch at first use and cached. Without it PyTorch's Python-registered
guard stands in: one device per process for autograd, no streams or events."""

from __future__ import annotations

import ctypes
import hashlib
import os
import subprocess
import tempfile
import threading
import warnings
from pathlib import Path

_lock = threading.Lock()
_library: ctypes.CDLL | None = None
_unavailable_reason: str | None = None
_SYNCHRONIZE = ctypes.CFUNCTYPE(None, ctypes.c_int)
_synchronize_callback = None  # kept alive: the guard holds the pointer


def _source() -> Path:
    return Path(__file__).with_name("_device_guard.cc")


def _cache_directory() -> Path:
    base = os.environ.get("PJRT_NEURON_TORCH_GUARD_DIR")
    if base:
        return Path(base)
    return Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "pjrt-neuron" / "torch-device-guard"


def _build(torch_dir: Path, target: Path) -> None:
    import torch

    compiler = os.environ.get("CXX", "c++")
    abi = int(torch._C._GLIBCXX_USE_CXX11_ABI)
    target.parent.mkdir(parents=True, exist_ok=True)
    # Built under a temporary name and renamed: processes of one job may build it at once.
    with tempfile.NamedTemporaryFile(dir=target.parent, suffix=".so", delete=False) as partial:
        partial_path = Path(partial.name)
    command = [compiler, "-shared", "-fPIC", "-O1", "-std=c++20", f"-D_GLIBCXX_USE_CXX11_ABI={abi}",
               f"-I{torch_dir / 'include'}", str(_source()), f"-L{torch_dir / 'lib'}", "-lc10",
               f"-Wl,-rpath,{torch_dir / 'lib'}", "-o", str(partial_path)]
    try:
        result = subprocess.run(command, capture_output=True, text=True, timeout=300)
    except (OSError, subprocess.TimeoutExpired) as e:
        partial_path.unlink(missing_ok=True)
        raise RuntimeError(f"could not run the C++ compiler {compiler!r} ({e}); install g++ or set CXX") from None
    if result.returncode != 0:
        partial_path.unlink(missing_ok=True)
        raise RuntimeError(f"{compiler} failed to build the device guard:\n{result.stderr[-2000:]}")
    os.replace(partial_path, target)


def _load() -> ctypes.CDLL:
    import torch

    torch_dir = Path(torch.__file__).parent
    key = hashlib.sha256(_source().read_bytes() + torch.__version__.encode() + str(torch_dir).encode()).hexdigest()[:16]
    target = _cache_directory() / f"neuron_device_guard-{torch.__version__}-{key}.so"
    if not target.exists():
        _build(torch_dir, target)
    library = ctypes.CDLL(str(target))
    library.pjrt_neuron_guard_install.restype = ctypes.c_int
    library.pjrt_neuron_guard_set_core_count.argtypes = [ctypes.c_int]
    library.pjrt_neuron_guard_set_alias.argtypes = [ctypes.c_int, ctypes.c_int]
    library.pjrt_neuron_guard_set_synchronize.argtypes = [_SYNCHRONIZE]
    library.pjrt_neuron_guard_current_core.restype = ctypes.c_int
    library.pjrt_neuron_guard_set_current_core.argtypes = [ctypes.c_int]
    library.pjrt_neuron_guard_set_current_core.restype = ctypes.c_int
    return library


def install(core_count: int) -> bool:
    """Registers the guard for PrivateUse1 (before PyTorch's Python one would be). False, with the
    reason kept for `require()`, when it cannot be built or another guard holds the device."""
    global _library, _unavailable_reason
    with _lock:
        if _library is not None:
            return True
        if os.environ.get("PJRT_NEURON_TORCH_GUARD", "1") == "0":
            _unavailable_reason = "PJRT_NEURON_TORCH_GUARD=0 turned it off"
            return False
        try:
            library = _load()
        except Exception as e:  # noqa: BLE001
            _unavailable_reason = str(e)
            return False
        if not library.pjrt_neuron_guard_install():
            _unavailable_reason = "another device guard is registered for PyTorch's PrivateUse1 device"
            return False
        library.pjrt_neuron_guard_set_core_count(max(1, core_count))
        _library = library
        return True


def installed() -> bool:
    return _library is not None


def set_cores(count: int, aliases: dict[int, int]) -> None:
    """How many `neuron:i` names the process has, once its client knows, and the job places
    (neuron:LOCAL_RANK) that name its own cores."""
    if _library is not None:
        _library.pjrt_neuron_guard_set_core_count(count)
        for place, own in aliases.items():
            _library.pjrt_neuron_guard_set_alias(place, own)


def set_synchronize(synchronize) -> None:
    """`synchronize(index)` waits for a core's launched work; streams and events wait through it."""
    global _synchronize_callback
    if _library is None:
        return

    def wait(index: int) -> None:
        try:
            synchronize(index)
        except Exception as e:  # noqa: BLE001 - an exception cannot cross into C++
            warnings.warn(f"neuron: waiting for neuron:{index} failed: {e}")

    _synchronize_callback = _SYNCHRONIZE(wait)
    _library.pjrt_neuron_guard_set_synchronize(_synchronize_callback)


def current_core() -> int | None:
    return None if _library is None else _library.pjrt_neuron_guard_current_core()


def set_current_core(index: int) -> bool:
    return _library is not None and bool(_library.pjrt_neuron_guard_set_current_core(index))


_warned = False


def warn_single_device(index: int) -> None:
    """Said once when neuron:1 and up are used without the guard: backward there will fail."""
    global _warned
    if _library is None and index > 0 and not _warned:
        _warned = True
        warnings.warn(f"neuron: neuron:{index} is used but the `neuron` device guard is not built "
                      f"({_unavailable_reason}); PyTorch's stand-in knows one device, so backward on "
                      "neuron:1 and up fails. Install a C++ compiler (g++) so pjrt-neuron can build it.")
