"""What `pjrt-neuron ls` prints: the simulated instance as the plugin describes it (its one instance
table), or on the neuron engine what the Neuron runtime reports."""

from __future__ import annotations

from pjrt_neuron import _native, config, tables
from pjrt_neuron.tables import Column


def describe(instance_type: str | None = None, logical_nc_config: int | None = None) -> dict:
    """Chips, cores, memory, links and the processes holding cores, from the plugin library."""
    name = instance_type or config.instance_type()
    lnc = logical_nc_config if logical_nc_config is not None else config.logical_nc_config()
    return _native.describe_instance(name, lnc)


def _process_name(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/comm") as f:
            return f.read().strip()
    except OSError:
        return "?"


def _core_range(ids: list[int]) -> str:
    return f"{ids[0]}-{ids[-1]}" if len(ids) > 1 else str(ids[0])


def _memory(num_bytes: int) -> str:
    return f"{num_bytes >> 30} GB"


def format_table(description: dict, show_processes: bool = False) -> str:
    """A neuron-ls style table: one row per chip."""
    titles = ["NEURON DEVICE", "NEURON CORES", "NEURON CORE IDS", "NEURON MEMORY", "CONNECTED DEVICES"]
    if show_processes:
        titles.append("PROCESSES")
    rows = []
    for chip in description["chips"]:
        row = [str(chip["chip"]), str(chip["cores"]), _core_range(chip["core_ids"]), _memory(chip["memory_bytes"]),
               ", ".join(str(c) for c in chip["connected_chips"])]
        if show_processes:
            row.append(", ".join(f"core {h['core']}: pid {h['pid']} ({_process_name(h['pid'])})"
                                 for h in chip["holders"]))
        rows.append(row)
    out = [
        "engine: sim (simulated NeuronCores)",
        f"instance-type: {description['instance_type']} (simulated)",
        f"logical-neuroncore-config: {description['logical_nc_config']}",
        f"neuroncore-generation: {description['core_generation']}",
        *(f"simulator engine for {framework}: {e['build']} ({e.get('path') or e.get('error')})"
          for framework, e in description.get("sim_engines", {}).items()),
        *tables.format_table([Column(t) for t in titles], rows, boxed=True),
    ]
    return "\n".join(out)


def format_neuron(report: dict) -> str:
    """The neuron engine's cores as the runtime reports them (_native.engine_report)."""
    lines = ["engine: neuron (the Neuron runtime)", f"runtime library: {report.get('neuron_library')}"]
    for key in ("settings_error", "runtime_error"):
        if key in report:
            lines.append(f"error: {report[key]}")
    if "runtime_error" not in report and "settings_error" not in report:
        lines += [f"runtime version: {report.get('runtime_version', report.get('runtime_version_error', '?'))}",
                  f"instance family: {report.get('instance_family', report.get('instance_error', 'not reported'))}",
                  f"visible NeuronCores: {report.get('visible_cores', report.get('visible_cores_error', '?'))}"
                  f" of {report.get('total_cores', '?')}"]
        if "hbm_bytes_per_core" in report:
            lines += [f"  core {i}: {_memory(b)} HBM ({b} bytes)" for i, b in enumerate(report["hbm_bytes_per_core"])]
        else:
            lines.append(f"HBM per core: unknown ({report.get('hbm_error', 'not reported')})")
    lines.append(f"compiler: {report.get('neuronx_cc')} "
                 f"{report.get('compiler_version', '(' + report.get('compiler_error', '?') + ')')}")
    return "\n".join(lines)
