"""One source of truth: the settings table, the instance table, the compile cache's directory
rule, entry format and sizes, and the version live in the plugin library, and the Python
package reads them from there (pjrt_neuron._native) instead of keeping copies."""

from __future__ import annotations

import hashlib
import importlib
import importlib.metadata
import re
from pathlib import Path

import numpy as np
import pytest

import pjrt_capi as P
import pjrt_neuron
from assertions import pjrt_error
from pjrt_neuron import _native, cache, config

REPO = Path(__file__).resolve().parent.parent
TABLE = {row["name"]: row for row in config.settings()}
# Files that still call getenv themselves; their settings move to common/settings.h later.
NOT_MOVED_YET = ("plugin/src/engine/", "plugin/src/daemon/", "plugin/src/exports/serve_instance.cc")
# Where the user's cache directory and programs are: the system's, not ours to document.
SYSTEM_VARIABLES = {"HOME", "XDG_CACHE_HOME", "PATH", "PYTHONPATH", "TMPDIR"}


# ---------------------------------------------------------------- the table


def test_the_table_describes_each_setting():
    for name, row in TABLE.items():
        assert row["meaning"] and row["default_text"] and row["allowed"], row
        assert row["read_by"] in ("plugin", "instance daemon", "python package"), row
        if row["kind"] in ("choice", "flag"):
            assert row["choices"], row
            assert row["default"] in {c["value"] for c in row["choices"]}, row


def test_getenv_is_called_only_by_the_settings_module():
    callers = []
    for path in sorted((REPO / "plugin" / "src").rglob("*.cc")):
        relative = path.relative_to(REPO).as_posix()
        if relative == "plugin/src/common/settings.cc" or relative.startswith(NOT_MOVED_YET):
            continue
        if "getenv(" in path.read_text():
            callers.append(relative)
    assert callers == []


def test_every_variable_the_plugin_and_the_package_read_is_in_the_table():
    read = set()
    for path in (REPO / "plugin" / "src").rglob("*.cc"):
        read |= set(re.findall(r'(?:getenv|Env)\("([A-Z0-9_]+)"\)', path.read_text()))
    for path in (REPO / "pjrt_neuron").glob("*.py"):
        read |= set(re.findall(r'environ(?:\.get|\.setdefault)?\(?\[?"((?:PJRT_NEURON|NEURON)_[A-Z0-9_]+)"',
                               path.read_text()))
    assert read - set(TABLE) - SYSTEM_VARIABLES == set()


def test_every_variable_in_the_readme_is_in_the_table():
    text = (REPO / "README.md").read_text()
    section = text[text.index("### Settings"):]
    section = section[:section.index("\n#", 1)]
    names = set()
    for row in section.splitlines():
        if not row.startswith("| `"):
            continue
        first_cell = row.split("|")[1]
        tokens = re.findall(r"`([A-Z0-9_]+)`", first_cell)
        names |= {tokens[0] + t if t.startswith("_") else t for t in tokens}
    assert names and names - set(TABLE) == set()


# ---------------------------------------------------------------- the package reads it


def test_the_library_is_loaded_once():
    assert _native.library() is _native.library()


def test_instance_types_come_from_the_library():
    types = config.instance_types()
    assert types[0] == TABLE["PJRT_NEURON_INSTANCE_TYPE"]["default"] == "trn1.2xlarge"
    assert len(types) == len(set(types)) == 8
    for row in _native.instance_types():
        description = _native.describe_instance(row["name"], 0)
        assert description["core_generation"] == row["core_generation"]
        assert description["logical_nc_config"] == row["default_logical_nc_config"]
        assert len(description["chips"]) == row["chips"]


def test_unset_and_empty_mean_the_default(monkeypatch):
    for value in (None, ""):
        for name in ("PJRT_NEURON_INSTANCE_TYPE", "NEURON_LOGICAL_NC_CONFIG", "PJRT_NEURON_TORCH_PLUGIN"):
            if value is None:
                monkeypatch.delenv(name, raising=False)
            else:
                monkeypatch.setenv(name, value)
        assert config.instance_type() == "trn1.2xlarge"
        assert config.logical_nc_config() == 0
        assert config.torch_plugin_choice() == "pjrt-neuron"


