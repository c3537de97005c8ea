"""spec §11 pitfalls, one test each (pitfall 10 is the scheduler's side of admission)."""

from __future__ import annotations

import pytest
from cache_driver import CacheDriver, tokens

from sim.kvcache import BlockHasher, BlockPool, HashKeys
from sim.sched import Request, Scheduler, SchedulerConfig


@pytest.mark.parametrize(
    ("num_prompt_tokens", "expected_hit"),
    [(16, 0), (17, 16), (32, 16), (33, 32), (48, 32), (64, 48), (65, 64), (79, 64), (80, 64)],
)
def test_pitfall_01_hit_is_capped_at_num_tokens_minus_one_in_whole_blocks(
    num_prompt_tokens, expected_hit
):
    """A prompt whose blocks are all cached hits (num_tokens - 1) // 16 * 16 tokens."""
    driver = CacheDriver(64)
    driver.arrive("A", tokens(1000, num_prompt_tokens))
    driver.run("A", [7])
    driver.arrive("B", tokens(1000, num_prompt_tokens))
    assert driver.schedule("B").hit_tokens == expected_hit


def test_pitfall_02_a_refused_lookup_is_counted_once_when_finally_admitted():
    """N=6. A (48) holds 3 blocks; X = A[:32] + 40 (hit 32, 3 new > 2 free) is refused twice,
    then admitted after A finishes (3 new + 2 evictable hits = 5, evicting A#2): counted once."""
    driver = CacheDriver(6)
    driver.arrive("A", tokens(1000, 48))
    driver.schedule("A")
    driver.arrive("X", tokens(1000, 32) + tokens(2000, 40))
    for _ in range(2):
        refused = driver.schedule("X")
        assert (refused.ok, refused.hit_tokens) == (False, 32)
        assert driver.stats["requests"] == 1
        assert driver.num_free_blocks == 2
    driver.finish("A")
    admitted = driver.schedule("X")
    assert (admitted.ok, admitted.hit_tokens, admitted.new_block_ids) == (True, 32, [4, 5, 3])
    assert admitted.evicted_labels == ["A#2"]
    assert (driver.stats["requests"], driver.stats["queries"], driver.stats["hits"]) == (2, 120, 32)


def test_pitfall_03_cached_free_blocks_are_free_but_free_hits_cost_capacity():
    """N=6. After A (64) finishes its 4 cached blocks count as free (usage 0). A + 17 needs
    2 new + 4 evictable hits = 6 > 5 and is refused; A + 16 needs 1 + 4 = 5 and fits."""
    driver = CacheDriver(6)
    driver.arrive("A", tokens(1000, 64))
    driver.run("A", [7])
    assert len(driver.manager.block_pool.cached_blocks) == 4
    assert (driver.num_free_blocks, driver.manager.usage) == (5, 0.0)
    driver.arrive("X", tokens(1000, 64) + tokens(2000, 17))
    assert not driver.schedule("X").ok
    driver.arrive("Y", tokens(1000, 64) + tokens(3000, 16))
    assert driver.schedule("Y").ok
    assert (driver.num_free_blocks, driver.manager.usage) == (0, 1.0)


def test_pitfall_04_eviction_order_front_to_back():
    """N=12. A (40) and B (20) run; A then B finish. Queue: B's tail, A's tail (unhashed, newest
    first), never-used 6..11, then cached by release: A#1, A#0 (tail first), B#0."""
    driver = CacheDriver(12)
    driver.arrive("A", tokens(1000, 40))
    driver.arrive("B", tokens(2000, 20))
    assert driver.schedule("A").new_block_ids == [1, 2, 3]
    assert driver.schedule("B").new_block_ids == [4, 5]
    driver.finish("A")
    driver.finish("B")
    assert driver.free_queue_ids() == [5, 3, 6, 7, 8, 9, 10, 11, 2, 1, 4]
    driver.arrive("C", tokens(3000, 11 * 16))
    step = driver.schedule("C")
    assert step.new_block_ids == [5, 3, 6, 7, 8, 9, 10, 11, 2, 1, 4]
    assert step.evicted_labels == ["A#1", "A#0", "B#0"]


def test_pitfall_05_outputs_become_hittable_except_the_last_sampled_token():
    """A (20 prompt + 28 outputs = 48 tokens) hashes 3 blocks but caches 2 (47 computed);
    the next turn with all 48 tokens + 8 more hits 32."""
    driver = CacheDriver(64)
    request = driver.arrive("A", tokens(1000, 20))
    run = driver.run("A", tokens(5000, 28))
    assert len(request.block_hashes) == 3
    assert (run.num_computed_tokens, run.stored_labels) == (47, ["A#0", "A#1"])
    driver.arrive("A2", tokens(1000, 20) + tokens(5000, 28) + tokens(8000, 8))
    assert driver.schedule("A2").hit_tokens == 32


