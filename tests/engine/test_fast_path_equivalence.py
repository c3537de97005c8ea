"""Every engine optimisation keeps outputs byte-identical to the straightforward path.

Each scenario (30 simulated seconds on the H100 profile of Llama-3.1-8B unless it says
otherwise, events on) runs twice through `run_scenario`: once with the engine's fast decode
path (the default: held-block decode tokens, the hash memo, each session turn reusing its
previous turn's block hashes, and with sync scheduling lazy decoders) and once with the
straightforward path, with async scheduling (the engine's default) and, for four of them, sync
scheduling. Every result file must be byte-identical. The scenarios stress what the
fast path skips or defers: preemption when the cache runs out, priority preemption, chunked
prefill, a small running set, several replicas, mixed traffic with salts, LoRA and
prompt-logprobs requests, and prefix caching off. The expected counts pin that each scenario
really reaches the situation it is named for.

The runner always takes the default path, so the test swaps the EngineCore that Cluster builds
for one with the path fixed, and checks every engine built used it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from run_files import assert_same_run_files

import sim.engine.cluster as cluster_module
from sim.config import Scenario
from sim.engine.core import EngineCore
from sim.runner import RunResult, run_scenario

PROFILE = "h100/llama-3.1-8b/tp1"


def chat(rate_per_s: float, **source: Any) -> dict[str, Any]:
    """Chat sessions at `rate_per_s` with 2 s mean think time."""
    return {
        "source": {"kind": "chat", "think_time_s": 2, **source},
        "arrivals": {"process": "poisson", "rate_per_s": rate_per_s},
    }


def rag(rate_per_s: float) -> dict[str, Any]:
    """RAG requests over a 50-document corpus (prompts of about 1,900 tokens)."""
    return {
        "source": {"kind": "rag", "corpus_size": 50},
        "arrivals": {"process": "poisson", "rate_per_s": rate_per_s},
    }


SCENARIOS: dict[str, dict[str, Any]] = {
    # 139 usable blocks (2,224 tokens) for chat at 2 sessions/s: the cache runs out.
    "chat-preempting": {
        "engine": {"num_gpu_blocks": 140, "max_model_len": 2048},
        "workload": chat(2.0),
    },
    "agent": {
        "workload": {
            "source": {"kind": "agent", "tool_latency_s": 0.5},
            "arrivals": {"process": "poisson", "rate_per_s": 0.5},
        }
    },
    "rag": {"workload": rag(4.0)},
    # Bronze (priority 5) is preempted for gold (0) in a 199-block cache.
    "priority": {
        "engine": {"policy": "priority", "num_gpu_blocks": 200, "max_model_len": 3000},
        "workload": chat(
            2.0,
            tenants=[{"name": "gold", "priority": 0}, {"name": "bronze", "priority": 5}],
        ),
    },
    # 256-token steps, each prefill chunk at most 64 tokens.
    "chunked-prefill": {
        "engine": {
            "max_num_batched_tokens": 256,
            "max_num_seqs": 16,
            "long_prefill_token_threshold": 64,
        },
        "workload": rag(3.0),
    },
    "four-seqs": {"engine": {"max_num_seqs": 4}, "workload": chat(2.0)},
    "two-replicas-prefix-aware": {
        "deployment": {"replicas": 2, "router": {"policy": "prefix_aware"}},
        "engine": {"num_gpu_blocks": 300, "max_model_len": 4096},
        "workload": chat(2.0),
    },
    # Chat, agent and RAG with a salted tenant, a LoRA tenant and prompt-logprobs requests,
    # block 32, priced by the roofline model.
    "mix-tenants-roofline": {
        "cost_model": "roofline",
        "engine": {"block_size": 32},
        "workload": {
            "source": {
                "kind": "mix",
                "components": [
                    {
                        "weight": 2,
                        "source": {
                            "kind": "chat",
                            "think_time_s": 2,
                            "prompt_logprobs_fraction": 0.2,
                            "tenants": [
                                {"name": "plain"},
                                {"name": "salted", "cache_salt": "tenant-b"},
                            ],
                        },
                    },
                    {
                        "weight": 1,
                        "source": {
                            "kind": "agent",
                            "tool_latency_s": 0.5,
                            "tenants": [
                                {"name": "adapter", "lora": {"name": "a", "id": 3, "path": "x"}}
                            ],
                        },
                    },
                    {"weight": 1, "source": {"kind": "rag", "corpus_size": 50}},
                ],
            },
            "arrivals": {"process": "poisson", "rate_per_s": 1.5},
        },
    },
    "no-prefix-caching": {"engine": {"enable_prefix_caching": False}, "workload": chat(2.0)},
}

# (requests finished, preemptions) of each scenario, from summary.json (shipped front end and
# real-engine factor on), with async scheduling (the default) and, for the scenarios that stress
# preemption and chunking, sync scheduling.
EXPECTED_COUNTS = {
    ("chat-preempting", True): (115, 45),
    ("agent", True): (56, 0),
    ("rag", True): (125, 0),
    ("priority", True): (109, 55),
    ("chunked-prefill", True): (92, 0),
    ("four-seqs", True): (125, 0),
    ("two-replicas-prefix-aware", True): (175, 37),
    ("mix-tenants-roofline", True): (137, 0),
    ("no-prefix-caching", True): (201, 0),
    ("chat-preempting", False): (117, 52),
    ("priority", False): (107, 66),
    ("chunked-prefill", False): (92, 0),
    ("two-replicas-prefix-aware", False): (179, 37),
}


def run_with_decode_path(
    name: str,
    fast_decode_path: bool,
    run_dir: Path,
    monkeypatch: pytest.MonkeyPatch,
    async_scheduling: bool = True,
) -> RunResult:
    """Run scenario `name` with every engine on the given decode path and scheduling mode."""
    built: list[EngineCore] = []

    def engine_core(*args: Any, **kwargs: Any) -> EngineCore:
        kwargs["fast_decode_path"] = fast_decode_path
        engine = EngineCore(*args, **kwargs)
        built.append(engine)
        return engine

    monkeypatch.setattr(cluster_module, "EngineCore", engine_core)
    data = {"name": name, "seed": 3, "duration_s": 30, "cost_model": PROFILE, **SCENARIOS[name]}
    engine = {**data.get("engine", {}), "async_scheduling": async_scheduling}
    data["engine"] = engine
    result = run_scenario(Scenario.model_validate(data), run_dir, run_dir=run_dir)
    assert built
    assert all(engine.scheduler.fast_decode_path is fast_decode_path for engine in built)
    return result


# The preempting chat stays in the fast lane in both modes (it crosses the most decode paths);
# the rest run in make test-all.
@pytest.mark.parametrize(
    ("name", "async_scheduling"),
    [
        key if key[0] == "chat-preempting" else pytest.param(*key, marks=pytest.mark.slow)
        for key in EXPECTED_COUNTS
    ],
)
def test_fast_and_straightforward_paths_write_identical_files(
    name: str, async_scheduling: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fast = run_with_decode_path(name, True, tmp_path / "fast", monkeypatch, async_scheduling)
    straightforward = run_with_decode_path(
        name, False, tmp_path / "straightforward", monkeypatch, async_scheduling
    )

    assert_same_run_files(fast.run_dir, straightforward.run_dir)

    summary = fast.summary
    counts = (summary["num_requests"], summary["num_preemptions"])
    assert counts == EXPECTED_COUNTS[name, async_scheduling]


def test_chunked_prefill_and_four_seqs_reach_their_limits(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The chunked scenario's busiest step schedules exactly its 256-token budget, all of it
    prefill in a step where one request is alone and so not capped at 64 (spec §12.1);
    four-seqs never runs more than 4 while up to 43 wait."""
    chunked = run_with_decode_path("chunked-prefill", True, tmp_path / "chunked", monkeypatch)
    steps = pq.read_table(chunked.run_dir / "steps.parquet").to_pydict()
    step_tokens = map(
        sum, zip(steps["num_prefill_tokens"], steps["num_decode_tokens"], strict=True)
    )
    assert (max(step_tokens), max(steps["num_prefill_tokens"])) == (256, 256)
    few = run_with_decode_path("four-seqs", True, tmp_path / "few", monkeypatch)
    steps = pq.read_table(few.run_dir / "steps.parquet").to_pydict()
    assert (max(steps["num_running"]), max(steps["num_waiting"])) == (4, 43)
