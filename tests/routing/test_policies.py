"""Each routing policy's decision on hand-set replica states (loads and cached prefixes)."""

from __future__ import annotations

import typing

import pytest
from hypothesis import given
from hypothesis import strategies as st
from routing_fakes import replicas, request

from sim.config.engine import RouterPolicy
from sim.routing import ROUTER_POLICIES, RouterTuning, make_router
from sim.routing.policies import (
    LeastLoadedRouter,
    PrefixAwareRouter,
    RoundRobinRouter,
    SessionAffinityRouter,
    SessionlessRequestWarning,
)


def test_router_policies_match_the_config_literal() -> None:
    assert typing.get_args(RouterPolicy) == ROUTER_POLICIES


@pytest.mark.parametrize("policy", ROUTER_POLICIES)
def test_make_router_builds_each_policy(policy: str) -> None:
    assert make_router(policy).policy == policy


def test_make_router_rejects_an_unknown_policy() -> None:
    with pytest.raises(
        ValueError, match="round_robin, least_loaded, prefix_aware, session_affinity"
    ):
        make_router("random")


def test_round_robin_cycles_through_replicas_whatever_their_state() -> None:
    # Replica 0 is the busiest and caches everything: round robin does not look.
    cluster = replicas((9, 900, 100), (0, 0, 0), (0, 0, 0))
    router = RoundRobinRouter()
    assert [router.choose(request(), cluster) for _ in range(7)] == [0, 1, 2, 0, 1, 2, 0]


def test_least_loaded_picks_the_fewest_queued_tokens() -> None:
    # (unfinished requests, queued tokens, cached tokens): replica 2 has 50 queued tokens.
    cluster = replicas((1, 300, 0), (1, 200, 0), (5, 50, 0))
    assert LeastLoadedRouter().choose(request(), cluster) == 2


def test_least_loaded_breaks_token_ties_by_requests_then_index() -> None:
    assert LeastLoadedRouter().choose(request(), replicas((3, 0, 0), (2, 0, 0), (2, 0, 0))) == 1
    assert LeastLoadedRouter().choose(request(), replicas((0, 0, 0), (0, 0, 0))) == 0


def test_session_affinity_pins_a_session_to_its_first_replica() -> None:
    router = SessionAffinityRouter()
    idle_first = replicas((0, 0, 0), (1, 10, 0))
    idle_second = replicas((4, 400, 0), (0, 0, 0))
    # Session a starts while replica 0 is idle and stays there when replica 1 becomes idler.
    assert router.choose(request("a1", session_id="a"), idle_first) == 0
    assert router.choose(request("a2", session_id="a"), idle_second) == 0
    # Session b starts later, on the then least loaded replica 1.
    assert router.choose(request("b1", session_id="b"), idle_second) == 1
    assert router.pins == {"a": 0, "b": 1}


def test_session_affinity_routes_sessionless_requests_by_load_and_forgets_ended_sessions() -> None:
    """A request without a session goes where least_loaded would send it, and the run is told
    once (a workload without sessions would otherwise run as least_loaded under this name)."""
    router = SessionAffinityRouter()
    with pytest.warns(SessionlessRequestWarning, match="request 'x' has no session") as caught:
        assert router.choose(request("x"), replicas((2, 20, 0), (1, 10, 0))) == 1
        assert router.choose(request("y"), replicas((2, 20, 0), (1, 10, 0))) == 1
    assert len(caught) == 1
    assert router.pins == {}
    router.choose(request("a1", session_id="a"), replicas((0, 0, 0), (1, 10, 0)))
    router.on_session_end("a")
    assert router.pins == {}
    # A new session reusing the id is placed afresh.
    assert router.choose(request("a1", session_id="a"), replicas((1, 10, 0), (0, 0, 0))) == 1


