"""The layout advisor's files: a markdown report, a JSON document and a bar chart (PNG)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from sim.studies.layout import LayoutReport, OrderingResult

if TYPE_CHECKING:
    from matplotlib.figure import Figure

MAX_PLOTTED_ORDERINGS = 20
JSON_DECIMALS = 9


def breaker_text(row: OrderingResult) -> str:
    """Which segment ends the prefix every request shares, e.g. 'timestamp (per_request)'."""
    if row.breaking_segment is None:
        return "none (every segment is static)"
    return f"{row.breaking_segment} ({row.breaking_scope})"


def verdict_lines(report: LayoutReport) -> list[str]:
    """The recommendation in plain words: the best order, and what breaks the written one."""
    best = report.best
    lines = [
        f"Best ordering: {best.label} - hit rate {best.hit_rate:.1%}, TTFT p50 "
        f"{best.ttft_p50_s * 1e3:.1f} ms, p99 {best.ttft_p99_s * 1e3:.1f} ms, "
        f"{best.cacheable_prefix_tokens:,} cacheable prefix tokens.",
    ]
    written = report.as_written
    if written is not None:
        rank = report.rank_of(written.order)
        lines.append(
            f"As written (rank {rank} of {len(report.rows)}): {breaker_text(written)} breaks the "
            f"shared prefix after {written.cacheable_prefix_tokens:,} tokens; hit rate "
            f"{written.hit_rate:.1%}, TTFT p50 {written.ttft_p50_s * 1e3:.1f} ms."
        )
    return lines


def layout_markdown(report: LayoutReport) -> str:
    """Every ordering, best first, as a GitHub-flavoured markdown table with the verdict."""
    scopes = ", ".join(f"{name} ({scope})" for name, scope in report.segment_scopes)
    lines = [
        f"# Prompt layout: {report.name}",
        "",
        f"{report.num_requests:,} requests from {report.num_tenants} tenants and "
        f"{report.num_users} users; chat template {report.chat_template}; KV blocks of "
        f"{report.block_size} tokens. Segments as written: {scopes}.",
        "",
        *(f"- {line}" for line in verdict_lines(report)),
        "",
        "| rank | ordering | hit rate | TTFT p50 (ms) | TTFT p99 (ms) | cacheable prefix "
        "(tokens) | breaks the prefix | mean prompt (tokens) |",
        "|---:|---|---:|---:|---:|---:|---|---:|",
    ]
    for rank, row in enumerate(report.rows, start=1):
        written = " (as written)" if row.is_as_written else ""
        lines.append(
            f"| {rank} | {row.label}{written} | {row.hit_rate:.2%} | {row.ttft_p50_s * 1e3:.2f} "
            f"| {row.ttft_p99_s * 1e3:.2f} | {row.cacheable_prefix_tokens:,} "
            f"| {breaker_text(row)} | {row.mean_prompt_tokens:,.0f} |"
        )
    return "\n".join(lines) + "\n"


def layout_json(report: LayoutReport) -> dict[str, Any]:
    """The report as plain data (floats rounded), best ordering first."""
    return {
        "name": report.name,
        "chat_template": report.chat_template,
        "block_size": report.block_size,
        "num_requests": report.num_requests,
        "num_tenants": report.num_tenants,
        "num_users": report.num_users,
        "segments": [{"name": name, "scope": scope} for name, scope in report.segment_scopes],
        "orderings": [
            {
                "rank": rank,
                "order": list(row.order),
                "as_written": row.is_as_written,
                "hit_rate": round(row.hit_rate, JSON_DECIMALS),
                "ttft_p50_s": round(row.ttft_p50_s, JSON_DECIMALS),
                "ttft_p99_s": round(row.ttft_p99_s, JSON_DECIMALS),
                "cacheable_prefix_tokens": row.cacheable_prefix_tokens,
                "breaking_segment": row.breaking_segment,
                "breaking_scope": row.breaking_scope,
                "mean_prompt_tokens": round(row.mean_prompt_tokens, JSON_DECIMALS),
            }
            for rank, row in enumerate(report.rows, start=1)
        ],
    }


def plotted_rows(report: LayoutReport) -> list[tuple[int, OrderingResult]]:
    """(rank, row) of the best orderings, plus the written order when it ranks lower."""
    shown = list(enumerate(report.rows[:MAX_PLOTTED_ORDERINGS], start=1))
    written = report.as_written
    if written is not None and not any(row.is_as_written for _, row in shown):
        shown.append((report.rank_of(written.order), written))
    return shown


def layout_figure(report: LayoutReport) -> Figure:
    """Hit rate and TTFT p50/p99 per ordering, best at the top, as horizontal bars."""
    from matplotlib.figure import Figure  # imported on use: keeps CLI start-up light

    shown = plotted_rows(report)
    labels = [
        f"#{rank} {row.label}" + (" (as written)" if row.is_as_written else "")
        for rank, row in shown
    ]
    positions = list(range(len(shown)))
    figure = Figure(figsize=(14, 1.6 + 0.38 * len(shown)), layout="constrained")
    hit_axes, ttft_axes = figure.subplots(1, 2, sharey=True, width_ratios=(1, 1.3))
    hit_colors = ["tab:orange" if row.is_as_written else "tab:blue" for _, row in shown]
    hit_axes.barh(positions, [row.hit_rate * 100 for _, row in shown], color=hit_colors)
    hit_axes.set_xlabel("prefix-cache hit rate (% of prompt tokens)")
    hit_axes.set_xlim(0, 100)
    hit_axes.set_yticks(positions, labels, fontsize=8)
    hit_axes.invert_yaxis()
    hit_axes.grid(axis="x", alpha=0.3)
    height = 0.4
    ttft_axes.barh(
        [position - height / 2 for position in positions],
        [row.ttft_p50_s * 1e3 for _, row in shown],
        height=height,
        label="p50",
        color="tab:green",
    )
    ttft_axes.barh(
        [position + height / 2 for position in positions],
        [row.ttft_p99_s * 1e3 for _, row in shown],
        height=height,
        label="p99",
        color="tab:red",
    )
    ttft_axes.set_xlabel("TTFT (ms)")
    ttft_axes.grid(axis="x", alpha=0.3)
    ttft_axes.legend(ncols=2, loc="lower right", bbox_to_anchor=(1.0, 1.0))
    num_rows = len(report.rows)
    shown_note = (
        f"all {num_rows} orderings"
        if num_rows <= MAX_PLOTTED_ORDERINGS
        else f"best {MAX_PLOTTED_ORDERINGS} of {num_rows} orderings"
    )
    figure.suptitle(
        f"Prompt layout {report.name}: {shown_note}, {report.num_requests:,} requests "
        f"(the written order in orange)"
    )
    return figure


def write_layout_files(report: LayoutReport, out_dir: Path) -> list[Path]:
    """Write layout.md, layout.json and layout.png into `out_dir`; returns their paths."""
    from sim.report.study_files import write_study_files

    return write_study_files(
        out_dir, "layout", layout_markdown(report), layout_json(report), layout_figure(report)
    )
