"""vLLM v1's KVCacheManager for one full-attention group (spec §5, §6)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sim.kvcache.block import KVBlock
from sim.kvcache.block_pool import BlockPool
from sim.kvcache.observer import BLOCK_HIT, CacheObserver
from sim.kvcache.request import CacheRequest, RequestStatus
from sim.kvcache.stats import PrefixCacheStats, PrefixLookupCounting

_ADMITTING = (RequestStatus.WAITING, RequestStatus.PREEMPTED)


class KVCacheManager(PrefixLookupCounting):
    """Prefix lookup, slot allocation with admission checks, caching of full blocks, and free."""

    __slots__ = (
        "block_size",
        "max_model_len",
        "enable_caching",
        "watermark_blocks",
        "block_pool",
        "req_to_blocks",
        "num_cached_block",
        "stats",
        "cumulative_stats",
    )

    def __init__(
        self,
        num_gpu_blocks: int,
        block_size: int = 16,
        *,
        max_model_len: int = 8192,
        enable_caching: bool = True,
        watermark: float = 0.0,
        observer: CacheObserver | None = None,
    ) -> None:
        self.block_size = block_size
        self.max_model_len = max_model_len
        self.enable_caching = enable_caching
        self.watermark_blocks = int(watermark * num_gpu_blocks)
        self.block_pool = BlockPool(
            num_gpu_blocks, enable_caching=enable_caching, observer=observer
        )
        self.req_to_blocks: dict[str, list[KVBlock]] = {}
        # Leading blocks of each allocated request already registered in the cache.
        self.num_cached_block: dict[str, int] = {}
        self.stats = PrefixCacheStats()  # since the last make_prefix_cache_stats()
        self.cumulative_stats = PrefixCacheStats()

    @property
    def num_free_blocks(self) -> int:
        """Free-queue length (cached blocks nobody holds count as free)."""
        return self.block_pool.free_block_queue.num_free_blocks

    @property
    def usage(self) -> float:
        """vllm:kv_cache_usage_perc."""
        return self.block_pool.usage

    def get_block_ids(self, request_id: str) -> list[int]:
        """The request's block table."""
        return [block.block_id for block in self.req_to_blocks.get(request_id, ())]

    def get_computed_blocks(self, request: CacheRequest) -> tuple[list[KVBlock], int]:
        """Longest cached prefix, capped at num_tokens - 1 and whole blocks; no side effects."""
        if not self.enable_caching or request.skip_reading_prefix_cache:
            return [], 0
        max_blocks = (request.num_tokens - 1) // self.block_size
        hit_blocks = self.block_pool.get_cached_prefix(request.block_hashes[:max_blocks])
        return hit_blocks, len(hit_blocks) * self.block_size

    def num_held_blocks(self, request_id: str) -> int:
        """Length of the request's block table."""
        return len(self.req_to_blocks.get(request_id, ()))

    @staticmethod
    def block_ids(blocks: Sequence[Any]) -> list[int]:
        """Ids of blocks this manager handed out."""
        return [block.block_id for block in blocks]

    def num_blocks_to_allocate(
        self, request_id: str, num_tokens: int, hit_blocks: Sequence[KVBlock]
    ) -> int:
        """Blocks allocate_slots would take (new ones plus free hit blocks) for `num_tokens`."""
        num_required = -(-num_tokens // self.block_size)
        num_held = len(self.req_to_blocks.get(request_id, ()))
        # Free hit blocks leave the free queue when touched, so they count against capacity.
        num_evictable_hits = sum(1 for block in hit_blocks if block.ref_cnt == 0)
        return max(num_required - len(hit_blocks) - num_held, 0) + num_evictable_hits

    def allocate_slots(
        self,
        request: CacheRequest,
        num_new_tokens: int,
        num_new_computed_tokens: int = 0,
        new_computed_blocks: Sequence[KVBlock] = (),
        *,
        full_sequence_must_fit: bool = False,
        has_running_requests: bool = False,
        num_external_computed_tokens: int = 0,
        delay_cache_blocks: bool = False,
        reserved_blocks: int = 0,
        now: float = 0.0,
    ) -> list[KVBlock] | None:
        """Allocate blocks for `num_new_tokens` more tokens; None (no change) if they don't fit.

        `num_external_computed_tokens` come from the CPU tier after the GPU hit: they get new
        blocks now and, with `delay_cache_blocks` (an async load), enter the GPU cache only
        when the load is done. The allocation itself must leave `reserved_blocks` free.
        """
        request_id = request.request_id
        max_model_len = self.max_model_len
        num_free = self.block_pool.free_block_queue.num_free_blocks
        num_computed = min(
            request.num_computed_tokens + num_new_computed_tokens + num_external_computed_tokens,
            max_model_len,
        )
        watermark = (
            self.watermark_blocks if has_running_requests and request.status in _ADMITTING else 0
        )
        if full_sequence_must_fit:
            num_full_sequence = min(request.num_tokens, max_model_len)
            needed = self.num_blocks_to_allocate(request_id, num_full_sequence, new_computed_blocks)
            if needed + watermark > num_free:
                return None
        num_slots = min(num_computed + num_new_tokens, max_model_len)
        needed = self.num_blocks_to_allocate(request_id, num_slots, new_computed_blocks)
        if needed + watermark > num_free - reserved_blocks:
            return None

        pool = self.block_pool
        blocks = self.req_to_blocks.get(request_id)
        if blocks is None:
            blocks = self.req_to_blocks[request_id] = []
            self.num_cached_block[request_id] = 0
        if new_computed_blocks:
            pool.touch(new_computed_blocks)
            blocks.extend(new_computed_blocks)
            self.num_cached_block[request_id] = len(blocks)
            observer = pool.observer
            if observer is not None:
                for block in new_computed_blocks:
                    assert block.block_hash is not None  # a prefix hit is a cached block
                    observer.on_block_event(
                        BLOCK_HIT, block.block_hash, block.block_id, block.num_tokens, now
                    )
        num_new_blocks = -(-num_slots // self.block_size) - len(blocks)
        new_blocks = pool.get_new_blocks(num_new_blocks, now) if num_new_blocks > 0 else []
        blocks.extend(new_blocks)
        if self.enable_caching and not delay_cache_blocks:
            self.cache_blocks(request, min(num_computed + num_new_tokens, request.num_tokens), now)
        return new_blocks

    def allocate_one_slot(self, request: CacheRequest, now: float = 0.0) -> bool:
        """`allocate_slots(request, 1) is not None` for a running request one token short of its
        sequence (a decode step), without the general bookkeeping; False changes nothing.

        A running request holds ceil(num_computed / B) blocks with every full one cached, so
        one more token needs a block only when it opens one, and caches one only when it fills
        one. The caller keeps num_computed + 1 within max_model_len.
        """
        num_slots = request.num_computed_tokens + 1
        block_size = self.block_size
        blocks = self.req_to_blocks[request.request_id]
        if num_slots > len(blocks) * block_size:
            pool = self.block_pool
            if pool.free_block_queue.num_free_blocks < 1:
                return False
            blocks.extend(pool.get_new_blocks(1, now))
        # Async scheduling runs a token ahead of the known ones: cache what is known, checked
        # every time then (the block filled may be the one before the slot's).
        num_cacheable = min(num_slots, request.num_tokens)
        if self.enable_caching and (num_cacheable < num_slots or num_cacheable % block_size == 0):
            self.cache_blocks(request, num_cacheable, now)
        return True

    def cache_blocks(self, request: CacheRequest, num_tokens: int, now: float = 0.0) -> None:
        """Register every block that is full within the first `num_tokens` tokens."""
        request_id = request.request_id
        num_cached = self.num_cached_block[request_id]
        num_full = min(num_tokens, len(request.block_hashes) * self.block_size) // self.block_size
        if num_full <= num_cached:
            return
        self.block_pool.cache_full_blocks(
            self.req_to_blocks[request_id],
            request.block_hashes,
            num_cached,
            num_full,
            self.block_size,
            now,
        )
        self.num_cached_block[request_id] = num_full

    def free(self, request: CacheRequest) -> None:
        """Release the request's blocks tail first (its deepest cached block evicts first)."""
        blocks = self.pop_blocks(request.request_id)
        if blocks:
            self.release_blocks(blocks)

    def pop_blocks(self, request_id: str) -> list[KVBlock]:
        """Forget the request's blocks without releasing them (a deferred free, spec §13.9)."""
        self.num_cached_block.pop(request_id, None)
        return self.req_to_blocks.pop(request_id, None) or []

    def release_blocks(self, blocks: Sequence[KVBlock]) -> None:
        """Release blocks in allocation order as `free` does: tail first."""
        self.block_pool.free_blocks(reversed(blocks))

    def _caches(self) -> bool:
        return self.enable_caching

    def _reset_pool(self, now: float) -> bool:
        return self.block_pool.reset_prefix_cache(now)
