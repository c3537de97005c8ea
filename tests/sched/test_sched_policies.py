"""Scheduling policy, preemption victims, chunking limits, admission rules and aborts (spec §7).

Small pools with B = 4 keep the block arithmetic visible; `num_gpu_blocks` includes the null block.
"""

from __future__ import annotations

import pytest
from sched_driver import SchedDriver, tokens

from sim.kvcache import RequestStatus
from sim.sched import POLICIES


def admission_order(driver: SchedDriver) -> list[str]:
    """Ids in the order they were admitted while running to idle."""
    steps = driver.run_until_idle()
    return [admitted[0] for step in steps.values() for admitted in step.admitted]


def add_five_prioritised(driver: SchedDriver) -> None:
    # Lower priority value first, then earlier arrival_at, then the request id compared as a
    # string (spec §12.4): the tied z-urgent and a-urgent go in id order, not add order.
    driver.add("late-urgent", tokens(100, 4), [1], priority=0, arrival_at=3.0)
    driver.add("background", tokens(200, 4), [1], priority=2, arrival_at=0.0)
    driver.add("z-urgent", tokens(300, 4), [1], priority=0, arrival_at=1.0)
    driver.add("a-urgent", tokens(400, 4), [1], priority=0, arrival_at=1.0)
    driver.add("normal", tokens(500, 4), [1], priority=1, arrival_at=0.0)


def test_priority_policy_admits_by_priority_then_arrival_then_request_id() -> None:
    driver = SchedDriver(num_gpu_blocks=16, block_size=4, policy="priority", max_num_seqs=1)
    add_five_prioritised(driver)
    expected = ["a-urgent", "z-urgent", "late-urgent", "normal", "background"]
    assert [request.request_id for request in driver.scheduler.waiting] == expected
    assert admission_order(driver) == expected


def test_fcfs_policy_ignores_priority() -> None:
    driver = SchedDriver(num_gpu_blocks=16, block_size=4, policy="fcfs", max_num_seqs=1)
    add_five_prioritised(driver)
    assert admission_order(driver) == [
        "late-urgent",
        "background",
        "z-urgent",
        "a-urgent",
        "normal",
    ]


def start_three_running(policy: str) -> SchedDriver:
    """4 usable blocks, budget 4 tokens. Y (priority 5) decodes; X (priority 0) decodes;
    Z (priority 0) is a 40-token prefill in 2-token chunks. After step 4 all 4 blocks are held
    (Y 2, X 1, Z 1) and X's next token (its 5th) needs a second block."""
    driver = SchedDriver(
        num_gpu_blocks=5,
        block_size=4,
        max_num_batched_tokens=4,
        max_num_seqs=4,
        policy=policy,
        scheduler_reserve_full_isl=False,
    )
    driver.add("Y", tokens(100, 3), tokens(1, 20), priority=5)
    assert driver.step().scheduled == {"Y": 3}
    driver.add("X", tokens(200, 2), tokens(1, 20), priority=0)
    assert driver.step().scheduled == {"Y": 1, "X": 2}
    driver.add("Z", tokens(300, 40), [1], priority=0)
    assert driver.step().scheduled == {"Y": 1, "X": 1, "Z": 2}
    step = driver.step()
    assert step.scheduled == {"Y": 1, "X": 1, "Z": 2}
    assert step.num_free_blocks == 0
    return driver


def test_priority_preempts_largest_priority_value_and_returns_its_tokens_to_the_budget() -> None:
    # Step 5: Y's decode is scheduled first (budget 4 -> 3); X then needs a block, so Y, the
    # running request with the largest (priority, arrival_at), is preempted. Y's token goes back
    # to the budget (3 -> 4); X takes 1 and Z's chunk gets the remaining 3 (not 2).
    driver = start_three_running("priority")
    y = driver.requests["Y"]
    step = driver.step()
    assert step.preempted == ["Y"]
    assert step.scheduled == {"X": 1, "Z": 3}
    assert step.output.total_num_scheduled_tokens == 4
    assert [request.request_id for request in step.output.scheduled] == ["X", "Z"]
    assert (step.running, step.waiting) == (["X", "Z"], ["Y"])
    assert (y.status, y.num_computed_tokens, y.num_preemptions) == (RequestStatus.PREEMPTED, 0, 1)
    assert driver.block_ids("Y") == []


