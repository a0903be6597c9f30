"""The simulated instance as the plugin describes it (its one instance table), for `pjrt-neuron ls`."""

from __future__ import annotations

from pjrt_neuron import _native, config


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
    headers = ["NEURON DEVICE", "NEURON CORES", "NEURON CORE IDS", "NEURON MEMORY", "CONNECTED DEVICES"]
    if show_processes:
        headers.append("PROCESSES")
    rows = []
    for chip in description["chips"]:
        row = [str(chip["chip"]), str(chip["cores"]), _core_range(chip["core_ids"]), _memory(chip["memory_bytes"]),
               ", ".join(str(c) for c in chip["connected_chips"])]
        if show_processes:
            row.append(", ".join(f"core {h['core']}: pid {h['pid']} ({_process_name(h['pid'])})"
                                 for h in chip["holders"]))
        rows.append(row)
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(headers)]
    rule = "+" + "+".join("-" * (w + 2) for w in widths) + "+"
    def line(cells):
        return "| " + " | ".join(c.ljust(w) for c, w in zip(cells, widths)) + " |"
    out = [
        f"instance-type: {description['instance_type']} (simulated)",
        f"logical-neuroncore-config: {description['logical_nc_config']}",
        f"neuroncore-generation: {description['core_generation']}",
        rule, line(headers), rule, *(line(r) for r in rows), rule,
    ]
    return "\n".join(out)
