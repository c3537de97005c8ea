"""Block-pool invariants under random arrive/schedule/output/preempt/finish/reset sequences.

A small pool (9 usable blocks of 2 tokens), at most 4 live requests and prompts built from a
few shared prefixes make hits, sharing, evictions and refusals frequent.
"""

from __future__ import annotations

from collections import Counter

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from sim.kvcache import BlockHasher, CacheRequest, HashKeys, KVCacheManager, RequestStatus

BLOCK_SIZE = 2
NUM_GPU_BLOCKS = 10
MAX_NUM_TOKENS = 40
MAX_LIVE_REQUESTS = 4
SHARED_PREFIXES = ([1, 2, 3, 4, 5, 6, 7, 8], [1, 2, 3, 4, 9, 9, 9, 9], [5, 5, 5, 5], [])
_ADMITTABLE = (RequestStatus.WAITING, RequestStatus.PREEMPTED)


class BlockPoolMachine(RuleBasedStateMachine):
    """Drives one KVCacheManager the way a scheduler does and checks the pool after every op."""

    def __init__(self) -> None:
        super().__init__()
        self.hasher = BlockHasher("sha256", BLOCK_SIZE)
        self.manager = KVCacheManager(NUM_GPU_BLOCKS, BLOCK_SIZE, max_model_len=64)
        self.requests: list[CacheRequest] = []

    def _live(self) -> list[CacheRequest]:
        return [request for request in self.requests if not request.status.is_finished]

    def _schedulable(self) -> list[CacheRequest]:
        return [
            request
            for request in self._live()
            if request.status in _ADMITTABLE or request.num_computed_tokens < request.num_tokens
        ]

    def _running(self) -> list[CacheRequest]:
        return [r for r in self.requests if r.status is RequestStatus.RUNNING]

    @precondition(lambda self: len(self._live()) < MAX_LIVE_REQUESTS)
    @rule(
        prefix=st.sampled_from(SHARED_PREFIXES),
        suffix=st.lists(st.integers(0, 3), min_size=1, max_size=14),
        salted=st.booleans(),
    )
    def arrive(self, prefix: list[int], suffix: list[int], salted: bool) -> None:
        keys = HashKeys(cache_salt="tenant") if salted else HashKeys()
        request_id = f"r{len(self.requests)}"
        self.requests.append(CacheRequest(request_id, prefix + suffix, self.hasher, hash_keys=keys))

    @precondition(lambda self: self._schedulable())
    @rule(data=st.data())
    def schedule(self, data: st.DataObject) -> None:
        request = data.draw(st.sampled_from(self._schedulable()))
        manager = self.manager
        admission = request.status in _ADMITTABLE
        hit_blocks, num_hit_tokens = manager.get_computed_blocks(request) if admission else ([], 0)
        assert num_hit_tokens <= request.num_tokens - 1
        assert num_hit_tokens == len(hit_blocks) * BLOCK_SIZE
        assert [block.block_hash for block in hit_blocks] == request.block_hashes[: len(hit_blocks)]
        remaining = request.num_tokens - request.num_computed_tokens - num_hit_tokens
        num_new_tokens = data.draw(st.integers(1, remaining))
        free_before = manager.num_free_blocks
        new_blocks = manager.allocate_slots(
            request,
            num_new_tokens,
            num_hit_tokens,
            hit_blocks,
            full_sequence_must_fit=admission,
            has_running_requests=bool(self._running()),
        )
        if new_blocks is None:
            assert manager.num_free_blocks == free_before
            return
        if admission:
            manager.record_prefix_cache_stats(request, num_hit_tokens)
            request.status = RequestStatus.RUNNING
            request.num_computed_tokens = num_hit_tokens
        request.num_computed_tokens += num_new_tokens

    @precondition(lambda self: self._running())
    @rule(data=st.data(), token=st.integers(0, 3))
    def output(self, data: st.DataObject, token: int) -> None:
        ready = [
            request
            for request in self._running()
            if request.num_computed_tokens == request.num_tokens
            and request.num_tokens < MAX_NUM_TOKENS
        ]
        if ready:
            data.draw(st.sampled_from(ready)).append_output_token_ids([token])

    @precondition(lambda self: self._running())
    @rule(data=st.data())
    def preempt(self, data: st.DataObject) -> None:
        request = data.draw(st.sampled_from(self._running()))
        self.manager.free(request)
        request.num_computed_tokens = 0
        request.status = RequestStatus.PREEMPTED
        request.num_preemptions += 1

    @precondition(lambda self: self._live())
    @rule(data=st.data())
    def finish(self, data: st.DataObject) -> None:
        request = data.draw(st.sampled_from(self._live()))
        self.manager.free(request)
        request.status = RequestStatus.FINISHED_STOPPED

    @rule(roll=st.integers(0, 15))
    def reset_prefix_cache(self, roll: int) -> None:
        if roll != 15:  # a reset clears every hash; keep it rare so evictions happen
            return
        anyone_holds = any(self.manager.req_to_blocks.values())
        assert self.manager.reset_prefix_cache() is not anyone_holds
        if not anyone_holds:
            assert self.manager.block_pool.cached_blocks == {}

    @invariant()
    def ref_counts_match_holders(self) -> None:
        pool = self.manager.block_pool
        holders = Counter(
            block.block_id for blocks in self.manager.req_to_blocks.values() for block in blocks
        )
        for block in pool.blocks[1:]:
            assert block.ref_cnt >= 0
            assert block.ref_cnt == holders[block.block_id]

    @invariant()
    def free_plus_held_is_usable(self) -> None:
        held = {
            block.block_id for blocks in self.manager.req_to_blocks.values() for block in blocks
        }
        free = [block.block_id for block in self.manager.block_pool.free_block_queue]
        assert not held & set(free)
        assert len(free) + len(held) == NUM_GPU_BLOCKS - 1
        assert 0.0 <= self.manager.usage <= 1.0

    @invariant()
    def hash_map_and_block_hashes_agree(self) -> None:
        pool = self.manager.block_pool
        mapped: set[int] = set()
        for block_hash, entry in pool.cached_blocks.items():
            blocks = list(entry.values()) if isinstance(entry, dict) else [entry]
            assert blocks
            for block in blocks:
                assert block.block_hash == block_hash
                mapped.add(block.block_id)
        hashed = {block.block_id for block in pool.blocks if block.block_hash is not None}
        assert hashed == mapped

    @invariant()
    def held_cached_prefix_matches_request_hashes(self) -> None:
        manager = self.manager
        for request in self._running():
            blocks = manager.req_to_blocks[request.request_id]
            assert len(blocks) == -(-request.num_computed_tokens // BLOCK_SIZE)
            num_cached = manager.num_cached_block[request.request_id]
            cached_hashes = [block.block_hash for block in blocks[:num_cached]]
            assert cached_hashes == request.block_hashes[:num_cached]

    @invariant()
    def free_queue_links_are_consistent(self) -> None:
        queue = self.manager.block_pool.free_block_queue
        forward = []
        block = queue._head.next_free
        while block is not queue._tail:
            assert block.next_free.prev_free is block
            assert block.ref_cnt == 0
            forward.append(block.block_id)
            block = block.next_free
        backward = []
        block = queue._tail.prev_free
        while block is not queue._head:
            backward.append(block.block_id)
            block = block.prev_free
        assert backward == forward[::-1]
        assert len(forward) == len(set(forward)) == queue.num_free_blocks
        assert self.manager.block_pool.null_block.block_id not in forward

    @invariant()
    def bulk_prefix_lookup_equals_block_by_block_lookups(self) -> None:
        pool = self.manager.block_pool
        for request in self.requests:
            one_by_one = []
            for block_hash in request.block_hashes:
                block = pool.get_cached_block(block_hash)
                if block is None:
                    break
                one_by_one.append(block)
            assert pool.get_cached_prefix(request.block_hashes) == one_by_one

    @invariant()
    def hits_never_exceed_queries(self) -> None:
        stats = self.manager.cumulative_stats
        assert 0 <= stats.hits <= stats.queries
        assert 0 <= stats.preempted_hits <= stats.preempted_queries


TestBlockPoolInvariants = BlockPoolMachine.TestCase
TestBlockPoolInvariants.settings = settings(max_examples=80, stateful_step_count=30, deadline=None)
