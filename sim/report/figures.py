"""The report's figures, drawn from per-variant aggregates with one color per variant throughout."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from matplotlib import colormaps
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.patches import Patch
from matplotlib.ticker import (
    EngFormatter,
    FixedLocator,
    FuncFormatter,
    LogLocator,
    NullFormatter,
    NullLocator,
)

from sim.report.runs import UNSTABLE_MARK
from sim.report.series import BLOCK_AGE_EDGES_S, TTFT_EDGES_S, StepBins

LEGEND_COLUMNS = 2
LEGEND_ROW_HEIGHT_IN = 0.22
# Inches a legend label's character takes at the legend's 9-point font (a generous average),
# and what an entry's line sample and gaps take besides.
LEGEND_CHAR_WIDTH_IN = 0.075
LEGEND_ENTRY_EXTRA_IN = 0.9
WARMUP_COLOR = "0.88"
NOTE_STYLE: dict[str, Any] = {
    "ha": "center",
    "va": "center",
    "color": "0.35",
    "fontsize": 10,
    "wrap": True,
}


@dataclass(slots=True, frozen=True)
class VariantStyle:
    """How a variant appears in every figure."""

    label: str
    color: str


@dataclass(slots=True, frozen=True)
class BlockSizeLine:
    """Hit rate per block size for one group of the other swept settings; NaN half-width: n=1."""

    label: str
    block_sizes: tuple[int, ...]
    mean_hit_rates: tuple[float, ...]
    half_widths: tuple[float, ...]
    unstable: tuple[bool, ...]  # some run of the point reached no steady state


@dataclass(slots=True, frozen=True)
class PrefillTokens:
    """A variant's prefill tokens per run (mean over seeds): served from cache and computed."""

    variant: str
    num_saved: float
    num_computed: float


def _palette(name: str) -> list[tuple[float, float, float, float]]:
    """The colors of one of matplotlib's listed (qualitative) colormaps, in order."""
    colormap = colormaps[name]
    return [colormap(index) for index in range(colormap.N)]


def variant_styles(labels: Mapping[str, str]) -> dict[str, VariantStyle]:
    """A distinct color per variant, in the given order: tab10, tab20, then viridis."""
    num_variants = len(labels)
    if num_variants <= 10:
        colors = _palette("tab10")[:num_variants]
    elif num_variants <= 20:
        colors = _palette("tab20")[:num_variants]
    else:
        colors = [colormaps["viridis"](i / (num_variants - 1)) for i in range(num_variants)]
    return {
        variant: VariantStyle(label, _hex(color))
        for (variant, label), color in zip(labels.items(), colors, strict=True)
    }


def _hex(color: tuple[float, ...]) -> str:
    return "#" + "".join(f"{round(255 * channel):02x}" for channel in color[:3])


def _figure(*, width: float, height: float) -> Figure:
    """A figure of `width` x `height` inches; a legend below its axes adds its own rows."""
    return Figure(figsize=(width, height), layout="constrained")


def _legend_below(figure: Figure, axes: Axes) -> None:
    """One legend under the axes, so it never covers data: two columns where the labels fit the
    figure's width side by side, else one; the figure grows by the legend's rows."""
    handles, labels = axes.get_legend_handles_labels()
    width_in, height_in = figure.get_size_inches()
    longest_in = max(len(label) for label in labels) * LEGEND_CHAR_WIDTH_IN
    fits = LEGEND_COLUMNS * (longest_in + LEGEND_ENTRY_EXTRA_IN) <= width_in
    num_columns = min(LEGEND_COLUMNS if fits else 1, len(labels))
    num_rows = math.ceil(len(labels) / num_columns)
    figure.set_size_inches(width_in, height_in + LEGEND_ROW_HEIGHT_IN * num_rows)
    figure.legend(
        handles,
        labels,
        loc="outside lower center",
        ncols=num_columns,
        fontsize=9,
        frameon=False,
    )


def _shade_warmup(axes: Axes, warmup_s: float) -> None:
    if warmup_s > 0:
        axes.axvspan(0.0, warmup_s, color=WARMUP_COLOR, label="warm-up (not in tables)")


def _note(axes: Axes, text: str) -> None:
    axes.text(0.5, 0.5, text, transform=axes.transAxes, **NOTE_STYLE)


def _seconds_label(value_s: float, _position: int) -> str:
    if value_s < 1.0:
        return f"{value_s * 1e3:g} ms"
    return f"{value_s:,.0f} s" if value_s == round(value_s) else f"{value_s:g} s"


