"""Scenario files with `deployment.replicas` and `deployment.router`: validation and the files
a multi-replica run writes (summary.json covers the cluster, replicas.json each replica)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from sim.config import load_scenario
from sim.errors import InputError
from sim.runner import run_scenario

# Two replicas behind a prefix-aware router; 20 s of chat sessions at 1/s, constant 10 ms steps.
CLUSTER_YAML = """\
name: two-replicas
seed: 5
duration_s: 20
engine: {num_gpu_blocks: 1025, max_model_len: 8192}
deployment:
  replicas: 2
  router: {policy: prefix_aware, cache_threshold: 0.3}
cost_model: "constant:0.01"
workload:
  source: {kind: chat, think_time_s: 1.0}
  arrivals: {process: poisson, rate_per_s: 1.0}
outputs: {events: false, scrape_interval_s: 5.0}
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "scenario.yaml"
    path.write_text(text)
    return path


def test_router_settings_default_to_one_replica_and_round_robin(tmp_path: Path) -> None:
    loaded = load_scenario(write(tmp_path, CLUSTER_YAML), ["deployment={}"])
    deployment = loaded.scenario.deployment
    assert (deployment.replicas, deployment.router.policy) == (1, "round_robin")
    assert (
        deployment.router.cache_threshold,
        deployment.router.balance_abs_threshold,
        deployment.router.balance_rel_threshold,
    ) == (0.5, 32, 1.0001)


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("deployment.replicas=0", "deployment.replicas: 0 is not allowed"),
        ("deployment.router.cache_threshold=1.5", "deployment.router.cache_threshold: 1.5"),
        ("deployment.router.balance_rel_threshold=0.5", "balance_rel_threshold: 0.5"),
        ("deployment.router.weights=3", "deployment.router.weights: unknown key"),
    ],
)
def test_bad_router_settings_are_one_line_errors(
    tmp_path: Path, override: str, message: str
) -> None:
    with pytest.raises(InputError) as raised:
        load_scenario(write(tmp_path, CLUSTER_YAML), [override])
    assert message in str(raised.value)
    assert "\n" not in str(raised.value)


def test_an_unknown_policy_is_reported_at_its_line(tmp_path: Path) -> None:
    text = CLUSTER_YAML.replace("policy: prefix_aware", "policy: random")
    with pytest.raises(InputError) as raised:
        load_scenario(write(tmp_path, text))
    assert str(raised.value) == (
        f"{tmp_path / 'scenario.yaml'}:7: deployment.router.policy: 'random' is not allowed: "
        "Input should be 'round_robin', 'least_loaded', 'prefix_aware' or 'session_affinity'"
    )


def test_a_cluster_run_writes_cluster_and_per_replica_numbers(tmp_path: Path) -> None:
    loaded = load_scenario(write(tmp_path, CLUSTER_YAML))
    result = run_scenario(loaded.scenario, loaded.base_dir, run_dir=tmp_path / "run")
    summary = result.summary
    assert (summary["num_replicas"], summary["router_policy"]) == (2, "prefix_aware")
    replicas = json.loads((result.run_dir / "replicas.json").read_text())["replicas"]
    assert [replica["replica"] for replica in replicas] == [0, 1]
    assert sum(replica["num_routed"] for replica in replicas) == summary["num_submitted"]
    for key in ("num_requests", "num_hits", "num_queries", "num_steps", "num_output_tokens"):
        assert sum(replica[key] for replica in replicas) == summary[key], key
    assert all(replica["num_routed"] > 0 for replica in replicas)


def test_a_single_replica_run_writes_no_replicas_file(tmp_path: Path) -> None:
    loaded = load_scenario(write(tmp_path, CLUSTER_YAML), ["deployment.replicas=1"])
    result = run_scenario(loaded.scenario, loaded.base_dir, run_dir=tmp_path / "run")
    assert result.summary["num_replicas"] == 1
    assert not (result.run_dir / "replicas.json").exists()


RUN_SCRIPT = """\
import sys
from pathlib import Path
from sim.config import load_scenario
from sim.runner import run_scenario
loaded = load_scenario(Path(sys.argv[1]))
run_scenario(loaded.scenario, loaded.base_dir, run_dir=Path(sys.argv[2]))
"""


@pytest.mark.slow
def test_cluster_results_are_byte_identical_across_hash_seeds(tmp_path: Path) -> None:
    # Separate processes with different str hash seeds: no result may depend on set order.
    scenario = write(tmp_path, CLUSTER_YAML)
    outputs = []
    for hash_seed in ("1", "2"):
        out = tmp_path / f"run-{hash_seed}"
        subprocess.run(
            [sys.executable, "-c", RUN_SCRIPT, str(scenario), str(out)],
            check=True,
            capture_output=True,
            env={**os.environ, "PYTHONHASHSEED": hash_seed},
        )
        outputs.append([(out / name).read_bytes() for name in ("summary.json", "replicas.json")])
    assert outputs[0] == outputs[1]
