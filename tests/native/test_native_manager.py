"""The compiled KV cache manager makes the reference's decisions on random op streams.

Hypothesis draws a pool (size, block size, watermark, caching on or off) and a stream of cache
ops on requests sharing prefixes: arrive, schedule (an admission with its prefix lookup, or a
chunk of a running request), a lookup alone (repeated lookups of one request between other ops
exercise the compiled core's lookup memo), append outputs, a decode slot, preempt, finish,
reset, and the CPU offload hooks: an admission with external (CPU tier) tokens, as an async load
(caching delayed, blocks reserved) or a sync one, the load landing, and a deferred free (blocks
popped, released later, oldest first). Both cores
get the same stream; after every op every observable must be equal: return values, block ids,
the free queue in order with its hashes, counters, per-request block tables and the observer's
events.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from sim.kvcache import CacheRequest, RequestStatus
from sim.native import make_hasher, make_manager

SHARED_RUNS = [list(range(1000 * run, 1000 * run + 64)) for run in range(3)]


class EventLog:
    """Every block event, in order."""

    def __init__(self) -> None:
        self.events: list[tuple[Any, ...]] = []

    def on_block_event(
        self, kind: str, block_hash: bytes, block_id: int, num_tokens: int, now: float
    ) -> None:
        self.events.append((kind, block_hash, block_id, num_tokens, now))


class Side:
    """One core's manager, hasher and requests."""

    def __init__(self, core: str, pool: dict[str, Any]) -> None:
        self.events = EventLog()
        self.hasher = make_hasher(core, "sha256", pool["block_size"])
        self.manager = make_manager(
            core,
            pool["num_gpu_blocks"],
            pool["block_size"],
            max_model_len=pool["max_model_len"],
            enable_caching=pool["enable_caching"],
            watermark=pool["watermark"],
            observer=self.events,
        )
        self.requests: dict[str, CacheRequest] = {}
        # vLLM never lets a sequence grow past max_model_len; streams that would are skipped.
        self.max_model_len: int = pool["max_model_len"]
        self.now = 0.0
        self.popped: list[list[Any]] = []

    def apply(self, op: tuple[Any, ...]) -> Any:
        """Run one op; returns what it decided."""
        self.now += 1.0
        name, index = op[0], op[1]
        manager = self.manager
        if name == "arrive":
            request_id = f"r{len(self.requests)}"
            prompt = SHARED_RUNS[op[2]][: op[3]] + op[4]
            if not prompt or len(prompt) > self.max_model_len:
                return None
            self.requests[request_id] = CacheRequest(
                request_id, prompt, self.hasher, skip_reading_prefix_cache=op[5]
            )
            return request_id
        live = [r for r in self.requests.values() if not r.status.is_finished]
        if name == "reset":
            return manager.reset_prefix_cache(self.now)
        if name == "release":
            if self.popped:
                manager.release_blocks(self.popped.pop(0))
            return None
        if not live:
            return None
        request = live[index % len(live)]
        if name == "schedule":
            return self._schedule(request, op[2])
        if name == "lookup":  # a lookup alone, as for a request blocked at the queue head
            hits, num_hit_tokens = manager.get_computed_blocks(request)
            return manager.block_ids(hits), num_hit_tokens
        if name == "external":
            return self._admit_external(request, op[2], op[3], op[4])
        if name == "land":
            if request.status is not RequestStatus.WAITING_FOR_REMOTE_KVS:
                return None
            manager.cache_blocks(request, request.num_computed_tokens, self.now)
            request.status = RequestStatus.RUNNING
            return manager.get_block_ids(request.request_id)
        if name == "output":
            if request.num_tokens + len(op[2]) > self.max_model_len:
                return None
            return request.append_output_token_ids(op[2])
        if name == "one_slot":
            if (
                request.status is not RequestStatus.RUNNING
                or request.num_computed_tokens != request.num_tokens - 1
            ):
                return None
            placed = manager.allocate_one_slot(request, self.now)
            if placed:
                request.num_computed_tokens += 1
            return placed
        if name == "defer_free":
            popped = manager.pop_blocks(request.request_id)
            self.popped.append(popped)
            request.status = RequestStatus.FINISHED_ABORTED
            return manager.block_ids(popped)
        manager.free(request)
        if name == "preempt":
            request.status = RequestStatus.PREEMPTED
            request.num_computed_tokens = 0
            request.num_preemptions += 1
        else:
            request.status = RequestStatus.FINISHED_STOPPED
        return None

    def _schedule(self, request: CacheRequest, fraction: float) -> Any:
        manager = self.manager
        admission = request.status is not RequestStatus.RUNNING
        hits, num_hit_tokens = manager.get_computed_blocks(request) if admission else ([], 0)
        remaining = request.num_tokens - request.num_computed_tokens - num_hit_tokens
        if remaining <= 0:
            return None
        num_new_tokens = max(1, int(remaining * fraction))
        has_running = any(r.status is RequestStatus.RUNNING for r in self.requests.values())
        new_blocks = manager.allocate_slots(
            request,
            num_new_tokens,
            num_hit_tokens,
            hits,
            full_sequence_must_fit=admission,
            has_running_requests=has_running,
            now=self.now,
        )
        decision = (manager.block_ids(hits), num_hit_tokens, new_blocks is not None)
        if new_blocks is None:
            return decision
        if admission:
            manager.record_prefix_cache_stats(request, num_hit_tokens)
            request.status = RequestStatus.RUNNING
            request.num_computed_tokens = num_hit_tokens
        request.num_computed_tokens += num_new_tokens
        return (*decision, manager.block_ids(new_blocks))

    def _admit_external(
        self, request: CacheRequest, num_external_blocks: int, load_async: bool, reserved: int
    ) -> Any:
        """An admission whose GPU hit the CPU tier continues by `num_external_blocks` blocks
        (at most to num_tokens): an async load allocates for them only and caches nothing
        yet; a sync one also computes the rest at once (spec §13.7.2, §13.7.6)."""
        if request.status not in (RequestStatus.WAITING, RequestStatus.PREEMPTED):
            return None
        manager = self.manager
        hits, num_hit_tokens = manager.get_computed_blocks(request)
        block_size = manager.block_size
        num_external = min(num_external_blocks * block_size, request.num_tokens - num_hit_tokens)
        num_new_tokens = 0 if load_async else request.num_tokens - num_hit_tokens - num_external
        if num_external <= 0 or (not load_async and num_new_tokens <= 0):
            return None
        new_blocks = manager.allocate_slots(
            request,
            num_new_tokens,
            num_hit_tokens,
            hits,
            full_sequence_must_fit=True,
            num_external_computed_tokens=num_external,
            delay_cache_blocks=load_async,
            reserved_blocks=reserved,
            now=self.now,
        )
        decision = (manager.block_ids(hits), num_hit_tokens, num_external, new_blocks is not None)
        if new_blocks is None:
            return decision
        manager.record_prefix_cache_stats(request, num_hit_tokens)
        request.num_computed_tokens = num_hit_tokens + num_external + num_new_tokens
        request.status = (
            RequestStatus.WAITING_FOR_REMOTE_KVS if load_async else RequestStatus.RUNNING
        )
        return (*decision, manager.block_ids(new_blocks))

    def state(self) -> dict[str, Any]:
        """Everything observable about the cache."""
        manager = self.manager
        pool = manager.block_pool
        return {
            "free_queue": pool.free_queue_entries(),
            "num_free_blocks": manager.num_free_blocks,
            "usage": manager.usage,
            "cached_free_usage": pool.cached_free_usage,
            "num_evictions": pool.num_evictions,
            "num_stored": pool.num_stored,
            "num_cached_hashes": pool.num_cached_hashes,
            "tables": {rid: manager.get_block_ids(rid) for rid in self.requests},
            "held": {rid: manager.num_held_blocks(rid) for rid in self.requests},
            "stats": manager.cumulative_stats.as_dict(),
            "events": list(self.events.events),
        }


