"""Scenario files: strict pydantic schema, `extends:`, `--set` overrides, clear one-line errors."""

from sim.config.base import MAX_SEED, StrictModel, field_problem
from sim.config.deployed import context_problem, deployed_engine, with_deployment_defaults
from sim.config.engine import (
    KERNEL_BLOCK_MULTIPLE,
    DeploymentSettings,
    EngineSettings,
    block_size_problem,
)
from sim.config.errors import validation_error_to_input_error
from sim.config.limits import (
    DEFAULT_MAX_RUNS,
    GROW_CACHE,
    MAX_ARRIVALS,
    MAX_SCRAPES,
    bounded_trace,
    check_pool_size,
    check_scenario_limits,
    check_sweep_size,
    check_total_pool,
    estimated_result_bytes,
    too_long_remedy,
)
from sim.config.scenario import (
    NAME_PATTERN,
    LoadedScenario,
    Scenario,
    load_scenario,
    scenario_json_schema,
    validate_scenario_data,
)
from sim.config.workload import GammaSettings, PoissonSettings, TraceSource
from sim.config.yaml_source import ScenarioSource, apply_overrides, load_source, yaml_text

__all__ = [
    "DEFAULT_MAX_RUNS",
    "GROW_CACHE",
    "KERNEL_BLOCK_MULTIPLE",
    "MAX_ARRIVALS",
    "MAX_SCRAPES",
    "MAX_SEED",
    "NAME_PATTERN",
    "DeploymentSettings",
    "EngineSettings",
    "GammaSettings",
    "LoadedScenario",
    "PoissonSettings",
    "Scenario",
    "ScenarioSource",
    "StrictModel",
    "TraceSource",
    "apply_overrides",
    "block_size_problem",
    "bounded_trace",
    "check_pool_size",
    "check_scenario_limits",
    "check_sweep_size",
    "check_total_pool",
    "context_problem",
    "deployed_engine",
    "estimated_result_bytes",
    "field_problem",
    "load_scenario",
    "load_source",
    "scenario_json_schema",
    "too_long_remedy",
    "validate_scenario_data",
    "validation_error_to_input_error",
    "with_deployment_defaults",
    "yaml_text",
]
