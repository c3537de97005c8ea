"""spec §10 scenarios s01-s25, driven on KVCacheManager directly, with vLLM 0.33.0's exact numbers.

Block size 16 and a fresh pool (ids handed out from 1) unless a test says otherwise; `A#i` is
block i of request A. Stats dicts are cumulative, in vLLM's field order.
"""

from __future__ import annotations

from cache_driver import CacheDriver, tokens

from sim.kvcache import HashKeys


def stats(requests=0, queries=0, hits=0, p_requests=0, p_queries=0, p_hits=0) -> dict[str, int]:
    """A cumulative PrefixCacheStats dict."""
    return {
        "requests": requests,
        "queries": queries,
        "hits": hits,
        "preempted_requests": p_requests,
        "preempted_queries": p_queries,
        "preempted_hits": p_hits,
    }


def labels(request_id: str, *indices: int) -> list[str]:
    """["A#0", "A#1", ...] for the given block indices."""
    return [f"{request_id}#{index}" for index in indices]


def test_s01_two_turn_chat_hits_112_of_225():
    """s01: A (75 prompt + 45 outputs) caches 7 blocks; B (150 tokens, 118 shared) hits 112."""
    driver = CacheDriver(64)
    a_prompt, a_outputs = tokens(1000, 75), tokens(5000, 45)
    driver.arrive("A", a_prompt)
    run = driver.run("A", a_outputs)
    assert run.prefill.hit_tokens == 0
    assert run.num_computed_tokens == 119
    assert run.block_ids_at_finish == [1, 2, 3, 4, 5, 6, 7, 8]
    assert run.stored_labels == labels("A", 0, 1, 2, 3, 4, 5, 6)

    driver.arrive("B", a_prompt + a_outputs[:43] + tokens(9000, 32))
    step = driver.schedule("B")
    assert (step.hit_tokens, step.num_new_tokens) == (112, 38)
    # Block 8 was A's unhashed tail: it went to the front of the free queue and is reused first.
    assert step.new_block_ids == [8, 9, 10]
    assert driver.block_ids("B") == [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]
    assert step.stored_labels == labels("B", 7, 8)
    assert driver.stats == stats(requests=2, queries=225, hits=112)


def test_s02_fully_cached_64_tokens_hit_only_48():
    """s02: a cached 64-token prompt asked again hits 48 (cap 63 tokens = 3 whole blocks)."""
    driver = CacheDriver(64)
    driver.arrive("A", tokens(1000, 64))
    assert driver.run("A", [7]).stored_labels == labels("A", 0, 1, 2, 3)
    driver.arrive("B", tokens(1000, 64))
    step = driver.schedule("B")
    assert (step.hit_tokens, step.num_new_tokens, step.new_block_ids) == (48, 16, [5])
    assert driver.block_ids("B") == [1, 2, 3, 5]
    assert driver.stats == stats(requests=2, queries=128, hits=48)


def test_s03_65_tokens_hit_all_four_blocks():
    """s03: a cached 65-token prompt asked again hits 64 and computes 1 token in one new block."""
    driver = CacheDriver(64)
    driver.arrive("A", tokens(1000, 65))
    driver.run("A", [7])
    driver.arrive("B", tokens(1000, 65))
    step = driver.schedule("B")
    assert (step.hit_tokens, step.num_new_tokens, step.new_block_ids) == (64, 1, [5])
    assert driver.stats == stats(requests=2, queries=130, hits=64)


def test_s04_prompt_below_one_block_is_never_cached():
    """s04: a 10-token prompt has no block hash, caches nothing, and hits 0 the second time."""
    driver = CacheDriver(64)
    assert driver.arrive("A", tokens(1000, 10)).block_hashes == []
    run = driver.run("A", [7, 8])
    assert run.stored_labels == []
    driver.arrive("B", tokens(1000, 10))
    assert driver.schedule("B").hit_tokens == 0
    assert driver.stats == stats(requests=2, queries=20, hits=0)
    assert driver.manager.block_pool.num_stored == 0


def test_s05_divergence_inside_a_block_keeps_the_whole_blocks_before_it():
    """s05: A 40 tokens cached; B shares the first 35, so only blocks 0-1 match: hit 32."""
    driver = CacheDriver(64)
    driver.arrive("A", tokens(1000, 40))
    driver.run("A", [7])
    driver.arrive("B", tokens(1000, 35) + tokens(2000, 10))
    step = driver.schedule("B")
    assert (step.hit_tokens, step.num_new_tokens, step.new_block_ids) == (32, 13, [3])
    assert driver.stats == stats(requests=2, queries=85, hits=32)


