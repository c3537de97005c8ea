"""The runs a report covers: one run directory, or a sweep's manifest and its run directories.

A sweep directory holds `manifest.parquet` (one row per run: run_id, status, error, run_dir,
variant, seed, one column per swept dotted path, then numeric summary keys) and `runs/<run_id>/`.
A run's numbers are the manifest's; keys the manifest lacks come from the run's summary.json.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from sim.errors import InputError
from sim.metrics import SUMMARY_FILE, rejection_note

MANIFEST_FILE = "manifest.parquet"
MANIFEST_FIXED_COLUMNS = ("run_id", "status", "error", "run_dir", "variant", "seed")
RUN_STATUSES = ("ok", "failed", "missing")
NO_PARAMETERS_LABEL = "all runs"
UNSTABLE_MARK = "(UNSTABLE)"
REJECTED_MARK = "(SOME REJECTED)"

ParameterValue = str | int | float | bool


@dataclass(slots=True)
class Run:
    """One run of a report: where its files are, its swept settings and its summary numbers."""

    run_id: str
    variant: str
    seed: int
    status: str  # one of RUN_STATUSES
    error: str | None
    run_dir: Path
    parameters: dict[str, ParameterValue] = field(default_factory=dict)
    metrics: dict[str, float] = field(default_factory=dict)
    stable: bool | None = None  # the run's stability verdict; None when it has none
    unstable_reason: str | None = None
    rejected: str | None = None  # what the run's rejected requests were; None: none rejected

    def metric(self, key: str) -> float:
        """A summary number; NaN when the run does not have it."""
        return self.metrics.get(key, math.nan)

    def values_of(self, paths: tuple[str, ...]) -> tuple[ParameterValue, ...]:
        """The run's values of the given swept paths."""
        return tuple(self.parameters[path] for path in paths)


@dataclass(slots=True)
class RunSet:
    """Every run of a report, in manifest order, and the dotted paths the sweep varied."""

    source_dir: Path
    is_sweep: bool
    parameter_paths: tuple[str, ...]
    runs: list[Run]

    def variants(self) -> list[str]:
        """Variant keys in order of first appearance."""
        return list(dict.fromkeys(run.variant for run in self.runs))

    def ok_runs(self, variant: str | None = None) -> list[Run]:
        """Finished runs, of one variant or of all."""
        return [
            run
            for run in self.runs
            if run.status == "ok" and (variant is None or run.variant == variant)
        ]

    def ok_runs_where(
        self, paths: tuple[str, ...], values: tuple[ParameterValue, ...]
    ) -> list[Run]:
        """Finished runs whose swept `paths` have the given `values`."""
        return [run for run in self.ok_runs() if run.values_of(paths) == values]

    def incomplete_runs(self) -> list[Run]:
        """Failed and missing runs."""
        return [run for run in self.runs if run.status != "ok"]

    def parameter_values(self, path: str) -> list[ParameterValue]:
        """The values a swept path takes, in order of first appearance."""
        return list(dict.fromkeys(run.parameters[path] for run in self.runs))

    def unstable_variants(self) -> list[str]:
        """Variants with a finished run that reached no steady state, in order."""
        return self._variants_where(lambda run: run.stable is False)

    def rejecting_variants(self) -> list[str]:
        """Variants with a finished run that rejected requests, in order."""
        return self._variants_where(lambda run: run.rejected is not None)

    def _variants_where(self, holds: Callable[[Run], bool]) -> list[str]:
        return [variant for variant in self.variants() if any(map(holds, self.ok_runs(variant)))]

    def variant_labels(self) -> dict[str, str]:
        """A short legend label per variant: `block_size=16, layout=chat` from the full paths,
        marked UNSTABLE when a run of the variant reached no steady state and SOME REJECTED
        when one rejected requests."""
        labels = self._plain_labels()
        for variant in self.unstable_variants():
            labels[variant] += f" {UNSTABLE_MARK}"
        for variant in self.rejecting_variants():
            labels[variant] += f" {REJECTED_MARK}"
        return labels

    def _plain_labels(self) -> dict[str, str]:
        labels: dict[str, str] = {}
        for run in self.runs:
            if run.variant in labels:
                continue
            if not self.is_sweep:
                labels[run.variant] = run.variant
            elif not self.parameter_paths:
                labels[run.variant] = NO_PARAMETERS_LABEL
            else:
                labels[run.variant] = self.settings_label(
                    self.parameter_paths, run.values_of(self.parameter_paths)
                )
        return labels

    def settings_label(self, paths: tuple[str, ...], values: tuple[ParameterValue, ...]) -> str:
        """`block_size=16, layout=chat`: short names of swept paths with their values."""
        names = short_parameter_names(self.parameter_paths)
        return ", ".join(
            f"{names[path]}={format_value(value)}"
            for path, value in zip(paths, values, strict=True)
        )


def short_parameter_names(paths: tuple[str, ...]) -> dict[str, str]:
    """Each dotted path's last segment, or the whole path where two last segments collide."""
    last_segments = [path.rsplit(".", 1)[-1] for path in paths]
    return {
        path: last if last_segments.count(last) == 1 else path
        for path, last in zip(paths, last_segments, strict=True)
    }