def test_fcfs_preempts_the_last_running_request_in_the_same_situation() -> None:
    # Same state under FCFS: the victim is Z (last in running), not yet scheduled this step.
    driver = start_three_running("fcfs")
    step = driver.step()
    assert step.preempted == ["Z"]
    assert step.scheduled == {"Y": 1, "X": 1}
    assert (step.running, step.waiting) == (["Y", "X"], ["Z"])


def test_request_that_cannot_grow_preempts_itself_and_stops_the_running_pass() -> None:
    # Priority policy: running [A (priority 0), V (priority 9)]; the 3rd usable block goes to A,
    # so V's decode finds none and V, the largest priority value, is its own victim.
    driver = SchedDriver(num_gpu_blocks=4, block_size=4, policy="priority")
    driver.add("A", tokens(100, 4), tokens(1, 10), priority=0)
    driver.add("V", tokens(200, 4), tokens(1, 10), priority=9)
    assert driver.step().scheduled == {"A": 4, "V": 4}
    step = driver.step()
    assert step.scheduled == {"A": 1}
    assert step.preempted == ["V"]


def test_no_admission_in_a_step_that_preempted() -> None:
    # As above, with W (priority 0, 2 tokens = 1 block) added before step 2. After V is
    # preempted one block is free and W heads the waiting queue, yet W waits for step 3.
    driver = SchedDriver(num_gpu_blocks=4, block_size=4, policy="priority")
    driver.add("A", tokens(100, 4), tokens(1, 10), priority=0)
    driver.add("V", tokens(200, 4), tokens(1, 10), priority=9)
    driver.step()
    driver.add("W", tokens(300, 2), [1], priority=0)
    preempting = driver.step()
    assert preempting.preempted == ["V"]
    assert preempting.admitted == []
    assert preempting.waiting == ["W", "V"]
    assert preempting.num_free_blocks == 1
    following = driver.step()
    assert following.admitted == [("W", 0, False)]
    assert following.scheduled == {"A": 1, "W": 2}


def test_long_prefill_token_threshold_caps_each_chunk() -> None:
    # Threshold 16: two 40-token prompts go 16, 16, 8 each, though the budget is 2048.
    driver = SchedDriver(num_gpu_blocks=64, block_size=16, long_prefill_token_threshold=16)
    driver.add("A", tokens(1000, 40), [1, 2])
    driver.add("B", tokens(2000, 40), [3, 4])
    steps = driver.run_until_idle()
    assert [step.scheduled for step in steps.values()] == [
        {"A": 16, "B": 16},
        {"A": 16, "B": 16},
        {"A": 8, "B": 8},
        {"A": 1, "B": 1},
    ]


def test_without_chunked_prefill_a_prefill_over_the_budget_blocks_the_queue() -> None:
    # Budget 64 = max_model_len. A takes 40, leaving 24: B (30 tokens) does not fit whole, and
    # C (10 tokens) behind it is not tried (head of line). Next step A decodes and both fit.
    driver = SchedDriver(
        num_gpu_blocks=64,
        block_size=16,
        max_num_batched_tokens=64,
        max_num_seqs=8,
        max_model_len=64,
        enable_chunked_prefill=False,
    )
    driver.add("A", tokens(1000, 40), [1, 2, 3])
    driver.add("B", tokens(2000, 30), [1, 2])
    driver.add("C", tokens(3000, 10), [1, 2])
    first = driver.step()
    assert first.scheduled == {"A": 40}
    assert first.waiting == ["B", "C"]
    assert driver.step().scheduled == {"A": 1, "B": 30, "C": 10}


