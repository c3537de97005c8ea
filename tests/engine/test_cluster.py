"""Engine replicas behind a router (Cluster via simulate): where each request goes.

Unless stated, steps take 0.25 s (ConstantStepCost), blocks hold 16 tokens and each replica
has 64 usable blocks. Which replica served a request is read from a per-replica recorder.
"""

from __future__ import annotations

import pytest
import simpy
from engine_fakes import CollectingRecorder, ConstantStepCost
from engine_specs import engine_config, open_spec, session_turn, tokens

from sim.engine import simulate
from sim.engine.cluster import Cluster
from sim.routing import RouterTuning, SessionAffinityRouter, make_router
from workloads.api import ChatConfig, PoissonArrivals, Workload
from workloads.spec import Segment


def run_cluster(specs, num_replicas: int, policy: str, cost_model: ConstantStepCost, **router):
    """Simulate; returns (replica index by request id, routed counts, shared recorder)."""
    shared = CollectingRecorder()
    per_replica = [CollectingRecorder() for _ in range(num_replicas)]
    result = simulate(
        specs,
        engine_config(),
        cost_model,
        recorder=shared,
        num_replicas=num_replicas,
        router=make_router(policy, RouterTuning(**router)),
        replica_recorders=per_replica,
    )
    replica_of = {
        request_id: index
        for index, recorder in enumerate(per_replica)
        for request_id in recorder.requests
    }
    return replica_of, result.num_routed, shared


def test_round_robin_sends_requests_in_turn(cost_model: ConstantStepCost) -> None:
    specs = [open_spec(f"r{n}", 0.1 * n, tokens(100 * n, 20), 2) for n in range(5)]
    replica_of, num_routed, shared = run_cluster(specs, 3, "round_robin", cost_model)
    assert replica_of == {"r0": 0, "r1": 1, "r2": 2, "r3": 0, "r4": 1}
    assert num_routed == [2, 2, 1]
    # The shared recorder sees every replica's requests and steps.
    assert sorted(shared.requests) == ["r0", "r1", "r2", "r3", "r4"]


def test_least_loaded_follows_queued_tokens(cost_model: ConstantStepCost) -> None:
    # a (100 outputs) keeps replica 0 busy; b (2 outputs) leaves replica 1 idle by 0.5 s.
    # At 1.1 s, c goes to idle replica 1 (no requests); d, dispatched at the same instant,
    # sees c's 16 tokens queued there and a's 0 queued on replica 0 (its decode token is
    # being computed), so it goes to replica 0. Round robin would send c to 0 and d to 1.
    specs = [
        open_spec("a", 0.0, tokens(0, 16), 100),
        open_spec("b", 0.0, tokens(100, 16), 2),
        open_spec("c", 1.1, tokens(200, 16), 2),
        open_spec("d", 1.1, tokens(300, 16), 2),
    ]
    replica_of, _, _ = run_cluster(specs, 2, "least_loaded", cost_model)
    assert replica_of == {"a": 0, "b": 1, "c": 1, "d": 0}
    replica_of, _, _ = run_cluster(specs, 2, "round_robin", cost_model)
    assert replica_of == {"a": 0, "b": 1, "c": 0, "d": 1}


def chat_session(session_id: str, num_turns: int, arrival_at: float) -> list:
    """A session whose turn k prompt is a shared 16-token system prompt plus k new blocks."""
    turns = []
    for turn_index in range(num_turns):
        segments = [Segment("system", "sys", tokens(0, 16))] + [
            Segment("history", f"{session_id}-{k}", tokens(1000 * (k + 1), 16))
            for k in range(turn_index + 1)
        ]
        turns.append(
            session_turn(
                f"{session_id}-t{turn_index}",
                session_id,
                turn_index,
                segments,
                tokens(1, 2),
                arrival_at=arrival_at if turn_index == 0 else None,
                think_time_s=0.5,
            )
        )
    return turns


def test_session_affinity_keeps_each_session_on_one_replica(cost_model: ConstantStepCost) -> None:
    # s1 (3 turns) and s2 (1 turn) start together: s1 on replica 0, s2 on replica 1 (s1's
    # 32 queued tokens). Round robin splits s1: its third turn lands on replica 1.
    specs = [*chat_session("s1", 3, 0.0), *chat_session("s2", 1, 0.0)]
    replica_of, _, _ = run_cluster(specs, 2, "session_affinity", cost_model)
    assert replica_of == {"s1-t0": 0, "s1-t1": 0, "s1-t2": 0, "s2-t0": 1}
    replica_of, _, _ = run_cluster(specs, 2, "round_robin", cost_model)
    assert replica_of == {"s1-t0": 0, "s2-t0": 1, "s1-t1": 0, "s1-t2": 1}


