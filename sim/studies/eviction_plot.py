"""Bar charts of an eviction report: hit rate and prefill tokens per policy."""

from __future__ import annotations

from pathlib import Path

from matplotlib.figure import Figure
from matplotlib.ticker import StrMethodFormatter

from sim.report.plotting import save_figure
from sim.studies.eviction import EvictionReport

_BASELINE_COLOR = "#4c72b0"
_POLICY_COLOR = "#8c8c8c"
_OPTIMUM_COLOR = "#55a868"


def plot_eviction_report(report: EvictionReport, path: Path) -> None:
    """Write the eviction figure as a PNG at `path`."""
    save_figure(eviction_figure(report), path)


def eviction_figure(report: EvictionReport) -> Figure:
    """Hit rate per policy (left) and prefill tokens computed (right)."""
    names = [row.name for row in report.rows]
    colors = [
        _BASELINE_COLOR
        if name == report.baseline
        else _OPTIMUM_COLOR
        if name == "belady"
        else _POLICY_COLOR
        for name in names
    ]
    positions = range(len(names))
    figure = Figure(figsize=(10, 4.2))
    hit_axes, prefill_axes = figure.subplots(1, 2)

    hit_rates = [100.0 * row.hit_rate for row in report.rows]
    bars = hit_axes.bar(positions, hit_rates, color=colors)
    hit_axes.bar_label(
        bars,
        labels=[f"{row.hit_rate:.1%}\n({row.hit_rate_gap_points:+.1f})" for row in report.rows],
        fontsize=8,
    )
    hit_axes.set_ylabel("prefix-cache hit rate (% of prompt tokens)")
    hit_axes.set_ylim(0, max(max(hit_rates, default=0.0) * 1.2, 1.0))
    hit_axes.set_title("Hit rate (gap vs baseline, points)", fontsize=10)

    prefill = [row.prefill_tokens_computed for row in report.rows]
    bars = prefill_axes.bar(positions, prefill, color=colors)
    prefill_axes.bar_label(
        bars,
        labels=[
            f"{row.prefill_tokens_computed:,}\n({row.prefill_tokens_gap:+,})" for row in report.rows
        ],
        fontsize=8,
    )
    prefill_axes.set_ylabel("prefill tokens computed")
    prefill_axes.yaxis.set_major_formatter(StrMethodFormatter("{x:,.0f}"))
    prefill_axes.set_ylim(0, max(max(prefill, default=0) * 1.2, 1))
    prefill_axes.set_title("Prefill tokens (gap vs baseline)", fontsize=10)

    for axes in (hit_axes, prefill_axes):
        axes.set_xticks(list(positions), names, rotation=15)
        axes.grid(axis="y", alpha=0.3)
    figure.suptitle(
        f"Eviction policies: {report.num_requests} requests ({report.num_skipped} skipped), "
        f"{report.num_gpu_blocks} GPU blocks x {report.block_size} tokens; "
        f"baseline {report.baseline}",
        fontsize=10,
    )
    figure.tight_layout()
    return figure
