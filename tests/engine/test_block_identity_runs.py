"""Runs with the block identity write the same result files as runs with vLLM's digests.

`simulate` hashes blocks with the block identity where no hash leaves the run (block events
off). Each case runs twice through `run_scenario` with the choice forced each way, and every
result file must be byte-identical; with block events on (forced identity against vLLM's
digests) every file but events.parquet is byte-identical and events.parquet differs only in its
`block_hash` column. The cases: the engine equivalence scenarios that stress preemption,
priority, several prefix-aware replicas and mixed salts and LoRA adapters (both cores, sync and
async), a Mooncake trace replay on 8 replicas, and chat on a CPU offload tier (whose chunk keys
are the requests' block hashes). A spy checks that every hasher built took the forced choice.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

import sim.engine.simulation as simulation_module
import sim.sched.scheduler as scheduler_module
from sim.config import Scenario
from sim.kvcache import Hasher
from sim.runner import RunResult, run_scenario
from tests.engine import test_fast_path_equivalence as fast_path
from tests.native.test_result_files import OFFLOAD_CHAT

REPO = Path(__file__).resolve().parents[2]

MOONCAKE_TRACE = REPO / "tests" / "fixtures" / "traces" / "mooncake"


def engine_case(name: str, *, core: str, async_scheduling: bool, events: bool) -> dict[str, Any]:
    """Scenario `name` of the engine equivalence test, 30 simulated seconds."""
    scenario = fast_path.SCENARIOS[name]
    return {
        "name": name,
        "seed": 3,
        "duration_s": 30,
        "cost_model": fast_path.PROFILE,
        **scenario,
        "engine": {
            **scenario.get("engine", {}),
            "core": core,
            "async_scheduling": async_scheduling,
        },
        "outputs": {"events": events, "scrape_interval_s": 5},
    }


TRACE_CASE: dict[str, Any] = {
    "name": "mooncake-8-replicas",
    "seed": 1,
    "duration_s": None,
    "warmup_s": 0,
    "engine": {"block_size": 16, "num_gpu_blocks": 6000, "max_model_len": 90000},
    "deployment": {"model": "llama-3.1-8b", "gpu": "h100", "tp": 1, "replicas": 8},
    "cost_model": fast_path.PROFILE,
    "workload": {
        "source": {
            "kind": "trace",
            "format": "mooncake",
            "path": str(MOONCAKE_TRACE / "arxiv_mooncake_trace_first1000.jsonl"),
            "max_requests": 150,
        }
    },
    "outputs": {"events": False},
}

OFFLOAD_CASE: dict[str, Any] = {
    **OFFLOAD_CHAT,
    "engine": {**OFFLOAD_CHAT["engine"], "kv_offloading_size": 1},
    "outputs": {"events": False, "scrape_interval_s": 5},
}


def run_with_identity(
    data: dict[str, Any], identity: bool, run_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> RunResult:
    """Run `data` with the block identity forced on or off; every hasher built must follow."""
    built: list[Hasher] = []
    make_hasher = scheduler_module.make_hasher

    def spy(*args: Any, **kwargs: Any) -> Hasher:
        hasher = make_hasher(*args, **kwargs)
        built.append(hasher)
        return hasher

    monkeypatch.setattr(scheduler_module, "make_hasher", spy)
    monkeypatch.setattr(simulation_module, "block_identity_wanted", lambda **_: identity)
    result = run_scenario(Scenario.model_validate(data), run_dir, run_dir=run_dir)
    assert built and all(hasher.identity is identity for hasher in built)
    return result


def assert_same_files(first: RunResult, second: RunResult, *, except_hashes: bool) -> None:
    """Every file byte-identical; with `except_hashes`, events.parquet only up to its hashes."""
    names = sorted(path.name for path in first.run_dir.iterdir())
    assert names == sorted(path.name for path in second.run_dir.iterdir())
    assert "requests.parquet" in names and "summary.json" in names
    for name in names:
        first_path, second_path = first.run_dir / name, second.run_dir / name
        if except_hashes and name == "events.parquet":
            first_events, second_events = pq.read_table(first_path), pq.read_table(second_path)
            assert first_events.num_rows > 0
            assert first_events.drop(["block_hash"]) == second_events.drop(["block_hash"])
            assert first_events["block_hash"] != second_events["block_hash"]
            continue
        assert first_path.read_bytes() == second_path.read_bytes(), name


def assert_identity_changes_nothing(
    data: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> RunResult:
    digests = run_with_identity(data, False, tmp_path / "digests", monkeypatch)
    identities = run_with_identity(data, True, tmp_path / "identities", monkeypatch)
    assert_same_files(digests, identities, except_hashes=data["outputs"]["events"])
    return identities


@pytest.mark.parametrize("core", ["native", "python"])
@pytest.mark.parametrize("async_scheduling", [True, False])
def test_preempting_chat_writes_identical_files(
    core: str, async_scheduling: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = engine_case(
        "chat-preempting", core=core, async_scheduling=async_scheduling, events=False
    )
    run = assert_identity_changes_nothing(data, tmp_path, monkeypatch)
    counts = (run.summary["num_requests"], run.summary["num_preemptions"])
    assert counts == fast_path.EXPECTED_COUNTS["chat-preempting", async_scheduling]


def test_events_differ_only_in_their_hashes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = engine_case("chat-preempting", core="native", async_scheduling=True, events=True)
    assert_identity_changes_nothing(data, tmp_path, monkeypatch)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("name", "async_scheduling"),
    [
        ("priority", True),
        ("two-replicas-prefix-aware", True),
        ("two-replicas-prefix-aware", False),
        ("mix-tenants-roofline", True),
    ],
)
def test_engine_scenarios_write_identical_files(
    name: str, async_scheduling: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = engine_case(name, core="native", async_scheduling=async_scheduling, events=False)
    run = assert_identity_changes_nothing(data, tmp_path, monkeypatch)
    counts = (run.summary["num_requests"], run.summary["num_preemptions"])
    assert counts == fast_path.EXPECTED_COUNTS[name, async_scheduling]


@pytest.mark.slow
def test_mixed_tenants_events_differ_only_in_their_hashes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = engine_case("mix-tenants-roofline", core="native", async_scheduling=True, events=True)
    assert_identity_changes_nothing(data, tmp_path, monkeypatch)


def test_trace_replay_on_eight_replicas_writes_identical_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = assert_identity_changes_nothing(TRACE_CASE, tmp_path, monkeypatch)
    assert (run.summary["num_requests"], run.summary["hit_rate"]) == (150, 0.224151523)


@pytest.mark.slow
def test_offload_chat_writes_identical_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = assert_identity_changes_nothing(OFFLOAD_CASE, tmp_path, monkeypatch)
    summary = run.summary
    assert (summary["num_requests"], summary["num_preemptions"]) == (78, 5)
    assert (summary["hit_rate"], summary["hit_rate_cpu"]) == (0.729124236, 0.054039375)