def test_s06_first_token_difference_breaks_the_whole_chain():
    """s06: B equals A (65 tokens) except token 0; blocks 1-3 have equal tokens but hit is 0."""
    driver = CacheDriver(64)
    a = driver.arrive("A", tokens(1000, 64) + [1])
    driver.run("A", [7])
    b = driver.arrive("B", [999] + tokens(1001, 63) + [1])
    assert not set(a.block_hashes) & set(b.block_hashes)
    step = driver.schedule("B")
    assert (step.hit_tokens, step.new_block_ids) == (0, [5, 6, 7, 8, 9])
    assert driver.stats == stats(requests=2, queries=130, hits=0)


def test_s07_last_sampled_token_is_never_cached():
    """s07: A (20 + 12 outputs) caches only A#0, so A2 hits 16; B (20 + 13) caches 2, B2 hits 32."""
    driver = CacheDriver(64)
    driver.arrive("A", tokens(1000, 20))
    run_a = driver.run("A", tokens(5000, 12))
    assert (run_a.num_computed_tokens, run_a.stored_labels) == (31, ["A#0"])
    driver.arrive("A2", tokens(1000, 20) + tokens(5000, 12) + tokens(8000, 8))
    assert driver.schedule("A2").hit_tokens == 16

    driver.arrive("B", tokens(3000, 20))
    run_b = driver.run("B", tokens(6000, 13))
    assert (run_b.num_computed_tokens, run_b.stored_labels) == (32, labels("B", 0, 1))
    driver.arrive("B2", tokens(3000, 20) + tokens(6000, 12) + tokens(9000, 8))
    assert driver.schedule("B2").hit_tokens == 32
    assert driver.stats == stats(requests=4, queries=120, hits=48)


def test_s08_running_requests_share_blocks():
    """s08: N=20. B = A[:48] + 30 hits A's 3 held blocks; shared blocks are counted once."""
    driver = CacheDriver(20)
    driver.arrive("A", tokens(1000, 64))
    assert driver.schedule("A").new_block_ids == [1, 2, 3, 4]
    assert driver.num_free_blocks == 15
    driver.arrive("B", tokens(1000, 48) + tokens(2000, 30))
    step = driver.schedule("B")
    assert (step.hit_tokens, step.new_block_ids) == (48, [5, 6])
    assert driver.block_ids("B") == [1, 2, 3, 5, 6]
    assert driver.num_free_blocks == 13
    driver.finish("A")
    assert driver.num_free_blocks == 14
    driver.finish("B")
    assert driver.num_free_blocks == 19
    assert driver.free_queue_ids() == [*range(6, 20), 4, 5, 3, 2, 1]
    assert driver.free_queue_labels() == [None] * 14 + ["A#3", "B#3", "A#2", "A#1", "A#0"]
    assert driver.stats == stats(requests=2, queries=142, hits=48)


def test_s09_a_requests_deepest_block_is_evicted_first():
    """s09: N=6. After A (64 tokens) the queue is [5, A#3..A#0]; C (40) evicts A#3 then A#2."""
    driver = CacheDriver(6)
    driver.arrive("A", tokens(1000, 64))
    driver.run("A", [7])
    assert driver.free_queue_ids() == [5, 4, 3, 2, 1]
    assert driver.free_queue_labels() == [None, "A#3", "A#2", "A#1", "A#0"]
    driver.arrive("C", tokens(3000, 40))
    step = driver.schedule("C")
    assert step.new_block_ids == [5, 4, 3]
    assert step.evicted_labels == ["A#3", "A#2"]
    assert step.stored_labels == ["C#0", "C#1"]
    driver.finish("C")
    driver.arrive("D", tokens(1000, 64))
    step = driver.schedule("D")
    assert (step.hit_tokens, step.new_block_ids, step.evicted_labels) == (32, [3, 4], ["C#1"])
    assert driver.manager.block_pool.num_evictions == 3
    assert driver.stats == stats(requests=3, queries=168, hits=32)


def test_s10_eviction_is_lru_by_release_time_across_requests():
    """s10: N=7. A and B (32 each) run; A finishes first, so C (64) evicts A#1, A#0, not B's."""
    driver = CacheDriver(7)
    driver.arrive("A", tokens(1000, 32))
    driver.arrive("B", tokens(2000, 32))
    assert driver.schedule("A").new_block_ids == [1, 2]
    assert driver.schedule("B").new_block_ids == [3, 4]
    driver.finish("A")
    driver.finish("B")
    assert driver.free_queue_ids() == [5, 6, 2, 1, 4, 3]
    assert driver.free_queue_labels() == [None, None, "A#1", "A#0", "B#1", "B#0"]
    driver.arrive("C", tokens(3000, 64))
    step = driver.schedule("C")
    assert step.new_block_ids == [5, 6, 2, 1]
    assert step.evicted_labels == ["A#1", "A#0"]
    assert driver.free_queue_labels() == ["B#1", "B#0"]


