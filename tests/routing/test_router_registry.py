"""One registry of router policies: the schema and make_router follow it."""

from __future__ import annotations

import pytest

from sim.config import Scenario
from sim.kvcache import HASH_ALGOS
from sim.routing import (
    ROUTER_POLICIES,
    ROUTER_REGISTRY,
    PrefixAwareRouter,
    RouterTuning,
    make_router,
)
from sim.sched import POLICIES


def test_the_registry_names_four_policies_each_built_by_its_own_class() -> None:
    assert ROUTER_POLICIES == ("round_robin", "least_loaded", "prefix_aware", "session_affinity")
    for name in ROUTER_POLICIES:
        assert make_router(name).policy == name


def test_prefix_aware_takes_its_thresholds_and_others_ignore_them() -> None:
    router = make_router("prefix_aware", RouterTuning(0.25, 8, 1.5))
    assert isinstance(router, PrefixAwareRouter)
    assert (router.cache_threshold, router.balance_abs_threshold, router.balance_rel_threshold) == (
        0.25,
        8,
        1.5,
    )
    assert make_router("round_robin", RouterTuning(0.25, 8, 1.5)).policy == "round_robin"
    with pytest.raises(ValueError, match="one of round_robin, least_loaded, prefix_aware, sess"):
        make_router("random")


def test_the_scenario_schema_allows_exactly_what_the_registries_hold() -> None:
    definitions = Scenario.model_json_schema()["$defs"]
    assert definitions["RouterSettings"]["properties"]["policy"]["enum"] == list(ROUTER_REGISTRY)
    engine = definitions["EngineSettings"]["properties"]
    assert engine["policy"]["enum"] == list(POLICIES)
    assert engine["hash_algo"]["enum"] == list(HASH_ALGOS)
