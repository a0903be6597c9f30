"""How a NeuronCore spends time on one program: the estimate's model and its constants.

The plugin counts each program's work from its HLO (hlo/cost_analysis.*); the per-generation
hardware figures (TensorEngine, Vector and Scalar engine rates, HBM bandwidth, SBUF size, chip
links) come from the plugin's table (core/instance.h, AWS's architecture pages). Everything else
the model assumes or fitted is in CONSTANTS below, each with its source, and nowhere else.

Per program and core, a roofline (the README's "Size before you rent" says the same in prose):
the TensorEngine's time (each matmul's tiles), the Vector and Scalar engines' (element operations
at their FP32 rates) and the HBM traffic (parameters read, results written, spilled
intermediates) overlap partly; collectives follow, unoverlapped, as rings (bytes over the link
bandwidth plus a latency a step); a fixed launch cost is added to every execution.

Pure arithmetic: nothing here reads the plugin, so the model can be calibrated on its own.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pjrt_neuron.estimation.records import Program

MODEL_NAME = "pjrt-neuron NeuronCore model v2 (tiles, spills, engine overlap; calibrated)"

@dataclass(frozen=True)
class Constant:
    value: float
    source: str


ARCH_V2 = "Neuron SDK docs, NeuronCore-v2 architecture (about-neuron/arch/neuron-hardware/neuron-core-v2)"
NKI_ISA = "Neuron SDK docs, NKI ISA nc_matmul and the NKI programming model (tile limits)"
CALIBRATION = ("checked against the held-out rows of benchmarks/calibration/rows.py (15 inference, 3 training; "
               "AWS Neuron SDK 2.16-2.27 tables): predicted / published 0.71 to 2.05, 17 of 18 within [0.67, 1.5]")
FIT = "fitted on the calibration's fit rows (benchmarks/calibration/rows.py, bench_estimate_calibration.py --fit)"

CONSTANTS = {
    # The TensorEngine is a 128 x 128 systolic array: the contraction runs over the 128 SBUF
    # partitions, the stationary operand holds up to 128 columns, the moving one streams through.
    "pe_partitions": Constant(128, ARCH_V2 + "; " + NKI_ISA + ": contraction (partition) dimension <= 128"),
    "pe_stationary_columns": Constant(128, NKI_ISA + ": stationary free size <= 128"),
    # A matmul instruction moves at most 512 columns: one PSUM bank (2 KiB a partition) of FP32.
    "pe_moving_columns": Constant(512, NKI_ISA + ": moving free size <= 512; PSUM 16 KiB a partition in 8 banks"),
    # Cycles each matmul instruction costs beyond its columns (loading weights, draining the array).
    "pe_instruction_overhead_cycles": Constant(16, FIT),
    # The share of its peak the TensorEngine sustains on full tiles under the compiler's schedule
    # (waiting on DMA, on PSUM evacuation by the other engines, on semaphores).
    "pe_sustained_fraction": Constant(0.5, FIT),
    # Vector and Scalar engine work on activations: the share of their peak FP32 rate reached.
    "element_engine_fraction": Constant(0.25, FIT),
    # How much of the other engines' and DMA time hides under the longest one (1: perfectly).
    "engine_overlap": Constant(0.75, FIT),
    # DMA reaches this share of the HBM's peak bandwidth.
    "hbm_efficiency": Constant(0.7, "assumed: typical sustained HBM2e DMA efficiency; not fitted"),
    # A tensor larger than this share of SBUF cannot stay on chip beside the tiles being computed:
    # it is written to HBM and read back.
    "sbuf_usable_fraction": Constant(0.5, "assumed: the compiler double-buffers SBUF; not fitted"),
    # Runtime cost of one execution (nrt_execute, input and output binding, the core's start).
    "launch_seconds": Constant(20e-6, FIT + " (batch-1 rows)"),
    # One step of a ring collective: synchronisation between neighbours.
    "collective_step_seconds": Constant(10e-6, "assumed: NeuronLink / on-chip semaphore round trip; not fitted"),
    # The spread of predicted / published throughput over the calibration's held-out rows: a
    # figure's range is [estimate / high, estimate / low].
    "calibration_ratio_low": Constant(0.71, CALIBRATION),
    "calibration_ratio_high": Constant(2.05, CALIBRATION),
}


def constant(name: str) -> float:
    return CONSTANTS[name].value


def matmul_cycles(m: int, k: int, n: int, batch: int = 1, constants: dict | None = None) -> float:
    """TensorEngine cycles for `batch` products [m x k] @ [k x n]: the contraction padded to whole
    partition tiles, the stationary side to whole column tiles, the moving side streamed a column
    a cycle in instructions of at most 512 columns, each with a fixed overhead. The compiler picks
    which operand is stationary; the cheaper choice is taken."""
    c = constants or CONSTANTS
    partitions, columns = c["pe_partitions"].value, c["pe_stationary_columns"].value
    moving, overhead = c["pe_moving_columns"].value, c["pe_instruction_overhead_cycles"].value

    def oriented(stationary: int, streamed: int) -> float:
        tiles = math.ceil(k / partitions) * math.ceil(stationary / columns)
        return tiles * (streamed + overhead * math.ceil(streamed / moving))

    return batch * min(oriented(m, n), oriented(n, m))


def matmul_efficiency(m: int, k: int, n: int, batch: int = 1, constants: dict | None = None) -> float:
    """Useful multiply-adds over what the array could have done in those cycles."""
    c = constants or CONSTANTS
    per_cycle = c["pe_partitions"].value * c["pe_stationary_columns"].value
    return batch * m * k * n / (matmul_cycles(m, k, n, batch, c) * per_cycle)


def spilled_bytes(intermediates: list[dict], sbuf_bytes: float, constants: dict | None = None) -> float:
    """HBM traffic of activations too large to stay in SBUF: each written once and read once."""
    c = constants or CONSTANTS
    limit = sbuf_bytes * c["sbuf_usable_fraction"].value
    return sum(2.0 * i["bytes"] * i["count"] for i in intermediates if i["bytes"] > limit)


def serialised(parts: list[float], constants: dict | None = None) -> float:
    """Engines run concurrently but wait on one another: the longest, plus the part of the others
    that does not hide under it."""
    c = constants or CONSTANTS
    longest = max(parts, default=0.0)
    return longest + (1.0 - c["engine_overlap"].value) * (sum(parts) - longest)


def constants_json() -> dict:
    return {name: {"value": c.value, "source": c.source} for name, c in CONSTANTS.items()}


@dataclass
class Target:
    """An instance to estimate for, with the figures the model needs per logical core."""
    name: str
    price_per_hour: float | None
    core_generation: str
    logical_nc_config: int
    total_cores: int
    cores_per_chip: int  # logical
    physical_cores_per_chip: int
    figures: dict

    def share(self) -> float:
        """A logical core's share of its chip."""
        return self.logical_nc_config / self.physical_cores_per_chip

    def matmul_flops_per_second(self, type_class: str, auto_cast: str) -> float:
        g = self.figures
        if type_class in ("bf16", "fp16") or (type_class == "fp32" and auto_cast == "matmult"):
            tflops = g["matmul_tflops_bf16"]
        elif type_class == "fp8":
            tflops = g["matmul_tflops_fp8"]
        else:
            tflops = g["matmul_tflops_fp32"]
        return tflops * 1e12 * self.share()

    def peak_flops_per_second(self) -> float:
        return self.figures["matmul_tflops_bf16"] * 1e12 * self.share()


