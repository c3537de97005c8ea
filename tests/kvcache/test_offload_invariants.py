"""Invariants of the CPU offload tier under random op sequences (hypothesis)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from sim.kvcache.offload import CpuOffloadTier, Lookup
from sim.kvcache.offload.arc import ARCOffloadPolicy

KEYS = [f"k{i}".encode() for i in range(10)]
Step = tuple[str, int, int, int]
steps = st.lists(
    st.tuples(
        st.sampled_from(["store", "complete_store", "load", "complete_load", "finish", "reset"]),
        st.integers(0, 3),  # request
        st.integers(0, 9),  # first chunk index
        st.integers(1, 4),  # number of chunks
    ),
    max_size=60,
)


def check(tier: CpuOffloadTier) -> None:
    refs = tier.ref_counts
    assert len(refs) <= tier.num_chunks
    assert tier.num_evictable == sum(1 for n in refs.values() if n == 0)
    assert tier.num_pending == sum(1 for n in refs.values() if n == -1)
    assert tier.usage() == (len(refs) - tier.num_evictable) / tier.num_chunks
    policy = tier.policy
    if isinstance(policy, ARCOffloadPolicy):
        assert set(policy.t1) | set(policy.t2) == set(refs)
        assert not set(policy.t1) & set(policy.t2)
        assert not (set(policy.b1) | set(policy.b2)) & set(refs)
        assert len(policy.b1) <= tier.num_chunks and len(policy.b2) <= tier.num_chunks
        assert 0 <= policy.target_t1 <= tier.num_chunks
    else:
        assert sorted(policy.snapshot()["order"]) == sorted(refs)


@settings(max_examples=150, deadline=None)
@given(policy=st.sampled_from(["lru", "arc"]), num_chunks=st.integers(1, 6), ops=steps)
def test_tier_bookkeeping_holds(policy: str, num_chunks: int, ops: list[Step]) -> None:
    tier = CpuOffloadTier(num_chunks, policy)
    stores: list[list[bytes]] = []
    loads: list[list[bytes]] = []
    for name, request, first, count in ops:
        keys = KEYS[first : first + count]
        request_id = f"r{request}"
        if name == "store":
            before = dict(tier.ref_counts)
            plan = tier.prepare_store(request_id, keys, first)
            if plan is None:
                assert tier.ref_counts == before  # all or nothing
            else:
                pinned = {k for k, n in before.items() if n != 0}
                assert not pinned & set(plan.evicted)  # pinned chunks are never evicted
                assert not set(keys) & set(plan.evicted)  # offered keys are protected
                assert all(tier.lookup(k) is Lookup.HIT_PENDING for k in plan.stored)
                stores.append(plan.stored)
        elif name == "complete_store" and stores:
            tier.complete_store(stores.pop(0))
        elif name == "load":
            ready = [k for k in keys if tier.lookup(k) is Lookup.HIT]
            if ready:
                tier.prepare_load(request_id, ready, KEYS.index(ready[0]))
                loads.append(ready)
        elif name == "complete_load" and loads:
            tier.complete_load(loads.pop(0))
        elif name == "finish":
            tier.request_finished(request_id)
        elif name == "reset":
            tier.reset()
            stores.clear()
            loads.clear()
        check(tier)
