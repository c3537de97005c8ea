"""`reset_prefix_cache` with a CPU tier (spec §13.9)."""

from __future__ import annotations

from sim.kvcache.manager import KVCacheManager
from sim.kvcache.offload.tier import CpuOffloadTier


def reset_prefix_cache(
    manager: KVCacheManager,
    tier: CpuOffloadTier | None,
    *,
    reset_external: bool = False,
    now: float = 0.0,
) -> bool:
    """Reset the GPU cache (fails while requests hold blocks); empty the CPU tier only with
    `reset_external`, whether or not the GPU reset succeeded. Returns the GPU reset's result."""
    reset = manager.reset_prefix_cache(now)
    if reset_external and tier is not None:
        tier.reset()
    return reset
