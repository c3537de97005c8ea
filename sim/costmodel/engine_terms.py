"""The real-engine terms on top of a kernel-derived or roofline step model (docs/cost_model.md
§5.7, §5.8).

Measured prefill steps run 1.1-1.7x the sum of their kernels on every real source prefixsim has
(what the kernel tables time in isolation leaves out: kernels back to back at sustained clocks,
as C++ engines show too, and a Python engine's eager launches, input preparation and sampling),
while the decode steps of CUDA-graph vLLM servers match it. One factor per GPU scales the
compute-bound coefficients (per token, per attention pair) and moves the knee T* so that the
weight-streaming floor b1 * T*, and every step below the knee (decode batches included), stays as
the kernels say. It is fitted to real end-to-end
measurements, never to kernel tables.

An engine without CUDA graphs (vLLM before 0.2.5, `--enforce-eager`) launches every layer's
kernels from Python in every decode step too; the host time of those launches that the GPU work
does not hide is a fixed time per decoder layer, added to decode-only steps of such engines. It is
fitted to published eager vs CUDA-graph step times and eager engines' decode steps. Such an engine
also works on every decoding sequence on the host, in series with the GPU: a time per sequence
(sim/costmodel/sequence_host.py), added to the same steps. Its prefill
steps cannot finish before the host has issued every layer: a floor of a host time per layer under
them (the longer of the two), fitted to eager engines' prefill steps.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import yaml

from sim.costmodel.batch import BatchShape, count_decodes
from sim.costmodel.model import CostModel, StepCoefficients
from sim.costmodel.sequence_host import SequenceHostTerm

ENGINE_TERMS_PATH = Path(__file__).parent / "data" / "engine_terms.yaml"
# Profile sources the factor applies to: models of kernels alone. Calibrated profiles are fitted
# to a real engine already.
KERNEL_ONLY_SOURCES = ("kernel-derived", "roofline")
# The factors tried when fitting: a real engine is not faster than its kernels.
FACTOR_GRID = np.round(np.arange(1.0, 3.0005, 0.005), 3)


@dataclass(frozen=True, slots=True)
class EngineTerms:
    """Prefill compute factors per GPU key; `pooled` (fitted on every GPU's rows together) for
    GPUs without real measurements; the eager engines' host time per layer and per decoding
    sequence in a decode step, and their floor per layer under a prefill step."""

    factors: dict[str, float]
    pooled: float
    provenance: str
    eager_host_per_layer_s: float
    eager_provenance: str
    eager_prefill_floor_per_layer_s: float
    eager_prefill_floor_provenance: str
    eager_sequence_host: SequenceHostTerm
    eager_sequence_host_provenance: str

    def factor(self, gpu_key: str) -> float:
        return self.factors.get(gpu_key, self.pooled)


@functools.cache
def load_engine_terms() -> EngineTerms:
    """The shipped terms and where they came from."""
    document = yaml.safe_load(ENGINE_TERMS_PATH.read_text())
    factors = {str(gpu): float(value) for gpu, value in document["per_gpu"].items()}
    eager, floor = document["eager_host"], document["eager_prefill_floor"]
    sequences = document["eager_sequence_host"]
    return EngineTerms(
        factors,
        float(document["pooled"]),
        str(document["provenance"]),
        float(eager["per_layer_s"]),
        str(eager["provenance"]),
        float(floor["per_layer_s"]),
        str(floor["provenance"]),
        SequenceHostTerm(float(sequences["per_sequence_s"]), float(sequences["per_tp_doubling_s"])),
        str(sequences["provenance"]),
    )


def real_engine_coefficients(coefficients: StepCoefficients, factor: float) -> StepCoefficients:
    """`coefficients` with compute-bound work `factor` times slower and the weight-streaming
    floor b1 * T* unchanged."""
    return replace(
        coefficients,
        per_token_s=coefficients.per_token_s * factor,
        t_star_tokens=round(coefficients.t_star_tokens / factor),
        per_attention_pair_s=coefficients.per_attention_pair_s * factor,
    )


def engine_coefficients(
    coefficients: StepCoefficients, profile_source: str, gpu_key: str
) -> StepCoefficients:
    """The coefficients a run uses: kernel-only profiles get the shipped real-engine factor of
    their GPU."""
    if profile_source not in KERNEL_ONLY_SOURCES:
        return coefficients
    return real_engine_coefficients(coefficients, load_engine_terms().factor(gpu_key))


class EagerEngineModel:
    """A step model of an engine without CUDA graphs: decode-only steps add the host time of
    launching `num_layers` layers from Python and `per_sequence_s` per decoding sequence; a step
    with a prefill chunk takes the longer of `inner`'s time (every engine the factor was fitted
    on runs prefill eagerly) and the host's floor of `num_layers` x `prefill_floor_per_layer_s`."""

    __slots__ = ("inner", "decode_host_s", "per_sequence_s", "prefill_floor_s")

    def __init__(
        self,
        inner: CostModel,
        num_layers: int,
        per_layer_s: float,
        prefill_floor_per_layer_s: float,
        per_sequence_s: float,
    ) -> None:
        self.inner = inner
        self.decode_host_s = num_layers * per_layer_s
        self.per_sequence_s = per_sequence_s
        self.prefill_floor_s = num_layers * prefill_floor_per_layer_s

    def step_time_s(self, batch: BatchShape) -> float:
        step_s = self.inner.step_time_s(batch)
        if batch.prefill_new_tokens:
            return max(step_s, self.prefill_floor_s)
        return step_s + self.decode_host_s + self.per_sequence_s * count_decodes(batch)