def _ring_bytes(kind: str, data_bytes: int, n: int) -> float:
    """Bytes each participant sends in a ring implementation of the collective."""
    if n <= 1:
        return 0.0
    if kind == "all-reduce":
        return 2.0 * (n - 1) / n * data_bytes
    if kind in ("all-gather", "reduce-scatter", "all-to-all"):
        return (n - 1) / n * data_bytes
    return float(data_bytes)  # collective-permute, collective-broadcast: one hop


def _ring_steps(kind: str, n: int) -> int:
    if n <= 1:
        return 0
    return 2 * (n - 1) if kind == "all-reduce" else (1 if kind in ("collective-permute",) else n - 1)


def collective_seconds(kind: str, data_bytes: float, n: int, target: Target) -> tuple[float, float]:
    """Time and bytes sent per participant of one collective over n cores. Within a chip the cores
    exchange through its HBM; a group spanning chips runs hierarchically: reduced inside each
    chip, then a ring across the chips over NeuronLink, each chip's link bandwidth shared by its
    cores' traffic only once (the in-chip step leaves one shard per core to send)."""
    g = target.figures
    sent = _ring_bytes(kind, data_bytes, n)
    step = constant("collective_step_seconds")
    if n <= target.cores_per_chip:
        return sent / (g["hbm_bytes_per_second"] * target.share()) + _ring_steps(kind, n) * step, sent
    chips = math.ceil(n / target.cores_per_chip)
    across = _ring_bytes(kind, data_bytes, chips) / g["link_bytes_per_second"]
    within = _ring_bytes(kind, data_bytes, target.cores_per_chip) / (g["hbm_bytes_per_second"] * target.share())
    return across + within + (_ring_steps(kind, chips) + _ring_steps(kind, target.cores_per_chip)) * step, sent