def test_s11_a_hit_refreshes_recency():
    """s11: N=8. B = A[:16] + 17 hits A#0; after B finishes A#0 sits behind A#1 in the queue."""
    driver = CacheDriver(8)
    driver.arrive("A", tokens(1000, 32))
    driver.run("A", [7])
    driver.arrive("B", tokens(1000, 16) + tokens(2000, 17))
    step = driver.schedule("B")
    assert (step.hit_tokens, step.new_block_ids) == (16, [3, 4])
    assert driver.num_free_blocks == 4
    driver.finish("B")
    assert driver.free_queue_ids() == [4, 5, 6, 7, 2, 3, 1]
    assert driver.free_queue_labels() == [None, None, None, None, "A#1", "B#1", "A#0"]


def test_s12_unhashed_tail_goes_to_the_front_and_is_reused_first():
    """s12: N=10. A (40 + 2 outputs) leaves queue [3, 4..9, 2, 1]; B (10 tokens) gets block 3."""
    driver = CacheDriver(10)
    driver.arrive("A", tokens(1000, 40))
    driver.run("A", [7, 8])
    assert driver.free_queue_ids() == [3, 4, 5, 6, 7, 8, 9, 2, 1]
    driver.arrive("B", tokens(2000, 10))
    step = driver.schedule("B")
    assert (step.new_block_ids, step.evicted_labels) == ([3], [])


def test_s13_readmission_after_preemption_counts_in_preempted_fields():
    """s13: A (64 prompt, 10 outputs, 73 computed) is preempted; re-admission hits 64 of 74."""
    driver = CacheDriver(64)
    driver.arrive("A", tokens(1000, 64))
    assert driver.schedule("A").stored_labels == labels("A", 0, 1, 2, 3)
    for token in tokens(5000, 9):
        driver.output("A", [token])
        driver.schedule("A")
    driver.output("A", [5009])
    assert driver.requests["A"].num_computed_tokens == 73
    assert driver.block_ids("A") == [1, 2, 3, 4, 5]
    driver.preempt("A")
    assert driver.num_free_blocks == 63
    step = driver.schedule("A")
    assert (step.admission, step.hit_tokens, step.num_new_tokens) == (True, 64, 10)
    assert step.new_block_ids == [5]
    assert driver.stats == stats(
        requests=1, queries=64, hits=0, p_requests=1, p_queries=74, p_hits=64
    )


def test_s14_cache_salt_isolates_tenants_and_empty_salt_is_no_salt():
    """s14: 48 tokens salted "tenant-1" cached; "tenant-2" hits 0, "tenant-1" 32, none 0, "" 32."""
    driver = CacheDriver(64)
    prompt = tokens(1000, 48)
    driver.arrive("A", prompt, hash_keys=HashKeys(cache_salt="tenant-1"))
    driver.run("A", [7])
    hits = {}
    for request_id, salt in (("B", "tenant-2"), ("C", "tenant-1"), ("D", None), ("E", "")):
        driver.arrive(request_id, prompt, hash_keys=HashKeys(cache_salt=salt))
        hits[request_id] = driver.schedule(request_id).hit_tokens
    assert hits == {"B": 0, "C": 32, "D": 0, "E": 32}
    assert driver.block_ids("E") == [8, 9, 11]  # E shares D's unsalted blocks
    assert driver.stats == stats(requests=5, queries=240, hits=64)


def test_s15_lora_name_and_path_enter_the_hash():
    """s15: 48 tokens under LoRA sql (path v1) cached; base model 0, same adapter 32, path v2 0.

    The LoRA integer id is not part of HashKeys at all (the replay test covers ids 1 vs 7).
    """
    driver = CacheDriver(64)
    prompt = tokens(1000, 48)
    sql_v1 = HashKeys(lora_name="sql", lora_path="/adapters/sql-v1")
    driver.arrive("A", prompt, hash_keys=sql_v1)
    driver.run("A", [7])
    cases = (
        ("B", HashKeys()),
        ("C", HashKeys(lora_name="sql", lora_path="/adapters/sql-v1")),
        ("D", HashKeys(lora_name="sql", lora_path="/adapters/sql-v2")),
    )
    hits = {}
    for request_id, keys in cases:
        driver.arrive(request_id, prompt, hash_keys=keys)
        hits[request_id] = driver.schedule(request_id).hit_tokens
    assert hits == {"B": 0, "C": 32, "D": 0}
    assert driver.stats == stats(requests=4, queries=192, hits=32)


