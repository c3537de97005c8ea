"""Published step and first-token times of other inference engines (gpt-fast, TensorRT-LLM,
LMDeploy TurboMind; `data/engine_steps/`) as real measurements for `prefixsim costmodel
validate`."""

from __future__ import annotations

import csv
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from sim.costmodel.batch import BatchShape, longest_context, step_features
from sim.costmodel.derive import kernel_reference
from sim.costmodel.engine_terms import engine_coefficients, real_engine_coefficients
from sim.costmodel.loader import auto_cost_model_spec
from sim.costmodel.model import StepTimeModel
from sim.costmodel.profiles import Profile, load_profile, shipped_profile_path
from sim.costmodel.roofline import roofline_profile
from sim.costmodel.specs import get_gpu, get_model
from sim.costmodel.validation import Exclusion, RealRow, ValidationRecord
from sim.errors import InputError

ENGINE_STEPS_CSV = Path(__file__).parent / "data" / "engine_steps" / "engine_steps.csv"
# What each value of the file's `source` column is in `costmodel validate`: an origin, held out
# as a whole, whose quantities are reported as "<origin>: <quantity>" sources.
SOURCES = {
    "gpt-fast": "gpt-fast (A100, CUDA graphs)",
    "TensorRT-LLM": "TensorRT-LLM (A100, kernel prior)",
    "LMDeploy": "LMDeploy TurboMind (A100, kernel prior)",
}
QUANTITIES = {"first_token": "first token", "decode_step": "decode steps"}
# Engines whose host launches kernels from Python, as vLLM's does: a run's real-engine terms
# apply to them. C++ engines (TensorRT-LLM, TurboMind) launch at a fraction of that host cost,
# so their decode steps are compared with the profile's kernel-level coefficients (no factor);
# their first tokens are prefill compute, which runs at the real rate whatever the host language
# (docs/cost_model.md §5.7), so every first-token row is predicted with the factor and fits it.
PYTHON_HOST = "python"
HOSTS = (PYTHON_HOST, "c++")


@dataclass(frozen=True, slots=True)
class EngineStep:
    """One row of data/engine_steps/engine_steps.csv."""

    row: str
    source: str
    engine: str
    host: str
    gpu_key: str
    model_key: str
    tp: int
    batch_size: int
    input_tokens: int
    quantity: str  # first_token: the prefill step of the batch; decode_step: one decode step
    context_tokens: int  # decode_step: the context every sequence is predicted at
    measured_s: float
    used: bool
    reason_not_used: str

    @property
    def origin(self) -> str:
        return SOURCES[self.source]

    @property
    def validation_source(self) -> str:
        return f"{self.origin}: {QUANTITIES[self.quantity]}"

    @property
    def shape(self) -> BatchShape:
        if self.quantity == "first_token":
            prompts = [self.input_tokens] * self.batch_size
            return BatchShape(prompts, [0] * self.batch_size, [])
        return BatchShape([], [], [self.context_tokens] * self.batch_size)

    @property
    def case(self) -> str:
        what = (
            f"prefill {self.batch_size}x{self.input_tokens}"
            if self.quantity == "first_token"
            else f"decode {self.batch_size}x{self.context_tokens}"
        )
        return f"{self.row}: {what}, {self.model_key} on {self.gpu_key} x{self.tp}, {self.engine}"


def read_engine_steps(path: Path = ENGINE_STEPS_CSV) -> list[EngineStep]:
    """Every row of `path` (used or not), checked for a known source, quantity and host."""
    steps = []
    with path.open(newline="") as handle:
        for line, row in enumerate(csv.DictReader(handle), start=2):
            checked = (("source", SOURCES), ("quantity", QUANTITIES), ("host", HOSTS))
            for column, allowed in checked:
                if row[column] not in allowed:
                    raise InputError(
                        f"{path}:{line}: {column} {row[column]!r} is not one of "
                        f"{', '.join(allowed)}"
                    )
            steps.append(
                EngineStep(
                    row=row["row"],
                    source=row["source"],
                    engine=row["engine"],
                    host=row["host"],
                    gpu_key=row["gpu_key"],
                    model_key=row["model_key"],
                    tp=int(row["tp"]),
                    batch_size=int(row["batch_size"]),
                    input_tokens=int(row["input_tokens"]),
                    quantity=row["quantity"],
                    context_tokens=int(row["context_tokens"]),
                    measured_s=float(row["measured_ms"]) * 1e-3,
                    used=row["used"] == "yes",
                    reason_not_used=row["reason_not_used"],
                )
            )
    return steps


def engine_step_rows(path: Path = ENGINE_STEPS_CSV) -> tuple[list[RealRow], list[Exclusion]]:
    """The used rows of `path` as real measurements, each predicted by the cost model a run would
    pick for its GPU, model and TP (the shipped profile, else the roofline prior); the rest with
    the reason they are left out."""
    rows, exclusions = [], []
    for step in read_engine_steps(path):
        if step.used:
            rows.append(_real_row(step))
        else:
            exclusions.append(Exclusion(step.validation_source, step.case, step.reason_not_used))
    return rows, exclusions


def _real_row(step: EngineStep) -> RealRow:
    gpu, model = get_gpu(step.gpu_key), get_model(step.model_key)
    spec = auto_cost_model_spec(gpu, model, step.tp)
    roofline = roofline_profile(gpu, model, step.tp)
    profile = roofline if spec == "roofline" else load_profile(shipped_profile_path(spec))
    shape = step.shape
    at_real_rate = step.host == PYTHON_HOST or step.quantity == "first_token"
    record = ValidationRecord(
        source=step.validation_source,
        profile=profile.name,
        case=step.case,
        measured_s=step.measured_s,
        predicted_s=_as_compared(profile, shape, at_real_rate),
        table_predicted_s=kernel_reference(gpu, model, step.tp).step_time_s(shape),
        roofline_predicted_s=_as_compared(roofline, shape, at_real_rate),
        in_fitted_range=profile.covered is None
        or not profile.covered.violations(*step_features(shape), longest_context(shape)),
        batch_size=step.batch_size,
    )
    return RealRow(
        record,
        step.origin,
        gpu.key,
        _time_at_factor(profile, shape, at_real_rate),
        fitted=step.quantity == "first_token",
    )


def _as_compared(profile: Profile, shape: BatchShape, at_real_rate: bool) -> float:
    """`profile`'s step time for `shape` as a run uses it (real-engine factor included) for a
    Python engine or a prefill, at its kernel-level coefficients for a C++ engine's decode step."""
    coefficients = profile.coefficients
    if at_real_rate:
        coefficients = engine_coefficients(coefficients, profile.source, profile.gpu)
    return StepTimeModel(coefficients).step_time_s(shape)


def _time_at_factor(
    profile: Profile, shape: BatchShape, at_real_rate: bool
) -> Callable[[float], float]:
    """The step time of `shape` at any real-engine factor; a C++ engine's decode step does not
    move."""
    features = step_features(shape)

    def step_time_s(factor: float) -> float:
        coefficients = profile.coefficients
        if at_real_rate:
            coefficients = real_engine_coefficients(coefficients, factor)
        return StepTimeModel(coefficients).features_time_s(*features)

    return step_time_s
