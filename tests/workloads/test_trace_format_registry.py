"""One registry of trace formats: the schema and the CLI follow it."""

from __future__ import annotations

from sim.cli import load_commands
from sim.config import Scenario
from workloads.api import TRACE_FORMATS
from workloads.traces.replay import TRACE_FORMAT_REGISTRY, trace_format_summaries


def test_the_registry_holds_the_three_readers_in_order() -> None:
    assert TRACE_FORMATS[:3] == ("mooncake", "dynamo", "azure")  # shipped first; more may follow
    assert all(TRACE_FORMAT_REGISTRY[name].name == name for name in TRACE_FORMATS)


def test_the_scenario_schema_allows_exactly_the_registered_formats() -> None:
    schema = Scenario.model_json_schema()
    assert schema["$defs"]["TraceSource"]["properties"]["format"]["enum"] == list(TRACE_FORMATS)


def test_the_cli_names_the_registered_formats() -> None:
    replay = next(info for info in load_commands().registered_commands if info.name == "replay")
    option = replay.callback.__defaults__[1]
    assert option.help == f"One of: {trace_format_summaries()}."
    for name in TRACE_FORMATS:
        assert f"{name} ({TRACE_FORMAT_REGISTRY[name].summary})" in option.help