def test_s16_chunked_prefill_caches_each_chunks_full_blocks_at_once():
    """s16: A (100 tokens) in chunks 40/40/20; B (same prompt) after chunk 1 hits 32."""
    driver = CacheDriver(64)
    driver.arrive("A", tokens(1000, 100))
    chunk1 = driver.schedule("A", 40)
    assert (chunk1.new_block_ids, chunk1.stored_labels) == ([1, 2, 3], ["A#0", "A#1"])
    assert driver.requests["A"].num_computed_tokens == 40
    driver.arrive("B", tokens(1000, 100))
    step = driver.schedule("B", 8)
    assert (step.hit_tokens, step.num_new_tokens, step.new_block_ids) == (32, 8, [4])
    assert driver.requests["B"].num_computed_tokens == 40
    chunk2 = driver.schedule("A", 40)
    assert (chunk2.new_block_ids, chunk2.stored_labels) == ([5, 6], labels("A", 2, 3, 4))
    chunk3 = driver.schedule("A")
    assert (chunk3.num_new_tokens, chunk3.stored_labels) == (20, ["A#5"])
    assert driver.stats == stats(requests=2, queries=200, hits=32)


def test_s17_admission_checks_the_full_sequence_not_the_chunk():
    """s17: N=10 (9 usable). A (160 tokens, 32-token chunk) is refused; B (144) is admitted."""
    driver = CacheDriver(10)
    driver.arrive("A", tokens(1000, 160))
    refused = driver.schedule("A", 32)
    assert not refused.ok
    assert driver.num_free_blocks == 9
    assert driver.stats == stats()
    driver.arrive("B", tokens(2000, 144))
    step = driver.schedule("B", 32)
    assert (step.ok, step.new_block_ids) == (True, [1, 2])
    assert driver.stats == stats(requests=1, queries=144, hits=0)


def test_s18_free_hit_blocks_count_against_capacity():
    """s18: N=6, A (64) cached and free. X = A + 17 needs 2 new + 4 evictable hits > 5: refused.
    Y = A + 16 needs 1 + 4 = 5: admitted, leaving 0 free."""
    driver = CacheDriver(6)
    driver.arrive("A", tokens(1000, 64))
    driver.run("A", [7])
    driver.arrive("X", tokens(1000, 64) + tokens(2000, 17))
    refused = driver.schedule("X")
    assert (refused.ok, refused.hit_tokens) == (False, 64)
    assert driver.num_free_blocks == 5
    driver.arrive("Y", tokens(1000, 64) + tokens(3000, 16))
    step = driver.schedule("Y")
    assert (step.ok, step.hit_tokens, step.new_block_ids) == (True, 64, [5])
    assert driver.num_free_blocks == 0
    assert driver.stats == stats(requests=2, queries=144, hits=64)


def test_s19_reset_prefix_cache_refused_while_blocks_are_held():
    """s19: reset fails while A holds blocks, succeeds after A finishes; then B hits 0."""
    driver = CacheDriver(64)
    driver.arrive("A", tokens(1000, 48))
    driver.schedule("A")
    assert driver.manager.reset_prefix_cache() is False
    driver.finish("A")
    assert driver.manager.reset_prefix_cache() is True
    assert driver.manager.block_pool.cached_blocks == {}
    assert driver.manager.make_prefix_cache_stats().reset is True
    driver.arrive("B", tokens(1000, 48))
    step = driver.schedule("B")
    assert (step.hit_tokens, step.new_block_ids) == (0, [4, 5, 6])


def test_s20_decode_takes_a_block_only_when_crossing_a_boundary():
    """s20: a 16-token prompt takes [1] (caching A#0); decoding token 16 takes [2], then none."""
    driver = CacheDriver(64)
    driver.arrive("A", tokens(1000, 16))
    prefill = driver.schedule("A")
    assert (prefill.new_block_ids, prefill.stored_labels) == ([1], ["A#0"])
    driver.output("A", [7])
    assert driver.schedule("A").new_block_ids == [2]
    driver.output("A", [8])
    assert driver.schedule("A").new_block_ids == []
    assert driver.block_ids("A") == [1, 2]


