"""`prefixsim plan`: the largest arrival rate, or the fewest replicas / least KV memory, that
meets latency SLOs; prints the probes and the answer, writes plan.json and plan.png."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import typer
from rich.console import Console
from rich.table import Table

from sim.cli.app import app
from sim.config import load_scenario
from sim.fileio import atomic_write_text
from sim.studies.plan import (
    FIND_MODES,
    PlanResult,
    PlanSettings,
    Probe,
    check_plan_inputs,
    parse_slo,
    plan,
)

console = Console(stderr=True)


def _verdict(probe: Probe) -> str:
    if probe.feasible:
        return "ok"
    return "over SLO" if probe.stable else "unstable"


def _probe_line(probe: Probe, index: int) -> str:
    metrics = ", ".join(
        f"{metric} {'n/a' if value is None else f'{value:.3g} s'}"
        for metric, value in probe.metrics_s.items()
    )
    return (
        f"probe {index}: {probe.value:g} -> {_verdict(probe)} "
        f"({metrics}, drain {probe.drain_s:.3g} s)"
    )


def _table(result: PlanResult) -> Table:
    table = Table(title=f"{result.scenario}: probes by {result.settings.find} ({result.unit})")
    table.add_column(result.settings.find, justify="right")
    for slo in result.slos:
        table.add_column(f"{slo.metric} (s) <= {slo.limit_s:g}", justify="right")
    table.add_column("drain (s)", justify="right")
    table.add_column("requests", justify="right")
    table.add_column("verdict")
    for probe in sorted(result.probes, key=lambda probe: probe.value):
        values = [probe.metrics_s[slo.metric] for slo in result.slos]
        table.add_row(
            f"{probe.value:g}",
            *("n/a" if value is None else f"{value:.4g}" for value in values),
            f"{probe.drain_s:.3g}",
            f"{probe.num_requests:,}",
            _verdict(probe),
        )
    return table


def _answer_line(result: PlanResult) -> str:
    find, unit = result.settings.find, result.unit
    if result.answer is None:
        return f"no {find} probed meets the SLOs (tried up to {result.infeasible_bound:g} {unit})"
    goal = "largest" if find == "rate" else "smallest"
    text = f"{goal} {find} meeting the SLOs: {result.answer:g} {unit}"
    if result.infeasible_bound is None:
        if find == "rate":
            return f"{text} (the largest probed; the boundary lies higher)"
        return f"{text} (the smallest possible)"
    return f"{text} (infeasible at {result.infeasible_bound:g})"


@app.command("plan")
def plan_command(
    scenario_file: Path = typer.Argument(..., help="Scenario YAML (with duration_s)."),
    slo: list[str] = typer.Option(
        ..., "--slo", help="Latency limit metric=value with s or ms, e.g. ttft_p99=2s (repeat)."
    ),
    find: str = typer.Option("rate", "--find", help=f"What to search: {', '.join(FIND_MODES)}."),
    rate: float | None = typer.Option(
        None, "--rate", help="Arrival rate (arrivals/s) to hold; for --find rate, the start."
    ),
    tolerance: float = typer.Option(
        0.05, "--tolerance", help="Stop bisecting when the bracket is within this fraction."
    ),
    max_drain_fraction: float = typer.Option(
        0.1,
        "--max-drain-fraction",
        help="Unstable if draining after duration_s takes longer than this x the window.",
    ),
    max_replicas: int = typer.Option(64, "--max-replicas", help="Upper end for --find replicas."),
    set_values: list[str] = typer.Option([], "--set", help="Override: dotted.path=value."),
    out: Path | None = typer.Option(
        None, "--out", help="Where plan.json and plan.png go (default results/<name>/plan-<find>)."
    ),
) -> None:
    """Find the capacity that meets the SLOs by simulating probes (bracket, then bisect)."""
    slos = [parse_slo(text) for text in slo]
    loaded = load_scenario(scenario_file, set_values)
    scenario = loaded.scenario
    settings = PlanSettings(
        find=find,
        rate_per_s=rate,
        rel_tol=tolerance,
        max_drain_fraction=max_drain_fraction,
        max_replicas=max_replicas,
    )
    check_plan_inputs(scenario, settings)
    out_dir = out if out is not None else Path("results") / scenario.name / f"plan-{find}"
    out_dir.mkdir(parents=True, exist_ok=True)
    num_probes = 0

    def report(probe: Probe) -> None:
        nonlocal num_probes
        num_probes += 1
        console.print(_probe_line(probe, num_probes))

    with tempfile.TemporaryDirectory(prefix=".plan-probes-", dir=out_dir) as scratch:
        result = plan(
            scenario, loaded.base_dir, slos, settings, scratch_dir=Path(scratch), on_probe=report
        )
    atomic_write_text(
        out_dir / "plan.json", json.dumps(result.to_json(), indent=2, sort_keys=True) + "\n"
    )
    from sim.report.plotting import save_figure
    from sim.studies.plan_figure import plan_figure

    save_figure(plan_figure(result), out_dir / "plan.png")
    Console().print(_table(result))
    print(_answer_line(result))
    console.print(f"plan.json and plan.png in {out_dir}")
