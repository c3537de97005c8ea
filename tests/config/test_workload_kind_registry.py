"""Workload kinds: the scenario's source models follow the workloads registry."""

from __future__ import annotations

from typing import get_args

from sim.config import Scenario
from sim.config.workload import GENERATOR_SOURCES
from workloads.generators.builders import GENERATOR_KINDS, MIX_KIND


def test_each_generator_kind_has_a_scenario_model_that_builds_its_config() -> None:
    names = [get_args(model.model_fields["kind"].annotation)[0] for model in GENERATOR_SOURCES]
    assert names == [kind.name for kind in GENERATOR_KINDS] == ["chat", "agent", "rag"]
    for model, kind in zip(GENERATOR_SOURCES, GENERATOR_KINDS, strict=True):
        assert type(model(kind=kind.name).build()) is kind.config


def test_the_schema_offers_the_generator_kinds_a_mix_and_a_trace() -> None:
    source = Scenario.model_json_schema()["$defs"]["WorkloadSettings"]["properties"]["source"]
    kinds = [kind.name for kind in GENERATOR_KINDS]
    assert sorted(source["discriminator"]["mapping"]) == sorted([*kinds, MIX_KIND, "trace"])
