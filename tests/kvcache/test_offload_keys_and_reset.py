"""The CPU tier shares the GPU cache's keys, and resets only with reset_external (§13.2, §13.9)."""

from __future__ import annotations

import pytest

from sim.kvcache import HashKeys
from sim.kvcache.offload import CpuOffloadTier, Lookup
from sim.kvcache.offload.lookup import external_hit_tokens
from sim.kvcache.offload.reset import reset_prefix_cache
from tests.kvcache.cache_driver import CacheDriver, tokens


def stored_tier(driver: CacheDriver, request_id: str) -> CpuOffloadTier:
    """A tier holding every full prompt block of the request, keyed by its GPU block hashes."""
    tier = CpuOffloadTier(8)
    hashes = driver.requests[request_id].block_hashes
    plan = tier.prepare_store(request_id, hashes, 0)
    assert plan is not None
    tier.complete_store(plan.stored)
    return tier


def test_salt_and_lora_isolate_the_cpu_tier_like_the_gpu_cache() -> None:
    """A 64-token prompt stored by A: the same prompt hits 64 on the CPU tier, with a different
    cache_salt or LoRA adapter it hits nothing."""
    driver = CacheDriver(32)
    driver.arrive("A", tokens(0, 64))
    tier = stored_tier(driver, "A")
    same = driver.arrive("B", tokens(0, 64))
    salted = driver.arrive("C", tokens(0, 64), hash_keys=HashKeys(cache_salt="tenant-2"))
    lora = driver.arrive("D", tokens(0, 64), hash_keys=HashKeys(lora_name="adapter"))
    assert external_hit_tokens(tier, same.block_hashes, 0, 64, 16) == 64
    assert external_hit_tokens(tier, salted.block_hashes, 0, 64, 16) == 0
    assert external_hit_tokens(tier, lora.block_hashes, 0, 64, 16) == 0


@pytest.mark.parametrize(
    ("reset_external", "cpu_after"), [(False, Lookup.HIT), (True, Lookup.MISS)]
)
def test_reset_prefix_cache_clears_the_tier_only_with_reset_external(
    reset_external: bool, cpu_after: Lookup
) -> None:
    """A finished 64-token request: the GPU reset succeeds; the CPU copy stays by default."""
    driver = CacheDriver(32)
    driver.arrive("A", tokens(0, 64))
    tier = stored_tier(driver, "A")
    driver.run("A", [1])
    assert reset_prefix_cache(driver.manager, tier, reset_external=reset_external)
    driver.arrive("B", tokens(0, 64))
    assert driver.schedule("B").hit_tokens == 0  # the GPU cache was emptied either way
    assert tier.lookup(driver.requests["A"].block_hashes[0]) is cpu_after


def test_tier_reset_does_not_depend_on_the_gpu_reset() -> None:
    """A running request holds GPU blocks, so the GPU reset fails; the tier is emptied anyway."""
    driver = CacheDriver(32)
    driver.arrive("A", tokens(0, 64))
    tier = stored_tier(driver, "A")
    assert driver.schedule("A").ok
    assert not reset_prefix_cache(driver.manager, tier, reset_external=True)
    assert tier.num_free == 8
