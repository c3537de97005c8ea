"""Every row of a 4-replica run's parquet files names the replica it belongs to.

Scenario: 4 replicas behind a round-robin router, single-turn chat requests with a shared
64-token system prompt at 8/s for 10 s (constant 10 ms steps), block events on.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq
import pytest

from sim.config import load_scenario
from sim.runner import run_scenario

SCENARIO = """\
name: four-replicas
seed: 5
duration_s: 10
engine: {max_model_len: 512, max_num_batched_tokens: 1024, num_gpu_blocks: 64}
deployment: {model: llama-3.1-8b, replicas: 4, router: {policy: round_robin}}
cost_model: "constant:0.01"
workload:
  source:
    kind: chat
    common: {system_prompt_tokens: 64}
    turns_per_session: 1
    user_message_tokens: 200
    answer_tokens: 8
  arrivals: {process: poisson, rate_per_s: 8.0}
outputs: {events: true, scrape_interval_s: 1.0}
"""


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp_path = tmp_path_factory.mktemp("replicas")
    path = tmp_path / "four.yaml"
    path.write_text(SCENARIO)
    loaded = load_scenario(path, ())
    return run_scenario(loaded.scenario, loaded.base_dir, run_dir=tmp_path / "run").run_dir


@pytest.mark.parametrize(
    "file_name", ["requests.parquet", "steps.parquet", "events.parquet", "metrics.parquet"]
)
def test_every_row_names_one_of_the_four_replicas(run_dir: Path, file_name: str) -> None:
    replicas = pq.read_table(run_dir / file_name, columns=["replica"]).column("replica")
    assert replicas.null_count == 0
    assert set(replicas.to_pylist()) == {0, 1, 2, 3}


def test_round_robin_requests_and_step_indexes_per_replica(run_dir: Path) -> None:
    requests = pq.read_table(run_dir / "requests.parquet").to_pylist()
    counts = [sum(row["replica"] == replica for row in requests) for replica in range(4)]
    assert max(counts) - min(counts) <= 1  # round robin deals the requests out evenly
    steps = pq.read_table(run_dir / "steps.parquet").to_pylist()
    for replica in range(4):
        indexes = [row["step_index"] for row in steps if row["replica"] == replica]
        assert indexes == list(range(1, len(indexes) + 1))


def test_each_scrape_has_every_replicas_gauges(run_dir: Path) -> None:
    rows = pq.read_table(run_dir / "metrics.parquet").to_pylist()
    usage = [row for row in rows if row["name"] == "vllm:kv_cache_usage_perc"]
    by_time: dict[float, list[int]] = {}
    for row in usage:
        by_time.setdefault(row["at"], []).append(row["replica"])
    assert all(replicas == [0, 1, 2, 3] for replicas in by_time.values())
    assert len(by_time) >= 10
