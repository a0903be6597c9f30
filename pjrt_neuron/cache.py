"""The persistent compile cache on disk (`pjrt-neuron cache ...`) and this process's cache metrics.

The plugin writes the cache; the library also tells this module where it is, what its files are
called and whether an entry is whole (`_native`), so the format lives in one place.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path

from pjrt_neuron import _native
from pjrt_neuron.tables import Column, format_table


def __getattr__(name: str):
    if name == "MAGIC":  # the entry's first line, as bytes
        return _native.compile_cache_format()["magic"].encode()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def directory() -> Path:
    """NEURON_COMPILE_CACHE_URL when it is a local path, else ~/.cache/pjrt-neuron/compile-cache."""
    return Path(_native.compile_cache_directory())


def _suffix(kind: str) -> str:
    return _native.compile_cache_format()[f"{kind}_suffix"]


@dataclass
class Entry:
    key: str
    path: Path
    size: int
    last_used: float
    header: dict
    valid: bool


def _header(text: str | None) -> dict | None:
    try:
        header = json.loads(text) if text is not None else None
    except ValueError:
        return None
    return header if isinstance(header, dict) else None


def _read_entry(path: Path) -> Entry:
    stat = path.stat()
    try:
        inspected = _native.inspect_cache_entry(str(path))
    except OSError:  # removed or unreadable since it was listed
        inspected = {"valid": False, "header": None}
    header = _header(inspected["header"])
    valid = inspected["valid"] and header is not None
    name = path.name[:-len(_suffix("entry"))]
    return Entry(name, path, stat.st_size, stat.st_mtime, header or {}, valid)


def entries(cache_dir: Path | None = None) -> list[Entry]:
    """Entries, least recently used first."""
    cache_dir = cache_dir or directory()
    if not cache_dir.is_dir():
        return []
    found = [_read_entry(p) for p in cache_dir.glob("*" + _suffix("entry"))]
    return sorted(found, key=lambda e: e.last_used)


def failed(cache_dir: Path | None = None) -> list[Path]:
    cache_dir = cache_dir or directory()
    return sorted(cache_dir.glob("*" + _suffix("failed"))) if cache_dir.is_dir() else []


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
    layout = _native.compile_cache_format()
    failed_files = "*" + layout["failed_suffix"]
    patterns = [failed_files] if failed_only else [
        "*" + layout["entry_suffix"], failed_files, "*" + layout["lock_suffix"], "*" + layout["temporary_marker"] + "*"]
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


def parse_size(text: str) -> int:
    """Sizes as the plugin reads PJRT_NEURON_COMPILE_CACHE_MAX_SIZE: 500M, 10G, 1.5GiB, 4096."""
    return _native.parse_size(text.strip())


def metrics() -> dict:
    """This process's compile counters: compiles, cache hits and misses, seconds compiling, bytes written."""
    return _native.compile_cache_metrics()


ENTRY_COLUMNS = [Column("KEY", "<", 16), Column("SIZE", ">", 10), Column("LAST USED", "<", 19), Column("OK", "<", 3),
                 Column("PROGRAM")]


def format_entries(found: list[Entry]) -> str:
    rows = [[e.key[:16], str(e.size), time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(e.last_used)),
             "yes" if e.valid else "NO", f"{e.header.get('program', '?')} ({e.header.get('format', '?')})"]
            for e in found]
    return "\n".join(format_table(ENTRY_COLUMNS, rows))
