"""Figure builders: one color per variant across figures, and notes where data are absent."""

from __future__ import annotations

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.colors import to_hex

from sim.report.figures import (
    BlockSizeLine,
    PrefillTokens,
    _figure,
    _legend_below,
    evictions_figure,
    hit_rate_vs_block_size_figure,
    kv_usage_figure,
    prefill_saved_figure,
    ttft_cdf_figure,
    variant_styles,
)
from sim.report.series import BLOCK_AGE_EDGES_S, TTFT_EDGES_S, StepBins

LABELS = {"engine.block_size=16": "block_size=16", "engine.block_size=32": "block_size=32"}


def step_bins(num_evictions: float) -> StepBins:
    """Four 1 s bins with 100 queries, 50 hits, `num_evictions` and usage 0.5 in each."""
    bins = StepBins.empty(np.arange(5.0))
    bins.num_queries[:] = 100
    bins.num_hits[:] = 50
    bins.num_evictions[:] = num_evictions
    bins.usage_time_s[:] = 0.25
    bins.busy_s[:] = 0.5
    bins.exposure_s[:] = 1.0
    return bins


def line_colors(axes) -> dict[str, str]:
    """Color of each labelled line (guide lines such as p50/p99 carry no label)."""
    return {
        line.get_label(): to_hex(line.get_color())
        for line in axes.get_lines()
        if not line.get_label().startswith("_")
    }


def test_styles_follow_tab10_then_stay_distinct():
    """Two variants get tab10's blue and orange; 25 variants still get 25 distinct colors."""
    styles = variant_styles(LABELS)
    assert [style.color for style in styles.values()] == ["#1f77b4", "#ff7f0e"]
    assert [style.label for style in styles.values()] == ["block_size=16", "block_size=32"]
    many = variant_styles({f"v{i}": f"v{i}" for i in range(25)})
    assert len({style.color for style in many.values()}) == 25


def test_each_variant_keeps_its_color_across_figures():
    """The TTFT, KV usage and eviction-rate lines of a variant all use its style color."""
    styles = variant_styles(LABELS)
    counts = np.zeros(len(TTFT_EDGES_S) - 1, dtype=np.int64)
    counts[300:310] = 5
    ttft = ttft_cdf_figure(dict.fromkeys(LABELS, counts), styles)
    bins = {"engine.block_size=16": step_bins(4.0), "engine.block_size=32": step_bins(2.0)}
    usage = kv_usage_figure(bins, styles, warmup_s=1.0)
    evictions = evictions_figure(bins, {}, 2, styles, warmup_s=0.0)
    assert line_colors(ttft.axes[0]) == {
        "block_size=16 (n=50)": "#1f77b4",
        "block_size=32 (n=50)": "#ff7f0e",
    }
    variant_colors = {"block_size=16": "#1f77b4", "block_size=32": "#ff7f0e"}
    assert line_colors(usage.axes[0]) == variant_colors | {
        "dashed: in use + cached but free": "#4c4c4c"
    }
    dashed = [line for line in usage.axes[0].get_lines() if line.get_linestyle() == "--"]
    assert [line.get_color() for line in dashed[:2]] == ["#1f77b4", "#ff7f0e"]
    assert line_colors(evictions.axes[0]) == variant_colors
    # Usage 0.25 / 0.5 s of step time = 50 %; evictions 4 per 1 s bin = 4 per second.
    assert np.allclose(usage.axes[0].get_lines()[0].get_ydata(), 50.0)
    assert np.allclose(evictions.axes[0].get_lines()[0].get_ydata(), 4.0)


