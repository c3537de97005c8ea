"""`prefixsim offload SCENARIO.yaml`: the smallest CPU KV offload size that reaches a share of
the unbounded-cache hit rate, and the TTFT it gives."""

from __future__ import annotations

import tempfile
from pathlib import Path

import typer
from rich.console import Console

from sim.cli.app import app
from sim.cli.errors import print_loud
from sim.config import load_scenario
from sim.fileio import check_output_dir


@app.command("offload")
def offload_command(
    scenario_file: Path = typer.Argument(..., help="Scenario whose traffic the sweep replays."),
    target: float = typer.Option(
        90.0, "--target", help="Percent of the unbounded-cache hit rate to reach."
    ),
    start_gib: float | None = typer.Option(
        None, "--start-gib", help="First nonzero size (default: the GPU KV cache's size)."
    ),
    growth_tol: float = typer.Option(
        0.002, "--growth-tol", help="Hit-rate growth per doubling that counts as a plateau."
    ),
    set_values: list[str] = typer.Option([], "--set", help="Override: dotted.path=value."),
    out: Path | None = typer.Option(None, "--out", help="Default: results/<name>/offload."),
) -> None:
    """Sweep kv_offloading_size from 0 until the hit rate stops growing; answer the smallest
    host memory reaching --target percent of that plateau, with its TTFT p50/p99."""
    from sim.report.study_files import write_study_files
    from sim.studies.offload import OffloadSettings, offload_study
    from sim.studies.offload_figure import offload_figure

    loaded = load_scenario(scenario_file, set_values)
    scenario = loaded.scenario
    settings = OffloadSettings(
        target_fraction=target / 100, start_gib=start_gib, growth_tol=growth_tol
    )
    console = Console(stderr=True)
    out = out if out is not None else Path("results") / scenario.name / "offload"
    check_output_dir(out)  # before the sweep, not after it
    with tempfile.TemporaryDirectory(prefix="prefixsim-offload-") as scratch:
        result = offload_study(
            scenario,
            loaded.base_dir,
            settings,
            scratch_dir=Path(scratch),
            on_point=lambda p: console.print(
                f"{p.size_gib:g} GiB: hit rate {p.hit_rate}, TTFT p99 {p.ttft_p99_s}"
            ),
        )
    markdown = result.to_markdown()
    write_study_files(out, "offload", markdown, result.as_dict(), offload_figure(result))
    console.print(markdown)
    warning = result.unstable_warning()
    if warning is not None:
        print_loud(console, warning)
    print(out / "offload.md")
