"""Published step and first-token times of other inference engines (gpt-fast, TensorRT-LLM,
LMDeploy TurboMind, Sarathi-Serve, TGI 1.0.3 on SageMaker; `data/engine_steps/`) as real
measurements for `prefixsim costmodel validate`."""

from __future__ import annotations

import csv
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from sim.costmodel.batch import BatchShape, longest_context, step_features
from sim.costmodel.derive import kernel_reference
from sim.costmodel.engine_terms import (
    eager_engine_model,
    eager_sequence_host_s,
    engine_coefficients,
    load_engine_terms,
    real_engine_coefficients,
)
from sim.costmodel.loader import auto_cost_model_spec
from sim.costmodel.model import CostModel, StepTimeModel
from sim.costmodel.profiles import Profile, load_profile, shipped_profile_path
from sim.costmodel.roofline import roofline_profile
from sim.costmodel.specs import get_gpu, get_model
from sim.costmodel.validation import Exclusion, RealRow, ValidationRecord
from sim.errors import InputError

ENGINE_STEPS_DIR = Path(__file__).parent / "data" / "engine_steps"
ENGINE_STEPS_CSV = ENGINE_STEPS_DIR / "engine_steps.csv"
# One file per later source, in engine_steps.csv's columns.
TGI_SAGEMAKER_CSV = ENGINE_STEPS_DIR / "tgi_sagemaker.csv"
VLLM01_CSV = ENGINE_STEPS_DIR / "vllm01_replicate.csv"
ENGINE_STEP_FILES = (ENGINE_STEPS_CSV, TGI_SAGEMAKER_CSV, VLLM01_CSV)
# What each value of the file's `source` column is in `costmodel validate`: an origin, held out
# as a whole, whose quantities are reported as "<origin>: <quantity>" sources.
SOURCES = {
    "gpt-fast": "gpt-fast (A100, CUDA graphs)",
    "TensorRT-LLM": "TensorRT-LLM (A100, kernel prior)",
    "LMDeploy": "LMDeploy TurboMind (A100, kernel prior)",
    "Sarathi-Serve": "Sarathi-Serve (A100 PCIe, vLLM-derived, no CUDA graphs)",
    "TGI-SageMaker": "TGI 1.0.3 on SageMaker (A10G, A100-40GB, no CUDA graphs)",
    "vLLM-0.1": "vLLM 0.1 (A100 TP 2, Ray workers, no CUDA graphs)",
}
QUANTITIES = {
    "first_token": "first token",
    "decode_step": "decode steps",
    "chunked_prefill": "chunked prefills",
}
# Engines whose host launches kernels from Python, as vLLM's does: a run's real-engine terms
# apply to them. C++ engines (TensorRT-LLM, TurboMind) launch at a fraction of that host cost,
# so their decode steps are compared with the profile's kernel-level coefficients (no factor);
# their first tokens are prefill compute, which runs at the real rate whatever the host language
# (docs/cost_model.md §5.7), so every first-token row is predicted with the factor and fits it.
PYTHON_HOST = "python"
HOSTS = (PYTHON_HOST, "c++")
# A Python engine's `cuda_graphs`: without them every decode step launches each layer from the
# host (the eager host time per layer); C++ engines say "n/a (...)".
CUDA_GRAPHS = ("yes", "no")
# Sources whose eager decode steps are compared with the shipped host time per layer but not
# fitted to it: TGI 1.0.3's steps at TP 4-8 wait on a host cost per step, not per layer
# (Llama-2-7B is slower than Llama-2-13B at TP 8), which the term does not model.
EAGER_VALIDATION_ONLY = frozenset({"TGI-SageMaker"})


@dataclass(frozen=True, slots=True)
class EngineStep:
    """One row of data/engine_steps/engine_steps.csv."""

    row: str
    source: str
    engine: str
    host: str
    cuda_graphs: bool
    gpu_key: str
    model_key: str
    tp: int
    batch_size: int
    input_tokens: int
    # first_token: the prefill step of the batch; decode_step: one decode step; chunked_prefill:
    # one prompt prefilled in steps of `chunk_tokens` new tokens each, timed together.
    quantity: str
    context_tokens: int  # decode_step: the context every sequence is predicted at
    chunk_tokens: int  # chunked_prefill: new tokens per step (the last step takes the rest)
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
    def at_real_rate(self) -> bool:
        """Predicted with the real-engine factor: a Python engine's steps, and every prefill."""
        return self.host == PYTHON_HOST or self.quantity != "decode_step"

    @property
    def fitted(self) -> bool:
        """A first token: it measures the real-engine factor (as Splitwise's prefills do); the
        chunked prefills check the form's chunking and are not fitted."""
        return self.quantity == "first_token"

    @property
    def eager(self) -> bool:
        """A Python engine without CUDA graphs: every step launches each layer from the host."""
        return self.host == PYTHON_HOST and not self.cuda_graphs

    def eager_layers(self, num_layers: int) -> int:
        """Layers launched from the host in this step on top of its GPU work: a decode step of an
        eager engine launches all `num_layers`."""
        return num_layers if self.eager and self.quantity == "decode_step" else 0

    def floor_layers(self, num_layers: int) -> int:
        """Layers the host launches under each prefill step of an eager engine: the step's floor."""
        return num_layers if self.eager and self.quantity != "decode_step" else 0

    @property
    def fits_eager_host(self) -> bool:
        """Its eager decode steps join the fit of the host time per layer."""
        return self.source not in EAGER_VALIDATION_ONLY

    @property
    def shapes(self) -> list[BatchShape]:
        """The steps the measurement spans, in order: one, or a chunked prefill's chunks (each
        attending to the chunks before it)."""
        if self.quantity == "chunked_prefill":
            return [
                BatchShape([min(self.chunk_tokens, self.input_tokens - start)], [start], [])
                for start in range(0, self.input_tokens, self.chunk_tokens)
            ]
        if self.quantity == "first_token":
            prompts = [self.input_tokens] * self.batch_size
            return [BatchShape(prompts, [0] * self.batch_size, [])]
        return [BatchShape([], [], [self.context_tokens] * self.batch_size)]

    @property
    def case(self) -> str:
        what = {
            "first_token": f"prefill {self.batch_size}x{self.input_tokens}",
            "decode_step": f"decode {self.batch_size}x{self.context_tokens}",
            "chunked_prefill": f"prefill {self.input_tokens} in chunks of {self.chunk_tokens}",
        }[self.quantity]
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
            if row["host"] == PYTHON_HOST and row["cuda_graphs"] not in CUDA_GRAPHS:
                raise InputError(
                    f"{path}:{line}: cuda_graphs {row['cuda_graphs']!r} of a python engine is not "
                    f"one of {', '.join(CUDA_GRAPHS)}"
                )
            steps.append(
                EngineStep(
                    row=row["row"],
                    source=row["source"],
                    engine=row["engine"],
                    host=row["host"],
                    cuda_graphs=row["cuda_graphs"] == "yes",
                    gpu_key=row["gpu_key"],
                    model_key=row["model_key"],
                    tp=int(row["tp"]),
                    batch_size=int(row["batch_size"]),
                    input_tokens=int(row["input_tokens"]),
                    quantity=row["quantity"],
                    context_tokens=int(row["context_tokens"]),
                    chunk_tokens=int(row["chunk_tokens"] or 0),
                    measured_s=float(row["measured_ms"]) * 1e-3,
                    used=row["used"] == "yes",
                    reason_not_used=row["reason_not_used"],
                )
            )
    return steps


