"""A faithful model of vLLM v1's KV block pool and prefix cache (stdlib + xxhash + cbor2 only)."""

from sim.kvcache.block import FreeBlockQueue, KVBlock
from sim.kvcache.block_pool import (
    BYTES_PER_BLOCK,
    MAX_NUM_GPU_BLOCKS,
    BlockPool,
    pool_capacity_tokens,
    pool_size_problem,
)
from sim.kvcache.hashing import (
    HASH_ALGOS,
    NO_HASH_KEYS,
    BlockHasher,
    Hasher,
    HashKeys,
    MultiModalItem,
    TraceBlocks,
    block_identity_wanted,
    none_hash,
)
from sim.kvcache.interface import CacheManager
from sim.kvcache.manager import KVCacheManager
from sim.kvcache.observer import (
    BLOCK_CLEARED,
    BLOCK_EVICTED,
    BLOCK_HIT,
    BLOCK_STORED,
    CacheObserver,
)
from sim.kvcache.offload import (
    CPU_EVICTED,
    CPU_STORED,
    OFFLOAD_POLICIES,
    CpuOffloadTier,
    Lookup,
    OffloadObserver,
    OffloadSizing,
    StorePlan,
    offload_sizing,
)
from sim.kvcache.offload.lookup import external_hit_tokens
from sim.kvcache.request import CacheRequest, RequestStatus, SymbolicPrompt, symbolic_prompt
from sim.kvcache.salt import cache_salt_problem
from sim.kvcache.sequential import run_alone
from sim.kvcache.stats import PrefixCacheStats, PrefixLookupCounting

__all__ = [
    "BYTES_PER_BLOCK",
    "BLOCK_CLEARED",
    "BLOCK_EVICTED",
    "BLOCK_HIT",
    "BLOCK_STORED",
    "CPU_EVICTED",
    "CPU_STORED",
    "HASH_ALGOS",
    "MAX_NUM_GPU_BLOCKS",
    "NO_HASH_KEYS",
    "OFFLOAD_POLICIES",
    "BlockHasher",
    "BlockPool",
    "CacheManager",
    "CacheObserver",
    "CacheRequest",
    "CpuOffloadTier",
    "FreeBlockQueue",
    "HashKeys",
    "Hasher",
    "KVBlock",
    "KVCacheManager",
    "Lookup",
    "MultiModalItem",
    "OffloadObserver",
    "OffloadSizing",
    "PrefixCacheStats",
    "PrefixLookupCounting",
    "RequestStatus",
    "StorePlan",
    "SymbolicPrompt",
    "TraceBlocks",
    "block_identity_wanted",
    "cache_salt_problem",
    "external_hit_tokens",
    "none_hash",
    "offload_sizing",
    "pool_capacity_tokens",
    "pool_size_problem",
    "run_alone",
    "symbolic_prompt",
]
