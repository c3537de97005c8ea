"""Scenario files: strict pydantic schema, `extends:`, `--set` overrides, clear one-line errors."""

from sim.config.base import StrictModel
from sim.config.engine import DeploymentSettings, EngineSettings
from sim.config.errors import validation_error_to_input_error
from sim.config.scenario import (
    NAME_PATTERN,
    LoadedScenario,
    Scenario,
    load_scenario,
    scenario_json_schema,
    validate_scenario_data,
)
from sim.config.workload import GammaSettings, PoissonSettings
from sim.config.yaml_source import ScenarioSource, apply_overrides, load_source

__all__ = [
    "NAME_PATTERN",
    "DeploymentSettings",
    "EngineSettings",
    "GammaSettings",
    "LoadedScenario",
    "PoissonSettings",
    "Scenario",
    "ScenarioSource",
    "StrictModel",
    "apply_overrides",
    "load_scenario",
    "load_source",
    "scenario_json_schema",
    "validate_scenario_data",
    "validation_error_to_input_error",
]