def test_with_chunked_prefill_the_same_prompt_gets_the_remaining_budget() -> None:
    driver = SchedDriver(
        num_gpu_blocks=64,
        block_size=16,
        max_num_batched_tokens=64,
        max_num_seqs=8,
        max_model_len=64,
    )
    driver.add("A", tokens(1000, 40), [1, 2, 3])
    driver.add("B", tokens(2000, 30), [1, 2])
    driver.add("C", tokens(3000, 10), [1, 2])
    first = driver.step()
    assert first.scheduled == {"A": 40, "B": 24}
    assert first.waiting == ["C"]


def test_kv_capacity_blocks_the_queue_head_of_line() -> None:
    # 4 usable blocks of 4: A (12 tokens) holds 3. B needs 2 blocks for its 6 tokens and is
    # refused; C (1 block) behind it would fit but is not tried.
    driver = SchedDriver(num_gpu_blocks=5, block_size=4)
    driver.add("A", tokens(100, 12), tokens(1, 3))
    driver.add("B", tokens(200, 6), [1])
    driver.add("C", tokens(300, 2), [1])
    step = driver.step()
    assert step.scheduled == {"A": 12}
    assert step.waiting == ["B", "C"]
    assert step.num_free_blocks == 1
    assert driver.stats.requests == 1  # a refused admission is not counted


def test_abort_running_request_frees_its_blocks_and_keeps_them_cached() -> None:
    # A (40 tokens, B = 16) holds 3 blocks, 2 of them full and cached. After the abort all 63
    # are free again, and the same prompt hits the 2 cached blocks.
    driver = SchedDriver(num_gpu_blocks=64, block_size=16)
    driver.add("A", tokens(1000, 40), tokens(1, 5))
    driver.step()
    assert driver.num_free_blocks == 60
    aborted = driver.scheduler.abort_request("A", now=1.0)
    assert (aborted.status, aborted.finished_at) == (RequestStatus.FINISHED_ABORTED, 1.0)
    assert driver.num_free_blocks == 63
    assert driver.scheduler.running == []
    assert "A" not in driver.scheduler.requests
    assert not driver.scheduler.has_unfinished_requests
    driver.add("A2", tokens(1000, 40), [1])
    assert driver.step().admitted == [("A2", 32, False)]


def test_abort_mid_prefill_frees_the_chunks_blocks() -> None:
    # Budget 16: after one chunk A holds 1 block; abort returns it.
    driver = SchedDriver(
        num_gpu_blocks=64, block_size=16, max_num_batched_tokens=16, max_num_seqs=16
    )
    driver.add("A", tokens(1000, 40), [1])
    assert driver.step().scheduled == {"A": 16}
    assert driver.num_free_blocks == 62
    driver.scheduler.abort_request("A")
    assert driver.num_free_blocks == 63


@pytest.mark.parametrize("policy", POLICIES)
def test_abort_waiting_request_leaves_the_queue_and_blocks_unchanged(policy: str) -> None:
    # max_num_seqs 1: A runs (1 block held, 14 free) while B and C wait; B is aborted.
    driver = SchedDriver(num_gpu_blocks=16, block_size=4, policy=policy, max_num_seqs=1)
    driver.add("A", tokens(100, 4), tokens(1, 3))
    driver.add("B", tokens(200, 4), [1])
    driver.add("C", tokens(300, 4), [1])
    driver.step()
    assert driver.num_free_blocks == 14
    aborted = driver.scheduler.abort_request("B", now=1.0)
    assert aborted.status is RequestStatus.FINISHED_ABORTED
    assert [request.request_id for request in driver.scheduler.waiting] == ["C"]
    assert driver.num_free_blocks == 14
    assert admission_order(driver) == ["C"]


def test_abort_preempted_request_in_waiting() -> None:
    # V is preempted (as in the self-preemption test) and then aborted from the waiting queue.
    driver = SchedDriver(num_gpu_blocks=4, block_size=4, policy="priority")
    driver.add("A", tokens(100, 4), tokens(1, 3), priority=0)
    driver.add("V", tokens(200, 4), tokens(1, 10), priority=9)
    driver.steps(2)
    assert driver.requests["V"].status is RequestStatus.PREEMPTED
    driver.scheduler.abort_request("V")
    assert len(driver.scheduler.waiting) == 0
    steps = driver.run_until_idle()
    assert [finished for step in steps.values() for finished in step.finished] == ["A"]
    assert driver.num_free_blocks == 3


