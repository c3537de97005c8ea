"""Running a sweep: skip finished runs, run the rest on a backend, record every outcome.

Layout: `<results>/<name>/` holds `sweep.resolved.yaml`, `manifest.parquet`, `runs/<run_id>/`
(one run directory each) and `runs/<run_id>.error.json` for a run that failed. The manifest is
rewritten atomically after every outcome, so an interrupted sweep leaves a consistent one, and
its rows follow expansion order, so it is the same whatever finished first.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from sim.config import check_scenario_limits
from sim.errors import InputError
from sim.fileio import (
    TEMP_SUFFIX,
    atomic_write_text,
    check_output_dir,
    remove_leftovers,
    writing,
)
from sim.runner import engine_start, start_key
from sim.sweep.execute import KILL_RUN_ENV, RunJob, RunOutcome
from sim.sweep.expand import SweepPlan, SweepRun
from sim.sweep.local import run_local
from sim.sweep.manifest import (
    ERROR_SUFFIX,
    RunRecord,
    manifest_table,
    read_run_record,
    run_dir_name,
    write_manifest,
)
from sim.sweep.ray_backend import check_ray_available, run_ray

BACKENDS = {"local": run_local, "ray": run_ray}
MANIFEST_NAME = "manifest.parquet"
RESOLVED_NAME = "sweep.resolved.yaml"


@dataclass(slots=True)
class SweepResult:
    """Where the sweep wrote, each run's record, and what this invocation did."""

    sweep_dir: Path
    records: dict[str, RunRecord]
    num_already_done: int
    write_problems: list[str] = field(default_factory=list)

    @property
    def manifest_path(self) -> Path:
        """The sweep's manifest.parquet."""
        return self.sweep_dir / MANIFEST_NAME

    @property
    def failed_run_ids(self) -> list[str]:
        """Runs whose last attempt failed, in expansion order."""
        return [run_id for run_id, record in self.records.items() if record.status == "failed"]


def sweep_dir_of(plan: SweepPlan, results_root: Path) -> Path:
    """`<results>/<sweep name>`, absolute (workers may run in another directory)."""
    return (results_root / plan.name).absolute()


def read_records(plan: SweepPlan, sweep_dir: Path) -> dict[str, RunRecord]:
    """Each run's state on disk, in expansion order."""
    return {run.run_id: read_run_record(sweep_dir, run.run_id) for run in plan.runs}


