"""The persistent compile cache on disk (`pjrt-neuron cache ...`) and this process's cache metrics.

The plugin writes the cache; this module reads the same format to list, size and prune it.
"""

from __future__ import annotations

import ctypes
import hashlib
import json
import os
import re
import time
from dataclasses import dataclass
from pathlib import Path

from pjrt_neuron import config

MAGIC = b"pjrt-neuron-cache/1\n"


def directory() -> Path:
    """NEURON_COMPILE_CACHE_URL when it is a local path, else ~/.cache/pjrt-neuron/compile-cache."""
    url = os.environ.get("NEURON_COMPILE_CACHE_URL", "")
    if url.startswith("file://"):
        url = url[len("file://"):]
    if url and "://" not in url:
        return Path(url)
    base = os.environ.get("XDG_CACHE_HOME") or (os.path.join(os.environ["HOME"], ".cache") if "HOME" in os.environ
                                                else "/tmp")
    return Path(base) / "pjrt-neuron" / "compile-cache"


@dataclass
class Entry:
    key: str
    path: Path
    size: int
    last_used: float
    header: dict
    valid: bool


def _read_entry(path: Path) -> Entry:
    data = path.read_bytes()
    stat = path.stat()
    header, valid = {}, False
    if data.startswith(MAGIC):
        end = data.find(b"\n", len(MAGIC))
        try:
            header = json.loads(data[len(MAGIC):end])
            at = end + 1
            length = int.from_bytes(data[at:at + 8], "little")
            checksum = data[at + 8:at + 40]
            payload = data[at + 40:]
            valid = len(payload) == length and hashlib.sha256(payload).digest() == checksum
        except (ValueError, json.JSONDecodeError):
            valid = False
    return Entry(path.name[:-len(".entry")], path, stat.st_size, stat.st_mtime, header, valid)


def entries(cache_dir: Path | None = None) -> list[Entry]:
    """Entries, least recently used first."""
    cache_dir = cache_dir or directory()
    if not cache_dir.is_dir():
        return []
    found = [_read_entry(p) for p in cache_dir.glob("*.entry")]
    return sorted(found, key=lambda e: e.last_used)


def failed(cache_dir: Path | None = None) -> list[Path]:
    cache_dir = cache_dir or directory()
    return sorted(cache_dir.glob("*.failed")) if cache_dir.is_dir() else []


def stats(cache_dir: Path | None = None) -> dict:
    cache_dir = cache_dir or directory()
    found = entries(cache_dir)
    return {
        "directory": str(cache_dir),
        "entries": len(found),
        "bytes": sum(e.size for e in found),
        "corrupt_entries": sum(not e.valid for e in found),
        "failed_compilations": len(failed(cache_dir)),
    }


def clear(cache_dir: Path | None = None, failed_only: bool = False) -> int:
    """Removes entries (or only remembered failures); returns how many files went."""
    cache_dir = cache_dir or directory()
    if not cache_dir.is_dir():
        return 0
    patterns = ["*.failed"] if failed_only else ["*.entry", "*.failed", "*.lock", "*.tmp.*"]
    removed = 0
    for pattern in patterns:
        for path in cache_dir.glob(pattern):
            path.unlink(missing_ok=True)
            removed += 1
    return removed


def prune(max_bytes: int, cache_dir: Path | None = None) -> list[Entry]:
    """Removes least recently used entries until the cache holds at most `max_bytes`."""
    found = entries(cache_dir)
    total = sum(e.size for e in found)
    removed = []
    for entry in found:
        if total <= max_bytes:
            break
        entry.path.unlink(missing_ok=True)
        total -= entry.size
        removed.append(entry)
    return removed


_SIZE = re.compile(r"^(\d+(?:\.\d+)?)(B|K|KB|KiB|M|MB|MiB|G|GB|GiB)?$")
_UNITS = {None: 1, "B": 1, "K": 1 << 10, "KB": 1 << 10, "KiB": 1 << 10, "M": 1 << 20, "MB": 1 << 20,
          "MiB": 1 << 20, "G": 1 << 30, "GB": 1 << 30, "GiB": 1 << 30}


def parse_size(text: str) -> int:
    """Sizes as the plugin reads PJRT_NEURON_COMPILE_CACHE_MAX_SIZE: 500M, 10G, 1.5GiB, 4096."""
    match = _SIZE.match(text.strip())
    if match is None:
        raise config.ConfigurationError(f"{text!r} is not a size like 500M or 10G (units B, K, M, G)")
    return int(float(match.group(1)) * _UNITS[match.group(2)])


def metrics() -> dict:
    """This process's compile counters: compiles, cache hits and misses, seconds compiling, bytes written."""
    library = ctypes.CDLL(config.library_path(), mode=os.RTLD_LOCAL | os.RTLD_NOW)
    function = library.PjrtNeuron_CompileCacheMetrics
    function.restype = ctypes.c_long
    function.argtypes = [ctypes.c_char_p, ctypes.c_size_t]
    out = ctypes.create_string_buffer(4096)
    function(out, len(out))
    return json.loads(out.value.decode())


def format_entries(found: list[Entry]) -> str:
    lines = [f"{'KEY':<16} {'SIZE':>10} {'LAST USED':<19} {'OK':<3} PROGRAM"]
    for e in found:
        used = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(e.last_used))
        lines.append(f"{e.key[:16]:<16} {e.size:>10} {used:<19} {'yes' if e.valid else 'NO':<3} "
                     f"{e.header.get('program', '?')} ({e.header.get('format', '?')})")
    return "\n".join(lines)
