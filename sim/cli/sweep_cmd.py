"""`prefixsim sweep`: run every variant of a sweep file, resuming where an earlier sweep stopped."""

from __future__ import annotations

import sys
from enum import StrEnum
from pathlib import Path

import typer

from sim.cli.app import app
from sim.config import DEFAULT_MAX_RUNS
from sim.metrics import rejection_note
from sim.sweep import (
    SweepPlan,
    SweepResult,
    SweepRun,
    load_sweep,
    read_records,
    run_sweep,
    sweep_dir_of,
)
from sim.sweep.driver import check_runs_within_limits, run_label, runs_refused_at_start

MAX_RUNS_HELP = "Refuse sweeps of more runs than this (raise it for a bigger sweep)."


class Backend(StrEnum):
    local = "local"
    ray = "ray"


def print_dry_run(plan: SweepPlan, results: Path) -> None:
    """Each run with its status: 'done' (has summary.json), 'would run', or 'would fail' at
    its start (each such run's reason then goes to stderr)."""
    records = read_records(plan, sweep_dir_of(plan, results))
    refused = runs_refused_at_start(plan)
    print(f"{'run_id':<12}  {'seed':>6}  {'status':<10}  variant")
    counts = dict.fromkeys(("done", "would run", "would fail"), 0)
    for run in plan.runs:
        if records[run.run_id].status == "ok":
            status = "done"
        else:
            status = "would fail" if run.run_id in refused else "would run"
        counts[status] += 1
        print(f"{run.run_id:<12}  {run.seed:>6}  {status:<10}  {run.variant}")
    for run in plan.runs:
        if run.run_id in refused and records[run.run_id].status != "ok":
            print(f"would fail: {run_label(run)}: {refused[run.run_id]}", file=sys.stderr)
    totals = ", ".join(f"{count} {status}" for status, count in counts.items())
    print(f"{len(plan.runs)} runs: {totals}", file=sys.stderr)


def print_outcome(plan: SweepPlan, result: SweepResult) -> None:
    """Write problems, each failed run, then one line of totals."""
    for problem in result.write_problems:
        print(f"warning: a write failed (a rerun repeats it): {problem}", file=sys.stderr)
    runs = {run.run_id: run for run in plan.runs}
    for run_id in result.failed_run_ids:
        print(f"failed {run_label(runs[run_id])}: {result.records[run_id].error}", file=sys.stderr)
    summaries = {run.run_id: result.records[run.run_id].summary or {} for run in plan.runs}
    _warn_about(
        [run for run in plan.runs if summaries[run.run_id].get("stable") is False],
        "reached no steady state (their latencies describe the run's length, not the deployment)",
    )
    _warn_about(
        [run for run in plan.runs if rejection_note(summaries[run.run_id]) is not None],
        "rejected requests (their latencies leave those out; the manifest's num_rejected counts "
        "them)",
    )
    num_ok = sum(record.status == "ok" for record in result.records.values())
    print(
        f"sweep {plan.name}: {len(plan.runs)} runs, {num_ok} ok "
        f"({result.num_already_done} already done), {len(result.failed_run_ids)} failed; "
        f"manifest {result.manifest_path}",
        file=sys.stderr,
    )


def _warn_about(runs: list[SweepRun], what: str) -> None:
    """One WARNING line naming the first few of `runs`, which all `what`."""
    if not runs:
        return
    shown = "; ".join(f"{run.variant or 'base'} seed {run.seed}" for run in runs[:5])
    more = f" and {len(runs) - 5} more" if len(runs) > 5 else ""
    counted = f"{len(runs)} run" if len(runs) == 1 else f"{len(runs)} runs"
    print(f"WARNING: {counted} {what}: {shown}{more}", file=sys.stderr)


@app.command("sweep")
def sweep_command(
    sweep_file: Path = typer.Argument(
        ..., help="Sweep YAML: a scenario plus sweep: {grid: ..., zip: ..., seeds: [...]}."
    ),
    jobs: int = typer.Option(1, "-j", "--jobs", min=1, help="Runs at a time."),
    backend: Backend = typer.Option(
        Backend.local,
        "--backend",
        help="local processes, or Ray tasks (RAY_ADDRESS or a local Ray).",
    ),
    set_values: list[str] = typer.Option(
        [], "--set", help="Override a base field before expansion: dotted.path=value (repeatable)."
    ),
    results: Path = typer.Option(Path("results"), "--results", help="Results root directory."),
    dry_run: bool = typer.Option(
        False,
        "--dry-run",
        help="List the runs, marking any that would fail at their start; run nothing.",
    ),
    progress: bool = typer.Option(True, "--progress/--no-progress", help="Show a progress bar."),
    max_runs: int = typer.Option(DEFAULT_MAX_RUNS, "--max-runs", min=1, help=MAX_RUNS_HELP),
) -> None:
    """Run a sweep into RESULTS/<name>/ (runs/, manifest.parquet); exit 1 if a run failed."""
    plan = load_sweep(sweep_file, set_values, max_runs)
    if dry_run:
        check_runs_within_limits(plan)  # as the sweep itself refuses first
        print_dry_run(plan, results)
        return
    result = run_sweep(
        plan, results_root=results, num_workers=jobs, backend=backend.value, progress=progress
    )
    print_outcome(plan, result)
    if result.failed_run_ids:
        raise typer.Exit(1)
