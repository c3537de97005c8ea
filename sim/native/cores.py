"""The registry of cache cores: the compiled one and the pure-Python reference."""

from __future__ import annotations

from typing import Final

from sim.kvcache import BlockHasher, CacheManager, CacheObserver, Hasher, KVCacheManager
from sim.native.manager import NativeBlockHasher, NativeKVCacheManager

CORES: Final = ("native", "python")
DEFAULT_CORE: Final = "native"

_HASHERS: dict[str, type[BlockHasher] | type[NativeBlockHasher]] = {
    "native": NativeBlockHasher,
    "python": BlockHasher,
}
_MANAGERS: dict[str, type[KVCacheManager] | type[NativeKVCacheManager]] = {
    "native": NativeKVCacheManager,
    "python": KVCacheManager,
}


def _check(core: str) -> None:
    if core not in CORES:
        raise ValueError(f"unknown core {core!r}; allowed: {', '.join(CORES)}")


def make_hasher(
    core: str,
    algo: str = "sha256",
    block_size: int = 16,
    hash_seed: str | None = None,
    *,
    memo_size: int = 0,
) -> Hasher:
    """The block hasher of `core`; both give every block the same hash."""
    _check(core)
    return _HASHERS[core](algo, block_size, hash_seed, memo_size=memo_size)


def make_manager(
    core: str,
    num_gpu_blocks: int,
    block_size: int = 16,
    *,
    max_model_len: int = 8192,
    enable_caching: bool = True,
    watermark: float = 0.0,
    observer: CacheObserver | None = None,
) -> CacheManager:
    """The KV cache manager of `core`; both make the same decisions block for block."""
    _check(core)
    return _MANAGERS[core](
        num_gpu_blocks,
        block_size,
        max_model_len=max_model_len,
        enable_caching=enable_caching,
        watermark=watermark,
        observer=observer,
    )
