"""One registry of trace formats: the schema, the CLI and the docs all follow it."""

from __future__ import annotations

import re
from pathlib import Path

from sim.cli import load_commands
from sim.config import Scenario
from workloads.api import TRACE_FORMATS
from workloads.traces.replay import TRACE_FORMAT_REGISTRY

DOC = Path(__file__).resolve().parents[2] / "docs" / "trace_formats.md"


def test_the_registry_holds_the_three_readers_in_order() -> None:
    assert TRACE_FORMATS == ("mooncake", "dynamo", "azure")
    assert all(TRACE_FORMAT_REGISTRY[name].name == name for name in TRACE_FORMATS)


def test_the_scenario_schema_allows_exactly_the_registered_formats() -> None:
    schema = Scenario.model_json_schema()
    assert schema["$defs"]["TraceSource"]["properties"]["format"]["enum"] == list(TRACE_FORMATS)


def test_the_cli_names_the_registered_formats() -> None:
    replay = next(info for info in load_commands().registered_commands if info.name == "replay")
    option = replay.callback.__defaults__[1]
    assert option.help == "One of mooncake, dynamo, azure."


def test_the_docs_have_a_section_per_format_opening_with_its_summary() -> None:
    sections = dict(re.findall(r"^## (\w+)\n\n(.+)$", DOC.read_text(), flags=re.MULTILINE))
    documented = {name: summary for name, summary in sections.items() if name != "Adding"}
    assert documented == {name: f"{form.summary}." for name, form in TRACE_FORMAT_REGISTRY.items()}