def test_eviction_ages_absent_or_empty_get_a_note():
    """No events files at all, or events without evictions: the right panel says which."""
    styles = variant_styles(LABELS)
    bins = {variant: step_bins(0.0) for variant in LABELS}
    without_events = evictions_figure(bins, {}, 2, styles, warmup_s=0.0)
    age_axes = without_events.axes[1]
    assert "2 run(s) without events.parquet left out" in age_axes.get_title()
    assert [text.get_text() for text in age_axes.texts] == [
        "no events.parquet in any run (outputs.events: false)"
    ]
    no_ages = dict.fromkeys(LABELS, np.zeros(len(BLOCK_AGE_EDGES_S) - 1, dtype=np.int64))
    no_evictions = evictions_figure(bins, no_ages, 0, styles, warmup_s=0.0)
    assert [text.get_text() for text in no_evictions.axes[1].texts] == [
        "no evictions after warm-up"
    ]
    assert "no evictions: the cache never had to free a cached block" in [
        text.get_text() for text in no_evictions.axes[0].texts
    ]


def test_block_size_axis_is_labelled_with_the_sizes():
    """Ticks sit at the swept block sizes, labelled as plain numbers; hit rates in percent, each
    tick with the decimals it needs (87.5 %, not a rounded 88 %); the unstable point at 32 is
    drawn hollow, and the legend says what hollow means."""
    line = BlockSizeLine(
        "layout=chat",
        (16, 32, 64),
        (0.85, 0.875, 0.9),
        (0.01, float("nan"), 0.02),
        (False, True, False),
    )
    figure = hit_rate_vs_block_size_figure([line])
    figure.canvas.draw()
    axes = figure.axes[0]
    assert [label.get_text() for label in axes.get_xticklabels()] == ["16", "32", "64"]
    assert list(axes.get_lines()[0].get_ydata()) == [85.0, 87.5, 90.0]
    label_of = axes.yaxis.get_major_formatter()
    assert [label_of(value, 0) for value in (85.0, 87.5, 90.0)] == ["85%", "87.5%", "90%"]
    hollow = [
        plotted
        for plotted in axes.get_lines()
        if plotted.get_markerfacecolor() == "white" and len(plotted.get_xdata())
    ]
    assert [list(plotted.get_xdata()) for plotted in hollow] == [[32]]
    legend_texts = [text.get_text() for text in figure.legends[0].get_texts()]
    assert legend_texts == [
        "hollow: some run reached no steady state (UNSTABLE)",
        "layout=chat",
    ]


def test_prefill_bars_show_the_saved_share():
    """750 saved + 250 computed tokens: a 75.0 % saved label; no prompt tokens says so."""
    styles = variant_styles(LABELS)
    figure = prefill_saved_figure(
        [
            PrefillTokens("engine.block_size=16", 750.0, 250.0),
            PrefillTokens("engine.block_size=32", 0.0, 0.0),
        ],
        styles,
    )
    assert [text.get_text() for text in figure.axes[0].texts] == [
        "75.0% saved",
        "no prompt tokens",
    ]


def _legend_extent(labels: list[str]) -> tuple[int, float, float, float]:
    """A 8.5-inch figure with one line per label and the legend below: (rows of the legend,
    its left and right edge, the figure's width), in pixels once drawn."""
    figure = _figure(width=8.5, height=5.0)
    axes = figure.subplots()
    for label in labels:
        axes.plot([0, 1], [0, 1], label=label)
    _legend_below(figure, axes)
    FigureCanvasAgg(figure).draw()
    legend = figure.legends[0]
    extent = legend.get_window_extent()
    rows = {round(text.get_window_extent().y0) for text in legend.get_texts()}
    return len(rows), extent.x0, extent.x1, figure.bbox.width


def test_legend_labels_too_long_for_two_columns_take_one_and_fit() -> None:
    """Two 52-character variant labels (UNSTABLE and n= included) overflowed both edges of an
    8.5-inch figure side by side; short ones still share a row."""
    long_labels = [
        "block_size=16, max_model_len=32768 (UNSTABLE) (n=414)",
        "block_size=64, max_model_len=32768 (UNSTABLE) (n=414)",
    ]
    rows, left, right, width = _legend_extent(long_labels)
    assert rows == 2  # one column
    assert left >= 0 and right <= width
    assert _legend_extent(["block_size=16 (n=414)", "block_size=64 (n=414)"])[0] == 1