def engine_step_rows(
    paths: tuple[Path, ...] = ENGINE_STEP_FILES,
) -> tuple[list[RealRow], list[Exclusion]]:
    """The used rows of `paths` as real measurements, each predicted by the cost model a run would
    pick for its GPU, model and TP (the shipped profile, else the roofline prior); the rest with
    the reason they are left out."""
    rows, exclusions = [], []
    for step in (step for path in paths for step in read_engine_steps(path)):
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
    shapes, at_real_rate = step.shapes, step.at_real_rate
    eager_num_layers = model.num_layers if step.eager else 0
    eager_layers = step.eager_layers(model.num_layers)
    # A fitted row's host time is added at whatever per-layer time the fit gives; a row left out
    # of that fit keeps the shipped per-layer time, which never saw it, as shipped and held out.
    fitted_layers = eager_layers if step.fits_eager_host else 0
    fixed_host_s = (eager_layers - fitted_layers) * load_engine_terms().eager_host_per_layer_s
    if eager_layers:  # its decoding sequences' host time is derived, not fitted
        fixed_host_s += sum(eager_sequence_host_s(shape, step.tp) for shape in shapes)
    # GPUs without kernel tables (A100 PCIe) have no layer-sum to compare with.
    reference = kernel_reference(gpu, model, step.tp) if gpu.kernel_tables else None
    steps_s = _steps_at_factor(profile, shapes, at_real_rate)
    record = ValidationRecord(
        source=step.validation_source,
        profile=profile.name,
        case=step.case,
        measured_s=step.measured_s,
        predicted_s=_as_compared(profile, shapes, at_real_rate, eager_num_layers),
        table_predicted_s=None
        if reference is None
        else sum(reference.step_time_s(shape) for shape in shapes),
        roofline_predicted_s=_as_compared(roofline, shapes, at_real_rate, eager_num_layers),
        in_fitted_range=profile.covered is None
        or not any(
            profile.covered.violations(*step_features(shape), longest_context(shape))
            for shape in shapes
        ),
        batch_size=step.batch_size,
    )
    return RealRow(
        record,
        step.origin,
        gpu.key,
        lambda factor: sum(steps_s(factor)) + fixed_host_s,
        fitted=step.fitted,
        eager_layers=fitted_layers,
        floor_layers=step.floor_layers(model.num_layers),
        steps_s=steps_s,
    )


def _as_compared(
    profile: Profile, shapes: list[BatchShape], at_real_rate: bool, eager_num_layers: int
) -> float:
    """`profile`'s time for the steps `shapes` as a run uses it (real-engine factor included)
    for a Python engine or a prefill, at its kernel-level coefficients for a C++ engine's decode
    step; with the eager terms of `eager_num_layers` layers for an engine without CUDA graphs."""
    coefficients = profile.coefficients
    if at_real_rate:
        coefficients = engine_coefficients(coefficients, profile.source, profile.gpu)
    model: CostModel = StepTimeModel(coefficients)
    if eager_num_layers:
        model = eager_engine_model(model, eager_num_layers, profile.tp, profile.source)
    return sum(model.step_time_s(shape) for shape in shapes)


def _steps_at_factor(
    profile: Profile, shapes: list[BatchShape], at_real_rate: bool
) -> Callable[[float], tuple[float, ...]]:
    """The times of the steps `shapes` at any real-engine factor, without eager terms; a C++
    engine's decode step does not move."""
    features = [step_features(shape) for shape in shapes]

    def steps_time_s(factor: float) -> tuple[float, ...]:
        coefficients = profile.coefficients
        if at_real_rate:
            coefficients = real_engine_coefficients(coefficients, factor)
        model = StepTimeModel(coefficients)
        return tuple(model.features_time_s(*step) for step in features)

    return steps_time_s
