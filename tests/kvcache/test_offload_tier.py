"""The CPU offload tier against the manager-level examples of spec §13.10 (real vLLM 0.33.0)."""

from __future__ import annotations

import pytest

from sim.kvcache.offload import CpuOffloadTier, Lookup, StorePlan, offload_sizing


def k(*names: str) -> list[bytes]:
    return [name.encode() for name in names]


def names(keys: list[bytes]) -> list[str]:
    return [key.decode() for key in keys]


def lru_order(tier: CpuOffloadTier) -> list[str]:
    return names(tier.policy.snapshot()["order"])


def stored(tier: CpuOffloadTier, request_id: str, keys: list[bytes], first: int) -> StorePlan:
    plan = tier.prepare_store(request_id, keys, first)
    assert plan is not None
    tier.complete_store(plan.stored)
    return plan


@pytest.fixture
def m1() -> CpuOffloadTier:
    """m1: 4 chunks; A stores A0-A3 and finishes."""
    tier = CpuOffloadTier(4, "lru")
    stored(tier, "A", k("A0", "A1", "A2", "A3"), 0)
    assert lru_order(tier) == ["A3", "A2", "A1", "A0"]  # while A is live: deeper first
    tier.request_finished("A")
    return tier


def test_m1_order_after_finish_is_tail_first(m1: CpuOffloadTier) -> None:
    assert lru_order(m1) == ["A3", "A2", "A1", "A0"]


def test_m2_to_m6_lru_sequence(m1: CpuOffloadTier) -> None:
    tier = m1
    # m2: live B stores 2 chunks and evicts A's two deepest.
    plan = stored(tier, "B", k("B0", "B1"), 0)
    assert names(plan.evicted) == ["A3", "A2"]
    assert lru_order(tier) == ["A1", "A0", "B1", "B0"]
    # m3: C loads A0, A1 (pinned), then stores C2: B1 goes; C's rank lifted A0 and A1.
    tier.prepare_load("C", k("A0", "A1"), 0)
    plan = stored(tier, "C", k("C2"), 2)
    assert names(plan.evicted) == ["B1"]
    tier.complete_load(k("A0", "A1"))
    assert lru_order(tier) == ["B0", "C2", "A1", "A0"]
    # m4: B finishes, then C finishes.
    tier.request_finished("B")
    assert lru_order(tier) == ["C2", "A1", "A0", "B0"]
    tier.request_finished("C")
    assert lru_order(tier) == ["B0", "C2", "A1", "A0"]
    # m5: D's 3 stores stay pending; E's 2 new keys cannot fit with 1 evictable chunk.
    plan_d = tier.prepare_store("D", k("D0", "D1", "D2"), 0)
    assert plan_d is not None and names(plan_d.evicted) == ["B0", "C2", "A1"]
    assert tier.lookup(b"D0") is Lookup.HIT_PENDING
    assert tier.lookup(b"A0") is Lookup.HIT
    assert tier.lookup(b"B0") is Lookup.MISS
    before = tier.snapshot()
    assert tier.prepare_store("E", k("E0", "E1"), 0) is None
    assert tier.snapshot() == before
    assert tier.usage() == 0.75 and tier.write_usage() == 0.75
    # m6: F re-offers D0-D2 (now ready) plus F3: only F3 is stored, A0 goes.
    assert tier.complete_store(plan_d.stored) == k("D0", "D1", "D2")
    plan = stored(tier, "F", k("D0", "D1", "D2", "F3"), 0)
    assert names(plan.stored) == ["F3"] and names(plan.evicted) == ["A0"]
    assert len(tier.ref_counts) == 4 and tier.usage() == 0.0  # a full tier at rest reads 0


def test_store_offer_with_only_pending_keys_stores_nothing() -> None:
    """Keys still pending are neither stored again nor counted as reused."""
    tier = CpuOffloadTier(2)
    assert tier.prepare_store("A", k("A0"), 0) == StorePlan(k("A0"), [])
    assert tier.prepare_store("B", k("A0"), 0) == StorePlan([], [])
    assert tier.take_allocation_sizes() == [1]
    tier.request_finished("B")
    assert tier.requests.keys() == {"A"}