POOLS = st.fixed_dictionaries(
    {
        "num_gpu_blocks": st.integers(2, 24),
        "block_size": st.sampled_from([1, 2, 4, 16]),
        "max_model_len": st.sampled_from([64, 128, 4096]),
        "enable_caching": st.booleans(),
        "watermark": st.sampled_from([0.0, 0.0, 0.1]),
    }
)
ARRIVE = st.tuples(
    st.just("arrive"),
    st.just(0),
    st.integers(0, 2),
    st.integers(0, 64),
    st.lists(st.integers(0, 3), max_size=10),
    st.booleans(),
)
OPS = st.lists(
    st.one_of(
        ARRIVE,
        ARRIVE,
        st.tuples(st.just("schedule"), st.integers(0, 50), st.sampled_from([0.3, 1.0, 1.0])),
        st.tuples(st.just("schedule"), st.integers(0, 50), st.just(1.0)),
        st.tuples(st.just("output"), st.integers(0, 50), st.lists(st.integers(0, 3), max_size=6)),
        st.tuples(st.just("one_slot"), st.integers(0, 50)),
        st.tuples(st.just("lookup"), st.integers(0, 50)),
        st.tuples(st.just("lookup"), st.just(0)),
        st.tuples(st.sampled_from(["preempt", "finish"]), st.integers(0, 50)),
        st.tuples(st.just("reset"), st.just(0)),
        st.tuples(
            st.just("external"),
            st.integers(0, 50),
            st.integers(1, 4),
            st.booleans(),
            st.sampled_from([0, 0, 1, 3]),
        ),
        st.tuples(st.just("land"), st.integers(0, 50)),
        st.tuples(st.just("defer_free"), st.integers(0, 50)),
        st.tuples(st.just("release"), st.just(0)),
    ),
    max_size=60,
)