@pytest.mark.parametrize("name, value, message", [
    ("PJRT_NEURON_INSTANCE_TYPE", "trn9.mega",
     "PJRT_NEURON_INSTANCE_TYPE='trn9.mega' is not a known instance type; use one of trn1.2xlarge, trn1.32xlarge, "
     "trn1n.32xlarge, trn2.48xlarge, inf2.xlarge, inf2.8xlarge, inf2.24xlarge, inf2.48xlarge"),
    ("NEURON_LOGICAL_NC_CONFIG", "two", "NEURON_LOGICAL_NC_CONFIG='two' is not a positive integer"),
    ("PJRT_NEURON_TORCH_PLUGIN", "bogus",
     "PJRT_NEURON_TORCH_PLUGIN='bogus'; use pjrt-neuron (this plugin, the default) or aws (AWS's libneuronxla)"),
])
def test_config_errors_name_the_variable_and_what_is_allowed(monkeypatch, name, value, message):
    monkeypatch.setenv(name, value)
    reader = {"PJRT_NEURON_INSTANCE_TYPE": config.instance_type, "NEURON_LOGICAL_NC_CONFIG": config.logical_nc_config,
              "PJRT_NEURON_TORCH_PLUGIN": config.torch_plugin_choice}[name]
    with pytest.raises(config.ConfigurationError) as error:
        reader()
    assert str(error.value) == message


@pytest.mark.parametrize("name, value, fragment", [
    ("PJRT_NEURON_COMPAT", "loud", "PJRT_NEURON_COMPAT='loud'; use warn (the default), strict or off"),
    ("PJRT_NEURON_COMPILE_CACHE_SHARED", "yes", "PJRT_NEURON_COMPILE_CACHE_SHARED='yes'; use 1 (on) or 0 (off"),
    ("PJRT_NEURON_COMPILE_CACHE_MAX_SIZE", "10T", "is not a size like 500M or 10G"),
    ("NEURON_RT_NUM_CORES", "0", "NEURON_RT_NUM_CORES='0' is not a positive integer"),
    ("NEURON_PJRT_PROCESS_INDEX", "one", "NEURON_PJRT_PROCESS_INDEX='one' is not a process index"),
    ("NEURON_PJRT_PROCESSES_NUM_DEVICES", "2,x", "NEURON_PJRT_PROCESSES_NUM_DEVICES entry='x' is not a positive"),
    ("PJRT_NEURON_COLLECTIVE_TIMEOUT", "5s", "PJRT_NEURON_COLLECTIVE_TIMEOUT='5s' is not a positive number of seconds"),
    ("PJRT_NEURON_DAEMON_IDLE_SECONDS", "-1", "is not a non-negative number of seconds"),
    ("NEURON_RT_VISIBLE_CORES", "0,2", "cores must be contiguous"),
])
def test_check_settings_refuses_bad_values(monkeypatch, name, value, fragment):
    _native.check_settings(name)  # the session's own value is fine
    monkeypatch.setenv(name, value)
    for names in ((name,), ()):
        with pytest.raises(config.ConfigurationError) as error:
            _native.check_settings(*names)
        assert fragment in str(error.value)


def test_check_settings_refuses_an_unknown_name():
    with pytest.raises(config.ConfigurationError, match="'PJRT_NEURON_NOPE' is not a pjrt-neuron setting"):
        _native.check_settings("PJRT_NEURON_NOPE")


def test_a_bad_flag_fails_the_compilation_naming_it(plugin_api, monkeypatch, tmp_path):
    """Flags are "0" or "1"; anything else used to mean off without a word."""
    monkeypatch.setenv("NEURON_COMPILE_CACHE_URL", str(tmp_path))
    monkeypatch.setenv("PJRT_NEURON_COMPILE_CACHE_RETRY_FAILED", "true")
    with P.Client(plugin_api) as client:
        with pjrt_error(P.ErrorCode.INVALID_ARGUMENT, "PJRT_NEURON_COMPILE_CACHE_RETRY_FAILED='true'", "use 1"):
            client.compile(DOUBLE)
        monkeypatch.setenv("PJRT_NEURON_COMPILE_CACHE_RETRY_FAILED", "1")
        client.compile(DOUBLE)


DOUBLE = """
func.func @main(%a: tensor<2x3xf32>) -> tensor<2x3xf32> {
  %0 = stablehlo.add %a, %a : tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}"""


# ---------------------------------------------------------------- the compile cache's rules


@pytest.mark.parametrize("url, expected", [
    ("/data/cache", "/data/cache"),
    ("file:///data/cache", "/data/cache"),
    ("s3://bucket/cache", "/xdg/pjrt-neuron/compile-cache"),
    (None, "/xdg/pjrt-neuron/compile-cache"),
])
def test_cache_directory_is_the_plugins(monkeypatch, url, expected):
    monkeypatch.setenv("XDG_CACHE_HOME", "/xdg")
    if url is None:
        monkeypatch.delenv("NEURON_COMPILE_CACHE_URL", raising=False)
    else:
        monkeypatch.setenv("NEURON_COMPILE_CACHE_URL", url)
    assert cache.directory() == Path(expected)


