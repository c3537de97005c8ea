"""vLLM's second cache tier in host memory: the CPU offload tier and its sizing (spec §13)."""

from sim.kvcache.offload.sizing import OffloadSizing, offload_sizing
from sim.kvcache.offload.tier import (
    CPU_EVICTED,
    CPU_STORED,
    OFFLOAD_POLICIES,
    CpuOffloadTier,
    Lookup,
    OffloadObserver,
    StorePlan,
)

__all__ = [
    "CPU_EVICTED",
    "CPU_STORED",
    "OFFLOAD_POLICIES",
    "CpuOffloadTier",
    "Lookup",
    "OffloadObserver",
    "OffloadSizing",
    "StorePlan",
    "offload_sizing",
]