@settings(max_examples=400, deadline=None)
@given(pool=POOLS, ops=OPS)
def test_both_cores_decide_the_same_on_random_op_streams(
    pool: dict[str, Any], ops: list[tuple[Any, ...]]
) -> None:
    reference, native = Side("python", pool), Side("native", pool)
    for op in ops:
        assert native.apply(op) == reference.apply(op), op
        assert native.state() == reference.state(), op


def test_an_eviction_stream_is_equal_and_evicts() -> None:
    """Ten 65-token requests rotating over three prefixes through 8 usable blocks (block 16):
    each stores its 4 full blocks (40 in all), LRU thrashes (0 hits), and after the first, which
    evicts 1, every request evicts 4 (33 in all); the second takes blocks 5, 6, 7, 8, 4."""
    pool = {
        "num_gpu_blocks": 9,
        "block_size": 16,
        "max_model_len": 4096,
        "enable_caching": True,
        "watermark": 0.0,
    }
    sides = [Side("python", pool), Side("native", pool)]
    decisions: list[list[Any]] = [[], []]
    for number in range(10):
        for side, decided in zip(sides, decisions, strict=True):
            side.apply(("arrive", 0, number % 3, 64, [number], False))
            decided.append(side.apply(("schedule", number, 1.0)))
            side.apply(("finish", number))
    assert decisions[0] == decisions[1]
    assert decisions[1][1] == ([], 0, True, [5, 6, 7, 8, 4])
    state = sides[1].state()
    assert sides[0].state() == state
    assert (state["num_stored"], state["stats"]["hits"], state["num_evictions"]) == (40, 0, 33)


def test_a_repeated_lookup_sees_its_hits_evicted_and_restored() -> None:
    """A request waiting at the queue head is looked up step after step. Block size 2, 4
    usable blocks: "a" (5 tokens) stores blocks 1 and 2 and finishes; "b" shares them (hits
    blocks 1, 2: 4 tokens, twice); "c" takes all 4 blocks, evicting both, so "b" now hits
    nothing; "d" stores the shared prefix again in blocks 1 and 2, and "b" hits them again."""
    pool = {
        "num_gpu_blocks": 5,
        "block_size": 2,
        "max_model_len": 64,
        "enable_caching": True,
        "watermark": 0.0,
    }
    for core in ("python", "native"):
        side = Side(core, pool)
        manager = side.manager
        waiting = CacheRequest("b", [1, 2, 3, 4, 9], side.hasher)
        lookups: list[Any] = []
        for prompt, num_lookups in (
            ([1, 2, 3, 4, 5], 2),
            ([7, 7, 8, 8, 6, 6, 5, 5], 1),
            ([1, 2, 3, 4, 6], 1),
        ):
            request = CacheRequest(f"r{len(lookups)}", prompt, side.hasher)
            assert manager.allocate_slots(request, request.num_tokens) is not None
            manager.free(request)
            for _ in range(num_lookups):  # a second lookup with the cache unchanged
                hits, num_hit_tokens = manager.get_computed_blocks(waiting)
                lookups.append((manager.block_ids(hits), num_hit_tokens))
        assert lookups == [([1, 2], 4), ([1, 2], 4), ([], 0), ([1, 2], 4)], core


