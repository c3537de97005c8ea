"""The two tiers combined (spec §13.7.1) on the scheduler examples s1-s3 of §13.10 (B = 16)."""

from __future__ import annotations

from sim.kvcache.offload import CpuOffloadTier
from sim.kvcache.offload.lookup import external_hit_tokens

A = [b"A0", b"A1", b"A2", b"A3"]


def tier_with(keys: list[bytes], *, complete: bool = True) -> CpuOffloadTier:
    tier = CpuOffloadTier(16)
    plan = tier.prepare_store("A", keys, 0)
    assert plan is not None
    if complete:
        tier.complete_store(plan.stored)
    return tier


def test_s1_cpu_hit_reaches_num_tokens() -> None:
    """64-token prompt, GPU keeps A#0 only: the CPU tier supplies 48, so 64 = num_tokens."""
    assert external_hit_tokens(tier_with(A), A, 16, 64, 16) == 48


def test_s2_pending_store_defers_then_last_block_is_loaded() -> None:
    """Same 64-token prompt while A#3's store is pending: GPU hit 48 (cap 63), deferred; once
    the store completes the CPU tier adds the last block (16) although the GPU holds it."""
    tier = tier_with(A[:3])
    plan = tier.prepare_store("A", A, 0)
    assert plan is not None and plan.stored == [b"A3"]
    assert external_hit_tokens(tier, A, 48, 64, 16) is None
    tier.complete_store([b"A3"])
    assert external_hit_tokens(tier, A, 48, 64, 16) == 16


def test_s3_partial_tail_has_no_key() -> None:
    """70-token prompt, GPU hit 64: no full chunk beyond the hit, so nothing external."""
    assert external_hit_tokens(tier_with(A), A, 64, 70, 16) == 0


def test_hit_stops_at_the_first_miss_and_never_fills_holes() -> None:
    tier = tier_with([b"A0", b"A2", b"A3"])
    assert external_hit_tokens(tier, A, 0, 64, 16) == 16
    assert external_hit_tokens(tier, A, 16, 64, 16) == 0


def test_chunk_loaded_by_another_request_defers() -> None:
    tier = tier_with(A)
    tier.prepare_load("B", [b"A2"], 2)
    assert external_hit_tokens(tier, A, 16, 64, 16, keys_being_loaded={b"A2"}) is None
    assert external_hit_tokens(tier, A, 0, 32, 16, keys_being_loaded={b"A2"}) == 32
