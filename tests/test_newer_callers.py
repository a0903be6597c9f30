"""Callers of PJRT 0.112 to 0.114 (JAX 0.11): errors and memories read through the function tables
that lead them, and the PJRT_Api slots added after the 0.81 header.

tests/newer_caller/client_0_114.c is such a caller, written from the header's facts apart from
the plugin. It runs against the newer engine build first, a real 0.115 plugin built from XLA, so
that its own reading of the layouts is checked by XLA's code, then against ours.
"""
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from pjrt_neuron import config
from pjrt_neuron.pjrt_capi import header_path

CLIENT_SOURCE = Path(__file__).parent / "newer_caller" / "client_0_114.c"


@pytest.fixture(scope="module")
def client(tmp_path_factory):
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        pytest.fail("a C compiler (cc or gcc) is needed to build the 0.114 caller")
    binary = tmp_path_factory.mktemp("newer_caller") / "client_0_114"
    subprocess.run([compiler, "-std=c11", "-Wall", "-Werror", f"-I{header_path().parent}", str(CLIENT_SOURCE),
                    "-o", str(binary), "-ldl"], check=True)
    return binary


def run_client(client, library, env_extra=None, *flags):
    env = dict(os.environ, **(env_extra or {}))
    result = subprocess.run([str(client), library, *flags], capture_output=True, text=True, timeout=120, env=env)
    lines = result.stdout.splitlines()
    assert result.returncode == 0 and lines[-1:] == ["done"], (result.stdout, result.stderr)
    found = {}
    for line in lines:
        key, _, value = line.partition(" ")
        found.setdefault(key, []).append(value)
    return found


def ours(client, env_extra=None):
    # A lock directory of its own: other tests' clients may hold the default instance's cores.
    env = {"PJRT_NEURON_ENGINE_LIBRARY": config.engine_library_path("capi"),
           "PJRT_NEURON_LOCK_DIR": tempfile.mkdtemp(prefix="pjrt-neuron-newer-caller-"), **(env_extra or {})}
    return run_client(client, config.library_path(), env, "bad-input")


def test_the_client_reads_a_real_0_115_plugin(client):
    newer_build = config.engine_builds()["lammps-jax-pjrt-cpu"]
    if newer_build is None:
        pytest.skip("the newer engine build (engine-jax extra) is installed in the torch-xla venv, where this runs")
    found = run_client(client, newer_build)
    assert found["version"] == ["0.115"]
    assert found["api_slots"] == ["143"]
    # The tables the client assumes are the sizes XLA's plugin reports for them.
    assert found["error_table_size"] == ["56"]
    assert found["memory_table_size"] == ["40"]
    assert found["error_api_agrees"] == ["1"]
    assert found["user_data_a"] == ["first", "second"]
    assert found["destructor"] == ["first", "second"]
    assert found["destructor_calls_after_destroy"] == ["2"]


def test_errors_read_through_their_table_agree_with_the_api(client):
    found = ours(client)
    assert found["version"] == ["0.114"]
    assert found["api_slots"] == ["143"]
    assert found["error_table_size"] == ["56"]
    assert found["error_message"] == ["PJRT_Client_LookupDevice: no NeuronCore with id 123456; this client has ids 0, 1"]
    assert found["error_code"] == ["3"]  # INVALID_ARGUMENT
    assert found["error_api_agrees"] == ["1"]
    assert found["payload_table"] == ["pjrt_neuron.function=PJRT_Client_LookupDevice"]
    assert found["payload_api"] == found["payload_table"]
    assert found["null_visitor"] == ["3 PJRT_Error_ForEachPayload: `visitor` is null"]


def test_memories_keep_a_callers_data_until_replaced_or_the_client_goes(client):
    found = ours(client)
    assert found["memory_table_size"] == ["40"]
    assert found["memories"] == ["4"]  # device and pinned_host memory of each of 2 cores
    assert found["user_data_a"] == ["first", "second"]
    assert found["user_data_b_absent"] == ["1"]
    assert found["destructor_calls_before_destroy"] == ["1"]
    assert found["stray_user_data_absent"] == ["1"]
    assert found["destructor"] == ["first", "second"]
    assert found["destructor_calls_after_destroy"] == ["2"]


def test_newer_topology_and_device_entries(client):
    found = ours(client)
    assert found["fingerprint_stable"] == ["1"]
    assert found["memory_space_kind_ids"] == ["0 1"]
    assert int(found["device_attributes"][0]) > 0
    assert found["clear_memory_stats"] == ["ok"]


def test_fingerprints_tell_instances_apart(client):
    fingerprints = {instance: ours(client, {"PJRT_NEURON_INSTANCE_TYPE": instance})["fingerprint"]
                    for instance in ("trn1.2xlarge", "trn1.32xlarge")}
    assert fingerprints["trn1.2xlarge"] != fingerprints["trn1.32xlarge"]
    assert fingerprints["trn1.2xlarge"] == ours(client, {"PJRT_NEURON_INSTANCE_TYPE": "trn1.2xlarge"})["fingerprint"]