@pytest.mark.parametrize("text, size", [("4096", 4096), ("500M", 500 << 20), ("10G", 10 << 30),
                                        ("1.5GiB", 3 << 29), (" 2K ", 2048)])
def test_parse_size_is_the_plugins(text, size):
    assert cache.parse_size(text) == size


@pytest.mark.parametrize("text", ["lots", "10T", "-1G", "1e3", ""])
def test_parse_size_refuses_what_the_plugin_refuses(text):
    with pytest.raises(config.ConfigurationError) as error:
        cache.parse_size(text)
    assert str(error.value) == f"'{text}' is not a size like 500M or 10G (units B, K, M, G)"


def _entry_bytes(header: bytes, payload: bytes) -> bytes:
    """The entry format written out independently of the plugin, to check both agree."""
    return (b"pjrt-neuron-cache/1\n" + header + b"\n" + len(payload).to_bytes(8, "little") +
            hashlib.sha256(payload).digest() + payload)


def test_cache_format_is_the_plugins():
    layout = _native.compile_cache_format()
    assert cache.MAGIC == layout["magic"].encode() == b"pjrt-neuron-cache/1\n"
    assert (layout["entry_suffix"], layout["failed_suffix"], layout["lock_suffix"]) == (".entry", ".failed", ".lock")


def test_entries_are_judged_by_the_plugin(tmp_path):
    header = b'{"program": "we\\"ird \\\\ name \\u00e9", "format": "hlo"}'
    good = _entry_bytes(header, b"payload")
    files = {
        "good": good,
        "checksum": good[:-1] + b"X",
        "truncated": good[:-3],
        "extra": good + b"!",
        "stranger": b"not an entry at all",
        "header": _entry_bytes(b"{not json", b"payload"),
    }
    for name, data in files.items():
        (tmp_path / f"{name}.entry").write_bytes(data)
    found = {e.key: e for e in cache.entries(tmp_path)}
    assert {k for k, e in found.items() if e.valid} == {"good"}
    assert found["good"].header == {"program": 'we"ird \\ name é', "format": "hlo"}
    assert found["checksum"].header == found["good"].header  # damaged payload, readable header
    assert found["stranger"].header == {} and found["header"].header == {}
    problems = {name: _native.inspect_cache_entry(str(tmp_path / f"{name}.entry"))["problem"] for name in files}
    truncated_or_extra = "the entry is truncated or has extra bytes"
    assert problems == {
        "good": "", "checksum": "the entry's checksum does not match", "truncated": truncated_or_extra,
        "extra": truncated_or_extra, "stranger": "not a pjrt-neuron cache entry", "header": ""}
    assert _native.inspect_cache_entry(str(tmp_path / "good.entry"))["payload_bytes"] == len(b"payload")


def test_a_compiled_entry_has_a_header_python_reads(plugin_api, monkeypatch, tmp_path):
    monkeypatch.setenv("NEURON_COMPILE_CACHE_URL", str(tmp_path))
    with P.Client(plugin_api) as client:
        (out,), = client.compile(DOUBLE).execute([client.buffer_from_numpy(np.ones((2, 3), np.float32))])
        np.testing.assert_array_equal(out.to_numpy(), np.full((2, 3), 2.0, np.float32))
    [entry] = cache.entries(tmp_path)
    assert entry.valid and entry.header["program"] == "main" and entry.header["plugin"] == pjrt_neuron.__version__


# ---------------------------------------------------------------- the version


def test_version_is_the_package_metadatas_and_the_librarys():
    pyproject = (REPO / "pyproject.toml").read_text()
    [declared] = re.findall(r'^version = "([^"]+)"', pyproject, re.M)
    assert pjrt_neuron.__version__ == _native.version() == declared


def test_version_without_package_metadata_says_so(monkeypatch):
    def not_installed(name):
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(importlib.metadata, "version", not_installed)
    try:
        assert importlib.reload(pjrt_neuron).__version__ == "0+unknown"
    finally:
        monkeypatch.undo()
        importlib.reload(pjrt_neuron)
    assert pjrt_neuron.__version__ == _native.version()


def test_every_setting_in_the_table_is_in_the_readme():
    text = (REPO / "README.md").read_text()
    section = text[text.index("### Settings"):]
    section = section[:section.index("\n#", 1)]
    cells = " ".join(row.split("|")[1] for row in section.splitlines() if row.startswith("| `"))
    missing = [name for name in TABLE if f"`{name}`" not in cells
               and not any(f"`{name[:len(name) - len(suffix)]}`" in cells and f"`{suffix}`" in cells
                           for suffix in ("_MAX_SIZE", "_SHARED", "_RETRY_FAILED") if name.endswith(suffix))]
    assert missing == []