def test_hundreds_of_hashes_churn_through_duplicates_evictions_and_a_reset() -> None:
    """Block size 1, 100 usable blocks: each of 24 rounds, two requests share a 60-token
    prompt (a 40-token run rotating over three, then 20 of the round's own token); "a" computes
    half, "b" hits those 30 blocks and computes the rest, then "a" computes its second half
    again, so 30 hashes are held by two blocks each. A round needs 90 blocks, so LRU evicts
    the earlier rounds': 2160 stored, 720 hits (b's), 2060 evictions, at most 70 hashes cached.
    A reset empties the cache; a 25th round then stores 90, hits 30 and leaves 60 hashes."""
    pool = {
        "num_gpu_blocks": 101,
        "block_size": 1,
        "max_model_len": 4096,
        "enable_caching": True,
        "watermark": 0.0,
    }
    sides = [Side("python", pool), Side("native", pool)]

    def run_round(number: int) -> int:
        first = len(sides[0].requests)
        ops: list[tuple[Any, ...]] = [("arrive", 0, number % 3, 40, [number] * 20, False)] * 2
        ops += [("schedule", first, 0.5), ("schedule", first + 1, 1.0), ("schedule", first, 1.0)]
        for op in ops:
            assert sides[1].apply(op) == sides[0].apply(op), op
        num_cached_hashes: int = sides[1].state()["num_cached_hashes"]
        for op in [("finish", 0)] * 2:
            assert sides[1].apply(op) == sides[0].apply(op), op
        assert sides[1].state() == sides[0].state()
        return num_cached_hashes

    peak = max(run_round(number) for number in range(24))
    state = sides[1].state()
    assert (state["num_stored"], state["stats"]["hits"], state["num_evictions"], peak) == (
        2160,
        720,
        2060,
        70,
    )
    assert [side.apply(("reset", 0)) for side in sides] == [True, True]
    assert sides[1].state() == sides[0].state()
    assert sides[1].state()["num_cached_hashes"] == 0
    run_round(24)
    state = sides[1].state()
    assert (state["num_stored"], state["stats"]["hits"], state["num_cached_hashes"]) == (
        2250,
        750,
        60,
    )


def test_the_free_queue_ring_wraps_fills_with_holes_and_rebuilds() -> None:
    """The compiled free queue is a ring of block ids with holes where a prefix hit took a
    block from the middle. Block size 2, 32 usable blocks (a 128-slot ring), 300 rounds: a
    request with a 21-token prompt (a 16-token run rotating over three, then 5 of its own
    tokens) hits the run's free cached blocks (holes mid-queue), computes the rest (its partial
    last block goes back to the queue front on release, below the ring's first position) and
    finishes, or every 7th round is preempted after half its tokens. A round releases up to 11
    blocks, so the ring wraps and is rebuilt many times; after every op both cores must show
    the same free queue in order, block tables, counters and events: 582 blocks stored, 4,752
    tokens hit (the run, nearly every round), 551 evictions."""
    pool = {
        "num_gpu_blocks": 33,
        "block_size": 2,
        "max_model_len": 4096,
        "enable_caching": True,
        "watermark": 0.0,
    }
    sides = [Side("python", pool), Side("native", pool)]
    for number in range(300):
        ending = "preempt" if number % 7 == 6 else "finish"
        fraction = 0.5 if ending == "preempt" else 1.0
        ops: list[tuple[Any, ...]] = [
            ("arrive", 0, number % 3, 16, [4 + number % 50] * 5, False),
            ("schedule", -1, fraction),  # the newest live request
            (ending, -1),
        ]
        for op in ops:
            assert sides[1].apply(op) == sides[0].apply(op), op
            assert sides[1].state() == sides[0].state(), op
    state = sides[1].state()
    assert (state["num_stored"], state["stats"]["hits"], state["num_evictions"]) == (582, 4752, 551)
