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
from sim.cli.errors import print_loud
from sim.errors import InputError
from sim.fileio import atomic_write_text, make_dirs, remove_created, remove_leftovers
from sim.runner import preflight
from sim.studies.plan import (
    FIND_MODES,
    PlanResult,
    PlanSettings,
    Probe,
    check_plan_inputs,
    format_quantity,
    format_value,
    parse_slos,
    plan,
    plan_base,
    slo_slug,
)

console = Console(stderr=True)


def _verdict(probe: Probe) -> str:
    if probe.feasible:
        return "ok"
    return "over SLO" if probe.stable else "unstable"


def _probe_line(probe: Probe, index: int, find: str) -> str:
    metrics = ", ".join(
        f"{metric} {'n/a' if value is None else f'{value:.3g} s'}"
        for metric, value in probe.metrics_s.items()
    )
    why = "" if probe.stable else f"; {probe.unstable_reason}"
    return (
        f"probe {index} (seed {probe.seed}): {format_value(probe.value, find)} -> "
        f"{_verdict(probe)} ({metrics}, drain {probe.drain_s:.3g} s{why})"
    )


def _table(result: PlanResult) -> Table:
    table = Table(title=f"{result.scenario}: probes by {result.settings.find} ({result.unit})")
    table.add_column(result.settings.find, justify="right")
    table.add_column("seed", justify="right")
    for slo in result.slos:
        table.add_column(f"{slo.metric} (s) <= {slo.limit_s:g}", justify="right")
    table.add_column("drain (s)", justify="right")
    table.add_column("requests", justify="right")
    table.add_column("verdict")
    for probe in sorted(result.probes, key=lambda probe: (probe.value, probe.seed)):
        values = [probe.metrics_s[slo.metric] for slo in result.slos]
        table.add_row(
            format_value(probe.value, result.settings.find),
            str(probe.seed),
            *("n/a" if value is None else f"{value:.4g}" for value in values),
            f"{probe.drain_s:.3g}",
            f"{probe.num_requests:,}",
            _verdict(probe),
        )
    return table


def answer_line(result: PlanResult) -> str:
    """The answer with sensible precision, its infeasible neighbour and the CI over seeds."""
    find = result.settings.find
    if result.answer is None:
        tried = (
            ""
            if result.infeasible_bound is None
            else format_quantity(result.infeasible_bound, find)
        )
        return f"no {find} probed meets the SLOs (tried up to {tried})"
    goal = "largest" if find == "rate" else "smallest"
    text = f"{goal} {find} meeting the SLOs: {format_quantity(result.answer, find)}"
    if result.infeasible_bound is None:
        if find == "rate":
            text += " (the largest probed; the boundary lies higher)"
        elif find == "replicas":
            text += " (the smallest possible)"
        else:
            text += (
                " (the least vLLM starts with: room for one engine.max_model_len sequence; "
                "lower max_model_len to probe below)"
            )
    else:
        text += f" (infeasible at {format_value(result.infeasible_bound, find)})"
    interval = result.answer_interval
    if interval is not None:
        mean, low, high = interval
        text += (
            f"; over {len(result.brackets)} seeds mean {format_value(mean, find)}, 95 % CI "
            f"[{format_value(low, find)}, {format_value(high, find)}]"
        )
    return text


def parse_seeds(text: str | None) -> tuple[int, ...]:
    """`1,2,3` as (1, 2, 3); None as ()."""
    if text is None:
        return ()
    try:
        seeds = tuple(int(part) for part in text.split(","))
    except ValueError:
        raise InputError(f"--seeds {text!r}: expected integers separated by commas") from None
    if len(set(seeds)) != len(seeds):
        raise InputError(f"--seeds {text!r}: each seed once")
    return seeds


@app.command("plan")
def plan_command(
    scenario_file: Path = typer.Argument(
        ..., help="Scenario YAML (with duration_s), or a sweep file: its base scenario and seeds."
    ),
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
    seeds: str | None = typer.Option(
        None,
        "--seeds",
        help="Comma-separated seeds: one search each, answer sustained by all, 95 % CI "
        "(default: the scenario's seed).",
    ),
    max_replicas: int = typer.Option(64, "--max-replicas", help="Upper end for --find replicas."),
    set_values: list[str] = typer.Option([], "--set", help="Override: dotted.path=value."),
    out: Path | None = typer.Option(
        None,
        "--out",
        help="Where plan.json and plan.png go (default results/<name>/plan-<find>-<SLOs>).",
    ),
) -> None:
    """Find the capacity that meets the SLOs by simulating probes (bracket, then bisect)."""
    slos = parse_slos(slo)
    scenario, base_dir, sweep_seeds = plan_base(scenario_file, set_values)
    settings = PlanSettings(
        find=find,
        rate_per_s=rate,
        rel_tol=tolerance,
        max_replicas=max_replicas,
        seeds=parse_seeds(seeds) or sweep_seeds,
    )
    check_plan_inputs(scenario, settings)
    try:
        # A kv-memory search sizes the cache itself: the file's own may be too small to start.
        preflight(scenario, base_dir, cache_sized_later=find == "kv-memory")
    except InputError as error:
        raise error.at(scenario_file) from None
    default_dir = Path("results") / scenario.name / f"plan-{find}-{slo_slug(slos)}"
    out_dir = out if out is not None else default_dir
    created_dirs = make_dirs(out_dir)
    remove_leftovers(out_dir)  # probe directories a killed plan left
    num_probes = 0

    def report(probe: Probe) -> None:
        nonlocal num_probes
        num_probes += 1
        console.print(_probe_line(probe, num_probes, find), soft_wrap=True, markup=False)

    try:
        with tempfile.TemporaryDirectory(
            prefix=".plan-probes-", suffix=".partial", dir=out_dir
        ) as scratch:
            result = plan(
                scenario, base_dir, slos, settings, scratch_dir=Path(scratch), on_probe=report
            )
    except BaseException:
        remove_created(created_dirs)  # a failed or interrupted plan leaves no empty directories
        raise
    atomic_write_text(
        out_dir / "plan.json", json.dumps(result.to_json(), indent=2, sort_keys=True) + "\n"
    )
    from sim.report.plotting import save_figure
    from sim.studies.plan_figure import plan_figure

    save_figure(plan_figure(result), out_dir / "plan.png")
    Console().print(_table(result))
    print(answer_line(result))
    note = result.stability_note()
    if note is not None:
        print_loud(console, note)
    console.print(f"plan.json and plan.png in {out_dir}")
