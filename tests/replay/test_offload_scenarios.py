"""The scheduler-level offload examples of spec §13.10 (s1-s7) and two reset_prefix_cache
workloads on s1 (§13.9), replayed by prefixsim: every step equal to what vLLM 0.33.0 printed
(its sync Scheduler, and its AsyncScheduler for the `.async` variants), and the spec's
numbers."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from sim.replay.engine_replay import replay_engine

SCENARIOS = Path(__file__).parents[1] / "fixtures" / "offload" / "sched"


def replay(name: str) -> list[dict[str, Any]]:
    return [line.line for line in replay_engine(SCENARIOS / f"{name}.jsonl")]


def steps(lines: list[dict[str, Any]]) -> dict[int, dict[str, Any]]:
    return {line["step"]: line for line in lines if line["op"] == "step"}


def last_step(lines: list[dict[str, Any]]) -> dict[str, Any]:
    return [line for line in lines if line["op"] == "step"][-1]


@pytest.mark.parametrize(
    "name",
    [
        f"{example}{mode}"
        for mode in ("", ".async")
        for example in [*(f"s{index}" for index in range(1, 8)), "reset", "reset_external"]
    ],
)
def test_every_line_equals_vllm(name: str) -> None:
    expected = [
        json.loads(line) for line in (SCENARIOS / f"{name}.vllm.jsonl").read_text().splitlines()
    ]
    actual = replay(name)
    assert len(actual) == len(expected)
    for want, got in zip(expected[1:], actual[1:], strict=True):  # headers differ in format
        assert {field: got.get(field) for field in want} == want


def test_s1_cpu_hit_reaches_num_tokens_and_waits_for_its_load() -> None:
    """D = A's 64-token prompt after C evicted A#1-A#3 from a 5-block GPU: GPU 16 + CPU 48."""
    lines = replay("s1")
    by_step = steps(lines)
    assert by_step[1]["stores"] == [[0, "A", 4]]
    assert by_step[5]["loads"] == [[2, "D", 3]]
    assert by_step[5]["waiting_kv"] == by_step[6]["waiting_kv"] == ["D"]
    assert by_step[7]["scheduled"] == {"D": 1}
    final = last_step(lines)
    assert (final["cum"]["queries"], final["cum"]["hits"]) == (192, 16)
    assert final["ext"] == {
        "queries": 176,
        "hits": 48,
        "preempted_queries": 0,
        "preempted_hits": 0,
        "host": 48,
    }


def test_s2_same_prompt_waits_for_the_pending_store() -> None:
    """B = A's prompt while A#3's store is pending: skipped in steps 2-4, then GPU 48 + a
    1-block load, B:1 at step 7 (without offloading it would compute 16 at step 2)."""
    lines = replay("s2")
    by_step = steps(lines)
    for step in (2, 3, 4):
        assert "B" not in by_step[step]["scheduled"] and by_step[step]["waiting"] == ["B"]
    assert by_step[5]["loads"] == [[1, "B", 1]]
    assert by_step[7]["scheduled"]["B"] == 1
    final = last_step(lines)
    assert (final["cum"]["queries"], final["cum"]["hits"]) == (128, 48)
    assert (final["ext"]["queries"], final["ext"]["hits"]) == (80, 16)


def test_s3_partial_tail_needs_no_cpu() -> None:
    """A 70-token prompt: B is admitted at step 2 with GPU hit 64 and computes 6."""
    lines = replay("s3")
    assert steps(lines)[2]["admitted"] == [{"id": "B", "hit_tokens": 64, "resumed": False}]
    assert steps(lines)[2]["scheduled"]["B"] == 6
    assert (last_step(lines)["ext"]["queries"], last_step(lines)["ext"]["hits"]) == (76, 0)


def test_s4_offers_larger_than_the_tier_store_nothing() -> None:
    """3 CPU chunks: every 4-chunk offer is refused; D gets GPU 16 and computes 48."""
    lines = replay("s4")
    assert all(not line.get("stores") for line in lines if line["op"] == "step")
    assert steps(lines)[5]["scheduled"] == {"D": 48}
    assert last_step(lines)["cpu"] == {"order": []}


def test_s5_prompt_only_storing_keeps_decode_blocks_off_the_tier() -> None:
    """A: 20 prompt + 40 outputs; only A#0 reaches the tier, so A2 gets GPU 16, CPU 0."""
    lines = replay("s5")
    assert steps(lines)[44]["admitted"] == [{"id": "A2", "hit_tokens": 16, "resumed": False}]
    assert last_step(lines)["ext"]["hits"] == 0