def test_pitfall_06_preempted_blocks_stay_hittable_and_relookup_is_preempted_only():
    """N=8. A (40) is preempted: its tail [3] goes to the front, A#1 and A#0 to the back. Its
    re-admission hits 32 and is reported only in the preempted_* counters."""
    driver = CacheDriver(8)
    driver.arrive("A", tokens(1000, 40))
    driver.schedule("A")
    driver.preempt("A")
    assert driver.free_queue_ids() == [3, 4, 5, 6, 7, 2, 1]
    assert driver.free_queue_labels() == [None, None, None, None, None, "A#1", "A#0"]
    step = driver.schedule("A")
    assert (step.hit_tokens, step.new_block_ids) == (32, [3])
    assert driver.stats == {
        "requests": 1,
        "queries": 40,
        "hits": 0,
        "preempted_requests": 1,
        "preempted_queries": 40,
        "preempted_hits": 32,
    }


def test_pitfall_07_salt_keys_block_0_only_yet_changes_every_hash():
    """A salt is an extra key of block 0 only, but every later hash differs through the chain;
    a LoRA (name, path) is an extra key of every block."""
    hasher = BlockHasher("sha256", 16)
    prompt = tokens(1000, 48)
    salted = HashKeys(cache_salt="s1")
    assert [salted.for_block(i, 16 * i, 16 * i + 16) for i in range(3)] == [
        (("cache_salt", "s1"),),
        None,
        None,
    ]
    lora = HashKeys(lora_name="n", lora_path="/p")
    lora_key = ("lora", "n", "/p")
    assert [lora.for_block(i, 16 * i, 16 * i + 16) for i in range(3)] == [(lora_key,)] * 3
    plain_hashes: list[bytes] = []
    salted_hashes: list[bytes] = []
    hasher.extend(plain_hashes, prompt)
    hasher.extend(salted_hashes, prompt, salted)
    assert all(p != s for p, s in zip(plain_hashes, salted_hashes, strict=True))


def test_pitfall_08_none_hash_depends_on_the_seed_so_differently_seeded_runs_never_share():
    """Two hashers with different seeds give different NONE_HASH and no common block hash."""
    prompt = tokens(1000, 64)
    unseeded, seeded = BlockHasher("sha256", 16), BlockHasher("sha256", 16, hash_seed="0")
    assert unseeded.none_hash != seeded.none_hash
    unseeded_hashes: list[bytes] = []
    seeded_hashes: list[bytes] = []
    unseeded.extend(unseeded_hashes, prompt)
    seeded.extend(seeded_hashes, prompt)
    assert not set(unseeded_hashes) & set(seeded_hashes)
    xxhash_a, xxhash_b = BlockHasher("xxhash", 16, "1"), BlockHasher("xxhash", 16, "2")
    assert xxhash_a.none_hash != xxhash_b.none_hash


def test_pitfall_09_duplicates_are_kept_lookup_takes_the_oldest_and_survives_one_eviction():
    """Pool of 5: blocks 1 and 2 cached under one hash; lookup returns 1; evicting 1 keeps 2."""
    pool = BlockPool(5)
    first, second = pool.get_new_blocks(2)
    block_hash = b"h" * 32
    pool.cache_full_blocks([first], [block_hash], 0, 1, 16)
    pool.cache_full_blocks([second], [block_hash], 0, 1, 16)
    assert pool.num_stored == 2
    assert pool.get_cached_block(block_hash) is first
    pool.free_blocks([first, second])
    assert [block.block_id for block in pool.free_block_queue] == [3, 4, 1, 2]
    evicting = pool.get_new_blocks(3)
    assert [block.block_id for block in evicting] == [3, 4, 1]
    assert pool.num_evictions == 1
    assert pool.get_cached_block(block_hash) is second


def _scheduler(num_gpu_blocks: int) -> Scheduler:
    return Scheduler(SchedulerConfig(num_gpu_blocks=num_gpu_blocks))


def _add(scheduler: Scheduler, request_id: str, prompt: list[int], num_outputs: int) -> None:
    outputs = tokens(7000, num_outputs)
    scheduler.add_request(Request(request_id, prompt, outputs, scheduler.hasher))


def test_pitfall_10a_admission_is_head_of_line_blocked_on_kv_capacity():
    """N=6 (5 usable). BIG (96 tokens = 6 blocks) can never fit; SMALL (16) behind it could,
    but admission stops at BIG: the step schedules nothing."""
    scheduler = _scheduler(6)
    _add(scheduler, "BIG", tokens(1000, 96), 1)
    _add(scheduler, "SMALL", tokens(2000, 16), 1)
    output = scheduler.schedule()
    assert (output.admitted, output.total_num_scheduled_tokens) == ([], 0)
    assert scheduler.kv_cache_manager.num_free_blocks == 5


def test_pitfall_10b_no_admission_in_a_step_that_preempted():
    """N=5 (4 usable). A and B (32 tokens each) fill the pool in step 1. In step 2 A's decode
    needs a third block, so B is preempted; C (16 tokens) would fit the 1 block left, but no
    waiting request is admitted in a step that preempted."""
    scheduler = _scheduler(5)
    _add(scheduler, "A", tokens(1000, 32), 8)
    _add(scheduler, "B", tokens(2000, 32), 8)
    first = scheduler.schedule()
    assert first.num_scheduled_tokens == {"A": 32, "B": 32}
    scheduler.update_from_output(first)
    _add(scheduler, "C", tokens(3000, 16), 1)
    second = scheduler.schedule()
    assert [request.request_id for request in second.preempted] == ["B"]
    assert second.num_scheduled_tokens == {"A": 1}
    assert second.admitted == []
    assert scheduler.kv_cache_manager.num_free_blocks == 1
