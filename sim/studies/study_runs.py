"""What every engine-backed study shares: its deployment settings, loading its YAML file, and
running a request stream through one simulated engine to collect the finished requests."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Self, TypeVar

import numpy as np
from pydantic import Field, ValidationError, ValidationInfo, model_validator

from sim.config import (
    NAME_PATTERN,
    DeploymentSettings,
    EngineSettings,
    StrictModel,
    apply_overrides,
    context_problem,
    field_problem,
    load_source,
    too_long_remedy,
    validation_error_to_input_error,
    with_deployment_defaults,
)
from sim.costmodel import CostModel
from sim.engine import simulate
from sim.errors import InputError
from sim.kvcache import pool_capacity_tokens
from sim.metrics import NullRecorder, RequestRecord
from sim.runner import engine_start
from sim.sched import SchedulerConfig
from workloads.api import RequestSpec, WorkloadError


class StudySettings(StrictModel):
    """The fields every study file has: its name and the deployment its requests run on."""

    name: str = Field(pattern=NAME_PATTERN, description="results go to results/<name>/")
    description: str | None = None
    engine: EngineSettings = Field(default_factory=EngineSettings)
    deployment: DeploymentSettings = Field(default_factory=DeploymentSettings)
    cost_model: str = Field(
        "auto", description="as in scenario files: 'auto', a profile name or path, 'roofline', ..."
    )

    @model_validator(mode="before")
    @classmethod
    def _engine_defaults_for_the_deployment(cls, data: Any, info: ValidationInfo) -> Any:
        return with_deployment_defaults(data, (info.context or {}).get("base_dir"))

    @model_validator(mode="after")
    def _max_model_len_within_the_context(self) -> Self:
        problem = context_problem(self.engine, self.deployment)
        if problem is not None:
            raise field_problem(*problem)
        return self


StudyT = TypeVar("StudyT", bound=StudySettings)


def load_study(
    path: Path, model: type[StudyT], overrides: Sequence[str] = ()
) -> tuple[StudyT, Path]:
    """Read, override (`--set`) and validate a study file, and check that its engine would
    start (`engine_start`); returns it and its directory."""
    source = load_source(path)
    apply_overrides(source, list(overrides))
    base_dir = path.resolve().parent
    try:
        settings = model.model_validate(source.data, context={"base_dir": base_dir})
    except ValidationError as error:
        raise validation_error_to_input_error(error, source) from None
    try:
        engine_start(settings, base_dir)
    except InputError as error:
        raise error.at(path) from None
    return settings, base_dir


class _RecordCollector(NullRecorder):
    """Keeps every finished request's record by request id."""

    def __init__(self) -> None:
        self.records: dict[str, RequestRecord] = {}

    def on_request_finished(self, request: RequestRecord) -> None:
        """Keep the record."""
        self.records[request.request_id] = request


@dataclass(slots=True)
class StudyEngine:
    """One engine replica's settings and step-time model, reused for every run of a study."""

    config: SchedulerConfig
    cost_model: CostModel
    model_context: int | None  # the model's context length, where its config names one

    @classmethod
    def from_settings(cls, settings: StudySettings, base_dir: Path) -> StudyEngine:
        """Size the KV cache and load the cost model exactly as `prefixsim run` does.

        The runner's helpers read only `engine`, `deployment` and `cost_model`, which every
        study's settings carry under the same names and types as a scenario's.
        """
        start = engine_start(settings, base_dir)
        return cls(
            start.config,
            start.cost_model_choice.model,
            settings.deployment.model_spec.context_length,
        )

    def run(self, specs: Iterable[RequestSpec]) -> dict[str, RequestRecord]:
        """Simulate `specs` (in arrival order) to completion; the finished records by id."""
        collector = _RecordCollector()
        try:
            result = simulate(
                specs, self.config, self.cost_model, recorder=collector, record_block_events=False
            )
        except WorkloadError as error:
            raise InputError(str(error)) from None
        num_too_long = result.num_rejected - result.num_rejected_queue_full
        if num_too_long:
            config = self.config
            pool_tokens = pool_capacity_tokens(config.num_gpu_blocks, config.block_size)
            prompts = "1 prompt was" if num_too_long == 1 else f"{num_too_long:,} prompts were"
            raise InputError(
                f"{prompts} at least engine.max_model_len tokens long and rejected; "
                + too_long_remedy(config.max_model_len, self.model_context, pool_tokens)
            )
        return collector.records


def ttft_percentiles_s(records: Iterable[RequestRecord], qs: Sequence[float]) -> list[float]:
    """TTFT percentiles (0..100, numpy's linear interpolation) of the records, in seconds."""
    ttfts_s = np.fromiter((record.ttft_s for record in records), dtype=float)
    if ttfts_s.size == 0:
        raise ValueError("no finished requests to take TTFT percentiles of")
    return [float(value) for value in np.percentile(ttfts_s, qs, method="linear")]
