"""`prefixsim export-metrics RUN`: a run's metrics.parquet as a Prometheus /metrics page."""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path

import typer
import yaml

from sim.cli.app import app
from sim.errors import InputError
from sim.fileio import atomic_write_text
from sim.metrics import METRICS_FILE, prometheus_text

RESOLVED_CONFIG_FILE = "config.resolved.yaml"


class ExportFormat(StrEnum):
    prometheus = "prometheus"


def served_model_name(run_dir: Path) -> str:
    """The run's deployment.model, which vLLM would serve under that name."""
    path = run_dir / RESOLVED_CONFIG_FILE
    try:
        config = yaml.safe_load(path.read_text(encoding="utf-8"))
        return str(config["deployment"]["model"])
    except (OSError, yaml.YAMLError, KeyError, TypeError) as error:
        raise InputError(f"cannot read deployment.model: {error}", source=str(path)) from None


@app.command("export-metrics")
def export_metrics_command(
    run_dir: Path = typer.Argument(..., help="A run directory (metrics.parquet)."),
    export_format: ExportFormat = typer.Option(
        ExportFormat.prometheus, "--format", help="prometheus: the text exposition format."
    ),
    at: float | None = typer.Option(
        None, "--at", help="Simulated time (s): the last scrape at or before it (default: end)."
    ),
    out: Path | None = typer.Option(None, "--out", help="Write the page here, not to stdout."),
) -> None:
    """Print the run's metrics as a vLLM 0.33 /metrics page, one series per replica (engine)."""
    metrics_path = run_dir / METRICS_FILE
    if not run_dir.exists():
        raise InputError("does not exist; give a run directory", source=str(run_dir))
    if not metrics_path.is_file():
        raise InputError(f"is not a run directory: no {METRICS_FILE}", source=str(run_dir))
    text = prometheus_text(metrics_path, served_model_name(run_dir), at)
    if out is None:
        print(text, end="")
    else:
        atomic_write_text(out, text)