def test_priority_victim_among_equal_keys_is_the_earliest_in_running() -> None:
    # Spec §12.5, as real vLLM 0.33.0 printed it: A and V tie on (priority 0, arrival 0), so
    # the victim is A, first in running, though V is the one needing a block. A preempts
    # itself and the pass goes on (§12.6): V decodes in A's freed block and finishes; A
    # comes back in step 3 and recomputes its 5 tokens.
    driver = SchedDriver(num_gpu_blocks=3, block_size=4, max_model_len=8, policy="priority")
    driver.add("A", tokens(100, 4), [1, 2], arrival_at=0.0)
    driver.add("V", tokens(200, 4), [1, 2], arrival_at=0.0)
    assert driver.step().scheduled == {"A": 4, "V": 4}
    step = driver.step()
    assert (step.scheduled, step.preempted, step.result.finished[0].request_id) == (
        {"V": 1},
        ["A"],
        "V",
    )
    assert (step.running, step.waiting, step.num_free_blocks) == ([], ["A"], 2)
    assert driver.step().scheduled == {"A": 5}


def test_tied_priority_requests_drain() -> None:
    # 7 usable blocks of 2 tokens; r0 and r1 tie on (priority 1, arrival_at 0), each a
    # 1-token prompt with 10 outputs. What vLLM 0.33.0 printed: both decode until step 7,
    # where r0 (first in running) is the victim; r1 finishes at step 10, and r0 resumes in
    # step 11 with 6 of its 7 tokens hit and finishes at step 14.
    driver = SchedDriver(
        num_gpu_blocks=8,
        block_size=2,
        max_num_batched_tokens=14,
        max_num_seqs=2,
        max_model_len=14,
        long_prefill_token_threshold=3,
        policy="priority",
        scheduler_reserve_full_isl=False,
    )
    driver.add("r0", [1000], tokens(1, 10), priority=1, arrival_at=0.0)
    driver.add("r1", [1000], tokens(1, 10), priority=1, arrival_at=0.0)
    steps = driver.run_until_idle(max_steps=100)
    finished_at = {rid: index for index, step in steps.items() for rid in step.finished}
    assert finished_at == {"r1": 10, "r0": 14}
    assert {index: step.preempted for index, step in steps.items() if step.preempted} == {7: ["r0"]}
    assert steps[11].admitted == [("r0", 6, True)]
    assert steps[11].scheduled == {"r0": 1}


def test_last_running_request_preempting_itself_lets_the_others_run() -> None:
    # 2 usable blocks of 4. Y (priority 5) runs alone in step 1; X (priority 0) joins in step 2
    # and takes the last block. In step 3 Y, first in running, needs a block: as the largest
    # priority value it is its own victim, and the running pass goes on (spec §12.6): X
    # decodes and finishes. No admission follows a preemption, so Y resumes in step 4. This is
    # what vLLM 0.33.0 printed.
    driver = SchedDriver(num_gpu_blocks=3, block_size=4, max_model_len=8, policy="priority")
    driver.add("Y", tokens(100, 3), tokens(1, 4), priority=5)
    assert driver.step().scheduled == {"Y": 3}
    driver.add("X", tokens(200, 4), tokens(1, 2), priority=0)
    assert driver.step().scheduled == {"Y": 1, "X": 4}
    step = driver.step()
    assert (step.scheduled, step.preempted, step.admitted) == ({"X": 1}, ["Y"], [])
    assert step.finished == ["X"]
    rest = driver.run_until_idle()
    assert [step.scheduled for step in rest.values()] == [{"Y": 5}, {"Y": 1}]
    assert rest[5].finished == ["Y"]
