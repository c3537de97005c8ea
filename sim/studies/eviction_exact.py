"""Cache-only replay of requests, one at a time, through the exact KVCacheManager (vLLM's LRU)."""

from __future__ import annotations

from collections.abc import Sequence

from sim.kvcache import CacheRequest, KVCacheManager, pool_capacity_tokens, run_alone


class ExactPoolReplay:
    """Admits a request (lookup + whole prompt), runs its decode steps, frees it."""

    __slots__ = ("manager", "prefill_tokens_computed")

    def __init__(self, num_gpu_blocks: int, block_size: int) -> None:
        # Only requests that fit the pool reach it, so no sequence is ever longer than the pool.
        self.manager = KVCacheManager(
            num_gpu_blocks,
            block_size,
            max_model_len=pool_capacity_tokens(num_gpu_blocks, block_size),
        )
        self.prefill_tokens_computed = 0

    def run(self, request: CacheRequest, output_tokens: Sequence[int]) -> None:
        """Replay one request to completion; it must fit the pool on its own."""
        run = run_alone(self.manager, request, output_tokens)
        if not run.admitted:
            raise ValueError(f"request {request.request_id!r} does not fit an empty pool")
        self.prefill_tokens_computed += run.num_new_tokens

    @property
    def num_evictions(self) -> int:
        """Cached blocks the pool has evicted so far."""
        return self.manager.block_pool.num_evictions