def test_s21_identical_blocks_are_not_deduplicated():
    """s21: A and B (same 20 prompt, same 14 outputs) side by side each cache their own block 1."""
    driver = CacheDriver(64)
    driver.arrive("A", tokens(1000, 20))
    driver.schedule("A")
    driver.arrive("B", tokens(1000, 20))
    step = driver.schedule("B")
    assert step.hit_tokens == 16
    assert driver.block_ids("B") == [1, 3]
    for token in tokens(5000, 13):
        for request_id in ("A", "B"):
            driver.output(request_id, [token])
        for request_id in ("A", "B"):
            driver.schedule(request_id)
    for request_id in ("A", "B"):
        driver.output(request_id, [5013])
        driver.finish(request_id)
    cached = driver.manager.block_pool.cached_blocks
    num_cached_blocks = sum(1 for block in driver.manager.block_pool.blocks if block.block_hash)
    assert (len(cached), num_cached_blocks) == (2, 3)
    assert driver.free_queue_labels()[-3:] == ["A#1", "A#1", "A#0"]
    driver.arrive("C", tokens(1000, 20) + tokens(5000, 12) + [1])
    step = driver.schedule("C")
    assert (step.hit_tokens, driver.block_ids("C")) == (32, [1, 2, 5])
    assert driver.stats == stats(requests=3, queries=73, hits=48)


def test_s22_block_size_32_hits_96():
    """s22: s01 with B=32: A caches 3 blocks, B hits 96; queries 225, hits 96."""
    driver = CacheDriver(64, block_size=32)
    a_prompt, a_outputs = tokens(1000, 75), tokens(5000, 45)
    driver.arrive("A", a_prompt)
    assert driver.run("A", a_outputs).stored_labels == ["A#0", "A#1", "A#2"]
    driver.arrive("B", a_prompt + a_outputs[:43] + tokens(9000, 32))
    step = driver.schedule("B")
    assert (step.hit_tokens, step.num_new_tokens, step.new_block_ids) == (96, 54, [4, 5])
    assert driver.stats == stats(requests=2, queries=225, hits=96)


def test_s23_prompt_logprobs_skip_the_lookup_but_still_cache():
    """s23: B (A's 48 tokens, prompt_logprobs) hits 0, is not counted, and caches its own copies."""
    driver = CacheDriver(64)
    driver.arrive("A", tokens(1000, 48))
    driver.run("A", [7])
    driver.arrive("B", tokens(1000, 48), skip_reading_prefix_cache=True)
    step = driver.schedule("B")
    assert (step.hit_tokens, step.new_block_ids) == (0, [4, 5, 6])
    assert step.stored_labels == ["A#0", "A#1", "A#2"]  # same hashes, new copies
    assert driver.stats == stats(requests=1, queries=48, hits=0)
    driver.finish("B")
    driver.arrive("C", tokens(1000, 40) + [1])
    assert driver.schedule("C").hit_tokens == 32
    assert driver.stats == stats(requests=2, queries=89, hits=32)


def test_s24_watermark_applies_only_while_someone_runs():
    """s24: N=50, watermark 0.1 = 5 blocks. A (640) admitted, 9 free; B (80) refused; C (64) in."""
    driver = CacheDriver(50, watermark=0.1)
    driver.arrive("A", tokens(1000, 640))
    assert driver.schedule("A").ok
    assert driver.num_free_blocks == 9
    driver.arrive("B", tokens(5000, 80))
    assert not driver.schedule("B").ok  # 5 + 5 > 9
    driver.arrive("C", tokens(6000, 64))
    step = driver.schedule("C")  # 4 + 5 <= 9
    assert (step.ok, step.new_block_ids) == (True, [41, 42, 43, 44])
    assert driver.num_free_blocks == 5
    assert driver.stats == stats(requests=2, queries=704, hits=0)


def test_s25_sha256_cbor_with_lora_and_salt():
    """s25: sha256_cbor; A (48, LoRA n,/p, salt s1) cached; B the same hits 32; C without salt 0."""
    driver = CacheDriver(64, hash_algo="sha256_cbor")
    salted = HashKeys(lora_name="n", lora_path="/p", cache_salt="s1")
    assert salted.for_block(0, 0, 16) == (("lora", "n", "/p"), ("cache_salt", "s1"))
    assert salted.for_block(1, 16, 32) == (("lora", "n", "/p"),)
    driver.arrive("A", tokens(1000, 48), hash_keys=salted)
    driver.run("A", [7])
    driver.arrive("B", tokens(1000, 48), hash_keys=salted)
    assert driver.schedule("B").hit_tokens == 32
    driver.arrive("C", tokens(1000, 48), hash_keys=HashKeys(lora_name="n", lora_path="/p"))
    assert driver.schedule("C").hit_tokens == 0
    assert driver.stats == stats(requests=3, queries=144, hits=32)