def tensor_engine_seconds(cost: dict, target: Target, auto_cast: str) -> float:
    """Each matrix product at the cycles its tiles take (matmul_cycles), at the
    clock its type's rate implies; counts from before matmul shapes were recorded fall back to
    FLOPs at the peak rate."""
    per_cycle = 2 * constant("pe_partitions") * constant("pe_stationary_columns")
    seconds = 0.0
    if cost.get("matmuls") is None:
        seconds = sum(f / target.matmul_flops_per_second(t, auto_cast) for t, f in cost["matmul_flops"].items())
    for m in cost.get("matmuls") or ():
        clock = target.matmul_flops_per_second(m["type"], auto_cast) / per_cycle
        seconds += m["count"] * matmul_cycles(m["m"], m["k"], m["n"], m["batch"]) / clock
    return seconds / constant("pe_sustained_fraction")


@dataclass
class ProgramEstimate:
    seconds: float
    bound: str
    parts: dict
    link_bytes: float
    matmul_flops: float


def estimate_program(p: Program, target: Target, auto_cast: str, collective_cores: int | None = None
                     ) -> ProgramEstimate:
    """One execution on one logical core. `collective_cores` widens the collectives that span
    every core of the run to that many cores (data parallel over the instance)."""
    cost = p.cost
    g = target.figures
    element_rate = 1e12 * target.logical_nc_config * constant("element_engine_fraction")
    tensor = tensor_engine_seconds(cost, target, auto_cast)
    vector = cost["vector_ops"] / (g["vector_tflops_per_core"] * element_rate)
    scalar = cost["transcendental_ops"] / (g["scalar_tflops_per_core"] * element_rate)
    spilled = spilled_bytes(cost.get("intermediates") or [], g["sbuf_bytes_per_core"] * target.logical_nc_config)
    hbm_rate = g["hbm_bytes_per_second"] * target.share() * constant("hbm_efficiency")
    # --auto-cast matmult: neuronx-cc casts FP32 matmul operands, the weights among them, to BF16,
    # so the weights are read at half their bytes.
    parameter_bytes = cost["parameter_bytes"] / (2 if auto_cast == "matmult" else 1)
    memory = (parameter_bytes + cost["output_bytes"] + spilled) / hbm_rate
    engines = serialised([tensor, vector, scalar, memory])
    participants = max(p.num_replicas * p.num_partitions, 1)
    collectives = 0.0
    link_bytes = 0.0
    for c in cost["collectives"]:
        n = c["group_size"] or participants
        if collective_cores and n == participants:
            n = collective_cores
        seconds, sent = collective_seconds(c["kind"], c["bytes"], n, target)
        collectives += seconds * c["count"]
        link_bytes += sent * c["count"]
    launch = constant("launch_seconds")
    compute = max(tensor, vector, scalar)
    parts = {"compute": compute, "memory": memory, "collectives": collectives, "launch": launch,
             "tensor_engine": tensor, "vector_engine": vector, "scalar_engine": scalar,
             "spilled_hbm_bytes": spilled, "engines": engines}
    seconds = engines + collectives + launch
    bound = max(("compute", "memory", "collectives", "launch"), key=parts.get)
    return ProgramEstimate(seconds, bound, parts, link_bytes, sum(cost["matmul_flops"].values()))
