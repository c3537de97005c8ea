"""Determinism across processes: the same scenario run in fresh interpreters under different
PYTHONHASHSEED values writes byte-identical result files.

Scenarios: multi-turn chat with two tenants (one salted) on a 599-block cache with sha256_cbor,
and a Mooncake trace replay with xxhash (whose per-process random seed vLLM has; prefixsim uses a
fixed one unless `engine.hash_seed` is set, see sim/kvcache/hashing.py). The -j part of this
property belongs to the sweep tests.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from reliability_cases import GOOD_MOONCAKE

# Whole runs in fresh interpreters under several hash seeds: make test-all.
pytestmark = pytest.mark.slow

SCENARIOS = {
    "chat_tenants": """\
name: det-chat
seed: 7
duration_s: 20.0
warmup_s: 2.0
engine: {num_gpu_blocks: 600, max_model_len: 4096, hash_algo: sha256_cbor}
cost_model: "linear:0.005,0.00002"
workload:
  source:
    kind: chat
    common: {system_prompt_tokens: 256}
    tenants: [{name: acme, cache_salt: acme}, {name: globex, weight: 2.0}]
  arrivals: {process: gamma, rate_per_s: 3.0, cv: 2.0}
""",
    "mooncake_xxhash": f"""\
name: det-trace
engine: {{num_gpu_blocks: 400, max_model_len: 4096, hash_algo: xxhash}}
cost_model: "constant:0.01"
workload:
  source: {{kind: trace, path: '{GOOD_MOONCAKE}', format: mooncake}}
""",
}


def _run_in_fresh_process(scenario: Path, out: Path, hash_seed: str) -> None:
    environment = {**os.environ, "PYTHONHASHSEED": hash_seed}
    command = [sys.executable, "-m", "sim", "run", str(scenario), "--out", str(out)]
    result = subprocess.run(
        [*command, "--no-progress"],
        capture_output=True,
        text=True,
        env=environment,
        cwd=scenario.parent,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr


def _contents(run_dir: Path) -> dict[str, bytes]:
    return {
        str(path.relative_to(run_dir)): path.read_bytes()
        for path in sorted(run_dir.rglob("*"))
        if path.is_file()
    }


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_same_bytes_under_different_hash_seeds(name, tmp_path):
    """PYTHONHASHSEED 0 and 123: the same file names and the same bytes in every file."""
    scenario = tmp_path / f"{name}.yaml"
    scenario.write_text(SCENARIOS[name])
    runs = {seed: tmp_path / f"run_seed_{seed}" for seed in ("0", "123")}
    for seed, out in runs.items():
        _run_in_fresh_process(scenario, out, seed)
    first, second = (_contents(out) for out in runs.values())
    assert {"summary.json", "requests.parquet", "config.resolved.yaml"} <= set(first)
    assert json.loads(first["summary.json"])["num_requests"] > 0
    assert sorted(first) == sorted(second)
    for file_name, data in first.items():
        assert data == second[file_name], f"{file_name} differs between hash seeds"