def eager_sequence_host_s(batch: BatchShape, tp: int) -> float:
    """The shipped host time of `batch`'s decoding sequences in an eager engine's step at `tp`."""
    return load_engine_terms().eager_sequence_host.at_tp(tp) * count_decodes(batch)


def eager_engine_model(
    inner: CostModel, num_layers: int, tp: int, profile_source: str
) -> CostModel:
    """`inner` as an engine without CUDA graphs runs it at tensor parallelism `tp`: kernel-only
    models get the shipped host times per layer and per decoding sequence on decode steps and the
    shipped floor under prefill steps; calibrated models are fitted to their engine already."""
    if profile_source not in KERNEL_ONLY_SOURCES:
        return inner
    terms = load_engine_terms()
    return EagerEngineModel(
        inner,
        num_layers,
        terms.eager_host_per_layer_s,
        terms.eager_prefill_floor_per_layer_s,
        terms.eager_sequence_host.at_tp(tp),
    )


@dataclass(frozen=True, slots=True)
class EagerFitRow:
    """A decode step of an engine without CUDA graphs: `base_s` is the step without host
    launches (the same step measured with CUDA graphs, or the CUDA-graph model's prediction)."""

    base_s: float
    num_layers: int
    measured_s: float


def fit_eager_host_per_layer_s(rows: Sequence[EagerFitRow]) -> float:
    """The host time per layer c >= 0 minimising sum(((base + layers * c) / measured - 1)^2),
    in closed form."""
    assert rows, "no rows to fit"
    measured = np.array([row.measured_s for row in rows])
    layers = np.array([row.num_layers for row in rows], dtype=float)
    base = np.array([row.base_s for row in rows])
    weights = 1.0 / measured**2
    return max(
        0.0, float(np.sum(weights * layers * (measured - base)) / np.sum(weights * layers**2))
    )


@dataclass(frozen=True, slots=True)
class FloorFitRow:
    """A measurement of an engine without CUDA graphs spanning prefill steps: `steps_s` are the
    steps' predicted times without the floor, `num_layers` the layers the host launches in each."""

    steps_s: tuple[float, ...]
    num_layers: int
    measured_s: float


# Floors per layer tried when fitting: 1 us steps up to 2 ms (0.8 ms fits the slowest host seen).
FLOOR_GRID_S = np.arange(0, 2001) * 1e-6


