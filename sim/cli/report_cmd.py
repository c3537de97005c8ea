"""`prefixsim report DIR`: figures and a Markdown report of a run or a sweep."""

from __future__ import annotations

from pathlib import Path

import typer

from sim.cli.app import app


@app.command("report")
def report_command(
    directory: Path = typer.Argument(
        ..., help="A run directory (summary.json) or a sweep directory (manifest.parquet)."
    ),
    out: Path | None = typer.Option(
        None, "--out", help="Write report.md and figures/ here instead of into DIRECTORY."
    ),
) -> None:
    """Draw the figures and write report.md: TTFT, hit rate, evictions, KV usage, CIs over seeds."""
    # Imported here: matplotlib would otherwise slow every prefixsim start-up.
    from sim.fileio import check_output_dir
    from sim.report.report import write_report

    check_output_dir(out if out is not None else directory)
    result = write_report(directory, out)
    for figure_path in result.figure_paths:
        print(figure_path)
    print(result.report_path)
