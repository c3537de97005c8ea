"""A request reduced to what an eviction policy sees: its chain of interned block keys."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(slots=True)
class BlockTrace:
    """One request as the block cache sees it in cache-only replay (admit, decode, free).

    `block_keys[i]` is the interned chained hash of block i; the list covers every block the
    request caches: prompt and outputs but the last sampled token (spec §6.2).
    """

    request_id: str
    block_keys: list[int]
    num_lookup_blocks: int  # blocks the lookup may hit: (prompt tokens - 1) // block_size
    num_blocks: int  # blocks held at the end, an unhashed partial last block included
    num_prompt_tokens: int
    reads_prefix_cache: bool  # False for prompt-logprob requests: no hit and not counted


def num_kv_tokens(num_prompt_tokens: int, num_output_tokens: int) -> int:
    """Tokens with KV when the request finishes: the last sampled token never gets a slot."""
    return num_prompt_tokens + max(num_output_tokens - 1, 0)


class BlockKeyInterner:
    """Maps chained block hashes to dense ints, so policies index lists instead of digests."""

    __slots__ = ("_keys",)

    def __init__(self) -> None:
        self._keys: dict[bytes, int] = {}

    def intern(self, block_hashes: Sequence[bytes]) -> list[int]:
        """The key of every hash, assigning the next int to hashes not seen before."""
        keys = self._keys
        interned = []
        for block_hash in block_hashes:
            key = keys.get(block_hash)
            if key is None:
                key = keys[block_hash] = len(keys)
            interned.append(key)
        return interned
