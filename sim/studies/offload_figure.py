"""offload.png: hit rate and TTFT against the host memory given to the CPU offload tier."""

from __future__ import annotations

from matplotlib.figure import Figure

from sim.studies.offload import OffloadResult


def offload_figure(result: OffloadResult) -> Figure:
    """Top: hit rate (GPU plus CPU tier, and the CPU tier's part) with the goal; bottom: TTFT
    p50 and p99. The x axis is symmetric-log so the run without offloading (0) shows."""
    points = result.sorted_points()
    sizes = [point.size_gib for point in points]
    figure = Figure(figsize=(6.4, 6.0), layout="constrained")
    hit_axes, ttft_axes = figure.subplots(2, 1, sharex=True)
    hit_axes.plot(sizes, [_pct(p.hit_rate) for p in points], "o-", label="GPU + CPU tier")
    hit_axes.plot(sizes, [_pct(p.hit_rate_cpu) for p in points], "s--", label="from CPU tier")
    if result.goal_hit_rate is not None:
        hit_axes.axhline(
            100 * result.goal_hit_rate,
            color="tab:red",
            linestyle=":",
            linewidth=1,
            label=f"{100 * result.settings.target_fraction:g} % of plateau",
        )
    hit_axes.set_ylabel("token hit rate (%)")
    ttft_axes.plot(sizes, [_ms(p.ttft_p50_s) for p in points], "o-", label="TTFT p50")
    ttft_axes.plot(sizes, [_ms(p.ttft_p99_s) for p in points], "s-", label="TTFT p99")
    ttft_axes.set_ylabel("TTFT (ms)")
    ttft_axes.set_yscale("log")
    ttft_axes.set_xlabel("host memory for KV offload per replica (GiB)")
    smallest = min((s for s in sizes if s > 0), default=1.0)
    for axes in (hit_axes, ttft_axes):
        axes.set_xscale("symlog", linthresh=smallest)
        axes.set_xlim(left=0, right=1.3 * max(sizes))
        if result.answer_gib is not None:
            axes.axvline(result.answer_gib, color="tab:green", linestyle="--", linewidth=1)
        axes.grid(True, which="both", alpha=0.3)
        axes.legend(fontsize=8)
    unstable = result.unstable_points()
    if unstable:
        ttft_axes.plot(
            [p.size_gib for p in unstable],
            [_ms(p.ttft_p99_s) for p in unstable],
            "x",
            color="tab:red",
            markersize=10,
            label="no steady state (TTFT grows with run length)",
        )
        ttft_axes.legend(fontsize=8)
    answer = f"answer {result.answer_gib:.3g} GiB" if result.answer_gib is not None else "no answer"
    title = f"{result.scenario}: CPU KV offload size sweep ({answer})"
    if unstable:
        title += f"\nUNSTABLE: {len(unstable)} of {len(points)} runs reached no steady state"
    figure.suptitle(title, fontsize=10, color="tab:red" if unstable else "black")
    return figure


def _pct(value: float | None) -> float:
    return float("nan") if value is None else 100 * value


def _ms(value: float | None) -> float:
    return float("nan") if value is None else 1000 * value