def _log_seconds_axis(axes: Axes, low_s: float, high_s: float) -> None:
    axes.set_xscale("log")
    # 1-2-5 ticks on a narrow range; one per decade once labels would crowd.
    subs = (1.0, 2.0, 5.0) if math.log10(high_s / low_s) <= 3.0 else (1.0,)
    axes.xaxis.set_major_locator(LogLocator(base=10.0, subs=subs))
    axes.xaxis.set_major_formatter(FuncFormatter(_seconds_label))
    axes.xaxis.set_minor_locator(LogLocator(base=10.0, subs="auto"))
    axes.xaxis.set_minor_formatter(NullFormatter())


def ttft_cdf_figure(
    counts_by_variant: Mapping[str, np.ndarray], styles: Mapping[str, VariantStyle]
) -> Figure:
    """Empirical TTFT CDF per variant on a log time axis, from counts over TTFT_EDGES_S."""
    figure = _figure(width=8.5, height=5.0)
    axes = figure.subplots()
    axes.set(
        ylim=(0.0, 1.02),
        xlabel="time to first token (log scale)",
        ylabel="fraction of requests with TTFT ≤ x",
        title="TTFT CDF per variant (requests after warm-up, seeds pooled)",
    )
    used = np.flatnonzero(sum(counts_by_variant.values()))
    if len(used) == 0:
        _note(axes, "no requests finished after warm-up")
        return figure
    for variant, counts in counts_by_variant.items():
        nonzero = np.flatnonzero(counts)
        if len(nonzero) == 0:
            continue
        first, last = nonzero[0], nonzero[-1]
        cumulative = np.cumsum(counts[first : last + 1]) / counts.sum()
        style = styles[variant]
        axes.plot(
            TTFT_EDGES_S[first : last + 2],
            np.concatenate(([0.0], cumulative)),
            color=style.color,
            label=f"{style.label} (n={counts.sum():,})",
            linewidth=1.6,
        )
    for fraction, name, offset_points in ((0.5, "p50", 3), (0.99, "p99", -10)):
        axes.axhline(fraction, color="0.6", linestyle=":", linewidth=0.9)
        axes.annotate(
            name,
            (0.0, fraction),
            xycoords=("axes fraction", "data"),
            xytext=(3, offset_points),
            textcoords="offset points",
            fontsize=8,
            color="0.4",
        )
    _log_seconds_axis(axes, TTFT_EDGES_S[used[0]], TTFT_EDGES_S[used[-1] + 1])
    axes.grid(True, which="major", color="0.92")
    _legend_below(figure, axes)
    return figure


def _percent_axis(axes: Axes, per_unit: float = 1.0) -> None:
    """Label the y ticks as percentages (the values times `per_unit`) with the decimals each
    needs: a tick at 87.5 reads 87.5 %, not a rounded 88 %."""
    axes.yaxis.set_major_formatter(
        FuncFormatter(lambda value, _position: f"{round(value * per_unit, 6):g}%")
    )


def hit_rate_vs_block_size_figure(lines: Sequence[BlockSizeLine]) -> Figure:
    """Mean hit rate with 95 % CI error bars per block size; one line per other-settings group.
    A point some of whose runs reached no steady state is drawn hollow, and the legend says so."""
    any_unstable = any(any(line.unstable) for line in lines)
    with_legend = len(lines) > 1 or bool(lines[0].label) or any_unstable
    figure = _figure(width=8.0, height=5.0)
    axes = figure.subplots()
    colors = _palette("tab10")
    block_sizes = sorted({size for line in lines for size in line.block_sizes})
    for index, line in enumerate(lines):
        color = colors[index % len(colors)]
        percents = [100 * rate for rate in line.mean_hit_rates]
        axes.errorbar(
            line.block_sizes,
            percents,
            yerr=[100 * np.nan_to_num(width) for width in line.half_widths],
            color=color,
            marker="o",
            capsize=4,
            linewidth=1.6,
            label=line.label or "mean hit rate",
        )
        hollow = [i for i, unstable in enumerate(line.unstable) if unstable]
        axes.plot(
            [line.block_sizes[i] for i in hollow],
            [percents[i] for i in hollow],
            linestyle="none",
            marker="o",
            markersize=7,
            markerfacecolor="white",
            markeredgecolor=color,
            zorder=3,
        )
    if any_unstable:
        axes.plot(
            [],
            [],
            linestyle="none",
            marker="o",
            markerfacecolor="white",
            markeredgecolor="0.3",
            label=f"hollow: some run reached no steady state {UNSTABLE_MARK}",
        )
    axes.set_xscale("log", base=2)
    axes.xaxis.set_major_locator(FixedLocator(block_sizes))
    axes.xaxis.set_minor_locator(NullLocator())
    axes.set_xticklabels([str(size) for size in block_sizes])
    _percent_axis(axes)
    axes.set(
        xlabel="block size (tokens per KV block, log scale)",
        ylabel="prefix-cache hit rate (% of prompt tokens)",
        title="Hit rate vs block size (mean ± 95 % CI over seeds)",
    )
    axes.grid(True, color="0.92")
    if with_legend:
        _legend_below(figure, axes)
    return figure


