"""The side-channel study's files: a markdown report, a JSON document and TTFT histograms (PNG)."""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from sim.studies.side_channel import CONFIDENCE, SettingResult, SideChannelReport

if TYPE_CHECKING:
    from matplotlib.figure import Figure

JSON_DECIMALS = 9
NUM_BINS = 60
SETTING_LABELS = {
    "no_salt": "no cache_salt",
    "per_tenant_salt": "a cache_salt per tenant",
    "shared_salt": "one cache_salt shared by all tenants",
}


def _median_ms(values: list[float]) -> float:
    return statistics.median(values) * 1e3


def side_channel_markdown(report: SideChannelReport) -> str:
    """One row per salt setting: accuracy with its interval, the rates and the TTFT medians."""
    lines = [
        f"# Prefix-cache timing side channel: {report.name}",
        "",
        f"{report.num_trials} trials x {report.num_probes_per_trial} probes per setting. "
        "Chance is the share of the larger class (0.5 when half the candidates were sent). "
        f"Intervals: {CONFIDENCE:.0%} Student's t over trials.",
        "",
        *([f"**{warning}**", ""] if (warning := report.overload_warning()) else []),
        "| setting | accuracy | 95 % interval | true-positive rate | false-positive rate "
        "| TTFT p50 sent (ms) | TTFT p50 not sent (ms) | threshold p50 (ms) |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for result in report.results:
        lines.append(
            f"| {SETTING_LABELS[result.setting]} | {result.accuracy:.3f} "
            f"| [{result.accuracy_low:.3f}, {result.accuracy_high:.3f}] "
            f"| {result.true_positive_rate:.3f} | {result.false_positive_rate:.3f} "
            f"| {_median_ms(result.probe_ttfts_s(True)):.2f} "
            f"| {_median_ms(result.probe_ttfts_s(False)):.2f} "
            f"| {result.median_threshold_s * 1e3:.2f} |"
        )
    return "\n".join(lines) + "\n"


def side_channel_json(report: SideChannelReport) -> dict[str, Any]:
    """The report as plain data: per setting, the summary and each trial's numbers."""

    def rounded(value: float) -> float:
        return round(value, JSON_DECIMALS)

    return {
        "name": report.name,
        "num_trials": report.num_trials,
        "num_probes_per_trial": report.num_probes_per_trial,
        "confidence": CONFIDENCE,
        "settings": [
            {
                "setting": result.setting,
                "accuracy": rounded(result.accuracy),
                "accuracy_low": rounded(result.accuracy_low),
                "accuracy_high": rounded(result.accuracy_high),
                "true_positive_rate": rounded(result.true_positive_rate),
                "false_positive_rate": rounded(result.false_positive_rate),
                "num_trials_behind": result.num_trials_behind,
                "trials": [
                    {
                        "accuracy": rounded(trial.accuracy),
                        "fell_behind": trial.fell_behind,
                        "threshold_s": rounded(trial.threshold_s),
                        "true_positive_rate": rounded(trial.true_positive_rate),
                        "false_positive_rate": rounded(trial.false_positive_rate),
                    }
                    for trial in result.trials
                ],
            }
            for result in report.results
        ],
    }


def _plot_setting(axes, result: SettingResult, bins: np.ndarray) -> None:
    sent_ms = np.asarray(result.probe_ttfts_s(True)) * 1e3
    not_sent_ms = np.asarray(result.probe_ttfts_s(False)) * 1e3
    axes.hist(not_sent_ms, bins=bins, alpha=0.6, color="tab:blue", label="victim did not send it")
    axes.hist(sent_ms, bins=bins, alpha=0.6, color="tab:red", label="victim sent it")
    axes.axvline(
        result.median_threshold_s * 1e3,
        color="black",
        linestyle="--",
        label="attacker's threshold (median over trials)",
    )
    axes.set_title(
        f"{SETTING_LABELS[result.setting]}: accuracy {result.accuracy:.2f} "
        f"[{result.accuracy_low:.2f}, {result.accuracy_high:.2f}]",
        fontsize=10,
    )
    from matplotlib.ticker import MaxNLocator

    axes.set_ylabel("probes")
    axes.yaxis.set_major_locator(MaxNLocator(integer=True))
    axes.grid(alpha=0.3)


def side_channel_figure(report: SideChannelReport) -> Figure:
    """Probe TTFT histograms per setting, split by whether the victim sent the candidate."""
    from matplotlib.figure import Figure  # imported on use: keeps CLI start-up light

    all_ms = np.concatenate(
        [
            np.asarray(trial.probe_ttfts_s) * 1e3
            for result in report.results
            for trial in result.trials
        ]
    )
    bins = np.linspace(0.0, float(all_ms.max()) * 1.02, NUM_BINS + 1)
    figure = Figure(figsize=(9, 2.2 + 2.4 * len(report.results)), layout="constrained")
    axes_list = np.atleast_1d(figure.subplots(len(report.results), 1, sharex=True))
    for axes, result in zip(axes_list, report.results, strict=True):
        _plot_setting(axes, result, bins)
    axes_list[0].legend(fontsize=8, loc="upper right")
    axes_list[-1].set_xlabel("probe TTFT (ms)")
    overloaded = " (OVERLOADED: queueing sets these TTFTs)" if report.overload_warning() else ""
    figure.suptitle(
        f"{report.name}: attacker's probe TTFTs, {report.num_trials} trials x "
        f"{report.num_probes_per_trial} probes{overloaded}"
    )
    return figure


def write_side_channel_files(report: SideChannelReport, out_dir: Path) -> list[Path]:
    """Write side_channel.md, .json and .png into `out_dir`; returns their paths."""
    from sim.report.study_files import write_study_files

    return write_study_files(
        out_dir,
        "side_channel",
        side_channel_markdown(report),
        side_channel_json(report),
        side_channel_figure(report),
    )
