"""Figures of the cost-model commands: calibration fit quality and validation per source."""

from __future__ import annotations

from matplotlib.axes import Axes
from matplotlib.figure import Figure

from sim.costmodel.calibrate import Calibration
from sim.costmodel.validation import KERNEL_SOURCE, ValidationReport, is_as_shipped

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
    """Predicted vs reference per source, and MAPE per source for three model variants."""
    figure = Figure(figsize=(18, 7.5))
    kernel_axes, end_to_end_axes, bar_axes = figure.subplots(1, 3)
    summaries = report.summaries()
    for axes, sources, title in (
        (kernel_axes, [KERNEL_SOURCE], "kernel tables: model vs its own training data"),
        (
            end_to_end_axes,
            [s.name for s in summaries if is_as_shipped(s.name)],
            "real measurements, as shipped",
        ),
    ):
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
        axes.set(
            xscale="log",
            yscale="log",
            xlabel="measured or kernel reference (ms)",
            ylabel="predicted by the shipped profile (ms)",
            title=title,
        )
        axes.legend(fontsize=7, markerscale=1.2, loc="upper left")
    positions = range(len(summaries))
    variants: tuple[tuple[str, list[float | None]], ...] = (
        ("fitted form (shipped profile)", [s.mape for s in summaries]),
        ("kernel table layer-sum", [s.table_mape for s in summaries]),
        ("roofline-only profile", [s.roofline_mape for s in summaries]),
    )
    width = 0.27
    for offset, (label, values) in enumerate(variants):
        bars = bar_axes.bar(
            [p + (offset - 1) * width for p in positions],
            [100 * v if v is not None else 0 for v in values],
            width=width,
            label=label,
        )
        bar_axes.bar_label(
            bars, labels=[f"{100 * v:.0f}" if v is not None else "" for v in values], fontsize=7
        )
    highest = max(100 * v for _, values in variants for v in values if v is not None)
    bar_axes.set_ylim(0, 1.3 * highest)
    bar_axes.axhline(10, color="grey", linestyle="--", linewidth=0.8)
    bar_axes.set_xticks(list(positions))
    bar_axes.set_xticklabels([s.name for s in summaries], rotation=60, ha="right", fontsize=7)
    bar_axes.set(ylabel="MAPE (%)", title="MAPE per source (dashed: 10 %)")
    bar_axes.legend(fontsize=8)
    figure.tight_layout()
    return figure


def identity_line(axes: Axes, values_ms: list[float]) -> None:
    """y = x with dashed ±10 % lines over the plotted range."""
    low, high = min(values_ms) * 0.8, max(values_ms) * 1.25
    axes.plot([low, high], [low, high], color="black", linewidth=0.8, label="predicted = measured")
    axes.plot([low, high], [1.1 * low, 1.1 * high], color="grey", linestyle="--", linewidth=0.6)
    axes.plot([low, high], [0.9 * low, 0.9 * high], color="grey", linestyle="--", linewidth=0.6)
