"""Markdown tables of a report: per-variant means with CIs, paired differences, incomplete runs."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from sim.report.runs import Run, RunSet, format_value, short_parameter_names
from sim.report.stats import MeanInterval, mean_interval, paired_differences


@dataclass(slots=True, frozen=True)
class TableMetric:
    """A summary key as a table column: shown as value x scale with fixed decimals."""

    key: str
    heading: str
    difference_heading: str
    scale: float
    decimals: int


TABLE_METRICS = (
    TableMetric("hit_rate", "hit rate (%)", "Δ hit rate (pp)", 100.0, 2),
    TableMetric("ttft_p50_s", "TTFT p50 (ms)", "Δ TTFT p50 (ms)", 1000.0, 2),
    TableMetric("ttft_p99_s", "TTFT p99 (ms)", "Δ TTFT p99 (ms)", 1000.0, 2),
    TableMetric("e2e_p50_s", "E2E p50 (s)", "Δ E2E p50 (s)", 1.0, 3),
    TableMetric("num_evictions", "evictions", "Δ evictions", 1.0, 0),
)
NOT_AVAILABLE = "n/a"


def markdown_table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """A GitHub-flavoured Markdown table; the first column left-aligned, the others right."""
    alignments = [":---"] + ["---:"] * (len(headers) - 1)
    lines = [_table_row(headers), _table_row(alignments)]
    lines += [_table_row(row) for row in rows]
    return "\n".join(lines) + "\n"


def _table_row(cells: Sequence[str]) -> str:
    return "| " + " | ".join(_cell(cell) for cell in cells) + " |"


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def _rounded(value: float, metric: TableMetric) -> float:
    # Adding 0.0 turns a rounded -0.0 into 0.0, so no "-0.00" appears.
    return round(value * metric.scale, metric.decimals) + 0.0


def format_interval(interval: MeanInterval, metric: TableMetric, *, signed: bool = False) -> str:
    """`mean ± half-width` in the metric's unit; the mean alone for n = 1; n/a for n = 0."""
    if interval.num_samples == 0:
        return NOT_AVAILABLE
    sign = "+" if signed else ""
    text = f"{_rounded(interval.mean, metric):{sign},.{metric.decimals}f}"
    if interval.half_width is not None:
        text += f" ± {_rounded(interval.half_width, metric):,.{metric.decimals}f}"
    return text


def _finite(values: Sequence[float]) -> list[float]:
    return [value for value in values if not math.isnan(value)]


def variant_summary_table(run_set: RunSet, labels: dict[str, str]) -> str:
    """One row per variant: completed seeds, then mean ± 95 % CI over seeds of each metric."""
    rows = []
    for variant in run_set.variants():
        runs = run_set.ok_runs(variant)
        cells = [labels[variant], str(len(runs))]
        for metric in TABLE_METRICS:
            interval = mean_interval(_finite([run.metric(metric.key) for run in runs]))
            cells.append(format_interval(interval, metric))
        rows.append(cells)
    headers = ["variant", "seeds", *(metric.heading for metric in TABLE_METRICS)]
    return markdown_table(headers, rows)


def paired_difference_table(run_set: RunSet, path: str) -> str:
    """Each value of `path` minus its first value, other swept settings equal, paired by seed."""
    values = run_set.parameter_values(path)
    baseline = values[0]
    other_paths = tuple(other for other in run_set.parameter_paths if other != path)
    groups = list(dict.fromkeys(run.values_of(other_paths) for run in run_set.runs))
    rows = []
    for group in groups:
        baseline_runs = run_set.ok_runs_where((path, *other_paths), (baseline, *group))
        for value in values[1:]:
            compared_runs = run_set.ok_runs_where((path, *other_paths), (value, *group))
            num_pairs = len(
                {run.seed for run in baseline_runs} & {run.seed for run in compared_runs}
            )
            cells = [f"{format_value(value)} − {format_value(baseline)}", str(num_pairs)]
            if other_paths:
                cells.insert(0, run_set.settings_label(other_paths, group))
            for metric in TABLE_METRICS:
                differences = paired_differences(
                    {run.seed: run.metric(metric.key) for run in baseline_runs},
                    {run.seed: run.metric(metric.key) for run in compared_runs},
                )
                cells.append(format_interval(mean_interval(differences), metric, signed=True))
            rows.append(cells)
    name = short_parameter_names(run_set.parameter_paths)[path]
    headers = [name, "pairs", *(metric.difference_heading for metric in TABLE_METRICS)]
    if other_paths:
        headers.insert(0, "other settings")
    return markdown_table(headers, rows)


def incomplete_runs_table(runs: Sequence[Run], labels: dict[str, str]) -> str:
    """Failed and missing runs with their error, in manifest order."""
    rows = [
        [run.run_id, run.status, labels[run.variant], str(run.seed), run.error or ""]
        for run in runs
    ]
    return markdown_table(["run", "status", "variant", "seed", "error"], rows)
