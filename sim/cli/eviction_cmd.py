"""`prefixsim eviction SCENARIO.yaml`: LRU vs LFU vs length-aware vs Belady on one stream."""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path

import typer
from rich.console import Console

from sim.cli.app import app
from sim.cli.errors import print_loud
from sim.config import check_pool_size, check_scenario_limits, load_scenario
from sim.errors import InputError
from sim.fileio import check_output_dir
from sim.runner import check_skipped, scheduler_config
from workloads.api import WorkloadError


@app.command("eviction")
def eviction_command(
    scenario_file: Path = typer.Argument(..., help="Scenario whose workload is the stream."),
    set_values: list[str] = typer.Option([], "--set", help="Override: dotted.path=value."),
    kv_tokens: int | None = typer.Option(
        None, "--kv-tokens", min=1, help="Cache size in tokens (default: the scenario's)."
    ),
    out: Path | None = typer.Option(None, "--out", help="Default: results/<name>/eviction."),
) -> None:
    """Replay the scenario's requests through the cache alone under each eviction policy."""
    from sim.report.study_files import write_study_files
    from sim.studies.eviction import compare_eviction_policies
    from sim.studies.eviction_plot import eviction_figure

    loaded = load_scenario(scenario_file, set_values)
    scenario = loaded.scenario
    try:
        check_scenario_limits(scenario)
    except InputError as error:
        raise error.at(scenario_file) from None
    block_size = scenario.engine.block_size
    if kv_tokens is not None:
        num_gpu_blocks = kv_tokens // block_size + 1
        check_pool_size(num_gpu_blocks, f"--kv-tokens {kv_tokens} ({num_gpu_blocks} blocks)")
    else:
        num_gpu_blocks = scheduler_config(scenario).num_gpu_blocks
    out = out if out is not None else Path("results") / scenario.name / "eviction"
    check_output_dir(out)
    specs = scenario.workload.build(
        seed=scenario.seed, until_s=scenario.duration_s, base_dir=loaded.base_dir
    )
    try:
        report = compare_eviction_policies(
            specs,
            num_gpu_blocks=num_gpu_blocks,
            block_size=block_size,
            hash_algo=scenario.engine.hash_algo,
        )
    except WorkloadError as error:
        raise InputError.from_workload_error(error) from None
    warning = check_skipped(
        report.num_skipped,
        report.num_requests + report.num_skipped,
        num_gpu_blocks,
        block_size,
        "give the cache more room with --kv-tokens",
    )
    markdown = report.to_markdown()
    write_study_files(out, "eviction", markdown, asdict(report), eviction_figure(report))
    console = Console(stderr=True)
    console.print(markdown)
    if warning is not None:
        print_loud(console, f"WARNING: {warning}")
    print(out / "eviction.md")
