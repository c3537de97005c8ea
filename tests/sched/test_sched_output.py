"""The batch shape SchedulerOutput hands the cost model, and per-request prefill accounting.

A scheduled request is a decode when it computes exactly its last token after outputs exist
(context = tokens already in KV); everything else is a prefill chunk (new tokens, context).
"""

from __future__ import annotations

from sched_driver import SchedDriver, tokens


def shapes(driver: SchedDriver) -> list[tuple[list[int], list[int], list[int]]]:
    """(prefill_new_tokens, prefill_context_tokens, decode_context_lens) of each step to idle."""
    return [
        (
            step.output.prefill_new_tokens,
            step.output.prefill_context_tokens,
            step.output.decode_context_lens,
        )
        for step in driver.run_until_idle().values()
    ]


def test_chunked_prefills_and_decodes_are_split_per_step() -> None:
    # w04: budget 64, A and B 100-token prompts with 3 outputs. Running requests come first.
    driver = SchedDriver(
        num_gpu_blocks=64, block_size=16, max_num_batched_tokens=64, max_num_seqs=8
    )
    a = driver.add("A", tokens(1000, 100), [1, 2, 3])
    b = driver.add("B", tokens(2000, 100), [4, 5, 6])
    assert shapes(driver) == [
        ([64], [0], []),
        ([36, 28], [64, 0], []),
        ([63], [28], [100]),
        ([9], [91], [101]),
        ([], [], [100]),
        ([], [], [101]),
    ]
    assert (a.num_computed_prefill_tokens, b.num_computed_prefill_tokens) == (100, 100)
    assert (a.num_cached_tokens, b.num_cached_tokens) == (0, 0)


def test_hit_tokens_are_context_not_new_tokens() -> None:
    # w03: B hits 48 of its 64 prompt tokens in the same step A computes them.
    driver = SchedDriver(num_gpu_blocks=64, block_size=16)
    driver.add("A", tokens(1000, 64), [1, 2])
    driver.add("B", tokens(1000, 64), [1, 2])
    assert shapes(driver) == [([64, 16], [0, 48], []), ([], [], [64, 64])]


def test_one_token_final_chunk_of_a_prompt_is_a_prefill() -> None:
    # Budget 16, 17-token prompt: the 2nd step computes 1 token, still a prompt token.
    driver = SchedDriver(
        num_gpu_blocks=64, block_size=16, max_num_batched_tokens=16, max_num_seqs=16
    )
    a = driver.add("A", tokens(1000, 17), [1, 2])
    assert shapes(driver) == [([16], [0], []), ([1], [16], []), ([], [], [17])]
    assert a.num_computed_prefill_tokens == 17


def test_resumed_request_recomputes_its_outputs_as_prefill() -> None:
    # w02: B resumes at step 41 with 81 tokens and hit 48, so it recomputes 33 as one chunk.
    driver = SchedDriver(num_gpu_blocks=11, block_size=16)
    driver.add("A", tokens(1000, 64), tokens(5000, 40))
    b = driver.add("B", tokens(2000, 64), tokens(6000, 40))
    steps = driver.steps(42)
    assert steps[18].output.decode_context_lens == [80]  # A only; B was preempted
    resume = steps[41].output
    assert (resume.prefill_new_tokens, resume.prefill_context_tokens) == ([33], [48])
    assert resume.decode_context_lens == []
    assert steps[42].output.decode_context_lens == [81]
    assert (b.num_cached_tokens, b.num_computed_prefill_tokens) == (0, 64 + 33)


def test_num_cached_tokens_is_the_first_admissions_hit() -> None:
    # B = 4, 5 usable blocks. "seed" caches tokens 100..107 (2 blocks). G (4 tokens) then A
    # (seed's 8 tokens + 4 more, hit 8) are admitted in step 2. In step 3 G's decode takes the
    # last block and A preempts itself (A#0-A#2 stay cached). A cannot return while G holds 2
    # blocks (1 new + 3 evictable hits > 3 free); after G finishes it resumes in step 5 with
    # hit 12 (cap 13 - 1), computing only token 12: a decode, nothing recomputed.
    driver = SchedDriver(num_gpu_blocks=6, block_size=4)
    driver.add("seed", tokens(100, 8), [1])
    assert driver.step().finished == ["seed"]
    g = driver.add("G", tokens(300, 4), tokens(1, 3))
    a = driver.add("A", tokens(100, 12), tokens(1, 5))
    assert a.num_cached_tokens == -1  # not admitted yet

    admit = driver.step()
    assert admit.admitted == [("G", 0, False), ("A", 8, False)]
    assert (admit.output.prefill_new_tokens, admit.output.prefill_context_tokens) == (
        [4, 4],
        [0, 8],
    )
    assert (a.num_cached_tokens, a.num_computed_prefill_tokens) == (8, 4)

    preempt = driver.step()
    assert (preempt.scheduled, preempt.preempted) == ({"G": 1}, ["A"])
    refused = driver.step()
    assert (refused.scheduled, refused.admitted, refused.finished) == ({"G": 1}, [], ["G"])

    resume = driver.step()
    assert resume.admitted == [("A", 12, True)]
    assert resume.scheduled == {"A": 1}
    assert resume.output.prefill_new_tokens == []
    assert resume.output.decode_context_lens == [12]
    assert (a.num_cached_tokens, a.num_computed_prefill_tokens) == (8, 4)
    assert (driver.stats.preempted_queries, driver.stats.preempted_hits) == (13, 12)
    assert (g.num_cached_tokens, g.num_computed_prefill_tokens) == (0, 4)
    driver.run_until_idle()
    assert a.num_output_tokens == 5
