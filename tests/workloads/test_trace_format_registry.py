"""One registry of trace formats: the schema, the CLI and the docs all follow it."""

from __future__ import annotations

from pathlib import Path

from sim.cli import load_commands
from sim.config import Scenario
from workloads.api import TRACE_FORMATS
from workloads.traces.replay import TRACE_FORMAT_REGISTRY, trace_format_table

DOC = Path(__file__).resolve().parents[2] / "docs" / "trace_formats.md"


def test_the_registry_holds_the_three_readers_in_order() -> None:
    assert TRACE_FORMATS[:3] == ("mooncake", "dynamo", "azure")  # shipped first; more may follow
    assert all(TRACE_FORMAT_REGISTRY[name].name == name for name in TRACE_FORMATS)


def test_the_scenario_schema_allows_exactly_the_registered_formats() -> None:
    schema = Scenario.model_json_schema()
    assert schema["$defs"]["TraceSource"]["properties"]["format"]["enum"] == list(TRACE_FORMATS)


def test_the_cli_names_the_registered_formats() -> None:
    replay = next(info for info in load_commands().registered_commands if info.name == "replay")
    option = replay.callback.__defaults__[1]
    assert option.help == f"One of {', '.join(TRACE_FORMATS)}."


def test_the_docs_show_the_table_the_registry_renders() -> None:
    text = DOC.read_text()
    shown = text.split("<!-- rendered from the registry -->\n", 1)[1]
    shown = shown.split("\n<!-- end of rendered table -->", 1)[0]
    assert shown == trace_format_table(), "paste trace_format_table() into docs/trace_formats.md"