def format_value(value: ParameterValue) -> str:
    """A parameter value as a sweep file would spell it."""
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def load_run_set(directory: Path) -> RunSet:
    """Read a run directory (has summary.json) or a sweep directory (has manifest.parquet)."""
    if not directory.is_dir():
        raise InputError(f"report directory {str(directory)!r} does not exist or is not a folder")
    if (directory / MANIFEST_FILE).is_file():
        return _load_sweep(directory)
    if (directory / SUMMARY_FILE).is_file():
        return _load_single_run(directory)
    # A scenario's results directory (results/<name>/) holding exactly one run.
    run_dirs = sorted(path.parent for path in directory.glob(f"*/{SUMMARY_FILE}"))
    if len(run_dirs) == 1:
        return _load_single_run(run_dirs[0])
    if run_dirs:
        raise InputError(
            f"{directory} holds {len(run_dirs)} runs; give one of them: "
            + ", ".join(str(path) for path in run_dirs[:3])
            + (", ..." if len(run_dirs) > 3 else "")
        )
    raise InputError(
        f"{directory} is neither a run directory (no {SUMMARY_FILE}) "
        f"nor a sweep directory (no {MANIFEST_FILE})"
    )


def read_summary(run_dir: Path) -> dict[str, float]:
    """The numeric values of a run's summary.json (nulls, strings and flags left out)."""
    return _numeric_values(_read_summary_document(run_dir))


def _read_summary_document(run_dir: Path) -> dict[str, Any]:
    path = run_dir / SUMMARY_FILE
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise InputError(f"cannot read the run summary: {error}", source=str(path)) from None
    if not isinstance(document, dict):
        raise InputError("the run summary is not a JSON object", source=str(path))
    return document


def _numeric_values(values: dict[str, Any]) -> dict[str, float]:
    return {
        key: float(value)
        for key, value in values.items()
        if isinstance(value, int | float) and not isinstance(value, bool) and not math.isnan(value)
    }


def _load_single_run(run_dir: Path) -> RunSet:
    document = _read_summary_document(run_dir)
    metrics = _numeric_values(document)
    scenario = document.get("scenario")
    run = Run(
        run_id=str(document.get("run_id") or run_dir.name),
        variant=str(scenario) if scenario else run_dir.name,
        seed=int(metrics.get("seed", 0)),
        status="ok",
        error=None,
        run_dir=run_dir,
        metrics=metrics,
    )
    _set_stability(run, document)
    return RunSet(run_dir, False, (), [run])


def _load_sweep(sweep_dir: Path) -> RunSet:
    manifest_path = sweep_dir / MANIFEST_FILE
    try:
        table = pq.read_table(manifest_path)
    except (OSError, ValueError) as error:
        raise InputError(f"cannot read the manifest: {error}", source=str(manifest_path)) from None
    columns = table.column_names
    missing = [name for name in MANIFEST_FIXED_COLUMNS if name not in columns]
    if missing:
        raise InputError(
            f"manifest lacks columns {missing}; a sweep manifest has {list(MANIFEST_FIXED_COLUMNS)}"
            " then the swept paths and summary keys",
            source=str(manifest_path),
        )
    rows = table.to_pylist()
    # A swept path is a column every variant string names; summary keys never appear there.
    parameter_paths = tuple(
        name
        for name in columns
        if rows
        and name not in MANIFEST_FIXED_COLUMNS
        and all(_names_parameter(str(row["variant"] or ""), name) for row in rows)
    )
    runs = [
        _sweep_run(sweep_dir, manifest_path, row_number, row, parameter_paths)
        for row_number, row in enumerate(rows, start=1)
    ]
    return RunSet(sweep_dir, True, parameter_paths, runs)


def _names_parameter(variant: str, column: str) -> bool:
    return variant.startswith(f"{column}=") or f",{column}=" in variant


def _sweep_run(
    sweep_dir: Path,
    manifest_path: Path,
    row_number: int,
    row: dict[str, Any],
    parameter_paths: tuple[str, ...],
) -> Run:
    status = row["status"]
    if status not in RUN_STATUSES:
        raise InputError(
            f"row {row_number}: status {status!r} is not one of {list(RUN_STATUSES)}",
            source=str(manifest_path),
        )
    if row["seed"] is None or row["run_dir"] is None:
        raise InputError(
            f"row {row_number}: seed and run_dir must be set", source=str(manifest_path)
        )
    manifest_metrics = _numeric_values(
        {
            name: value
            for name, value in row.items()
            if name not in MANIFEST_FIXED_COLUMNS and name not in parameter_paths
        }
    )
    run = Run(
        run_id=str(row["run_id"]),
        variant=str(row["variant"] or ""),
        seed=int(row["seed"]),
        status=status,
        error=row["error"],
        run_dir=sweep_dir / row["run_dir"],
        parameters={path: row[path] for path in parameter_paths},
        metrics=manifest_metrics,
    )
    if status == "ok":
        if not (run.run_dir / SUMMARY_FILE).is_file():
            run.status = "missing"
            run.error = f"{row['run_dir']}/{SUMMARY_FILE} not found"
        else:
            document = _read_summary_document(run.run_dir)
            run.metrics = _numeric_values(document) | manifest_metrics
            _set_stability(run, document)
    return run


def _set_stability(run: Run, summary: dict[str, Any]) -> None:
    run.rejected = rejection_note(summary)
    stable = summary.get("stable")
    if isinstance(stable, bool):
        run.stable = stable
        reason = summary.get("unstable_reason")
        run.unstable_reason = str(reason) if reason is not None else None
