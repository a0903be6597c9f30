"""How a NeuronCore spends time on one program: the estimate's model and its constants.

The plugin counts each program's work from its HLO (hlo/cost_analysis.*); the per-generation
hardware figures (TensorEngine, Vector and Scalar engine rates, HBM bandwidth, SBUF size, chip
links) come from the plugin's table (core/instance.h, AWS's architecture pages). Everything else
the model assumes or fitted is in CONSTANTS below, each with its source, and nowhere else.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


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
