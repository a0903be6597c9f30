"""`pjrt-neuron estimate --plot roofline.png`: each program on the roofline of one logical
NeuronCore of the estimated instance (the `plot` extra, with matplotlib)."""

from __future__ import annotations


class PlotUnavailable(Exception):
    """matplotlib is missing: the message says what to install."""


def require_matplotlib() -> None:
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise PlotUnavailable("--plot needs matplotlib: pip install 'pjrt-neuron[plot]' "
                              "(or pip install matplotlib)") from None


def roofline_points(result: dict) -> list[dict]:
    """Per program that ran: operations per HBM byte and estimated operations per second."""
    points = []
    for p in result["programs"]:
        if not p["executions"] or p["seconds"] <= 0:
            continue
        operations = sum(p["matmul_flops"].values()) + p["vector_ops"] + p["transcendental_ops"]
        if operations <= 0 or p["hbm_bytes"] <= 0:
            continue  # no work or no traffic: nowhere on a roofline
        points.append({"program": p["program"], "intensity": operations / p["hbm_bytes"],
                       "ops_per_second": operations / p["seconds"], "bound": p["bound"],
                       "share_of_step": p["share_of_step"]})
    return points


def write_plot(path: str, result: dict, target) -> int:
    """Writes the PNG; returns how many programs it drew."""
    import matplotlib

    matplotlib.use("Agg")  # files only: no display here or on a build machine
    import matplotlib.pyplot as plt

    points = roofline_points(result)
    bandwidth = target.figures["hbm_bytes_per_second"] * target.share()
    peaks = {"BF16/FP16 matmul": target.figures["matmul_tflops_bf16"] * 1e12 * target.share(),
             "FP32 matmul": target.figures["matmul_tflops_fp32"] * 1e12 * target.share()}
    intensities = [p["intensity"] for p in points] or [1.0]
    low = min(min(intensities) / 4, 0.1)
    high = max(max(intensities) * 4, max(peaks.values()) / bandwidth * 4)
    figure, axes = plt.subplots(figsize=(8, 5.5))
    xs = [low * (high / low) ** (i / 200) for i in range(201)]
    for label, peak in peaks.items():
        axes.plot(xs, [min(peak, bandwidth * x) for x in xs], label=f"{label} roof ({peak / 1e12:.1f} TFLOPS)")
    colours = {"compute": "tab:green", "memory": "tab:red", "collectives": "tab:purple", "launch": "tab:gray"}
    for bound in colours:
        chosen = [p for p in points if p["bound"] == bound]
        if chosen:
            axes.scatter([p["intensity"] for p in chosen], [p["ops_per_second"] for p in chosen],
                         s=[30 + 300 * p["share_of_step"] for p in chosen], c=colours[bound],
                         label=f"{bound}-bound programs", alpha=0.8, edgecolors="black")
    for p in sorted(points, key=lambda p: -p["share_of_step"])[:8]:
        axes.annotate(p["program"][:32], (p["intensity"], p["ops_per_second"]), fontsize=7,
                      xytext=(4, 4), textcoords="offset points")
    axes.set_xscale("log")
    axes.set_yscale("log")
    axes.set_xlabel("operations per HBM byte")
    axes.set_ylabel("estimated operations per second (one logical NeuronCore)")
    axes.set_title(f"{target.name} ({target.core_generation}): estimated, not measured", fontsize=10)
    axes.grid(True, which="both", alpha=0.3)
    axes.legend(fontsize=7, loc="lower right")
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return len(points)
