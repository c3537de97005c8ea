"""Tiny sweep files for the sweep tests: chat at 2 requests/s for 5 simulated seconds.

Each run has a 128-block cache and a constant 20 ms step, so it finishes in a fraction of a
wall second.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

BASE_YAML = """\
name: tiny
seed: 1
duration_s: 5
engine: {num_gpu_blocks: 128, max_model_len: 1008}
cost_model: "constant:0.02"
workload:
  source: {kind: chat}
  arrivals: {process: poisson, rate_per_s: 2.0}
outputs: {events: false}
"""

# Four runs: block size 16/32 x seeds 1/2.
FOUR_RUNS = """\
sweep:
  grid:
    engine.block_size: [16, 32]
  seeds: [1, 2]
"""

# Four runs; the two with 32 blocks (496 tokens, less than max_model_len 1008) are valid
# scenarios that fail at run time with an InputError, as vLLM refuses to start.
TWO_TOO_SMALL = """\
sweep:
  zip:
    engine.num_gpu_blocks: [128, 32]
  seeds: [1, 2]
"""


def write_sweep(directory: Path, sweep_yaml: str, base_yaml: str = BASE_YAML) -> Path:
    """`directory/sweep.yaml`: the base scenario followed by a `sweep:` block."""
    path = directory / "sweep.yaml"
    path.write_text(base_yaml + sweep_yaml)
    return path


def manifest_rows(sweep_dir: Path) -> list[dict[str, Any]]:
    """The rows of `sweep_dir/manifest.parquet`."""
    return pq.read_table(sweep_dir / "manifest.parquet").to_pylist()


def leftovers(sweep_dir: Path) -> list[str]:
    """Hidden partial run directories or temp files left in runs/ (there should be none)."""
    return sorted(path.name for path in (sweep_dir / "runs").iterdir() if path.name[0] == ".")
