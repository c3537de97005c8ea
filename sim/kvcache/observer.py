"""The hook through which the cache reports what it does to its blocks, with a caller-given time."""

from __future__ import annotations

from typing import Protocol

BLOCK_STORED = "stored"
BLOCK_HIT = "hit"
BLOCK_EVICTED = "evicted"
BLOCK_CLEARED = "cleared"  # dropped from the cache by reset_prefix_cache, not by eviction


class CacheObserver(Protocol):
    """Receives one call per block stored, hit, evicted or cleared."""

    def on_block_event(
        self, kind: str, block_hash: bytes, block_id: int, num_tokens: int, now: float
    ) -> None:
        """`num_tokens` is the prefix length the block's hash covers ((index + 1) * block_size)."""
