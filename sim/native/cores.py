"""The registry of cache cores: the compiled one and the pure-Python reference."""

from __future__ import annotations

from typing import Final, TypedDict, Unpack

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
    identity: bool = False,
) -> Hasher:
    """The block hasher of `core`; both give every block the same hash (with `identity`, the
    same block identity: sim.kvcache.hashing)."""
    _check(core)
    return _HASHERS[core](algo, block_size, hash_seed, memo_size=memo_size, identity=identity)


class ManagerOptions(TypedDict, total=False):
    """The keyword options both managers' constructors take (their defaults apply)."""

    max_model_len: int
    enable_caching: bool
    watermark: float
    observer: CacheObserver | None


def make_manager(
    core: str, num_gpu_blocks: int, block_size: int = 16, **options: Unpack[ManagerOptions]
) -> CacheManager:
    """The KV cache manager of `core`; both make the same decisions block for block."""
    _check(core)
    return _MANAGERS[core](num_gpu_blocks, block_size, **options)
