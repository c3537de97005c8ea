"""`prefixsim run`, `validate`, `schema` and `demo`: scenarios from YAML."""

from __future__ import annotations

import json
from pathlib import Path

import typer
from rich.console import Console

from sim.cli.app import app
from sim.cli.errors import print_loud
from sim.cli.sweep_cmd import MAX_RUNS_HELP
from sim.config import DEFAULT_MAX_RUNS, load_scenario, load_source
from sim.errors import InputError
from sim.fileio import atomic_write_text, check_output_file
from sim.metrics import parse_goodput, rejection_note
from sim.runner import preflight, run_scenario
from sim.sweep import load_sweep
from sim.sweep.driver import check_runs_within_limits, run_label, runs_refused_at_start

console = Console(stderr=True)
SUMMARY_FIELDS = (
    ("num_requests", "requests measured", "{:,}"),
    ("hit_rate", "prefix-cache hit rate (tokens)", "{:.1%}"),
    ("external_hit_rate", "CPU-tier hit rate (its queries)", "{:.1%}"),
    ("ttft_p50_s", "TTFT p50", "{:.3f} s"),
    ("ttft_p99_s", "TTFT p99", "{:.3f} s"),
    ("tpot_p99_s", "TPOT p99", "{:.4f} s"),
    ("e2e_p50_s", "E2E p50", "{:.3f} s"),
    ("output_tokens_per_s", "output tokens/s", "{:,.0f}"),
    ("goodput_per_s", "goodput (requests/s within SLOs)", "{:,.2f}"),
    ("num_preemptions", "preemptions", "{:,}"),
    ("num_evictions", "evictions", "{:,}"),
    ("kv_usage_mean", "KV usage mean", "{:.1%}"),
)


def stability_line(summary: dict) -> str:
    """'steady state reached', or a loud warning with the reason the run is unstable."""
    if summary.get("stable"):
        return (
            "steady state reached: request rate, queue and TTFT without significant growth "
            "over the window"
        )
    return (
        "WARNING: UNSTABLE - no steady state, so these numbers describe this run's length, "
        f"not the deployment: {summary.get('unstable_reason')}"
    )


def print_summary(summary: dict, run_dir: Path) -> None:
    """A few headline numbers, the stability verdict, any rejected requests, then the path of the
    full results."""
    for key, label, template in SUMMARY_FIELDS:
        if key not in summary:
            continue  # goodput without --goodput limits
        value = summary[key]
        shown = "n/a" if value is None else template.format(value)
        console.print(f"  {label:<32} {shown}")
    style = "green" if summary.get("stable") else "bold red"
    console.print(stability_line(summary), style=style, soft_wrap=True, markup=False)
    rejected = rejection_note(summary)
    if rejected is not None:
        warning = f"WARNING: {rejected}. The latencies and rates measure only the admitted ones."
        print_loud(console, warning)
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
    goodput: list[str] = typer.Option(
        [],
        "--goodput",
        help="A goodput limit as vLLM's benchmark takes it, NAME:MS with NAME ttft, tpot or "
        "e2el (repeatable); adds goodput_per_s to summary.json (the run gets its own id).",
    ),
) -> None:
    """Simulate one scenario and write requests/steps/events/metrics parquet and summary.json."""
    goodput_slos = parse_goodput(goodput)
    loaded = load_scenario(scenario_file, set_values)
    try:
        result = run_scenario(
            loaded.scenario,
            loaded.base_dir,
            results_root=results,
            run_dir=out,
            progress=progress,
            goodput=goodput_slos,
        )
    except InputError as error:
        raise error.at(scenario_file) from None
    print_summary(result.summary, result.run_dir)
    print(json.dumps(result.summary, sort_keys=True))


@app.command("validate")
def validate_command(
    scenario_file: Path = typer.Argument(..., help="Scenario or sweep YAML."),
    set_values: list[str] = typer.Option([], "--set", help="Override: dotted.path=value."),
    max_runs: int = typer.Option(DEFAULT_MAX_RUNS, "--max-runs", min=1, help=MAX_RUNS_HELP),
) -> None:
    """Check a scenario, sweep or study file: prints 'ok', or one line on the problem."""
    keys = load_source(scenario_file).data
    if "sweep" in keys:
        plan = load_sweep(scenario_file, set_values, max_runs)
        check_runs_within_limits(plan)
        refused = runs_refused_at_start(plan)
        print(f"ok: sweep {plan.name} with {len(plan.runs)} runs")
        if refused:
            print(f"{len(refused)} of them would fail at their start; the others still run:")
            for run in plan.runs:
                if run.run_id in refused:
                    print(f"  sweep run {run_label(run)}: {refused[run.run_id]}")
    elif "segments" in keys or "secrets" in keys:
        from sim.studies.layout_config import LayoutStudySettings
        from sim.studies.side_channel_config import SideChannelSettings
        from sim.studies.study_runs import load_study

        model = LayoutStudySettings if "segments" in keys else SideChannelSettings
        settings, _ = load_study(scenario_file, model, set_values)
        print(f"ok: study {settings.name}")
    else:
        loaded = load_scenario(scenario_file, set_values)
        try:
            preflight(loaded.scenario, loaded.base_dir)
        except InputError as error:
            raise error.at(scenario_file) from None
        print(f"ok: {loaded.scenario.name} (run id {loaded.scenario.run_id()})")


@app.command("schema")
def schema_command(
    out: Path | None = typer.Option(None, "--out", help="Write the JSON Schema here."),
) -> None:
    """Print (or save) the JSON Schema of scenario, sweep and study files, for editors."""
    from sim.cli.file_schema import file_json_schema  # imports the study models: only when used

    if out is not None:
        check_output_file(out)
    text = json.dumps(file_json_schema(), indent=2, sort_keys=True) + "\n"
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