def fit_prefill_floor_per_layer_s(rows: Sequence[FloorFitRow]) -> float:
    """The floor per layer h on FLOOR_GRID_S minimising sum((sum_i max(step_i, layers * h) /
    measured - 1)^2): rows whose steps all outlast the floor do not move it."""
    assert rows, "no rows to fit"
    losses = np.zeros(len(FLOOR_GRID_S))
    for row in rows:
        floors = row.num_layers * FLOOR_GRID_S
        predicted = sum(np.maximum(step_s, floors) for step_s in row.steps_s)
        losses += (predicted / row.measured_s - 1) ** 2
    # The smallest floor among equal losses: a floor no row binds is none.
    return float(FLOOR_GRID_S[int(np.argmin(losses))])


@dataclass(frozen=True, slots=True)
class FitRow:
    """One real measurement as a function of the factor: `engine_s(factor)` is the predicted
    engine time; rows measured through a serving front end add its request_s once."""

    gpu_key: str
    engine_s: Callable[[float], float]
    measured_s: float
    through_frontend: bool


@dataclass(frozen=True, slots=True)
class EngineFit:
    factors: dict[str, float]  # per GPU key with rows
    pooled: float  # one factor for every row
    request_s: float | None  # None: no row went through a front end

    def factor(self, gpu_key: str) -> float:
        return self.factors.get(gpu_key, self.pooled)


# A GPU gets its own factor from this many fitted rows on; fewer, and it takes the pooled one.
MIN_ROWS_PER_GPU = 10
# Rounds of alternating the per-GPU factors and request_s; the fit settles within a few.
_ROUNDS = 6


def fit_engine_terms(rows: Sequence[FitRow], request_s: float | None = None) -> EngineFit:
    """The pooled factor (with request_s), then per-GPU factors (GPUs with MIN_ROWS_PER_GPU rows
    or more) alternating with request_s, each minimising the squared relative error; a given
    `request_s` is held fixed instead of fitted."""
    assert rows, "no rows to fit"
    pooled, fitted_request_s = _best_factor(rows, request_s)
    by_gpu: dict[str, list[FitRow]] = {}
    for row in rows:
        by_gpu.setdefault(row.gpu_key, []).append(row)
    own = {gpu: group for gpu, group in by_gpu.items() if len(group) >= MIN_ROWS_PER_GPU}
    fit = EngineFit({}, pooled, fitted_request_s)
    for _ in range(_ROUNDS):
        factors = {gpu: _best_factor(group, fit.request_s)[0] for gpu, group in own.items()}
        if request_s is None:
            fitted_request_s = _request_s(rows, EngineFit(factors, pooled, None))
        fit = EngineFit(factors, pooled, fitted_request_s)
    return fit


def _best_factor(rows: Sequence[FitRow], request_s: float | None) -> tuple[float, float | None]:
    """The factor on FACTOR_GRID with the least loss over `rows`, and the request_s used with it
    (`request_s` itself, or fitted at each factor when None)."""
    measured = np.array([row.measured_s for row in rows])
    served = np.array([row.through_frontend for row in rows])
    best: tuple[float, float, float | None] = (np.inf, 1.0, request_s)
    for factor in FACTOR_GRID:
        predicted = np.array([row.engine_s(float(factor)) for row in rows])
        offset = request_s
        if offset is None and served.any():
            offset = best_offset_s(predicted[served], measured[served])
        loss = float(
            np.sum(((predicted + np.where(served, offset or 0.0, 0.0)) / measured - 1) ** 2)
        )
        if loss < best[0]:
            best = (loss, float(factor), offset)
    return best[1], best[2]


def _request_s(rows: Sequence[FitRow], fit: EngineFit) -> float | None:
    """request_s at `fit`'s factors; None without served rows."""
    served = [row for row in rows if row.through_frontend]
    if not served:
        return None
    predicted = np.array([row.engine_s(fit.factor(row.gpu_key)) for row in served])
    return best_offset_s(predicted, np.array([row.measured_s for row in served]))


def best_offset_s(predicted_s: np.ndarray, measured_s: np.ndarray) -> float:
    """The constant r >= 0 minimising sum(((predicted + r) / measured - 1)^2)."""
    weights = 1.0 / measured_s**2
    return max(0.0, float(np.sum((measured_s - predicted_s) * weights) / np.sum(weights)))