def test_session_affinity_forgets_sessions_that_ended(cost_model: ConstantStepCost) -> None:
    # s1 ends (one turn) long before s2's first turn is read at 5 s: only s2 is still pinned.
    router = SessionAffinityRouter()
    specs = [*chat_session("s1", 1, 0.0), *chat_session("s2", 2, 5.0)]
    simulate(specs, engine_config(), cost_model, num_replicas=2, router=router)
    assert router.pins == {"s2": 0}


def test_prefix_aware_follows_the_cached_prefix(cost_model: ConstantStepCost) -> None:
    # a and b (64 tokens each) start on replicas 0 and 1 (nothing cached: fewer requests
    # wins). At 2 s both have finished; c repeats b's first 48 tokens (48/64 = 0.75 > 0.5)
    # and goes to replica 1, where it hits 48 tokens; d repeats a's and goes to replica 0.
    specs = [
        open_spec("a", 0.0, tokens(0, 64), 2),
        open_spec("b", 0.0, tokens(500, 64), 2),
        open_spec("c", 2.0, [*tokens(500, 48), *tokens(900, 16)], 2),
        open_spec("d", 2.0, [*tokens(0, 48), *tokens(800, 16)], 2),
    ]
    replica_of, _, shared = run_cluster(specs, 2, "prefix_aware", cost_model)
    assert replica_of == {"a": 0, "b": 1, "c": 1, "d": 0}
    assert [shared.requests[name].num_cached_tokens for name in "abcd"] == [0, 0, 48, 48]
    replica_of, _, shared = run_cluster(specs, 2, "round_robin", cost_model)
    assert replica_of == {"a": 0, "b": 1, "c": 0, "d": 1}
    assert [shared.requests[name].num_cached_tokens for name in "abcd"] == [0, 0, 0, 0]


def test_prefix_aware_below_the_cache_threshold_balances_load(cost_model: ConstantStepCost) -> None:
    # With cache_threshold 0.8, c's 0.75 match is not enough: c and d split by load instead
    # (c: both idle, replica 0; d: replica 1 has fewer requests).
    specs = [
        open_spec("a", 0.0, tokens(0, 64), 2),
        open_spec("b", 0.0, tokens(500, 64), 2),
        open_spec("c", 2.0, [*tokens(500, 48), *tokens(900, 16)], 2),
        open_spec("d", 2.0, [*tokens(0, 48), *tokens(800, 16)], 2),
    ]
    replica_of, _, _ = run_cluster(specs, 2, "prefix_aware", cost_model, cache_threshold=0.8)
    assert replica_of == {"a": 0, "b": 1, "c": 0, "d": 1}


def chat_workload() -> Workload:
    """Default chat sessions (512-token system prompt, growing history), 1 session/s, 60 s."""
    return Workload(ChatConfig(), PoissonArrivals(1.0), until_s=60.0, seed=11)


def run_chat(policy: str) -> CollectingRecorder:
    """The chat workload on 4 replicas of 2048 usable blocks, 1/64 s steps."""
    recorder = CollectingRecorder()
    simulate(
        chat_workload(),
        engine_config(num_gpu_blocks=2049, max_model_len=8192, max_num_seqs=64),
        ConstantStepCost(0.015625),
        recorder=recorder,
        duration_s=60.0,
        num_replicas=4,
        router=make_router(policy),
    )
    return recorder


def test_prefix_aware_beats_round_robin_on_chat_sessions() -> None:
    # Round robin sends a session's next turn to a replica that mostly lacks its history;
    # prefix-aware routing finds the replica holding it.
    # 107 requests, 83,874 prompt tokens looked up: hits 58,784 (70.1%) against 74,192 (88.5%).
    round_robin = run_chat("round_robin")
    prefix_aware = run_chat("prefix_aware")
    assert (round_robin.num_hits, round_robin.num_queries) == (58_784, 83_874)
    assert (prefix_aware.num_hits, prefix_aware.num_queries) == (74_192, 83_874)
    assert len(round_robin.requests) == len(prefix_aware.requests) == 107


def test_cluster_runs_are_deterministic() -> None:
    first = run_chat("prefix_aware")
    second = run_chat("prefix_aware")
    assert first.requests == second.requests
    assert first.steps == second.steps


def test_cluster_rejects_a_wrong_number_of_replica_recorders(
    cost_model: ConstantStepCost,
) -> None:
    with pytest.raises(ValueError, match="2 replica recorders given for 3 replicas"):
        Cluster(
            simpy.Environment(),
            engine_config(),
            cost_model,
            make_router("round_robin"),
            num_replicas=3,
            replica_recorders=[CollectingRecorder(), CollectingRecorder()],
        )
