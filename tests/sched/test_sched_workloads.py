"""spec §10 rows w01-w05, driving the Scheduler directly with the exact numbers vLLM 0.33.0 gave.

B = 16 tokens a block; `num_gpu_blocks` N includes the null block, so N - 1 are usable.
"""

from __future__ import annotations

from sched_driver import SchedDriver, tokens

from sim.kvcache import RequestStatus


def test_w01_second_turn_hits_the_first_turns_prompt_and_outputs() -> None:
    # A: 75-token prompt, 45 outputs; it computes 75 + 44 = 119 tokens, so 7 full blocks cached.
    # B: A's prompt + A's first 43 outputs + 32 new tokens = 150; hit capped to 7 blocks = 112.
    driver = SchedDriver(num_gpu_blocks=64, block_size=16)
    a_prompt, a_outputs = tokens(1000, 75), tokens(5000, 45)
    a = driver.add("A", a_prompt, a_outputs)

    first = driver.step()
    assert first.scheduled == {"A": 75}
    assert first.admitted == [("A", 0, False)]
    rest = driver.steps(44)
    assert [index for index, step in rest.items() if step.finished] == [45]
    assert rest[45].finished == ["A"]
    assert (driver.stats.queries, driver.stats.hits) == (75, 0)
    assert a.num_computed_tokens == 119
    assert driver.scheduler.kv_cache_manager.block_pool.num_cached_hashes == 7
    assert driver.num_free_blocks == 63

    assert driver.step().scheduled == {}  # idle engine step
    b = driver.add("B", a_prompt + a_outputs[:43] + tokens(9000, 32), [1, 2, 3])
    admit = driver.step()
    assert admit.scheduled == {"B": 38}
    assert admit.admitted == [("B", 112, False)]
    # Hit blocks 1-7, then A's unhashed tail block 8 (front of the free queue), then 9 and 10.
    assert driver.block_ids("B") == list(range(1, 11))
    assert (driver.stats.requests, driver.stats.queries, driver.stats.hits) == (2, 225, 112)
    assert (b.num_cached_tokens, b.num_computed_prefill_tokens) == (112, 38)
    assert (a.num_cached_tokens, a.num_computed_prefill_tokens) == (0, 75)

    tail = driver.run_until_idle()
    assert list(tail) == [48, 49]
    assert tail[49].finished == ["B"]


def test_w02_preemption_by_recompute_with_evicted_hits() -> None:
    # 10 usable blocks; A and B: 64-token prompts, 40 outputs each. At token 80 A needs a 6th
    # block: B (last running) is preempted and A's new block evicts B#4 (tail first).
    driver = SchedDriver(num_gpu_blocks=11, block_size=16)
    a = driver.add("A", tokens(1000, 64), tokens(5000, 40))
    b = driver.add("B", tokens(2000, 64), tokens(6000, 40))

    steps = driver.steps(18)
    assert steps[1].scheduled == {"A": 64, "B": 64}
    assert steps[1].num_free_blocks == 2
    assert steps[2].scheduled == {"A": 1, "B": 1}
    assert steps[2].num_free_blocks == 0
    assert all(steps[index].scheduled == {"A": 1, "B": 1} for index in range(3, 18))

    preempting = steps[18]
    assert preempting.scheduled == {"A": 1}
    assert preempting.preempted == ["B"]
    assert preempting.evicted_labels == ["B#4"]
    assert (preempting.running, preempting.waiting) == (["A"], ["B"])
    assert preempting.num_free_blocks == 4
    assert (b.status, b.num_computed_tokens, b.num_preemptions) == (RequestStatus.PREEMPTED, 0, 1)

    steps |= driver.steps(23)

    # B cannot return while A runs: its 81 tokens need 2 new blocks plus 4 evictable hits > 4.
    assert all(steps[index].admitted == [] for index in range(19, 41))
    assert steps[34].evicted_labels == ["B#3"]
    assert steps[40].finished == ["A"]

    resume = steps[41]
    assert resume.scheduled == {"B": 33}
    assert resume.admitted == [("B", 48, True)]
    assert resume.evicted_labels == ["A#5", "A#4"]
    assert driver.stats.as_dict() == {
        "requests": 2,
        "queries": 128,
        "hits": 0,
        "preempted_requests": 1,
        "preempted_queries": 81,
        "preempted_hits": 48,
    }

    tail = driver.run_until_idle()
    assert max(tail) == 63
    assert tail[63].finished == ["B"]
    evictions = {index: step.evicted_labels for index, step in (steps | tail).items()}
    assert {index: labels for index, labels in evictions.items() if labels} == {
        18: ["B#4"],
        34: ["B#3"],
        41: ["A#5", "A#4"],
        57: ["A#3"],
    }
    assert driver.scheduler.num_preemptions == 1
    assert (b.num_preemptions, b.num_cached_tokens, b.num_computed_prefill_tokens) == (1, 0, 97)
    assert (a.num_preemptions, a.num_cached_tokens, a.num_computed_prefill_tokens) == (0, 0, 64)


