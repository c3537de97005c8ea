"""Figures of the cost-model commands: calibration fit quality and validation per source."""

from __future__ import annotations

from matplotlib.axes import Axes
from matplotlib.figure import Figure

from sim.costmodel.calibrate import Calibration
from sim.costmodel.validation import (
    KERNEL_SOURCE,
    ErrorSummary,
    ValidationReport,
    is_as_shipped,
)

KIND_MARKERS = {"step": "o", "request": "s", "decode": "^"}


def calibration_figure(calibration: Calibration) -> Figure:
    """Predicted vs measured step times of a calibration, and the relative error per row."""
    figure = Figure(figsize=(11, 4.5))
    scatter_axes, error_axes = figure.subplots(1, 2)
    measured_ms = [m.time_s * 1e3 for m in calibration.measurements]
    predicted_ms = [p * 1e3 for p in calibration.fit.predicted_s]
    for kind, marker in KIND_MARKERS.items():
        rows = [index for index, m in enumerate(calibration.measurements) if m.kind == kind]
        if not rows:
            continue
        scatter_axes.scatter(
            [measured_ms[i] for i in rows],
            [predicted_ms[i] for i in rows],
            marker=marker,
            label=kind,
        )
        error_axes.scatter(
            [measured_ms[i] for i in rows],
            [100 * (predicted_ms[i] / measured_ms[i] - 1) for i in rows],
            marker=marker,
            label=kind,
        )
    identity_line(scatter_axes, measured_ms + predicted_ms)
    scatter_axes.set(
        xscale="log",
        yscale="log",
        xlabel="measured (ms)",
        ylabel="predicted (ms)",
        title=f"{calibration.profile.name}: RMS {calibration.fit.rms_rel_err:.1%}, "
        f"max {calibration.fit.max_rel_err:.1%}",
    )
    scatter_axes.legend()
    error_axes.axhline(0, color="black", linewidth=0.8)
    error_axes.set(
        xscale="log",
        xlabel="measured (ms)",
        ylabel="predicted / measured - 1 (%)",
        title="relative error per row",
    )
    figure.tight_layout()
    return figure


def validation_figure(report: ValidationReport) -> Figure:
    """Predicted vs reference per source (the kernel tables, the real sources as shipped), and
    MAPE per source for three model variants, one bar group per source."""
    summaries = report.summaries()
    figure = Figure(figsize=(16, 8 + 0.3 * len(summaries)), layout="constrained")
    # Two subfigures: the bars' long source names do not squeeze the scatter plots above.
    grid = figure.add_gridspec(2, 1, height_ratios=(7, 0.3 * len(summaries) + 1))
    top, bottom = figure.add_subfigure(grid[0]), figure.add_subfigure(grid[1])
    kernel_axes, end_to_end_axes = top.subplots(1, 2)
    for axes, sources, title in (
        (kernel_axes, [KERNEL_SOURCE], "kernel tables: model vs its own training data"),
        (
            end_to_end_axes,
            [s.name for s in summaries if is_as_shipped(s.name)],
            "real measurements, as shipped",
        ),
    ):
        _scatter_sources(axes, report, sources)
        axes.set(
            xscale="log",
            yscale="log",
            xlabel="measured or kernel reference (ms)",
            ylabel="predicted by the shipped profile (ms)",
            title=title,
        )
    kernel_axes.legend(fontsize=7, loc="upper left")
    # Many real sources: their legend goes beside the points, not over them.
    end_to_end_axes.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.02, 1.0))
    _mape_bars(bottom.subplots(), summaries)
    return figure


def _scatter_sources(axes: Axes, report: ValidationReport, sources: list[str]) -> None:
    values_ms = []
    for index, source in enumerate(sources):
        rows = [r for r in report.records if r.source == source]
        measured = [r.measured_s * 1e3 for r in rows]
        predicted = [r.predicted_s * 1e3 for r in rows]
        values_ms += measured + predicted
        axes.scatter(
            measured,
            predicted,
            s=8 if len(rows) > 20 else 40,
            alpha=0.6,
            marker="os^Dvp"[index % 6],
            label=source,
        )
    identity_line(axes, values_ms)


def _mape_bars(axes: Axes, summaries: list[ErrorSummary]) -> None:
    """Horizontal bars, the first source on top, each labelled with its MAPE."""
    positions = [len(summaries) - 1 - index for index in range(len(summaries))]
    variants: tuple[tuple[str, list[float | None]], ...] = (
        ("fitted form (shipped profile)", [s.mape for s in summaries]),
        ("kernel table layer-sum", [s.table_mape for s in summaries]),
        ("roofline-only profile", [s.roofline_mape for s in summaries]),
    )
    height = 0.27
    for offset, (label, values) in enumerate(variants):
        shown = [(p, v) for p, v in zip(positions, values, strict=True) if v is not None]
        bars = axes.barh(
            [p - (offset - 1) * height for p, _ in shown],
            [100 * v for _, v in shown],
            height=height,
            label=label,
        )
        axes.bar_label(bars, labels=[f"{100 * v:.1f}" for _, v in shown], fontsize=7, padding=2)
    highest = max(100 * v for _, values in variants for v in values if v is not None)
    axes.set_xlim(0, 1.1 * highest)
    axes.axvline(10, color="grey", linestyle="--", linewidth=0.8)
    axes.set_yticks(positions)
    axes.set_yticklabels([s.name for s in summaries], fontsize=8)
    axes.set_ylim(-0.6, len(summaries) - 0.4)
    axes.set(xlabel="MAPE (%)", title="MAPE per source (dashed: 10 %)")
    axes.legend(fontsize=8, loc="lower right")


def identity_line(axes: Axes, values_ms: list[float]) -> None:
    """y = x with dashed ±10 % lines over the plotted range."""
    low, high = min(values_ms) * 0.8, max(values_ms) * 1.25
    axes.plot([low, high], [low, high], color="black", linewidth=0.8, label="predicted = measured")
    axes.plot([low, high], [1.1 * low, 1.1 * high], color="grey", linestyle="--", linewidth=0.6)
    axes.plot([low, high], [0.9 * low, 0.9 * high], color="grey", linestyle="--", linewidth=0.6)
