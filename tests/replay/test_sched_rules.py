"""The scheduler rules of spec §12 and the §12.8 options, each on its example workload (B = 4).

Every workload in tests/fixtures/sched_rules/ replays equal, on every field, to what real vLLM
0.33.0 printed for it; the step lines the spec quotes are also asserted one by one.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from sim.replay.engine_replay import replay_engine

RULES_DIR = Path(__file__).resolve().parents[1] / "fixtures" / "sched_rules"
NAMES = sorted(path.stem for path in RULES_DIR.glob("*.jsonl"))


def replayed(name: str) -> list[dict[str, Any]]:
    """Our output lines, header excluded."""
    lines = replay_engine(RULES_DIR / f"{name}.jsonl")
    return [line.line for line in lines if line.line is not None and line.line["op"] != "header"]


def golden(name: str) -> list[dict[str, Any]]:
    """vLLM's output lines, header excluded."""
    text = (RULES_DIR / "golden" / f"{name}.out.jsonl").read_text()
    lines = [json.loads(row) for row in text.splitlines() if row.strip()]
    return [line for line in lines if line["op"] != "header"]


def steps(name: str) -> dict[int, dict[str, Any]]:
    """Our step lines by step number."""
    return {line["step"]: line for line in replayed(name) if line["op"] == "step"}


def test_all_ten_examples_are_present() -> None:
    assert len([name for name in NAMES if name.startswith("r12_")]) == 10


@pytest.mark.parametrize("name", NAMES)
def test_replay_equals_vllm_on_every_field(name: str) -> None:
    want, got = golden(name), replayed(name)
    assert len(got) == len(want)
    for index, (expected, actual) in enumerate(zip(want, got, strict=True)):
        assert {field: actual.get(field) for field in expected} == expected, f"line {index}"


def test_12_1_long_prefill_threshold_only_with_two_or_more_requests() -> None:
    by_step = steps("r12_1_threshold_alone")
    assert [line["scheduled"] for line in by_step.values()] == [
        {"A": 20},  # alone: no cap
        {"B": 8, "C": 8},
        {"B": 8, "C": 8},
        {"B": 4, "C": 8},
        {"C": 16},  # alone again: its last 16 tokens in one chunk
        {},  # the flush step after the last finish (§12.3)
    ]
    assert by_step[4]["finished"] == ["B"]


def test_12_2_and_12_3_ignored_aborts_and_flush_steps() -> None:
    lines = replayed("r12_3_flush_and_aborts")
    assert [(line["op"], line.get("step")) for line in lines] == [
        ("add", None),
        ("step", 1),
        ("step", 2),
        ("step", 3),  # flush after A finished
        ("abort", None),  # A already finished: ignored
        ("abort", None),  # unknown id: ignored; the idle run_until_idle prints nothing
        ("add", None),
        ("abort", None),  # B aborted while waiting
        ("step", 4),  # one empty step flushes the abort
        ("summary", None),
    ]
    assert [line.get("ignored", False) for line in lines if line["op"] == "abort"] == [
        True,
        True,
        False,
    ]
    assert lines[3]["scheduled"] == {} and lines[8]["scheduled"] == {}
    assert lines[-1]["steps"] == 4
    assert lines[-1]["cum"]["requests"] == 1  # B was never admitted, so never counted


def test_12_4_priority_ties_go_by_request_id_as_a_string() -> None:
    step = steps("r12_4_priority_ties_by_id")[1]
    assert list(step["scheduled"].items()) == [("q9", 8), ("q10", 8), ("q8", 8)]


@pytest.mark.parametrize(
    ("name", "scheduled", "preempted", "free"),
    [
        ("r12_5_priority_victim", {"B": 1}, ["A"], 1),  # the tie goes to A, first in running
        ("r12_5_fcfs_victim", {"A": 1}, ["B"], 2),  # FCFS: B is last and preempts itself
    ],
)
def test_12_5_preemption_victim(
    name: str, scheduled: dict[str, int], preempted: list[str], free: int
) -> None:
    by_step = steps(name)
    assert (by_step[1]["scheduled"], by_step[1]["num_free_blocks"]) == ({"A": 6, "B": 8}, 0)
    step = by_step[2]
    assert (step["scheduled"], step["preempted"], step["num_free_blocks"]) == (
        scheduled,
        preempted,
        free,
    )


def test_12_6_priority_self_preemption_continues_the_running_pass() -> None:
    step = steps("r12_6_priority_self_preemption")[2]
    assert (step["scheduled"], step["preempted"], step["running"], step["waiting"]) == (
        {"B": 1},
        ["A"],
        ["B"],
        ["A"],
    )
    assert step["num_free_blocks"] == 2


def test_tied_priority_requests_with_caching_off_preempt_each_other_forever() -> None:
    # What vLLM 0.33.0 printed too: every 5 steps the first in running is the victim (§12.5).
    lines = replayed("tied_priority_livelock")
    assert len(lines) == len(golden("tied_priority_livelock"))
    preempted = [line["preempted"] for line in lines if line["op"] == "step" and line["preempted"]]
    assert preempted[:4] == [["r0"], ["r1"], ["r0"], ["r1"]]
    assert lines[-1]["total_preemptions"] == 16


def test_12_7_blocks_of_requests_finishing_together_free_in_schedule_order() -> None:
    by_step = steps("r12_7_release_order")
    assert by_step[1]["scheduled"] == {"B": 8, "A": 8}
    assert by_step[2]["evicted_labels"] == ["B#1", "B#0", "A#1", "A#0"]


def test_12_8_adaptive_threshold_floors_the_cap_at_a_fair_share() -> None:
    # Budget 64, threshold 8, three 100-token prompts: the cap is max(8, 64 // 3) = 21.
    by_step = steps("r12_8_adaptive_threshold")
    assert by_step[1]["scheduled"] == {"A": 21, "B": 21, "C": 21}
    assert by_step[5]["scheduled"] == {"A": 16, "B": 16, "C": 16}


def test_12_8_max_num_active_seqs_caps_admission() -> None:
    # max_num_seqs 4, max_num_active_seqs 2: C waits until A and B have finished.
    by_step = steps("r12_8_max_num_active_seqs")
    assert by_step[1]["scheduled"] == {"A": 8, "B": 8}
    assert by_step[2]["finished"] == ["A", "B"]
    assert by_step[3]["admitted"] == [{"id": "C", "hit_tokens": 0, "resumed": False}]


def test_12_8_prefill_schedule_interval_holds_new_prefill() -> None:
    # Interval 3: A prefilled at executed step 1 and decodes; B, added after step 1, is held
    # in steps 2 and 3 and admitted in step 4.
    by_step = steps("r12_8_prefill_schedule_interval")
    assert [by_step[step]["scheduled"] for step in (2, 3, 4)] == [
        {"A": 1},
        {"A": 1},
        {"A": 1, "B": 8},
    ]
    assert by_step[3]["waiting"] == ["B"]
