"""Scenario files: strict pydantic schema, `extends:`, `--set` overrides, clear one-line errors."""

from sim.config.scenario import (
    LoadedScenario,
    Scenario,
    load_scenario,
    validate_scenario_data,
)

__all__ = [
    "LoadedScenario",
    "Scenario",
    "load_scenario",
    "validate_scenario_data",
]
