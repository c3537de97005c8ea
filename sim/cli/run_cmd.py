"""`prefixsim run`, `validate`, `schema` and `demo`: scenarios from YAML."""

from __future__ import annotations

import json
from pathlib import Path

import typer
from rich.console import Console

from sim.cli.app import app
from sim.config import load_scenario, load_source, scenario_json_schema
from sim.errors import InputError
from sim.fileio import atomic_write_text
from sim.runner import run_scenario
from sim.sweep import load_sweep

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
    try:
        result = run_scenario(
            loaded.scenario, loaded.base_dir, results_root=results, run_dir=out, progress=progress
        )
    except InputError as error:
        raise error.at(scenario_file) from None
    print_summary(result.summary, result.run_dir)
    print(json.dumps(result.summary, sort_keys=True))


@app.command("validate")
def validate_command(
    scenario_file: Path = typer.Argument(..., help="Scenario or sweep YAML."),
    set_values: list[str] = typer.Option([], "--set", help="Override: dotted.path=value."),
) -> None:
    """Check a scenario, sweep or study file: prints 'ok', or one line on the problem."""
    keys = load_source(scenario_file).data
    if "sweep" in keys:
        plan = load_sweep(scenario_file, set_values)
        print(f"ok: sweep {plan.name} with {len(plan.runs)} runs")
    elif "segments" in keys or "secrets" in keys:
        from sim.studies.layout_config import LayoutStudySettings
        from sim.studies.side_channel_config import SideChannelSettings
        from sim.studies.study_runs import load_study

        model = LayoutStudySettings if "segments" in keys else SideChannelSettings
        settings, _ = load_study(scenario_file, model, set_values)
        print(f"ok: study {settings.name}")
    else:
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
    out: Path = typer.Option(Path("results/demo"), "--out", help="The demo sweep's directory."),
    jobs: int = typer.Option(2, "-j", "--jobs", min=1, help="Runs at a time."),
    set_values: list[str] = typer.Option(
        [], "--set", help="Override a field of the demo's base scenario: dotted.path=value."
    ),
) -> None:
    """Run the embedded demo sweep (block size x prompt layout, 2 seeds) and write its report."""
    from sim.demo import run_demo, variant_lines  # draws with matplotlib: load only when used

    result = run_demo(out, overrides=set_values, num_workers=jobs, progress=True)
    for line in variant_lines(result.sweep.sweep_dir):
        console.print(f"  {line}", soft_wrap=True)
    if result.sweep.failed_run_ids:
        console.print(f"{len(result.sweep.failed_run_ids)} runs failed; see the report")
    console.print(f"report in {result.report.report_path}")