def test_w03_second_request_hits_blocks_cached_earlier_in_the_same_step() -> None:
    # Blocks are cached at schedule time, so B (same 64-token prompt) hits A's first 3 blocks.
    driver = SchedDriver(num_gpu_blocks=64, block_size=16)
    a = driver.add("A", tokens(1000, 64), [1, 2])
    b = driver.add("B", tokens(1000, 64), [1, 2])

    step = driver.step()
    assert step.scheduled == {"A": 64, "B": 16}
    assert step.admitted == [("A", 0, False), ("B", 48, False)]
    assert (driver.stats.queries, driver.stats.hits) == (128, 48)
    assert step.num_free_blocks == 58
    assert driver.block_ids("A") == [1, 2, 3, 4]
    assert driver.block_ids("B") == [1, 2, 3, 5]
    assert (a.num_cached_tokens, b.num_cached_tokens) == (0, 48)

    assert driver.step().finished == ["A", "B"]
    assert not driver.scheduler.has_unfinished_requests


def test_w04_token_budget_splits_prefills_into_chunks() -> None:
    # Budget 64 tokens a step; two 100-token prompts with 3 outputs each.
    driver = SchedDriver(
        num_gpu_blocks=64, block_size=16, max_num_batched_tokens=64, max_num_seqs=8
    )
    driver.add("A", tokens(1000, 100), [1, 2, 3])
    driver.add("B", tokens(2000, 100), [4, 5, 6])

    steps = driver.run_until_idle()
    assert [step.scheduled for step in steps.values()] == [
        {"A": 64},
        {"A": 36, "B": 28},
        {"A": 1, "B": 63},
        {"A": 1, "B": 9},
        {"B": 1},
        {"B": 1},
    ]
    assert steps[1].waiting == ["B"]
    assert steps[2].admitted == [("B", 0, False)]
    assert steps[2].num_free_blocks == 54
    assert steps[4].finished == ["A"]
    assert steps[6].finished == ["B"]
    assert (driver.stats.requests, driver.stats.queries) == (2, 200)


def test_w05_max_num_seqs_keeps_the_third_request_waiting() -> None:
    # max_num_seqs 2: C waits (with budget to spare) until A and B finish.
    driver = SchedDriver(num_gpu_blocks=64, block_size=16, max_num_seqs=2)
    driver.add("A", tokens(1000, 20), [1, 2, 3])
    driver.add("B", tokens(2000, 20), [4, 5, 6])
    driver.add("C", tokens(3000, 20), [7, 8, 9])

    steps = driver.run_until_idle()
    assert [step.scheduled for step in steps.values()] == [
        {"A": 20, "B": 20},
        {"A": 1, "B": 1},
        {"A": 1, "B": 1},
        {"C": 20},
        {"C": 1},
        {"C": 1},
    ]
    assert [steps[index].waiting for index in (1, 2, 3)] == [["C"], ["C"], ["C"]]
    assert steps[3].finished == ["A", "B"]
    assert steps[4].admitted == [("C", 0, False)]
    assert steps[6].finished == ["C"]
    assert (driver.stats.requests, driver.stats.queries) == (3, 60)