def _time_series_figure(
    series_by_variant: Mapping[str, np.ndarray],
    centers_s: np.ndarray,
    styles: Mapping[str, VariantStyle],
    warmup_s: float,
) -> tuple[Figure, Axes]:
    figure = _figure(width=9.0, height=4.8)
    axes = figure.subplots()
    _plot_time_series(axes, series_by_variant, centers_s, styles, warmup_s)
    _legend_below(figure, axes)
    return figure, axes


def _plot_time_series(
    axes: Axes,
    series_by_variant: Mapping[str, np.ndarray],
    centers_s: np.ndarray,
    styles: Mapping[str, VariantStyle],
    warmup_s: float,
) -> None:
    _shade_warmup(axes, warmup_s)
    for variant, values in series_by_variant.items():
        style = styles[variant]
        # Small markers keep a bin whose neighbours are empty (NaN) visible.
        axes.plot(
            centers_s,
            values,
            color=style.color,
            label=style.label,
            linewidth=1.4,
            marker=".",
            markersize=3,
        )
    axes.set_xlim(0.0, centers_s[-1] + (centers_s[-1] - centers_s[-2] if len(centers_s) > 1 else 1))
    axes.set_xlabel("simulated time (s)")
    axes.grid(True, color="0.92")


def hit_rate_over_time_figure(
    bins_by_variant: Mapping[str, StepBins], styles: Mapping[str, VariantStyle], warmup_s: float
) -> Figure:
    """Token hit rate per time bin (hits / queries, seeds pooled), one line per variant."""
    centers_s = next(iter(bins_by_variant.values())).centers_s()
    width_s = _bin_width_s(bins_by_variant)
    figure, axes = _time_series_figure(
        {variant: 100 * bins.hit_rate() for variant, bins in bins_by_variant.items()},
        centers_s,
        styles,
        warmup_s,
    )
    axes.set_ylim(-2.0, 102.0)  # a line at 0 % stays clear of the axis
    _percent_axis(axes)
    axes.set(
        ylabel="hit rate (% of prompt tokens looked up)",
        title=f"Prefix-cache hit rate over time ({width_s:g} s bins, seeds pooled)",
    )
    return figure


def kv_usage_figure(
    bins_by_variant: Mapping[str, StepBins], styles: Mapping[str, VariantStyle], warmup_s: float
) -> Figure:
    """Per variant, KV blocks in use (vLLM's usage, solid) and in use or holding a cached prefix
    while free (dashed, same color): vLLM counts the latter as free, yet they are the cache."""
    centers_s = next(iter(bins_by_variant.values())).centers_s()
    width_s = _bin_width_s(bins_by_variant)
    figure = _figure(width=9.0, height=4.8)
    axes = figure.subplots()
    _plot_time_series(
        axes,
        {variant: 100 * bins.mean_usage() for variant, bins in bins_by_variant.items()},
        centers_s,
        styles,
        warmup_s,
    )
    for variant, bins in bins_by_variant.items():
        axes.plot(
            centers_s,
            100 * (bins.mean_usage() + bins.mean_cached_free()),
            color=styles[variant].color,
            linestyle="--",
            linewidth=1.2,
        )
    axes.plot([], [], color="0.3", linestyle="--", label="dashed: in use + cached but free")
    _legend_below(figure, axes)
    axes.set_ylim(0.0, 102.0)
    _percent_axis(axes)
    axes.set(
        ylabel="% of KV blocks",
        title=f"KV blocks in use (solid, vLLM's kv_cache_usage_perc) and holding cached "
        f"prefixes (dashed)\n({width_s:g} s bins, step-time mean, seeds pooled)",
    )
    return figure


def _bin_width_s(bins_by_variant: Mapping[str, StepBins]) -> float:
    edges_s = next(iter(bins_by_variant.values())).edges_s
    return float(edges_s[1] - edges_s[0])


