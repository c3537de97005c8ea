"""A run's or a sweep's report: PNG figures and report.md, built from result files alone.

Output goes to `<out>/report.md` and `<out>/figures/*.png`, each written atomically. The
Markdown depends only on the result files (no paths, dates or versions), so the same inputs give
an identical report.md.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from matplotlib.figure import Figure

from sim.errors import InputError
from sim.fileio import atomic_write_text
from sim.metrics import MIN_MEASURED_REQUESTS, SUMMARY_FILE
from sim.report.capacity import load_swept_path, swept_capacity
from sim.report.cost_model_section import cost_model_section
from sim.report.figures import (
    BlockSizeLine,
    PrefillTokens,
    VariantStyle,
    evictions_figure,
    hit_rate_over_time_figure,
    hit_rate_vs_block_size_figure,
    kv_usage_figure,
    prefill_saved_figure,
    ttft_cdf_figure,
    variant_styles,
)
from sim.report.plotting import save_figure
from sim.report.runs import (
    REJECTED_MARK,
    UNSTABLE_MARK,
    Run,
    RunSet,
    format_value,
    load_run_set,
)
from sim.report.series import (
    TTFT_EDGES_S,
    StepBins,
    read_eviction_age_counts,
    read_step_bins,
    read_ttft_counts,
    time_bin_edges,
)
from sim.report.stats import CONFIDENCE, mean_interval
from sim.report.tables import (
    incomplete_runs_table,
    markdown_table,
    paired_difference_table,
    variant_summary_table,
)

REPORT_FILE = "report.md"
FIGURES_DIR = "figures"
BLOCK_SIZE_PATH = "engine.block_size"
RUN_DETAIL_KEYS = (
    "num_requests",
    "requests_per_s",
    "output_tokens_per_s",
    "hit_rate",
    "num_prefill_tokens_saved",
    "num_computed_prefill_tokens",
    "kv_usage_mean",
    "kv_usage_max",
    "num_preemptions",
    "num_evictions",
    "ttft_p90_s",
    "e2e_p99_s",
    "queue_p99_s",
    "itl_p50_s",
    "num_gpu_blocks",
    "block_size",
    "warmup_s",
    "window_s",
)
# Shown for runs with the CPU offload tier: its hits apart from the GPU's.
OFFLOAD_DETAIL_KEYS = (
    "hit_rate_gpu_and_cpu",
    "hit_rate_cpu",
    "num_external_queries",
    "num_external_hits",
    "num_host_cached_tokens",
    "offload_num_chunks",
)


@dataclass(slots=True, frozen=True)
class ReportFigure:
    """A drawn figure: its file name under figures/, heading and caption in report.md."""

    file_name: str
    title: str
    caption: str


@dataclass(slots=True)
class ReportResult:
    """Where the report and its figures were written."""

    report_path: Path
    figure_paths: list[Path]


def write_report(source_dir: Path, out_dir: Path | None = None) -> ReportResult:
    """Read a run or sweep directory (or a scenario's results folder holding one run); write
    report.md and figures/ into out_dir (default: the run or sweep directory)."""
    run_set = load_run_set(source_dir)
    if not run_set.ok_runs():
        statuses = Counter(run.status for run in run_set.runs)
        counts = ", ".join(f"{count} {status}" for status, count in sorted(statuses.items()))
        raise InputError(
            f"no run has finished ({counts}), so there is nothing to report; run or resume the "
            "sweep first",
            source=str(run_set.source_dir),
        )
    out_dir = run_set.source_dir if out_dir is None else out_dir
    labels = run_set.variant_labels()
    figures = draw_figures(run_set, variant_styles(labels), out_dir / FIGURES_DIR)
    report_path = out_dir / REPORT_FILE
    atomic_write_text(report_path, render_report(run_set, labels, figures))
    return ReportResult(report_path, [out_dir / FIGURES_DIR / f.file_name for f in figures])


def _warmup_s(run: Run) -> float:
    warmup_s = run.metric("warmup_s")
    return 0.0 if math.isnan(warmup_s) else warmup_s


def _end_at(run: Run) -> float:
    end_at = run.metric("end_at")
    if math.isnan(end_at):
        raise InputError("end_at is missing", source=str(run.run_dir / SUMMARY_FILE))
    return end_at


@dataclass(slots=True)
class VariantTraces:
    """Per variant, the binned traces of its finished runs, seeds pooled."""

    step_bins: dict[str, StepBins]
    ttft_counts: dict[str, np.ndarray]
    age_counts: dict[str, np.ndarray]  # only variants whose runs wrote events.parquet
    num_runs_without_events: int


def read_variant_traces(run_set: RunSet, variants: list[str], edges_s: np.ndarray) -> VariantTraces:
    """Read every finished run's traces once, a batch at a time, into per-variant bins."""
    traces = VariantTraces({}, {}, {}, 0)
    for variant in variants:
        traces.step_bins[variant] = StepBins.empty(edges_s)
        traces.ttft_counts[variant] = np.zeros(len(TTFT_EDGES_S) - 1, dtype=np.int64)
        for run in run_set.ok_runs(variant):
            traces.step_bins[variant].add(read_step_bins(run.run_dir, edges_s, _end_at(run)))
            traces.ttft_counts[variant] += read_ttft_counts(run.run_dir, _warmup_s(run))
            ages = read_eviction_age_counts(run.run_dir, _warmup_s(run))
            if ages is None:
                traces.num_runs_without_events += 1
            elif variant in traces.age_counts:
                traces.age_counts[variant] += ages
            else:
                traces.age_counts[variant] = ages
    return traces


def draw_figures(
    run_set: RunSet, styles: dict[str, VariantStyle], figures_dir: Path
) -> list[ReportFigure]:
    """Draw and save every figure the finished runs support; none without finished runs."""
    variants = [variant for variant in run_set.variants() if run_set.ok_runs(variant)]
    if not variants:
        return []
    drawn: list[ReportFigure] = []

    def save(file_name: str, title: str, caption: str, draw: Callable[[], Figure]) -> None:
        save_figure(draw(), figures_dir / file_name)
        drawn.append(ReportFigure(file_name, title, caption))

    ok_runs = run_set.ok_runs()
    warmups_s = {_warmup_s(run) for run in ok_runs}
    shaded_warmup_s = warmups_s.pop() if len(warmups_s) == 1 else 0.0
    traces = read_variant_traces(run_set, variants, time_bin_edges(max(map(_end_at, ok_runs))))

    save(
        "ttft_cdf.png",
        "TTFT distribution",
        "Empirical CDF of time to first token per variant, requests arriving after warm-up, "
        "all seeds pooled (log time axis; dotted lines at p50 and p99).",
        lambda: ttft_cdf_figure(traces.ttft_counts, styles),
    )
    lines = block_size_lines(run_set) if BLOCK_SIZE_PATH in run_set.parameter_paths else []
    # Worth drawing only when some line has two or more block sizes.
    if any(len(line.block_sizes) > 1 for line in lines):
        save(
            "hit_rate_vs_block_size.png",
            "Hit rate vs block size",
            f"Token hit rate per block size: mean over seeds with {_confidence_text()} "
            "Student-t error bars; one line per combination of the other swept settings.",
            lambda: hit_rate_vs_block_size_figure(lines),
        )
    save(
        "hit_rate_over_time.png",
        "Hit rate over time",
        "Prefix-cache hits / queries (tokens) per time bin, seeds pooled; gaps are bins "
        "without lookups. Grey: warm-up, left out of the tables.",
        lambda: hit_rate_over_time_figure(traces.step_bins, styles, shaded_warmup_s),
    )
    save(
        "evictions.png",
        "Evictions and block age at eviction",
        "Left: cached blocks evicted per second of simulated time (from steps.parquet, mean "
        "over seeds). Right: time from a block's store to its eviction (events.parquet), as a "
        "share of each variant's evictions after warm-up.",
        lambda: evictions_figure(
            traces.step_bins,
            traces.age_counts,
            traces.num_runs_without_events,
            styles,
            shaded_warmup_s,
        ),
    )
    save(
        "kv_usage.png",
        "KV cache usage over time",
        "Solid: vLLM's kv_cache_usage_perc (blocks held by requests) per time bin. Dashed: "
        "those plus the free blocks that still hold a cached prefix "
        "(prefixsim:kv_cache_cached_free_perc), which vLLM's gauge counts as free although "
        "they are the prefix cache, and evictions take them. Averaged over step time, seeds "
        "pooled.",
        lambda: kv_usage_figure(traces.step_bins, styles, shaded_warmup_s),
    )
    save(
        "prefill_saved.png",
        "Prefill tokens saved",
        "Prefill tokens per run served from the prefix cache (requests' cached tokens) vs "
        "computed, mean over seeds, measured window. Computed tokens include recomputation "
        "after preemption, so the saved share can sit below the hit rate.",
        lambda: prefill_saved_figure(prefill_tokens(run_set, variants), styles),
    )
    return drawn


def block_size_lines(run_set: RunSet) -> list[BlockSizeLine]:
    """Hit rate mean and CI half-width per block size, per group of the other swept settings."""
    other_paths = tuple(path for path in run_set.parameter_paths if path != BLOCK_SIZE_PATH)
    block_sizes = sorted(run_set.parameter_values(BLOCK_SIZE_PATH))
    lines = []
    for group in dict.fromkeys(run.values_of(other_paths) for run in run_set.runs):
        points = []
        for block_size in block_sizes:
            runs = run_set.ok_runs_where((BLOCK_SIZE_PATH, *other_paths), (block_size, *group))
            interval = mean_interval(
                [run.metric("hit_rate") for run in runs if not math.isnan(run.metric("hit_rate"))]
            )
            if interval.num_samples:
                half_width = math.nan if interval.half_width is None else interval.half_width
                unstable = any(run.stable is False for run in runs)
                points.append((int(block_size), interval.mean, half_width, unstable))
        if points:
            sizes, means, half_widths, unstable_points = zip(*points, strict=True)
            label = run_set.settings_label(other_paths, group)
            lines.append(BlockSizeLine(label, sizes, means, half_widths, unstable_points))
    return lines


def prefill_tokens(run_set: RunSet, variants: list[str]) -> list[PrefillTokens]:
    """Mean prompt tokens saved and computed per run, for each variant with finished runs."""
    tokens = []
    for variant in variants:
        runs = run_set.ok_runs(variant)
        saved = [run.metric("num_prefill_tokens_saved") for run in runs]
        computed = [run.metric("num_computed_prefill_tokens") for run in runs]
        tokens.append(
            PrefillTokens(
                variant,
                mean_interval([v for v in saved if not math.isnan(v)]).mean,
                mean_interval([v for v in computed if not math.isnan(v)]).mean,
            )
        )
    return tokens


def render_report(run_set: RunSet, labels: dict[str, str], figures: list[ReportFigure]) -> str:
    """The report.md text."""
    confidence = _confidence_text()
    parts = [f"# prefixsim report: {run_set.source_dir.resolve().name}\n", _overview(run_set)]
    if run_set.is_sweep:
        parts.append("## Summary per variant\n")
        parts.append(
            f"Mean ± {confidence} confidence half-width over seeds (Student t, n − 1 degrees "
            "of freedom); the mean alone when one seed finished, n/a when none did. Numbers "
            "cover each run's measured window (after warm-up), as in its summary.json.\n"
        )
    else:
        parts.append("## Summary\n")
        parts.append(
            "One run, so no confidence intervals. Numbers cover the measured window (after "
            "warm-up), as in summary.json.\n"
        )
    parts.append(variant_summary_table(run_set, labels))
    parts.append("## Stability\n")
    parts.append(stability_section(run_set, labels))
    parts.append(cost_model_section(run_set))
    if run_set.is_sweep and run_set.parameter_paths:
        parts.append("## Paired differences\n")
        parts.append(
            "For each swept setting: every value minus the setting's first value (manifest "
            "order), with the other swept settings equal and runs paired by seed; mean ± "
            f"{confidence} confidence half-width of the per-seed differences.\n"
        )
        for path in run_set.parameter_paths:
            parts.append(f"### `{path}`\n")
            if len(run_set.parameter_values(path)) < 2:
                parts.append("Only one value: nothing to compare.\n")
            else:
                parts.append(paired_difference_table(run_set, path))
    if not run_set.is_sweep:
        parts.append("## Run details\n")
        parts.append(_run_details_table(run_set.runs[0]))
    parts.append("## Figures\n")
    if not figures:
        parts.append("No finished runs: nothing to plot.\n")
    for figure in figures:
        parts.append(f"### {figure.title}\n")
        parts.append(f"{figure.caption}\n")
        parts.append(f"![{figure.title}]({FIGURES_DIR}/{figure.file_name})\n")
    if run_set.is_sweep:
        parts.append("## Failed and missing runs\n")
        incomplete = run_set.incomplete_runs()
        if incomplete:
            parts.append(incomplete_runs_table(incomplete, labels))
        else:
            parts.append("None: every run finished.\n")
    return "\n".join(parts)


def stability_section(run_set: RunSet, labels: dict[str, str]) -> str:
    """Which runs reached a steady state, why the others did not, and how far a load sweep
    stays stable."""
    runs = run_set.ok_runs()
    unstable = [run for run in runs if run.stable is False]
    unknown = [run for run in runs if run.stable is None]
    rule = (
        "A run is stable when its request rate, waiting queue and TTFT show no significant "
        f"growth over the measured window and it measured enough requests "
        f"({MIN_MEASURED_REQUESTS}) to tell (sim.metrics.stability). An unstable run's latencies "
        "grow with its length: they describe the run, not the deployment."
    )
    parts = [f"{rule}\n"]
    if not unstable:
        parts.append("Every finished run reached a steady state.\n")
    else:
        parts.append(
            f"**{len(unstable)} of {len(runs)} finished runs reached no steady state**; their "
            f"variants are marked {UNSTABLE_MARK} in the tables and figures.\n"
        )
        rows = [
            [run.run_id, labels[run.variant], str(run.seed), run.unstable_reason or ""]
            for run in unstable
        ]
        parts.append(markdown_table(["run", "variant", "seed", "why"], rows))
    if unknown:
        parts.append(f"{len(unknown)} runs have no stability verdict (older summary.json).\n")
    rejecting = [run for run in runs if run.rejected is not None]
    if rejecting:
        parts.append(
            f"**{len(rejecting)} of {len(runs)} finished runs rejected requests**: their "
            "latencies and rates measure only the requests they admitted; their variants are "
            f"marked {REJECTED_MARK} in the tables and figures.\n"
        )
        rows = [
            [run.run_id, labels[run.variant], str(run.seed), run.rejected or ""]
            for run in rejecting
        ]
        parts.append(markdown_table(["run", "variant", "seed", "rejected"], rows))
    path = load_swept_path(run_set) if run_set.is_sweep else None
    if path is not None:
        capacity = swept_capacity(run_set, path)
        if capacity.passing is None:
            parts.append(f"Not stable at the smallest swept `{path}`.\n")
        elif capacity.failing is None:
            parts.append(
                f"Stable at every swept `{path}`, up to {format_value(capacity.passing)}.\n"
            )
        else:
            parts.append(
                f"**Stable up to `{path}` = {format_value(capacity.passing)}**; unstable from "
                f"{format_value(capacity.failing)} (every seed of a value and of all smaller "
                "values must be stable and reject no request).\n"
            )
    return "\n".join(parts)


def _confidence_text() -> str:
    return f"{CONFIDENCE:.0%}".replace("%", " %")


def _overview(run_set: RunSet) -> str:
    if not run_set.is_sweep:
        run = run_set.runs[0]
        return (
            f"Run `{run.run_id}` of scenario `{run.variant}`, seed {run.seed}: "
            f"{_format_number(run.metric('num_requests'))} requests measured over "
            f"{_format_number(run.metric('window_s'))} s after a "
            f"{_format_number(_warmup_s(run))} s warm-up.\n"
        )
    statuses = [run.status for run in run_set.runs]
    seeds = sorted({run.seed for run in run_set.runs})
    text = (
        f"Sweep of {len(run_set.runs)} runs ({statuses.count('ok')} ok, "
        f"{statuses.count('failed')} failed, {statuses.count('missing')} missing): "
        f"{_count(len(run_set.variants()), 'variant')} x seeds {', '.join(map(str, seeds))}.\n"
    )
    if run_set.parameter_paths:
        swept = "; ".join(
            f"`{path}` ∈ {{{', '.join(format_value(v) for v in run_set.parameter_values(path))}}}"
            for path in run_set.parameter_paths
        )
        text += f"\nSwept settings: {swept}.\n"
    return text


def _count(number: int, noun: str) -> str:
    return f"{number} {noun}" if number == 1 else f"{number} {noun}s"


def _format_number(value: float) -> str:
    if math.isnan(value):
        return "n/a"
    if value == int(value) and abs(value) < 1e15:
        return f"{int(value):,}"
    return f"{value:,.6g}"


def _run_details_table(run: Run) -> str:
    keys: tuple[str, ...] = RUN_DETAIL_KEYS
    if not math.isnan(run.metric("hit_rate_gpu_and_cpu")):
        keys += OFFLOAD_DETAIL_KEYS
    rows = [[key, _format_number(run.metric(key))] for key in keys]
    return markdown_table(["summary.json key", "value"], rows)
