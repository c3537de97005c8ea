"""`prefixsim run`, `validate`, `schema` and `demo`: scenarios from YAML."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import typer
from rich.console import Console

from sim.cli import app
from sim.config import load_scenario, scenario_json_schema
from sim.demo import DEMO_SCENARIO_YAML
from sim.fileio import atomic_write_text
from sim.runner import run_scenario
from sim.sweep import is_sweep_file, load_sweep

console = Console(stderr=True)
SUMMARY_FIELDS = (
    ("num_requests", "requests measured", "{:,}"),
    ("hit_rate", "prefix-cache hit rate (tokens)", "{:.1%}"),
    ("ttft_p50_s", "TTFT p50", "{:.3f} s"),
    ("ttft_p99_s", "TTFT p99", "{:.3f} s"),
    ("e2e_p50_s", "E2E p50", "{:.3f} s"),
    ("output_tokens_per_s", "output tokens/s", "{:,.0f}"),
    ("num_preemptions", "preemptions", "{:,}"),
    ("num_evictions", "evictions", "{:,}"),
    ("kv_usage_mean", "KV usage mean", "{:.1%}"),
)


def print_summary(summary: dict, run_dir: Path) -> None:
    """A few headline numbers, then the path of the full results."""
    for key, label, template in SUMMARY_FIELDS:
        value = summary.get(key)
        shown = "n/a" if value is None else template.format(value)
        console.print(f"  {label:<32} {shown}")
    console.print(f"results in {run_dir}")


@app.command("run")
def run_command(
    scenario_file: Path = typer.Argument(..., help="Scenario YAML."),
    set_values: list[str] = typer.Option(
        [], "--set", help="Override a field: dotted.path=value (repeatable)."
    ),
    results: Path = typer.Option(Path("results"), "--results", help="Results root directory."),
    out: Path | None = typer.Option(
        None, "--out", help="Exact run directory (default: RESULTS/<name>/<run_id>)."
    ),
    progress: bool = typer.Option(True, "--progress/--no-progress", help="Show a progress bar."),
) -> None:
    """Simulate one scenario and write requests/steps/events/metrics parquet and summary.json."""
    loaded = load_scenario(scenario_file, set_values)
    result = run_scenario(
        loaded.scenario, loaded.base_dir, results_root=results, run_dir=out, progress=progress
    )
    print_summary(result.summary, result.run_dir)
    print(json.dumps(result.summary, sort_keys=True))


@app.command("validate")
def validate_command(
    scenario_file: Path = typer.Argument(..., help="Scenario or sweep YAML."),
    set_values: list[str] = typer.Option([], "--set", help="Override: dotted.path=value."),
) -> None:
    """Check a scenario or sweep file: prints 'ok' and its run ids, or one line on the problem."""
    if is_sweep_file(scenario_file):
        plan = load_sweep(scenario_file, set_values)
        print(f"ok: sweep {plan.name} with {len(plan.runs)} runs")
        return
    loaded = load_scenario(scenario_file, set_values)
    print(f"ok: {loaded.scenario.name} (run id {loaded.scenario.run_id()})")


@app.command("schema")
def schema_command(
    out: Path | None = typer.Option(None, "--out", help="Write the JSON Schema here."),
) -> None:
    """Print (or save) the JSON Schema of scenario files, for editors."""
    text = json.dumps(scenario_json_schema(), indent=2, sort_keys=True) + "\n"
    if out is None:
        print(text, end="")
    else:
        atomic_write_text(out, text)


@app.command("demo")
def demo_command(
    out: Path = typer.Option(Path("results/demo"), "--out", help="Where the demo writes."),
) -> None:
    """Run the embedded default scenario (a few simulated minutes of multi-turn chat)."""
    with tempfile.TemporaryDirectory() as scratch:
        scenario_file = Path(scratch) / "demo.yaml"
        scenario_file.write_text(DEMO_SCENARIO_YAML)
        loaded = load_scenario(scenario_file)
        result = run_scenario(loaded.scenario, loaded.base_dir, run_dir=out, progress=True)
    print_summary(result.summary, result.run_dir)
