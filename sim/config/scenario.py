"""The scenario file: one simulated deployment under one traffic, and how to load it."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, ValidationError, ValidationInfo, model_validator

from sim.config.base import MAX_SEED, StrictModel, field_problem
from sim.config.deployed import context_problem, with_deployment_defaults
from sim.config.engine import DeploymentSettings, EngineSettings, OutputSettings
from sim.config.errors import validation_error_to_input_error
from sim.config.workload import TraceSource, WorkloadSettings
from sim.config.yaml_source import ScenarioSource, apply_overrides, load_source, yaml_text
from sim.costmodel import load_cost_model
from sim.errors import InputError

NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.-]*$"


class Scenario(StrictModel):
    """A what-if: engine settings, the deployment, the cost model, the traffic, how long."""

    name: str = Field(pattern=NAME_PATTERN, description="results go to results/<name>/<run_id>/")
    description: str | None = None
    seed: int = Field(
        0, ge=0, le=MAX_SEED, description="seeds the workload; the engine itself is exact"
    )
    duration_s: float | None = Field(
        None, gt=0, description="simulated seconds of arrivals; in-flight requests then drain"
    )
    warmup_s: float = Field(0.0, ge=0, description="requests arriving earlier are not measured")
    engine: EngineSettings = Field(default_factory=EngineSettings)
    deployment: DeploymentSettings = Field(default_factory=DeploymentSettings)
    cost_model: str = Field(
        "auto",
        description="'auto' (the shipped profile of the deployment, else roofline), a profile "
        "name like 'h100/llama-3.1-8b/tp1', a profile YAML path, 'roofline', "
        "'constant:<s>' or 'linear:<b0_s>,<per_token_s>'",
    )
    frontend: Literal["auto", "none"] = Field(
        "auto",
        description="the API server's time around the engine (tokenization, hand-off, first "
        "token streaming): 'auto' (a calibrated profile's, none for constant:/linear: models, else "
        "the shipped one) or 'none'",
    )
    workload: WorkloadSettings = Field(description="the traffic: a generator or a trace")
    outputs: OutputSettings = Field(default_factory=OutputSettings)

    @model_validator(mode="after")
    def _bounded(self) -> Scenario:
        bounded = (
            self.duration_s is not None
            or self.workload.num_arrivals is not None
            or isinstance(self.workload.source, TraceSource)
        )
        if not bounded:
            raise ValueError("set duration_s or workload.num_arrivals, or the run never ends")
        if self.duration_s is not None and self.warmup_s >= self.duration_s:
            raise field_problem(
                "warmup_s",
                f"warmup_s ({self.warmup_s}) must be shorter than duration_s ({self.duration_s})",
            )
        return self

    @model_validator(mode="before")
    @classmethod
    def _engine_defaults_for_the_deployment(cls, data: Any, info: ValidationInfo) -> Any:
        return with_deployment_defaults(data, (info.context or {}).get("base_dir"))

    @model_validator(mode="after")
    def _max_model_len_within_the_context(self) -> Scenario:
        problem = context_problem(self.engine, self.deployment)
        if problem is not None:
            raise field_problem(*problem)
        return self

    @model_validator(mode="after")
    def _cost_model_loads(self, info: ValidationInfo) -> Scenario:
        # The runner resolves "auto"; a relative profile path needs the scenario's directory.
        spec = self.cost_model
        base_dir = (info.context or {}).get("base_dir")
        if spec == "auto" or (is_relative_profile_path(spec) and base_dir is None):
            return self
        if is_relative_profile_path(spec) and base_dir is not None:
            spec = str(base_dir / spec)
        deployment = self.deployment
        try:
            load_cost_model(spec, gpu=deployment.gpu, model=deployment.model_spec, tp=deployment.tp)
        except InputError as error:
            raise field_problem("cost_model", str(error)) from None
        return self

    def resolved(self) -> dict[str, Any]:
        """Every setting, defaults included, as plain data.

        `engine.core` is left out: both cores give byte-identical results, so it names how a
        run is computed, not what (like -j), and never changes a run id or result file.
        `deployment.cuda_graphs` is left out at its default, so the run ids of scenarios written
        before it existed stay."""
        excluded: dict[str, Any] = {"engine": {"core"}}
        if self.deployment.cuda_graphs:
            excluded["deployment"] = {"cuda_graphs"}
        return self.model_dump(mode="json", exclude=excluded)

    def run_id(self) -> str:
        """A short hash of the resolved config: equal configs share a run directory."""
        canonical = json.dumps(self.resolved(), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(canonical.encode()).hexdigest()[:12]

    def resolved_yaml(self) -> str:
        """The resolved config as YAML (written beside a run's results)."""
        return yaml_text(self.resolved())


def is_relative_profile_path(cost_model: str) -> bool:
    """Whether a cost-model string names a profile YAML relative to the scenario file."""
    return cost_model.endswith((".yaml", ".yml")) and not Path(cost_model).is_absolute()


@dataclass(slots=True)
class LoadedScenario:
    """A validated scenario and the directory its relative paths are resolved against."""

    scenario: Scenario
    base_dir: Path
    source: ScenarioSource


def validate_scenario_data(source: ScenarioSource) -> Scenario:
    """Validate merged scenario data; problems become one-line InputErrors naming file and line."""
    base_dir = source.path.resolve().parent
    try:
        return Scenario.model_validate(source.data, context={"base_dir": base_dir})
    except ValidationError as error:
        raise validation_error_to_input_error(error, source) from None


def load_scenario(path: Path, overrides: list[str] | tuple[str, ...] = ()) -> LoadedScenario:
    """Read, merge (`extends:`), override (`--set`) and validate a scenario file."""
    source = load_source(path)
    if "sweep" in source.data:
        file_name, line = source.location("sweep")
        raise InputError(
            "sweep: this is a sweep file (a scenario per run); give one scenario, or run the "
            "sweep with `prefixsim sweep`",
            source=file_name,
            line=line,
        )
    apply_overrides(source, list(overrides))
    return LoadedScenario(validate_scenario_data(source), path.resolve().parent, source)


def scenario_json_schema() -> dict[str, Any]:
    """JSON Schema of scenario files, for editor completion and checking."""
    schema = Scenario.model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "prefixsim scenario"
    return schema
