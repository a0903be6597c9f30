"""pytest plugin (entry point ``pytest11``): each pytest-xdist worker gets NeuronCores of its own.

NeuronCores are exclusive between processes, as on Trainium, so two xdist workers that each
ask for every core of the instance collide. In a worker this plugin sets, before any test
imports a framework:

- ``NEURON_RT_VISIBLE_CORES`` to the worker's share of the instance, when there are at least
  as many cores as workers (worker *i* of *n* takes the *i*-th *n*-th);
- otherwise a lock directory of the worker's own (``PJRT_NEURON_LOCK_DIR``), so each worker
  has a whole simulated instance to itself.

With ``PJRT_NEURON_XDIST=instance`` every worker simulates a whole instance of its own, so tests
written for the whole instance (a serial run's device count) pass unchanged under ``-n``.

It does nothing outside xdist workers, when the run already chose cores
(``NEURON_RT_VISIBLE_CORES`` or ``NEURON_RT_NUM_CORES``), or with ``PJRT_NEURON_XDIST=0``.
"""

from __future__ import annotations

import os

_OFF_VALUES = ("0", "off", "false", "no")


def _enabled() -> bool:
    return os.environ.get("PJRT_NEURON_XDIST", "1").lower() not in _OFF_VALUES


def _whole_instances() -> bool:
    return os.environ.get("PJRT_NEURON_XDIST", "1").lower() == "instance"


def _worker(config) -> tuple[int, int] | None:
    """(index, count) of this xdist worker, or None outside a worker.

    Read from xdist's own record of the worker, not PYTEST_XDIST_WORKER: a pytest run started
    from inside a worker inherits that variable, and its controller is no worker.
    """
    workerinput = getattr(config, "workerinput", None)
    if not isinstance(workerinput, dict):
        return None
    name, count = str(workerinput.get("workerid", "")), str(workerinput.get("workercount", ""))
    if not name.startswith("gw") or not name[2:].isdigit() or not count.isdigit():
        return None
    return int(name[2:]), int(count)


def _instance_cores() -> int:
    from pjrt_neuron import instance

    return int(instance.describe()["total_cores"])


def plan(index: int, count: int, total_cores: int, lock_dir: str, whole_instances: bool = False) -> dict[str, str]:
    """The environment a worker gets: a share of the cores, or an instance of its own."""
    if count <= total_cores and not whole_instances:
        share = total_cores // count
        first = index * share
        cores = str(first) if share == 1 else f"{first}-{first + share - 1}"
        return {"NEURON_RT_VISIBLE_CORES": cores}
    return {"PJRT_NEURON_LOCK_DIR": os.path.join(lock_dir, f"xdist-{os.getpid()}-gw{index}")}


def describe_plan(count: int, total_cores: int, whole_instances: bool = False) -> str:
    from pjrt_neuron import config as settings

    instance_type = settings.instance_type()
    if whole_instances:
        return (f"pjrt-neuron: {count} xdist workers, each simulating a {instance_type} of its own "
                "(PJRT_NEURON_XDIST=instance)")
    if count <= total_cores:
        share = total_cores // count
        return (f"pjrt-neuron: {count} xdist workers share {instance_type}: {share} NeuronCore(s) each "
                "(NEURON_RT_VISIBLE_CORES per worker; PJRT_NEURON_XDIST=0 turns this off)")
    return (f"pjrt-neuron: {count} xdist workers, more than {instance_type}'s {total_cores} NeuronCores: "
            "each worker simulates an instance of its own (PJRT_NEURON_XDIST=0 turns this off)")


def _chosen_by_user() -> bool:
    return bool(os.environ.get("NEURON_RT_VISIBLE_CORES") or os.environ.get("NEURON_RT_NUM_CORES"))


def pytest_configure(config) -> None:
    worker = _worker(config)
    if worker is None or not _enabled() or _chosen_by_user():
        return
    index, count = worker
    try:
        from pjrt_neuron import config as settings  # not pytest's `config`

        lock_dir = settings.lock_directory()
        total_cores = _instance_cores()
    except Exception as error:  # a project that never uses NeuronCores must still run its tests
        config.issue_config_time_warning(
            _config_warning(f"pjrt-neuron cannot give this xdist worker its own NeuronCores: {error}"), stacklevel=2)
        return
    os.environ.update(plan(index, count, total_cores, lock_dir, _whole_instances()))


def _config_warning(message: str):
    import pytest

    return pytest.PytestConfigWarning(message)


def pytest_report_header(config) -> str | None:
    # The controller prints the header; it knows the worker count from -n.
    count = getattr(config.option, "numprocesses", None)
    if not isinstance(count, int) or count < 1 or not _enabled() or _chosen_by_user():
        return None
    try:
        return describe_plan(count, _instance_cores(), _whole_instances())
    except Exception as error:  # a header must never break a test run
        return f"pjrt-neuron: cannot plan NeuronCores for xdist workers: {error}"