@contextlib.contextmanager
def _progress_bar(name: str, total: int, enabled: bool) -> Iterator[Callable[[bool], None]]:
    """Yields `advance(failed)`, called once per finished run."""
    num_failed = 0
    if not enabled:
        yield lambda failed: None
        return
    columns = [
        TextColumn(f"[bold]{name}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("runs, {task.description}"),
        TimeElapsedColumn(),
    ]
    with Progress(*columns, console=Console(stderr=True), transient=True) as progress:
        task = progress.add_task("0 failed", total=total)

        def advance(failed: bool) -> None:
            nonlocal num_failed
            num_failed += failed
            progress.update(task, advance=1, description=f"{num_failed} failed")

        yield advance


def check_runs_within_limits(plan: SweepPlan) -> None:
    """Refuse the sweep before it starts when one of its runs is beyond the size limits."""
    for run in plan.runs:
        try:
            check_scenario_limits(run.scenario)
        except InputError as error:
            raise InputError(f"sweep run {run_label(run)}: {error}") from None


def runs_refused_at_start(plan: SweepPlan) -> dict[str, str]:
    """Why each run within the limits whose engine would not start (`engine_start`: a KV cache
    vLLM refuses, say) fails, by run id; the sweep still runs, and such runs fail alone. Runs
    that start alike (`start_key`) are checked once: a sweep's runs mostly differ in their
    workload and seed."""
    problem_by_start: dict[str, str | None] = {}
    refused = {}
    for run in plan.runs:
        key = start_key(run.scenario)
        if key not in problem_by_start:
            try:
                engine_start(run.scenario, plan.base_dir)
                problem_by_start[key] = None
            except InputError as error:
                problem_by_start[key] = str(error)
        problem = problem_by_start[key]
        if problem is not None:
            refused[run.run_id] = problem
    return refused


def run_label(run: SweepRun) -> str:
    """How messages name a sweep's run: its id, then its variant and seed in brackets."""
    label = ", ".join(filter(None, (run.variant, f"seed {run.seed}")))
    return f"{run.run_id} [{label}]"


def _prepare_sweep_dir(plan: SweepPlan, sweep_dir: Path) -> None:
    check_output_dir(sweep_dir)
    if (
        sweep_dir.is_dir()
        and not (sweep_dir / RESOLVED_NAME).is_file()
        and any(not _is_temp_file(entry) for entry in sweep_dir.iterdir())
    ):
        raise InputError(
            f"holds files but is not an earlier sweep (no {RESOLVED_NAME}); a sweep writes its "
            "runs, manifest and report there, over files of the same names, so choose a new or "
            "empty folder",
            source=str(sweep_dir),
        )
    with writing(sweep_dir):
        sweep_dir.mkdir(parents=True, exist_ok=True)
    # What a killed sweep left: temp manifests, partial run directories.
    remove_leftovers(sweep_dir)
    # The resolved file first: it marks the folder as this sweep's, so a sweep stopped right
    # after it finds its folder again.
    atomic_write_text(sweep_dir / RESOLVED_NAME, plan.resolved_yaml())
    with writing(sweep_dir):
        (sweep_dir / "runs").mkdir(exist_ok=True)
    remove_leftovers(sweep_dir / "runs")


def _is_temp_file(entry: Path) -> bool:
    """A write's temporary file (the resolved file's, a sweep stopped while writing it)."""
    return entry.name.startswith(".") and entry.name.endswith(TEMP_SUFFIX)


@dataclass(slots=True)
class _OutcomeWriter:
    """Writes each outcome to disk (error record, manifest) as it arrives."""

    plan: SweepPlan
    result: SweepResult
    advance: Callable[[bool], None]

    def save_manifest(self) -> None:
        table = manifest_table(self.plan.runs, self.plan.spec.paths, self.result.records)
        write_manifest(self.result.manifest_path, table)

    def save_manifest_or_fail(self) -> None:
        try:
            self.save_manifest()
        except InputError as error:
            raise InputError(
                f"{error}; finished runs are kept, a rerun writes the manifest again"
            ) from None

    def record(self, outcome: RunOutcome) -> None:
        """Note one finished run; a failed write is reported, it never stops the sweep."""
        sweep_dir = self.result.sweep_dir
        run_dir = sweep_dir / run_dir_name(outcome.run_id)
        error_path = run_dir.with_name(f"{outcome.run_id}{ERROR_SUFFIX}")
        try:
            if outcome.error is None:
                self.result.records[outcome.run_id] = read_run_record(sweep_dir, outcome.run_id)
                error_path.unlink(missing_ok=True)
            else:
                self.result.records[outcome.run_id] = RunRecord("failed", outcome.error)
                # A killed worker cannot clean up after itself.
                shutil.rmtree(run_dir.with_name(f".{outcome.run_id}.partial"), True)
                error = {"error": outcome.error, "kind": outcome.kind}
                atomic_write_text(error_path, json.dumps(error, sort_keys=True) + "\n")
            self.save_manifest()
        except (OSError, InputError) as problem:
            self.result.write_problems.append(str(problem))
        self.advance(outcome.error is not None)


def run_sweep(
    plan: SweepPlan,
    *,
    results_root: Path = Path("results"),
    num_workers: int = 1,
    backend: str = "local",
    progress: bool = True,
) -> SweepResult:
    """Run every run of `plan` without summary.json on `backend`; failures never stop others."""
    if backend not in BACKENDS:
        raise InputError(f"--backend {backend!r} is not one of: {', '.join(BACKENDS)}")
    if num_workers < 1:
        raise InputError(f"-j {num_workers}: need at least 1 worker")
    if backend == "ray":
        check_ray_available()
    check_runs_within_limits(plan)
    sweep_dir = sweep_dir_of(plan, results_root)
    _prepare_sweep_dir(plan, sweep_dir)
    records = read_records(plan, sweep_dir)
    result = SweepResult(
        sweep_dir, records, sum(record.status == "ok" for record in records.values())
    )
    kill_run_id = os.environ.get(KILL_RUN_ENV)
    jobs = [
        RunJob(
            run.run_id,
            run.scenario,
            plan.base_dir,
            sweep_dir / run_dir_name(run.run_id),
            kill_for_test=run.run_id == kill_run_id,
        )
        for run in plan.runs
        if records[run.run_id].status != "ok"
    ]

    with _progress_bar(plan.name, len(jobs), progress) as advance:
        writer = _OutcomeWriter(plan, result, advance)
        writer.save_manifest_or_fail()
        try:
            BACKENDS[backend](jobs, num_workers, writer.record)
        except BaseException:
            # Interrupted: the backend stopped its workers; what they were writing goes.
            remove_leftovers(sweep_dir / "runs")
            raise
        writer.save_manifest_or_fail()
    return result
