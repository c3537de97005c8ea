"""The compiled hasher and KV cache manager behind the reference classes' interfaces."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import xxhash
import xxhash._xxhash

from sim.kvcache import (
    MAX_NUM_GPU_BLOCKS,
    NO_HASH_KEYS,
    BlockHasher,
    CacheObserver,
    PrefixCacheStats,
    RequestStatus,
    pool_size_problem,
)
from sim.native._core import CacheCore, HasherCore, find_libcrypto, find_xxh3

# Digests in C++ through the libraries Python's hashlib (loaded by sim.kvcache) and the xxhash
# package's extension (it exports XXH3_128bits) already loaded, whichever module came first.
find_libcrypto()
find_xxh3(xxhash._xxhash.__file__)


class NativeBlockHasher(HasherCore):
    """BlockHasher's chained hashes (or block identities) computed in C++; requests with extra
    keys (LoRA, salt, multimodal, prompt embeds) are hashed by the reference BlockHasher it
    holds."""

    hashes_like = BlockHasher.hashes_like

    def __init__(
        self,
        algo: str = "sha256",
        block_size: int = 16,
        hash_seed: str | None = None,
        *,
        memo_size: int = 0,
        identity: bool = False,
    ) -> None:
        reference = BlockHasher(algo, block_size, hash_seed, memo_size=memo_size, identity=identity)
        super().__init__(
            algo,
            block_size,
            reference.none_hash,
            reference,
            NO_HASH_KEYS,
            xxhash.xxh3_128_digest,
            identity,
        )
        self.algo = algo
        self.block_size = block_size
        self.none_hash = reference.none_hash
        self.memo_size = memo_size
        self.identity = identity


class NativeKVCacheManager(CacheCore):
    """KVCacheManager and its BlockPool in C++: blocks are ids, not KVBlock objects; the
    prefix-cache counters are counted in C++ too (the compiled scheduler counts there)."""

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
        if not 2 <= num_gpu_blocks <= MAX_NUM_GPU_BLOCKS:
            raise ValueError(pool_size_problem(num_gpu_blocks))
        super().__init__(
            num_gpu_blocks,
            block_size,
            max_model_len,
            enable_caching,
            int(watermark * num_gpu_blocks),
            observer,
            RequestStatus.WAITING,
            RequestStatus.PREEMPTED,
        )

    @property
    def stats(self) -> PrefixCacheStats:
        """Counters since the last make_prefix_cache_stats() (a copy)."""
        return PrefixCacheStats(*self._lookup_counts(False))

    @property
    def cumulative_stats(self) -> PrefixCacheStats:
        """Counters of the whole run (a copy)."""
        return PrefixCacheStats(*self._lookup_counts(True))

    def make_prefix_cache_stats(self) -> PrefixCacheStats:
        """Counters since the previous call (vLLM reports per-step deltas)."""
        return PrefixCacheStats(*self._take_lookup_counts())

    @property
    def block_pool(self) -> NativeKVCacheManager:
        """The pool's counters and free queue live in the same object."""
        return self

    @property
    def num_usable_blocks(self) -> int:
        """Blocks a request can hold: all but the null block."""
        return self.num_gpu_blocks - 1

    @staticmethod
    def block_ids(blocks: Sequence[Any]) -> list[int]:
        """Ids of blocks this manager handed out (its blocks are ids already)."""
        return list(blocks)
