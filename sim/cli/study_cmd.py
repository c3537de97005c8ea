"""`prefixsim layout` and `prefixsim side-channel`: engine-backed what-if studies from YAML."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from sim.cli.app import app
from sim.cli.errors import print_loud
from sim.fileio import check_output_dir
from sim.studies.layout import LayoutReport, advise_layout
from sim.studies.layout_config import LayoutStudySettings
from sim.studies.layout_report import verdict_lines, write_layout_files
from sim.studies.side_channel import SideChannelReport, run_side_channel
from sim.studies.side_channel_config import SideChannelSettings
from sim.studies.side_channel_report import write_side_channel_files
from sim.studies.study_runs import load_study

console = Console()
progress_console = Console(stderr=True)

SET_OPTION = typer.Option([], "--set", help="Override a field: dotted.path=value (repeatable).")
OUT_OPTION = typer.Option(
    None, "--out", help="Directory for the markdown, JSON and PNG (default: results/<name>)."
)
PROGRESS_OPTION = typer.Option(True, "--progress/--no-progress", help="Show a progress bar.")
StudyT = TypeVar("StudyT", LayoutStudySettings, SideChannelSettings)


def _load_study(
    path: Path, model: type[StudyT], set_values: list[str], out: Path | None
) -> tuple[StudyT, Path, Path]:
    """The study file validated, its folder, and the checked output folder (default
    results/<name>)."""
    settings, base_dir = load_study(path, model, set_values)
    out_dir = out or Path("results") / settings.name
    check_output_dir(out_dir)
    return settings, base_dir, out_dir


@contextlib.contextmanager
def _progress(label: str, enabled: bool) -> Iterator[Callable[[int, int], None] | None]:
    if not enabled:
        yield None
        return
    columns = (TextColumn(f"[bold]{label}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, console=progress_console, transient=True) as progress:
        task = progress.add_task(label, total=None)

        def report(num_done: int, num_total: int) -> None:
            progress.update(task, completed=num_done, total=num_total)

        yield report


def _print_written(paths: list[Path]) -> None:
    console.print("wrote " + ", ".join(str(path) for path in paths))


def layout_table(report: LayoutReport, top: int) -> Table:
    """The best `top` orderings (and the written one) as a rich table."""
    table = Table(
        title=f"Prompt layout {report.name}: {len(report.rows)} orderings",
        caption="TTFT in ms; prefix: cacheable tokens before the first non-static segment",
    )
    table.add_column("rank", justify="right", no_wrap=True)
    table.add_column("ordering", ratio=1)
    for header in ("hit rate", "p50 ms", "p99 ms", "prefix"):
        table.add_column(header, justify="right", no_wrap=True)
    table.add_column("breaks at", no_wrap=True)
    for rank, row in enumerate(report.rows, start=1):
        if rank > top and not row.is_as_written:
            continue
        table.add_row(
            str(rank),
            row.label + (" [bold](as written)[/bold]" if row.is_as_written else ""),
            f"{row.hit_rate:.1%}",
            f"{row.ttft_p50_s * 1e3:.1f}",
            f"{row.ttft_p99_s * 1e3:.1f}",
            f"{row.cacheable_prefix_tokens:,}",
            row.breaking_segment or "-",
        )
    return table


@app.command("layout")
def layout_command(
    prompt_file: Path = typer.Argument(..., help="PROMPT.yaml: segments, traffic, deployment."),
    set_values: list[str] = SET_OPTION,
    out: Path | None = OUT_OPTION,
    top: int = typer.Option(10, "--top", min=1, help="Orderings shown in the table."),
    progress: bool = PROGRESS_OPTION,
) -> None:
    """Rank the orderings of a prompt template's segments by prefix-cache hit rate and TTFT."""
    settings, base_dir, out_dir = _load_study(prompt_file, LayoutStudySettings, set_values, out)
    with _progress("orderings", progress) as on_done:
        report = advise_layout(settings, base_dir, on_ordering_done=on_done)
    console.print(layout_table(report, top))
    for line in verdict_lines(report):
        console.print(line)
    _print_written(write_layout_files(report, out_dir))


def side_channel_table(report: SideChannelReport) -> Table:
    """The attacker's accuracy per salt setting as a rich table."""
    table = Table(
        title=f"Timing side channel {report.name}: {report.num_trials} trials x "
        f"{report.num_probes_per_trial} probes"
    )
    for header in ("setting", "accuracy", "95 % interval", "TP rate", "FP rate"):
        table.add_column(header, justify="left" if header == "setting" else "right", no_wrap=True)
    for result in report.results:
        table.add_row(
            result.setting,
            f"{result.accuracy:.3f}",
            f"[{result.accuracy_low:.3f}, {result.accuracy_high:.3f}]",
            f"{result.true_positive_rate:.3f}",
            f"{result.false_positive_rate:.3f}",
        )
    return table


@app.command("side-channel")
def side_channel_command(
    scenario_file: Path = typer.Argument(..., help="Side-channel study YAML."),
    set_values: list[str] = SET_OPTION,
    out: Path | None = OUT_OPTION,
    progress: bool = PROGRESS_OPTION,
) -> None:
    """How accurately an attacker tenant tells from TTFT which prompts a victim sent, per salt."""
    settings, base_dir, out_dir = _load_study(scenario_file, SideChannelSettings, set_values, out)
    with _progress("trials", progress) as on_done:
        report = run_side_channel(settings, base_dir, on_trial_done=on_done)
    console.print(side_channel_table(report))
    warning = report.overload_warning()
    if warning is not None:
        print_loud(console, warning)
    _print_written(write_side_channel_files(report, out_dir))
