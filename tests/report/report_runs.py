"""Tiny real runs and sweep directories for the report tests.

Every run is 10 simulated seconds of chat at 2 requests/s with a constant 20 ms step time and a
KV cache of about 3000 tokens, small enough that blocks get evicted. A sweep directory is built as
the sweep command lays it out: `runs/<run_id>/` plus a manifest.parquet in its schema.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from sim.config.scenario import Scenario
from sim.runner import run_scenario

MANIFEST_SUMMARY_KEYS = (
    "hit_rate",
    "ttft_p50_s",
    "ttft_p90_s",
    "ttft_p99_s",
    "e2e_p50_s",
    "num_requests",
    "num_evictions",
    "num_prefill_tokens_saved",
)


def tiny_scenario(
    *, seed: int, block_size: int = 16, layout: str = "chat", events: bool = True
) -> Scenario:
    """The tiny chat scenario of these tests."""
    return Scenario.model_validate(
        {
            "name": "tiny-chat",
            "seed": seed,
            "duration_s": 10,
            "warmup_s": 2,
            "cost_model": "constant:0.02",
            "engine": {
                "block_size": block_size,
                "num_gpu_blocks": 3000 // block_size,
                "max_model_len": 2048,
                "max_num_batched_tokens": 2048,
            },
            "workload": {
                "source": {
                    "kind": "chat",
                    "layout": layout,
                    "common": {"system_prompt_tokens": 512, "user_id_tokens": 8},
                },
                "arrivals": {"process": "poisson", "rate_per_s": 2.0},
            },
            "outputs": {"events": events, "scrape_interval_s": 1.0},
        }
    )


def run_tiny(run_dir: Path, **settings: Any) -> dict[str, Any]:
    """Simulate the tiny scenario into run_dir; returns its summary."""
    return run_scenario(tiny_scenario(**settings), Path.cwd(), run_dir=run_dir).summary


def manifest_row(
    run_id: str, variant_settings: dict[str, Any], seed: int, summary: dict[str, Any] | None
) -> dict[str, Any]:
    """A manifest row as the sweep writes it: ok with summary numbers, else 'missing'."""
    row: dict[str, Any] = {
        "run_id": run_id,
        "status": "ok" if summary is not None else "missing",
        "error": None,
        "run_dir": f"runs/{run_id}",
        "variant": ",".join(f"{path}={value}" for path, value in variant_settings.items()),
        "seed": seed,
        **variant_settings,
    }
    for key in MANIFEST_SUMMARY_KEYS:
        row[key] = None if summary is None else summary[key]
    return row


def write_manifest(sweep_dir: Path, rows: Sequence[dict[str, Any]]) -> None:
    """manifest.parquet with the given rows, columns in row order."""
    sweep_dir.mkdir(parents=True, exist_ok=True)
    pd.DataFrame(list(rows)).to_parquet(sweep_dir / "manifest.parquet", index=False)


def build_sweep(
    sweep_dir: Path,
    block_sizes: Sequence[int],
    seeds: Sequence[int],
    layouts: Sequence[str] = (),
) -> list[dict[str, Any]]:
    """Run block size (x layout, when given) x seed into sweep_dir; returns the manifest rows."""
    rows = []
    for block_size in block_sizes:
        for layout in layouts or (None,):
            settings: dict[str, Any] = {"engine.block_size": block_size}
            if layout is not None:
                settings["workload.source.layout"] = layout
            for seed in seeds:
                run_id = f"bs{block_size}-{layout or 'chat'}-s{seed}"
                summary = run_tiny(
                    sweep_dir / "runs" / run_id,
                    seed=seed,
                    block_size=block_size,
                    layout=layout or "chat",
                )
                rows.append(manifest_row(run_id, settings, seed, summary))
    write_manifest(sweep_dir, rows)
    return rows