def evictions_figure(
    bins_by_variant: Mapping[str, StepBins],
    age_counts_by_variant: Mapping[str, np.ndarray],
    num_runs_without_events: int,
    styles: Mapping[str, VariantStyle],
    warmup_s: float,
) -> Figure:
    """Evictions per second over time, and the block age at eviction (from events.parquet)."""
    figure = _figure(width=14.0, height=5.0)
    rate_axes, age_axes = figure.subplots(1, 2)
    centers_s = next(iter(bins_by_variant.values())).centers_s()
    width_s = _bin_width_s(bins_by_variant)
    _plot_time_series(
        rate_axes,
        {variant: bins.evictions_per_s() for variant, bins in bins_by_variant.items()},
        centers_s,
        styles,
        warmup_s,
    )
    rate_axes.set_ylim(bottom=0.0)
    rate_axes.set(
        ylabel="evictions per second (mean over seeds)",
        title=f"Evictions over time ({width_s:g} s bins)",
    )
    total_evictions = sum(bins.num_evictions.sum() for bins in bins_by_variant.values())
    if total_evictions == 0:
        _note(rate_axes, "no evictions: the cache never had to free a cached block")
    _plot_eviction_ages(age_axes, age_counts_by_variant, num_runs_without_events, styles)
    _legend_below(figure, rate_axes)
    return figure


def _plot_eviction_ages(
    axes: Axes,
    age_counts_by_variant: Mapping[str, np.ndarray],
    num_runs_without_events: int,
    styles: Mapping[str, VariantStyle],
) -> None:
    title = "Block age at eviction (time since stored, after warm-up)"
    if num_runs_without_events:
        title += f"\n{num_runs_without_events} run(s) without events.parquet left out"
    axes.set(title=title, xlabel="age since stored (log scale)")
    axes.set_ylabel("share of the variant's evictions per bin")
    drawn = {
        variant: counts for variant, counts in age_counts_by_variant.items() if counts.sum() > 0
    }
    if not drawn:
        _log_seconds_axis(axes, BLOCK_AGE_EDGES_S[0], BLOCK_AGE_EDGES_S[-1])
        axes.set_xlim(BLOCK_AGE_EDGES_S[0], BLOCK_AGE_EDGES_S[-1])
        _note(
            axes,
            "no events.parquet in any run (outputs.events: false)"
            if not age_counts_by_variant
            else "no evictions after warm-up",
        )
        return
    used = np.flatnonzero(sum(drawn.values()))
    low, high = used[0], used[-1] + 1
    for variant, counts in drawn.items():
        style = styles[variant]
        axes.stairs(
            counts[low:high] / counts.sum(),
            BLOCK_AGE_EDGES_S[low : high + 1],
            color=style.color,
            linewidth=1.4,
            label=style.label,
        )
    _log_seconds_axis(axes, BLOCK_AGE_EDGES_S[low], BLOCK_AGE_EDGES_S[high])
    axes.set_ylim(bottom=0.0)
    _percent_axis(axes, per_unit=100.0)
    axes.grid(True, color="0.92")


def prefill_saved_figure(
    tokens: Sequence[PrefillTokens], styles: Mapping[str, VariantStyle]
) -> Figure:
    """Per variant, prompt tokens served from the prefix cache vs computed (stacked bars)."""
    height = max(3.0, 0.45 * len(tokens) + 1.8)
    figure = Figure(figsize=(10.0, height), layout="constrained")
    axes = figure.subplots()
    positions = np.arange(len(tokens))
    for position, entry in zip(positions, tokens, strict=True):
        color = styles[entry.variant].color
        axes.barh(position, entry.num_saved, color=color, height=0.6)
        axes.barh(
            position,
            entry.num_computed,
            left=entry.num_saved,
            height=0.6,
            color=color,
            alpha=0.3,
            hatch="//",
            edgecolor=color,
        )
        total = entry.num_saved + entry.num_computed
        share = f"{entry.num_saved / total:.1%} saved" if total > 0 else "no prompt tokens"
        axes.annotate(
            share,
            (total, position),
            xytext=(4, 0),
            textcoords="offset points",
            va="center",
            fontsize=8,
        )
    axes.set_yticks(positions, [styles[entry.variant].label for entry in tokens], fontsize=8)
    axes.invert_yaxis()
    axes.xaxis.set_major_formatter(EngFormatter())
    axes.set_xlim(0.0, 1.18 * max((e.num_saved + e.num_computed for e in tokens), default=1.0))
    axes.set(
        xlabel="prefill tokens per run (mean over seeds, after warm-up)",
        title="Prefill tokens saved by the prefix cache vs computed",
    )
    figure.legend(
        handles=[
            Patch(facecolor="0.4", label="saved (prefix-cache hit)"),
            Patch(facecolor="0.4", alpha=0.3, hatch="//", edgecolor="0.4", label="computed"),
        ],
        fontsize=8,
        loc="outside lower center",
        ncols=2,
    )
    axes.set_axisbelow(True)
    axes.grid(True, axis="x", color="0.92")
    return figure