@pytest.mark.parametrize(
    ("loads", "imbalanced"),
    [
        ([0, 32], False),  # gap 32 is not above the absolute threshold 32
        ([0, 33], True),  # gap 33 > 32 and 33 > 1.0001 * 0
        ([100, 133], True),  # 133 > 100.01
        ([10_000, 10_033], True),  # 10033 > 10001
        ([400_000, 400_033], False),  # 400033 < 1.0001 * 400000 = 400040
    ],
)
def test_imbalance_needs_both_the_absolute_and_the_relative_gap(
    loads: list[int], imbalanced: bool
) -> None:
    assert PrefixAwareRouter().is_imbalanced(loads) is imbalanced


def test_prefix_aware_routes_to_the_longest_cached_prefix_when_balanced() -> None:
    # 100-token prompt: replica 1 caches 64 tokens (0.64 > 0.5) though it is the busiest.
    cluster = replicas((0, 0, 16), (3, 300, 64), (1, 100, 48))
    assert PrefixAwareRouter().choose(request(num_prompt_tokens=100), cluster) == 1


def test_prefix_aware_falls_back_to_the_least_loaded_below_the_cache_threshold() -> None:
    # The best match is 48/100 = 0.48, not above 0.5: least unfinished requests wins (replica 2).
    cluster = replicas((2, 0, 48), (3, 0, 32), (1, 900, 0))
    assert PrefixAwareRouter().choose(request(num_prompt_tokens=100), cluster) == 2
    # At exactly the threshold (50/100) it still falls back: the rule is "above".
    cluster = replicas((2, 0, 50), (1, 0, 0))
    assert PrefixAwareRouter().choose(request(num_prompt_tokens=100), cluster) == 1


def test_prefix_aware_ignores_the_cache_when_imbalanced() -> None:
    # Loads 40 and 2 (gap 38 > 32): the request goes to replica 1 despite replica 0's full hit.
    cluster = replicas((40, 0, 96), (2, 0, 0))
    assert PrefixAwareRouter().choose(request(num_prompt_tokens=100), cluster) == 1
    # With a larger absolute threshold the cluster counts as balanced and the cache wins.
    router = PrefixAwareRouter(RouterTuning(balance_abs_threshold=64))
    assert router.choose(request(num_prompt_tokens=100), cluster) == 0


def test_prefix_aware_breaks_match_ties_by_load_then_index() -> None:
    cluster = replicas((3, 0, 80), (2, 0, 80), (2, 0, 80))
    assert PrefixAwareRouter().choose(request(num_prompt_tokens=100), cluster) == 1


@given(
    states=st.lists(
        st.tuples(st.integers(0, 100), st.integers(0, 10_000), st.integers(0, 99)),
        min_size=1,
        max_size=8,
    ),
    policy=st.sampled_from(ROUTER_POLICIES),
)
def test_every_policy_returns_a_replica_index(
    states: list[tuple[int, int, int]], policy: str
) -> None:
    cluster = replicas(*states)
    router = make_router(policy)
    chosen = [router.choose(request(f"r{n}", session_id=f"s{n % 3}"), cluster) for n in range(6)]
    assert all(0 <= index < len(cluster) for index in chosen)


@given(
    states=st.lists(
        st.tuples(st.integers(0, 20), st.integers(0, 10_000), st.integers(0, 99)),
        min_size=2,
        max_size=8,
    )
)
def test_prefix_aware_choice_is_the_best_match_or_the_least_loaded(
    states: list[tuple[int, int, int]],
) -> None:
    # Loads of at most 20 requests never exceed the default absolute gap of 32: always balanced.
    cluster = replicas(*states)
    chosen = PrefixAwareRouter().choose(request(num_prompt_tokens=100), cluster)
    best_cached = max(replica.num_cached_tokens for replica in cluster)
    if best_cached > 50:
        assert cluster[chosen].num_cached_tokens == best_cached
    else:
        fewest = min(replica.num_unfinished_requests for replica in cluster)
        assert cluster[chosen].num_unfinished_requests == fewest