def test_arc_example() -> None:
    """§13.10 ARC: promotion at finish, eviction by target, ghost hits move p."""
    tier = CpuOffloadTier(4, "arc")
    stored(tier, "A", k("A0", "A1", "A2", "A3"), 0)
    tier.request_finished("A")
    assert tier.policy.snapshot()["t1"] == k("A3", "A2", "A1", "A0")
    tier.prepare_load("C", k("A0", "A1"), 0)
    tier.complete_load(k("A0", "A1"))
    tier.request_finished("C")
    state = tier.policy.snapshot()
    assert (state["t1"], state["t2"]) == (k("A3", "A2"), k("A1", "A0"))
    plan = stored(tier, "B", k("B0", "B1", "B2"), 0)
    assert names(plan.evicted) == ["A3", "A2", "A1"]
    state = tier.policy.snapshot()
    assert (state["b1"], state["b2"], state["p"]) == (k("A3", "A2"), k("A1"), 0.0)
    tier.request_finished("B")
    plan = stored(tier, "G", k("A2", "A3"), 2)
    assert names(plan.evicted) == ["B2", "B1"]
    state = tier.policy.snapshot()
    assert state["p"] == 2.0
    assert (state["t1"], state["t2"]) == (k("B0", "A2", "A3"), k("A0"))


def test_refused_store_changes_no_chunk_but_records_the_offer() -> None:
    """All or nothing: a refused offer still ranks the request (vLLM records before allocating)."""
    tier = CpuOffloadTier(2)
    stored(tier, "A", k("A0", "A1"), 0)
    tier.request_finished("A")
    tier.prepare_load("B", k("A0"), 0)
    assert tier.prepare_store("C", k("C0", "C1", "C2"), 0) is None
    assert lru_order(tier) == ["A1", "A0"]
    assert tier.take_allocation_sizes() == [2, 3]


def test_pinned_chunks_are_never_evicted_and_reset_drops_them() -> None:
    tier = CpuOffloadTier(2)
    stored(tier, "A", k("A0", "A1"), 0)
    tier.prepare_load("B", k("A0", "A1"), 0)
    assert tier.prepare_store("C", k("C0"), 0) is None
    assert tier.usage() == 1.0
    tier.reset()
    assert tier.lookup(b"A0") is Lookup.MISS and tier.num_free == 2 and tier.usage() == 0.0
    assert tier.prepare_store("C", k("C0"), 0) == StorePlan(k("C0"), [])


def test_reset_restarts_request_ranks() -> None:
    """After a reset a live request gets a new rank on its next access."""
    tier = CpuOffloadTier(3)
    stored(tier, "A", k("A0"), 0)
    tier.reset()
    stored(tier, "B", k("B0"), 0)
    stored(tier, "A", k("A1"), 1)
    assert lru_order(tier) == ["B0", "A1"]
    tier.request_finished("B")
    assert lru_order(tier) == ["A1", "B0"]


@pytest.mark.parametrize(
    ("size_gib", "per_worker", "world", "chunks", "tokens"),
    [
        (64, 2 * 2**20, 1, 32768, 524288),  # §13.2: Llama-3.1-8B bf16, B=16, TP=1
        (64, 2**20, 2, 32768, 524288),  # the same at TP=2: the flag is the total
        (0.5, 2 * 2**20, 1, 256, 4096),
        (1, 100_000, 1, 10485, 167760),  # 100,000 bytes pad to 102,400 (25 pages)
    ],
)
def test_sizing(size_gib: float, per_worker: int, world: int, chunks: int, tokens: int) -> None:
    sizing = offload_sizing(size_gib, per_worker, world_size=world, block_size=16)
    assert (sizing.num_chunks, sizing.size_tokens) == (chunks, tokens)


def test_sizing_with_several_blocks_per_chunk() -> None:
    sizing = offload_sizing(1, 3000, block_size=16, blocks_per_chunk=4)
    assert (sizing.chunk_bytes, sizing.num_chunks, sizing.tokens_per_chunk) == (12288, 87381, 64)