def test_s6_decode_blocks_stored_when_prompt_only_is_off() -> None:
    """A#1 is stored at step 13 and A#2 at step 29; A2 then gets GPU 16 + CPU 32."""
    by_step = steps(replay("s6"))
    assert by_step[13]["stores"] == [[1, "A", 1]]
    assert by_step[29]["stores"] == [[2, "A", 1]]
    assert by_step[44]["loads"] == [[4, "A2", 2]]
    assert by_step[46]["scheduled"] == {"A2": 16}


def test_s7_gpu_only_hit_refreshes_the_cpu_copies() -> None:
    """8 chunks hold A and C; A's GPU-only re-run re-offers its chunks, so E evicts C's."""
    final = last_step(replay("s7"))
    assert sorted(final["cpu"]["order"]) == ["A#0", "A#1", "A#2", "A#3", "E#0", "E#1", "E#2", "E#3"]


def test_async_load_completion_costs_one_more_step() -> None:
    """s1 with async scheduling (spec §13.7.3): D's load is admitted in step 9 and reported by
    step 10's output, which is processed after step 11 was scheduled, so D:1 runs in step 12
    (M+2; sync: admitted 5, reported 6, D:1 in 7). The counters are the sync ones."""
    by_step = steps(replay("s1.async"))
    assert by_step[9]["loads"] == [[2, "D", 3]]
    assert [step for step, line in by_step.items() if line["waiting_kv"] == ["D"]] == [9, 10, 11]
    assert by_step[11]["processed_step"] == 10 and by_step[11]["done"] == [2]
    assert by_step[12]["scheduled"] == {"D": 1}
    final = last_step(replay("s1.async"))
    assert (final["cum"]["queries"], final["cum"]["hits"]) == (192, 16)
    assert (final["ext"]["queries"], final["ext"]["hits"], final["ext"]["host"]) == (176, 48, 48)


def test_async_s2_pending_store_then_load_two_steps_later() -> None:
    """s2 with async scheduling: A#3's store (planned in step 1, reported by step 4's output,
    processed in iteration 5) holds B; B's 1-block load starts in step 6 and B:1 runs in 9."""
    by_step = steps(replay("s2.async"))
    assert by_step[5]["done"] == [0]
    assert by_step[6]["loads"] == [[1, "B", 1]]
    assert by_step[9]["scheduled"] == {"A": 1, "B": 1}


def resets(lines: list[dict[str, Any]]) -> list[bool]:
    return [line["reset"] for line in lines if line["op"] == "reset_prefix_cache"]


def test_reset_without_external_keeps_the_cpu_tier() -> None:
    """s1 with a GPU reset after A's step and one while D waits for its load (it fails: D
    holds 4 blocks): the tier keeps A's and C's chunks, so D loads all 64 tokens from it."""
    lines = replay("reset")
    assert resets(lines) == [True, False]
    by_step = steps(lines)
    assert by_step[5]["loads"] == [[2, "D", 4]]
    assert by_step[7]["scheduled"] == {"D": 1}
    assert last_step(lines)["ext"]["hits"] == 64


def test_reset_external_empties_the_tier_and_flushes_its_jobs() -> None:
    """With reset_external, after A's step: A's store (job 0) is flushed by the next step and
    the tier is empty, so D later finds nothing on the CPU and computes its 64 tokens."""
    lines = replay("reset_external")
    assert resets(lines) == [True, True]
    by_step = steps(lines)
    assert by_step[2]["flush"] == [0] and by_step[2]["cpu"] == {"order": []}
    assert by_step[5]["scheduled"] == {"D": 64}
    assert last_step(lines)["ext"]["hits"] == 0


def test_async_reset_external_restarts_live_offers_and_releases_a_waiting_load() -> None:
    """Async: A's step is still in flight at the first reset (GPU reset fails); A, still live,
    offers its 4 chunks again from chunk 0 when it finishes (job 1 in step 3). The second
    reset empties the tier under D's 3-chunk load (job 3): the job is flushed in step 12, its
    report releases D, and D:1 runs in step 14 with the 48 tokens it loaded."""
    lines = replay("reset_external.async")
    assert resets(lines) == [False, False]
    by_step = steps(lines)
    assert by_step[2]["flush"] == [0] and by_step[2]["cpu"] == {"order": []}
    assert by_step[3]["stores"] == [[1, "A", 4]]
    assert by_step[11]["loads"] == [[3, "D", 3]]
    assert by_step[12]["flush"] == [3] and by_step[13]["done"] == [3]
    assert by_step[14]["scheduled"] == {"D": 1}
    assert last_step(lines)["ext"]["hits"] == 48
