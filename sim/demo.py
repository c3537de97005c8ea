"""What `make demo` runs: a small embedded sweep of multi-turn chat, then its report."""

from __future__ import annotations

import dataclasses
import math
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from sim.errors import InputError
from sim.report.report import ReportResult, write_report
from sim.report.runs import load_run_set
from sim.report.stats import mean_interval
from sim.sweep import SweepResult, load_sweep, run_sweep

DEMO_SWEEP_YAML = """\
# Multi-turn chat on one H100 serving Llama-3.1-8B: how do the KV block size and the place of
# per-user fields in the prompt (after the system prompt, or before it) change hit rate and TTFT?
name: demo
seed: 1
duration_s: 480
warmup_s: 240
engine:
  block_size: 16
  max_num_batched_tokens: 8192
  max_num_seqs: 256
deployment: {model: llama-3.1-8b, gpu: h100, tp: 1}
cost_model: auto
workload:
  source:
    kind: chat
    common: {system_prompt_tokens: 256, user_id_tokens: 16, timestamp_tokens: 8}
  arrivals: {process: poisson, rate_per_s: 2.0}
outputs: {events: true, scrape_interval_s: 5.0}
sweep:
  grid:
    engine.block_size: [16, 64]
    workload.source.layout: [chat, chat_user_fields_first]
  seeds: [1, 2]
"""


# How errors name the sweep above (written to a scratch file to be loaded).
DEMO_SOURCE = "the demo sweep (DEMO_SWEEP_YAML in sim/demo.py)"


@dataclass(slots=True)
class DemoResult:
    """The demo sweep's outcome and the report written into its directory."""

    sweep: SweepResult
    report: ReportResult


def run_demo(
    out_dir: Path,
    *,
    overrides: Sequence[str] = (),
    num_workers: int = 2,
    progress: bool = True,
) -> DemoResult:
    """Run the embedded sweep (`overrides`: dotted.path=value on its base) into `out_dir`.

    Finished runs are kept and reused; the report is written into `out_dir` too.
    """
    with tempfile.TemporaryDirectory() as scratch:
        sweep_file = Path(scratch) / "demo.yaml"
        sweep_file.write_text(DEMO_SWEEP_YAML)
        try:
            loaded = load_sweep(sweep_file, list(overrides))
        except InputError as error:
            if error.source != str(sweep_file):
                raise
            # The scratch file is gone when the user reads this: name the sweep it held.
            raise InputError(error.message, source=DEMO_SOURCE, line=error.line) from None
        # The sweep directory is results_root / plan name, so naming the plan after --out
        # puts the sweep exactly there.
        plan = dataclasses.replace(loaded, name=out_dir.name)
        sweep = run_sweep(
            plan, results_root=out_dir.parent, num_workers=num_workers, progress=progress
        )
    return DemoResult(sweep, write_report(sweep.sweep_dir))


def variant_lines(sweep_dir: Path) -> list[str]:
    """One line per variant: mean hit rate and TTFT p50 over its finished seeds."""
    run_set = load_run_set(sweep_dir)
    lines = []
    for variant, label in run_set.variant_labels().items():
        runs = run_set.ok_runs(variant)
        hit_rate = mean_interval([run.metric("hit_rate") for run in runs]).mean
        ttft_p50_s = mean_interval([run.metric("ttft_p50_s") for run in runs]).mean
        if math.isnan(hit_rate):
            lines.append(f"{label}: no finished runs")
        else:
            lines.append(
                f"{label}: hit rate {hit_rate:.1%}, TTFT p50 {ttft_p50_s * 1000:.1f} ms "
                f"({len(runs)} seeds)"
            )
    return lines
