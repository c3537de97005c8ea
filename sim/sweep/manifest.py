"""manifest.parquet: one row per run of a sweep, in expansion order, with its summary numbers.

Columns: run_id, status ('ok' | 'failed' | 'missing'), error, run_dir ('runs/<run_id>'), variant,
seed, one column per swept dotted path, then every numeric summary.json key (sorted by name),
then `stable` (bool) and `unstable_reason` (null for stable runs) from the stability test.
"""

from __future__ import annotations

import io
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from sim.fileio import atomic_write_bytes
from sim.runner import lost_result_files
from sim.sweep.expand import SweepRun, format_value

FIXED_COLUMNS = ("run_id", "status", "error", "run_dir", "variant", "seed")
ERROR_SUFFIX = ".error.json"


@dataclass(slots=True)
class RunRecord:
    """A run's state on disk: 'ok' with its summary, 'failed' with its error, or 'missing'."""

    status: str
    error: str | None = None
    summary: dict[str, Any] | None = None


def run_dir_name(run_id: str) -> str:
    """A run's directory, relative to the sweep directory."""
    return f"runs/{run_id}"


def read_run_record(sweep_dir: Path, run_id: str) -> RunRecord:
    """A finished run has summary.json and its other result files; a failed one left
    runs/<run_id>.error.json. A run missing a result file (removed since) is run again."""
    run_dir = sweep_dir / run_dir_name(run_id)
    try:
        summary = json.loads((run_dir / "summary.json").read_text())
    except (OSError, ValueError):
        summary = None  # not finished (or unreadable): the run is done again
    if summary is not None:
        lost = lost_result_files(run_dir)
        if not lost:
            return RunRecord("ok", summary=summary)
        return RunRecord("missing", f"{', '.join(lost)} lost since it finished: it runs again")
    error_path = sweep_dir / f"{run_dir_name(run_id)}{ERROR_SUFFIX}"
    try:
        error_record = json.loads(error_path.read_text())
    except FileNotFoundError:
        return RunRecord("missing")
    except (OSError, ValueError):
        return RunRecord("failed", f"unreadable error record {error_path.name}")
    return RunRecord("failed", str(error_record.get("error")))


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _parameter_array(values: list[Any]) -> pa.Array:
    """Native types when the values share one; otherwise (or for lists/maps) text."""
    present = [value for value in values if value is not None]
    if present and all(isinstance(value, bool) for value in present):
        return pa.array(values, type=pa.bool_())
    if present and all(isinstance(value, int) and _is_number(value) for value in present):
        return pa.array(values, type=pa.int64())
    if present and all(_is_number(value) for value in present):
        return pa.array([None if v is None else float(v) for v in values], type=pa.float64())
    if all(isinstance(value, str) for value in present):
        return pa.array(values, type=pa.string())
    return pa.array([None if v is None else format_value(v) for v in values], type=pa.string())


def _metric_array(values: list[Any]) -> pa.Array:
    numbers = [value if _is_number(value) else None for value in values]
    if all(isinstance(value, int) for value in numbers if value is not None):
        return pa.array(numbers, type=pa.int64())
    return pa.array([None if v is None else float(v) for v in numbers], type=pa.float64())


def manifest_table(
    runs: list[SweepRun], paths: tuple[str, ...], records: dict[str, RunRecord]
) -> pa.Table:
    """The manifest rows of `runs` (expansion order) given each run's record."""
    ordered = [records[run.run_id] for run in runs]
    columns: dict[str, pa.Array] = {
        "run_id": pa.array([run.run_id for run in runs], type=pa.string()),
        "status": pa.array([record.status for record in ordered], type=pa.string()),
        "error": pa.array([record.error for record in ordered], type=pa.string()),
        "run_dir": pa.array([run_dir_name(run.run_id) for run in runs], type=pa.string()),
        "variant": pa.array([run.variant for run in runs], type=pa.string()),
        "seed": pa.array([run.seed for run in runs], type=pa.int64()),
    }
    for path in paths:
        columns[path] = _parameter_array([dict(run.parameters)[path] for run in runs])
    summaries = [record.summary or {} for record in ordered]
    metric_keys = {
        key for summary in summaries for key, value in summary.items() if _is_number(value)
    }
    for key in sorted(metric_keys - set(columns)):
        columns[key] = _metric_array([summary.get(key) for summary in summaries])
    columns["stable"] = pa.array([summary.get("stable") for summary in summaries], pa.bool_())
    columns["unstable_reason"] = pa.array(
        [summary.get("unstable_reason") for summary in summaries], pa.string()
    )
    return pa.table(columns)


def write_manifest(path: Path, table: pa.Table) -> None:
    """Write the manifest atomically (a reader sees the old or the new one, whole)."""
    buffer = io.BytesIO()
    pq.write_table(table, buffer)
    atomic_write_bytes(path, buffer.getvalue())
