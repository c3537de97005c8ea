"""Shipped profiles against held-out kernel layer-sum shapes and real measurements: Splitwise's
prefill/decode iterations, published TTFTs, published eager vs CUDA-graph decode steps and vLLM
serving runs replayed by a layer above (`prefixsim costmodel validate`)."""

from __future__ import annotations

import csv
import functools
import statistics
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from sim.costmodel.batch import BatchShape, longest_context, step_features
from sim.costmodel.derive import SHIPPED_COMBINATIONS, kernel_reference, t_star_candidates
from sim.costmodel.engine_terms import (
    EagerFitRow,
    EngineFit,
    FitRow,
    FloorFitRow,
    best_offset_s,
    eager_engine_model,
    eager_sequence_host_s,
    engine_coefficients,
    fit_eager_host_per_layer_s,
    fit_engine_terms,
    fit_prefill_floor_per_layer_s,
    load_engine_terms,
    real_engine_coefficients,
)
from sim.costmodel.fit import Measurement, StepFeatures, fit_step_form
from sim.costmodel.model import CostModel, StepCoefficients, StepTimeModel
from sim.costmodel.profiles import Profile, load_profile, shipped_profile_path
from sim.costmodel.roofline import roofline_coefficients, roofline_profile
from sim.costmodel.sequence_host import (
    SequenceHostTerm,
    SetupGrowth,
    fit_sequence_host_term,
    setup_growths,
)
from sim.costmodel.shapes import held_out_shapes
from sim.costmodel.specs import get_gpu, get_model

DATA_DIR = Path(__file__).parent / "data"
SPLITWISE_CSV = DATA_DIR / "splitwise" / "perf_model.csv"
PUBLISHED_CSV = DATA_DIR / "published" / "published_ttft.csv"
EAGER_PAIRS_CSV = DATA_DIR / "eager" / "eager_vs_graph.csv"
EAGER_TP_SWEEP_CSV = DATA_DIR / "eager" / "eager_tp_sweep.csv"

KERNEL_SOURCE = "kernel tables (model vs its own training tables, not validation)"
LOSO_SUFFIX = " (leave-one-source-out)"
# No other source measures a serving front end, so its request_s is fitted on the source's own
# other setups (GPU, model, TP) when the serving runs are held out.
SERVED_LOSO_SUFFIX = " (leave-one-source-out; front end leave-one-setup-out)"
SPLITWISE_PREFILL_SOURCE = "Splitwise prefill"
SPLITWISE_DECODE_SOURCE = "Splitwise decode"
SPLITWISE_REFIT_SOURCE = "Splitwise, form refitted (2-fold)"
# The validation target: leave-one-source-out MAPE within 10 % on every real source with at
# least 20 rows.
TARGET_MAPE = 0.10
TARGET_MIN_ROWS = 20
PUBLISHED_SPLITWISE_SOURCE = "published TTFT (Splitwise rows)"
PUBLISHED_OTHER_SOURCE = "published TTFT (other rows)"
EAGER_PAIRS_SOURCE = "eager vs CUDA-graph decode steps"
EAGER_TP_SWEEP_SOURCE = "eager decode steps at TP 1-4 (TGI 1.2)"

# Splitwise rows that do not measure what their columns say: at TP2 and 512-token prompts the
# batch-64 prefill takes 0.8 s (A100) against 6.5 s at batch 32 (weights leave ~8 GiB per GPU, too
# little for 64 prompts), so these rows are left out with that reason.
SPLITWISE_ANOMALIES = {
    ("llama2-70b", 2, 512, 64): "batch-64 prefill is 8x faster than batch 32: not a full prefill",
}
SPLITWISE_GPUS = {"a100-80gb": "a100", "h100-80gb": "h100"}
# The power-capped H100 runs prefill up to 1.9x slower than the same runs uncapped; no GPU spec
# models a power cap, so they are not an H100 prediction.
POWER_CAPPED = "power-capped H100: no GPU spec models the cap (prefill up to 1.9x slower)"
SPLITWISE_HARDWARE_LEFT_OUT = {"h100-80gb-pcap": POWER_CAPPED}
SPLITWISE_MODELS = {"llama2-70b": "llama-2-70b", "bloom-176b": "bloom-176b"}
# Published rows by (gpu, model) exactly as written in the CSV: the shipped GPU and model that
# stand for them, or why none can.
PUBLISHED_SETUPS: dict[tuple[str, str], tuple[str, str] | str] = {
    ("A100-80GB (DGX-A100)", "BLOOM-176B"): ("a100", "bloom-176b"),
    ("H100-80GB (DGX-H100)", "BLOOM-176B"): ("h100", "bloom-176b"),
    ("H100-80GB power-capped (DGX-H100)", "BLOOM-176B"): POWER_CAPPED,
    ("A100-80GB (DGX-A100)", "Llama-2-70B"): ("a100", "llama-2-70b"),
    ("H100-80GB (DGX-H100)", "Llama-2-70B"): ("h100", "llama-2-70b"),
    ("H100-80GB power-capped (DGX-H100)", "Llama-2-70B"): POWER_CAPPED,
    (
        "A100-80GB SXM",
        "Llama-3.1-Nemotron-Safety-Guard-Multilingual-8B-V1 (Llama-3.1-8B architecture)",
    ): ("a100", "llama-3.1-8b"),
    # GH200's GPU is an H100 die with HBM3 at 4 TB/s; H200 (same die, 4.8 TB/s) is the closest.
    (
        "GH200 480GB (Hopper GPU)",
        "Llama-3.1-Nemotron-Safety-Guard-8B (Llama-3.1-8B architecture)",
    ): ("h200", "llama-3.1-8b"),
    ("A100-80GB", "Llama-3-8B"): ("a100", "llama-3.1-8b"),
    ("H100-80GB x2", "Llama-3.3-70B-Instruct"): "fp8 weights; the profiles are bf16",
    ("GH200 NVL32 (32 GPUs)", "Llama-3.1-70B"): "32-GPU TensorRT-LLM system; no profile",
    ("GH200 NVL32 (32 GPUs)", "Llama-3.1-405B"): "32-GPU TensorRT-LLM system; no profile",
}


@dataclass(frozen=True, slots=True)
class ValidationRecord:
    source: str
    profile: str
    case: str  # what was run, e.g. "prefill 8x512" or the held-out shape
    measured_s: float
    predicted_s: float
    table_predicted_s: float | None  # the kernel layer-sum itself, where it is not the reference
    roofline_predicted_s: float | None  # the specs-only profile of the same (gpu, model, tp)
    in_fitted_range: bool
    batch_size: int | None = None  # sequences measured together, where the source says
    # The real-engine terms a leave-one-source-out prediction was made with ("" as shipped).
    held_out_terms: str = ""

    @property
    def relative_error(self) -> float:
        return self.predicted_s / self.measured_s - 1


@dataclass(frozen=True, slots=True)
class ErrorSummary:
    """Errors of one group of records (a source, or a profile's held-out kernel shapes)."""

    name: str
    num_rows: int
    mape: float
    median_signed_error: float
    max_abs_error: float
    table_mape: float | None
    roofline_mape: float | None


@dataclass(frozen=True, slots=True)
class Exclusion:
    source: str
    case: str
    reason: str


@dataclass(frozen=True, slots=True)
class ServedMeasurement:
    """A serving run's metric replayed by a layer above: as shipped, and engine-only (front-end
    request_s 0) with the real-engine factor at 1 and at 2. Every request arrives at once and the
    factor moves only their one prefill step, so the metric is linear in the factor (up to the
    rounding of T* / factor, under 1 % of a decode step)."""

    shipped: ValidationRecord
    gpu_key: str
    setup: str  # GPU, model and TP: the front end's leave-one-setup-out group
    engine_s_at_factor_1: float
    engine_s_at_factor_2: float
    request_s_count: int  # 1 where the front end's request_s is in the metric (TTFT, E2E)
    is_ttft: bool  # a prefill measurement the factor and request_s are fitted to

    def engine_s(self, factor: float) -> float:
        slope = self.engine_s_at_factor_2 - self.engine_s_at_factor_1
        return self.engine_s_at_factor_1 + (factor - 1) * slope


@dataclass(frozen=True, slots=True)
class RealRow:
    """A real measurement as shipped, and its prediction at any real-engine factor."""

    record: ValidationRecord
    origin: str  # rows of one origin leave together
    gpu_key: str
    engine_s: Callable[[float], float]
    request_s_count: int = 0
    setup: str = ""
    fitted: bool = False  # a prefill measurement the factor is fitted to
    # Decoder layers an engine without CUDA graphs launches from the host in this decode step (0:
    # a CUDA-graph or prefill step); every such row is fitted to the host time per layer.
    eager_layers: int = 0
    # Decoder layers an engine without CUDA graphs launches in each of this measurement's prefill
    # steps (0: not such a measurement): each step lasts at least that many layers' host floor.
    floor_layers: int = 0
    # The steps' times at a factor, where the measurement spans several (a chunked prefill);
    # None: one step, `engine_s`.
    steps_s: Callable[[float], tuple[float, ...]] | None = None

    def time_s(self, factor: float, floor_per_layer_s: float) -> float:
        """The predicted engine time at `factor`, each eager prefill step at least its floor."""
        if not self.floor_layers:
            return self.engine_s(factor)
        floor_s = self.floor_layers * floor_per_layer_s
        return sum(max(step_s, floor_s) for step_s in self._steps_at(factor))

    def _steps_at(self, factor: float) -> tuple[float, ...]:
        return self.steps_s(factor) if self.steps_s else (self.engine_s(factor),)

    def fit_row(self, floor_per_layer_s: float) -> FitRow:
        def engine_s(factor: float) -> float:
            return self.time_s(factor, floor_per_layer_s)

        return FitRow(self.gpu_key, engine_s, self.record.measured_s, self.request_s_count > 0)

    def eager_fit_row(self, fit: EngineFit) -> EagerFitRow:
        return EagerFitRow(
            self.engine_s(fit.factor(self.gpu_key)), self.eager_layers, self.record.measured_s
        )

    def floor_fit_row(self, fit: EngineFit) -> FloorFitRow:
        return FloorFitRow(
            self._steps_at(fit.factor(self.gpu_key)), self.floor_layers, self.record.measured_s
        )


@dataclass(frozen=True, slots=True)
class ValidationReport:
    records: list[ValidationRecord]
    exclusions: list[Exclusion]
    fit_on_all: EngineFit  # the real-engine factor and request_s fitted on every real source
    eager_host_per_layer_s: float  # fitted on every real source's eager decode steps
    eager_prefill_floor_per_layer_s: float  # fitted on every real source's eager prefill steps
    # Derived from Vidur's host profiles alone (no step time fitted), with its setups' growths.
    eager_sequence_host: SequenceHostTerm
    sequence_host_growths: list[SetupGrowth]

    def summaries(self, key: str = "source") -> list[ErrorSummary]:
        """Error statistics per source (or per `key`="profile" within the kernel held-out rows)."""
        groups: dict[str, list[ValidationRecord]] = defaultdict(list)
        for record in self.records:
            if key == "source":
                groups[record.source].append(record)
            elif record.source == KERNEL_SOURCE:
                groups[record.profile].append(record)
        return [_summarize(name, rows) for name, rows in groups.items()]

    def target_check(
        self, max_mape: float = TARGET_MAPE, min_rows: int = TARGET_MIN_ROWS
    ) -> list[tuple[ErrorSummary, bool]]:
        """Every real source predicted leave-one-source-out with at least `min_rows` rows, and
        whether its MAPE is within `max_mape` (the validation target)."""
        return [
            (summary, summary.mape <= max_mape)
            for summary in self.summaries()
            if summary.name.endswith((LOSO_SUFFIX, SERVED_LOSO_SUFFIX))
            and summary.num_rows >= min_rows
        ]

    def setup_summaries(self, *, held_out: bool = False) -> list[ErrorSummary]:
        """Errors per real source and cost model ("source | profile"): as shipped, or predicted
        leave-one-source-out (`held_out`); no kernel tables, no refit."""
        groups: dict[str, list[ValidationRecord]] = defaultdict(list)
        for record in self.records:
            if _in_breakdown(record, held_out):
                groups[f"{record.source} | {record.profile}"].append(record)
        return [_summarize(name, rows) for name, rows in sorted(groups.items())]

    def batch_summaries(self, *, held_out: bool = False) -> list[ErrorSummary]:
        """Errors per real source and batch size ("source | B"), as shipped or held out."""
        groups: dict[tuple[str, int], list[ValidationRecord]] = defaultdict(list)
        for record in self.records:
            if record.batch_size is None or not _in_breakdown(record, held_out):
                continue
            groups[(record.source, record.batch_size)].append(record)
        return [
            _summarize(f"{source} | {batch}", rows)
            for (source, batch), rows in sorted(groups.items())
        ]


def validate_shipped_profiles(
    served: list[ServedMeasurement] | None = None, served_exclusions: Sequence[Exclusion] = ()
) -> ValidationReport:
    """Every comparison `prefixsim costmodel validate` reports: the kernel-table check, each real
    source as shipped, and each real source predicted by the real-engine factor (and front end)
    fitted without it. `served` are real serving measurements replayed by a layer above this one
    (`served_exclusions`: those it left out, with their reasons)."""
    profiles = _shipped_profiles()
    real_rows, exclusions = _real_rows(profiles, served or [])
    exclusions += served_exclusions
    on_all = fit_real_engine_terms(real_rows)
    growths = setup_growths()
    return ValidationReport(
        _kernel_held_out_records(profiles)
        + [row.record for row in real_rows]
        + leave_one_source_out_records(real_rows)
        + _splitwise_refit_records(_splitwise_cases()[0], profiles),
        exclusions,
        on_all.fit,
        on_all.eager_host_per_layer_s,
        on_all.prefill_floor_per_layer_s,
        fit_sequence_host_term(growths),
        growths,
    )


def real_measurement_rows(served: list[ServedMeasurement]) -> list[RealRow]:
    """Every real measurement `validate_shipped_profiles` compares with, as functions of the
    real-engine factor."""
    return _real_rows(_shipped_profiles(), served)[0]


def _shipped_profiles() -> dict[tuple[str, str, int], Profile]:
    return {
        (gpu, model, tp): load_profile(shipped_profile_path(f"{gpu}/{model}/tp{tp}"))
        for gpu, model, tp in SHIPPED_COMBINATIONS
    }


def _real_rows(
    profiles: dict[tuple[str, str, int], Profile], served: list[ServedMeasurement]
) -> tuple[list[RealRow], list[Exclusion]]:
    # real_sources builds its rows with this module's RealRow, so it is imported here.
    from sim.costmodel.real_sources import engine_step_rows

    splitwise_cases, splitwise_exclusions = _splitwise_cases()
    published_rows, published_exclusions = _published_rows(profiles)
    eager_rows, eager_exclusions = eager_pair_rows()
    step_rows, step_exclusions = engine_step_rows()
    rows = (
        _splitwise_rows(splitwise_cases, profiles)
        + published_rows
        + eager_rows
        + eager_tp_sweep_rows()
        + step_rows
        + [_served_row(measurement) for measurement in served]
    )
    exclusions = splitwise_exclusions + published_exclusions + eager_exclusions + step_exclusions
    return rows, exclusions


def held_out_at_request_s(
    rows: list[RealRow], source: str, request_s: float
) -> tuple[EngineFit, ErrorSummary]:
    """`source`'s rows predicted by the factor fitted on the other sources' prefill measurements
    with the front end's request_s held at `request_s`: how much of the held-out error hangs on
    the constant the serving runs cannot tell from the factor (a diagnosis; the shipped fit
    leaves request_s free)."""
    origin = _origin(source)
    terms = fit_real_engine_terms([row for row in rows if row.origin != origin], request_s)
    fit, floor_s = terms.fit, terms.prefill_floor_per_layer_s
    held_out = [
        replace(row.record, predicted_s=row.time_s(fit.factor(row.gpu_key), floor_s))
        for row in rows
        if row.record.source == source
    ]
    return fit, _summarize(source, held_out)


@dataclass(frozen=True, slots=True)
class RealEngineTerms:
    """The real-engine terms fitted on a set of real measurements."""

    fit: EngineFit  # the prefill factors and the front end's request_s
    eager_host_per_layer_s: float
    prefill_floor_per_layer_s: float


# Rounds of fitting the factor with the floor, then the floor at the factor: the second round
# settles both (the floor binds only steps whose compute the factor barely moves).
_FLOOR_ROUNDS = 2


def fit_real_engine_terms(rows: list[RealRow], request_s: float | None = None) -> RealEngineTerms:
    """The factors (and request_s, unless given) on `rows`' prefill measurements, each eager
    prefill step at least the floor, alternating with the floor fitted at those factors; then the
    decode host time per layer at the factors."""
    floor_s = 0.0
    for _ in range(_FLOOR_ROUNDS):
        fit = fit_engine_terms([row.fit_row(floor_s) for row in rows if row.fitted], request_s)
        floor_s = fit_prefill_floor(rows, fit)
    return RealEngineTerms(fit, fit_eager_host(rows, fit), floor_s)


def fit_eager_host(rows: list[RealRow], fit: EngineFit) -> float:
    """The host time per layer fitted on `rows`' eager decode steps, at `fit`'s factors; 0 when
    none of them is one (nothing measures the term then)."""
    eager = [row.eager_fit_row(fit) for row in rows if row.eager_layers]
    return fit_eager_host_per_layer_s(eager) if eager else 0.0


def fit_prefill_floor(rows: list[RealRow], fit: EngineFit) -> float:
    """The floor per layer fitted on `rows`' fitted eager prefill measurements, at `fit`'s
    factors; 0 when there are none."""
    eager = [row.floor_fit_row(fit) for row in rows if row.floor_layers and row.fitted]
    return fit_prefill_floor_per_layer_s(eager) if eager else 0.0


def _in_breakdown(record: ValidationRecord, held_out: bool) -> bool:
    if held_out:
        return bool(record.held_out_terms)
    return is_as_shipped(record.source)


def is_as_shipped(source: str) -> bool:
    """A real source compared with the shipped model itself (not a refit or a variant)."""
    return source not in (KERNEL_SOURCE, SPLITWISE_REFIT_SOURCE) and not source.endswith(
        (LOSO_SUFFIX, SERVED_LOSO_SUFFIX)
    )


def leave_one_source_out_records(rows: list[RealRow]) -> list[ValidationRecord]:
    """Each real source predicted with the real-engine terms fitted on the other sources: the
    factor on their prefill measurements (front end included where they went through one), the
    eager host time per layer on their eager decode steps."""
    records = []
    for origin in sorted({row.origin for row in rows}):
        held_out = [row for row in rows if row.origin == origin]
        fitted = fit_real_engine_terms([row for row in rows if row.origin != origin])
        fit, eager_s = fitted.fit, fitted.eager_host_per_layer_s
        floor_s = fitted.prefill_floor_per_layer_s
        served = any(row.request_s_count for row in held_out)
        # A source measured through the front end on several setups predicts each setup with
        # request_s fitted on its others; one of a single setup takes the other sources'.
        by_setup = served and len({row.setup for row in held_out if row.fitted}) > 1
        for row in held_out:
            factor = fit.factor(row.gpu_key)
            if by_setup:
                request_s = _setup_held_out_request_s(held_out, row.setup, fit)
            else:
                request_s = (fit.request_s or 0.0) if served else 0.0
            terms = f"x{factor:.3f} prefill compute"
            if row.eager_layers:
                terms += f", eager host {eager_s * 1e6:.0f} us/layer"
            if row.floor_layers:
                terms += f", eager prefill floor {floor_s * 1e6:.0f} us/layer"
            records.append(
                replace(
                    row.record,
                    source=row.record.source + (SERVED_LOSO_SUFFIX if by_setup else LOSO_SUFFIX),
                    held_out_terms=terms,
                    predicted_s=row.time_s(factor, floor_s)
                    + row.request_s_count * request_s
                    + row.eager_layers * eager_s,
                    table_predicted_s=None,
                    roofline_predicted_s=None,
                )
            )
    return records


def _setup_held_out_request_s(rows: list[RealRow], setup: str, fit: EngineFit) -> float:
    """request_s fitted to the TTFTs of the other setups' serving runs at `fit`'s factors."""
    training = [row for row in rows if row.fitted and row.setup != setup]
    predicted = np.array([row.engine_s(fit.factor(row.gpu_key)) for row in training])
    measured = np.array([row.record.measured_s for row in training])
    return best_offset_s(predicted, measured)


def _served_row(measurement: ServedMeasurement) -> RealRow:
    return RealRow(
        measurement.shipped,
        _origin(measurement.shipped.source),
        measurement.gpu_key,
        measurement.engine_s,
        measurement.request_s_count,
        measurement.setup,
        measurement.is_ttft,
    )


def _origin(source: str) -> str:
    """Sources measured on the same runs: Splitwise's medians, a serving run's three metrics."""
    if "Splitwise" in source:
        return "Splitwise"
    return source.split(":")[0]


def eager_pair_rows() -> tuple[list[RealRow], list[Exclusion]]:
    """Published decode steps of Python engines measured without and with CUDA graphs (dense
    decoders): the eager time is predicted as the CUDA-graph time plus the host time of launching
    every layer; the rest of the file is listed with its reason."""
    shipped_per_layer_s = load_engine_terms().eager_host_per_layer_s
    rows, exclusions = [], []
    with EAGER_PAIRS_CSV.open(newline="") as handle:
        for row in csv.DictReader(handle):
            case = f"{row['row']}: {row['model']} on {row['gpu']}, {row['engine']}"
            if row["fitted"] != "yes":
                exclusions.append(Exclusion(EAGER_PAIRS_SOURCE, case, row["reason_not_fitted"]))
                continue
            num_layers = int(row["num_layers"])
            graph_s = float(row["graph_ms_per_step"]) * 1e-3
            record = ValidationRecord(
                source=EAGER_PAIRS_SOURCE,
                profile=f"{row['engine']} {row['model']} tp{row['tp']}",
                case=case,
                measured_s=float(row["eager_ms_per_step"]) * 1e-3,
                predicted_s=graph_s + num_layers * shipped_per_layer_s,
                table_predicted_s=None,
                roofline_predicted_s=None,
                in_fitted_range=True,
                batch_size=int(row["batch_size"]),
            )
            rows.append(
                RealRow(
                    record,
                    EAGER_PAIRS_SOURCE,
                    gpu_key="",
                    engine_s=_measured_with_cuda_graphs(graph_s),
                    eager_layers=num_layers,
                )
            )
    return rows, exclusions


def eager_tp_sweep_rows() -> list[RealRow]:
    """Decode steps of a 2023 engine without CUDA graphs (TGI 1.2, NCCL all-reduce) at TP 1, 2
    and 4 on one model and GPU: predicted as the cost model a run would pick (roofline: no
    kernel-derived profile for the model) plus the host time of launching every layer."""
    rows = []
    with EAGER_TP_SWEEP_CSV.open(newline="") as handle:
        for row in csv.DictReader(handle):
            model = get_model(row["model_key"])
            gpu_key, tp, batch_size = row["gpu_key"], int(row["tp"]), int(row["batch_size"])
            profile = roofline_profile(get_gpu(gpu_key), model, tp)
            shape = BatchShape([], [], [int(row["decode_context_tokens"])] * batch_size)
            record = _record(
                EAGER_TP_SWEEP_SOURCE,
                profile,
                f"{row['row']}: {row['model']} on {row['gpu']} x{tp}, {row['engine']}",
                shape,
                float(row["eager_ms_per_step"]) * 1e-3,
                None,
                with_roofline=False,
                eager_num_layers=model.num_layers,
            )
            rows.append(
                RealRow(
                    replace(record, batch_size=batch_size),
                    EAGER_TP_SWEEP_SOURCE,
                    gpu_key,
                    _step_time_at_factor(
                        profile.coefficients, shape, eager_sequence_host_s(shape, tp)
                    ),
                    eager_layers=model.num_layers,
                )
            )
    return rows


def _kernel_held_out_records(
    profiles: dict[tuple[str, str, int], Profile],
) -> list[ValidationRecord]:
    shapes = held_out_shapes()
    records = []
    for (gpu, model, tp), profile in profiles.items():
        reference = kernel_reference(get_gpu(gpu), get_model(model), tp)
        records += [
            _record(
                KERNEL_SOURCE,
                profile,
                _describe(shape),
                shape,
                reference.step_time_s(shape),
                None,
                real_engine=False,
            )
            for shape in shapes
        ]
    return records


@dataclass(frozen=True, slots=True)
class _SplitwiseCase:
    setup: str  # hardware, model and tp as Splitwise names them
    gpu_key: str
    model_key: str
    tp: int
    source: str
    case: str
    shape: BatchShape
    measured_s: float
    batch_size: int


def _splitwise_cases() -> tuple[list[_SplitwiseCase], list[Exclusion]]:
    """Median prefill and decode iteration times per setup, batch, prompt and output size."""
    prompt_ms: dict[tuple, list[float]] = defaultdict(list)
    token_ms: dict[tuple, list[float]] = defaultdict(list)
    with SPLITWISE_CSV.open(newline="") as handle:
        for row in csv.DictReader(handle):
            run = (row["model"], row["hardware"], int(row["tensor_parallel"]))
            sizes = (int(row["prompt_size"]), int(row["batch_size"]), int(row["token_size"]))
            prompt_ms[run + sizes].append(float(row["prompt_time"]))
            token_ms[run + sizes].append(float(row["token_time"]))
    cases, exclusions = [], []
    for key in sorted(prompt_ms):
        model, hardware, tp, prompt_size, batch_size, token_size = key
        setup = f"{hardware} {model} tp{tp}"
        anomaly = SPLITWISE_HARDWARE_LEFT_OUT.get(hardware) or SPLITWISE_ANOMALIES.get(
            (model, tp, prompt_size, batch_size)
        )
        if anomaly is not None:
            case = f"{setup} {batch_size}x{prompt_size}"
            exclusions.append(Exclusion(SPLITWISE_PREFILL_SOURCE, case, anomaly))
            exclusions.append(Exclusion(SPLITWISE_DECODE_SOURCE, case, anomaly))
            continue
        gpu_key, model_key = SPLITWISE_GPUS[hardware], SPLITWISE_MODELS[model]
        # Decode contexts: the prompt plus, on average, half the generated tokens.
        decode_context = prompt_size + token_size // 2
        for source, case, shape, times_ms in (
            (
                SPLITWISE_PREFILL_SOURCE,
                f"{setup} prefill {batch_size}x{prompt_size}",
                BatchShape([prompt_size] * batch_size, [0] * batch_size, []),
                prompt_ms[key],
            ),
            (
                SPLITWISE_DECODE_SOURCE,
                f"{setup} decode {batch_size}x{decode_context}",
                BatchShape([], [], [decode_context] * batch_size),
                token_ms[key],
            ),
        ):
            cases.append(
                _SplitwiseCase(
                    setup,
                    gpu_key,
                    model_key,
                    tp,
                    source,
                    case,
                    shape,
                    statistics.median(times_ms) * 1e-3,
                    batch_size,
                )
            )
    return cases, exclusions


def _measured_with_cuda_graphs(graph_s: float) -> Callable[[float], float]:
    """A measured CUDA-graph step: no real-engine factor moves it."""

    def step_time_s(_factor: float) -> float:
        return graph_s

    return step_time_s


def _splitwise_rows(
    cases: list[_SplitwiseCase], profiles: dict[tuple[str, str, int], Profile]
) -> list[RealRow]:
    rows = []
    for case in cases:
        model = get_model(case.model_key)
        reference = kernel_reference(get_gpu(case.gpu_key), model, case.tp)
        profile = profiles[(case.gpu_key, case.model_key, case.tp)]
        # Splitwise's stack ran without CUDA graphs (data/splitwise/README.md): its decode steps
        # launch every layer from the host, and its prefill steps wait for the host to do so.
        is_decode = case.source == SPLITWISE_DECODE_SOURCE
        record = _record(
            case.source,
            profile,
            case.case,
            case.shape,
            case.measured_s,
            reference.step_time_s(case.shape),
            eager_num_layers=model.num_layers,
        )
        rows.append(
            RealRow(
                replace(record, batch_size=case.batch_size),
                _origin(case.source),
                case.gpu_key,
                _step_time_at_factor(
                    profile.coefficients,
                    case.shape,
                    eager_sequence_host_s(case.shape, case.tp) if is_decode else 0.0,
                ),
                fitted=not is_decode,
                eager_layers=model.num_layers if is_decode else 0,
                floor_layers=0 if is_decode else model.num_layers,
            )
        )
    return rows


def _step_time_at_factor(
    coefficients: StepCoefficients, shape: BatchShape, host_s: float = 0.0
) -> Callable[[float], float]:
    """The step time of `shape` under kernel-derived `coefficients` times a real-engine factor,
    plus `host_s` that no factor moves."""
    features = step_features(shape)

    def step_time_s(factor: float) -> float:
        model = StepTimeModel(real_engine_coefficients(coefficients, factor))
        return model.features_time_s(*features) + host_s

    return step_time_s


def _splitwise_refit_records(
    cases: list[_SplitwiseCase], profiles: dict[tuple[str, str, int], Profile]
) -> list[ValidationRecord]:
    """Can the form follow a real serving stack once refitted? Two-fold cross-validation per
    setup: fit on every other case (the shipped profile as prior), predict the rest."""
    by_setup: dict[str, list[_SplitwiseCase]] = defaultdict(list)
    for case in cases:
        by_setup[case.setup].append(case)
    records = []
    for setup, setup_cases in by_setup.items():
        # Alternate folds within prefill and within decode cases, so each fold sees both.
        fold_of = {}
        for source in (SPLITWISE_PREFILL_SOURCE, SPLITWISE_DECODE_SOURCE):
            same_source = [case for case in setup_cases if case.source == source]
            fold_of.update({case.case: index % 2 for index, case in enumerate(same_source)})
        first = setup_cases[0]
        shipped = profiles[(first.gpu_key, first.model_key, first.tp)]
        for held_out_fold in (0, 1):
            training = [
                Measurement((StepFeatures.of(case.shape),), case.measured_s, case.case)
                for case in setup_cases
                if fold_of[case.case] != held_out_fold
            ]
            fit = fit_step_form(
                training, t_star_candidates(get_gpu(first.gpu_key)), shipped.coefficients
            )
            refitted = Profile(
                name=f"{setup} refit",
                gpu=first.gpu_key,
                model=first.model_key,
                tp=first.tp,
                dtype=shipped.dtype,
                engine="Splitwise profiling stack",
                source="calibrated",
                provenance="two-fold cross-validation on Splitwise medians",
                coefficients=fit.coefficients,
                covered=fit.covered,
            )
            records += [
                _record(
                    SPLITWISE_REFIT_SOURCE,
                    refitted,
                    case.case,
                    case.shape,
                    case.measured_s,
                    None,
                    with_roofline=False,
                )
                for case in setup_cases
                if fold_of[case.case] == held_out_fold
            ]
    return records


def _published_rows(
    profiles: dict[tuple[str, str, int], Profile],
) -> tuple[list[RealRow], list[Exclusion]]:
    """Published TTFTs; the Splitwise ones repeat Splitwise's prefill medians, so only the
    others are fitted to."""
    rows, exclusions = [], []
    with PUBLISHED_CSV.open(newline="") as handle:
        for line, row in enumerate(csv.DictReader(handle), start=2):
            case = f"line {line}: {row['gpu']}, {row['model']}, {row['input_tokens']} tokens"
            setup = PUBLISHED_SETUPS[(row["gpu"], row["model"])]
            is_splitwise = "splitwise" in row["source"]
            source = PUBLISHED_SPLITWISE_SOURCE if is_splitwise else PUBLISHED_OTHER_SOURCE
            if isinstance(setup, str):
                exclusions.append(Exclusion(source, case, setup))
                continue
            gpu_key, model_key = setup
            tp = int(row["tp"])
            profile = profiles[(gpu_key, model_key, tp)]
            model = get_model(model_key)
            reference = kernel_reference(get_gpu(gpu_key), model, tp)
            # "unknown" cached tokens are taken as none cached.
            num_cached = int(row["cached_tokens"]) if row["cached_tokens"].isdigit() else 0
            prefill = BatchShape([int(row["input_tokens"]) - num_cached], [num_cached], [])
            # Splitwise's stack runs without CUDA graphs (its prefill steps have the host floor).
            eager_num_layers = model.num_layers if is_splitwise else 0
            record = _record(
                source,
                profile,
                case,
                prefill,
                float(row["value_ms"]) * 1e-3,
                reference.step_time_s(prefill),
                eager_num_layers=eager_num_layers,
            )
            rows.append(
                RealRow(
                    replace(record, batch_size=int(row["batch_size"] or 1)),
                    _origin(source),
                    gpu_key,
                    _step_time_at_factor(profile.coefficients, prefill),
                    fitted=not is_splitwise,
                    floor_layers=eager_num_layers,
                )
            )
    return rows, exclusions


def _record(
    source: str,
    profile: Profile,
    case: str,
    shape: BatchShape,
    measured_s: float,
    table_predicted_s: float | None,
    with_roofline: bool = True,
    real_engine: bool = True,
    eager_num_layers: int = 0,
) -> ValidationRecord:
    """`profile` against one measurement: as a run uses it (`real_engine`; an engine without
    CUDA graphs of `eager_num_layers` layers when that is set), or its kernel-only coefficients
    (the kernel-table comparison)."""
    in_range = profile.covered is None or not profile.covered.violations(
        *step_features(shape), longest_context(shape)
    )
    coefficients = profile.coefficients
    if real_engine:
        coefficients = engine_coefficients(coefficients, profile.source, profile.gpu)
    # Built without its covered ranges: rows outside them are flagged, not warned about.
    model = StepTimeModel(coefficients)
    roofline = _roofline_model(profile.gpu, profile.model, profile.tp, real_engine)
    return ValidationRecord(
        source=source,
        profile=profile.name,
        case=case,
        measured_s=measured_s,
        predicted_s=_as_run(model, profile.source, eager_num_layers, profile.tp).step_time_s(shape),
        table_predicted_s=table_predicted_s,
        roofline_predicted_s=(
            _as_run(roofline, "roofline", eager_num_layers, profile.tp).step_time_s(shape)
            if with_roofline
            else None
        ),
        in_fitted_range=in_range,
    )


def _as_run(model: CostModel, profile_source: str, eager_num_layers: int, tp: int) -> CostModel:
    """`model` as a run uses it: an engine without CUDA graphs of `eager_num_layers` layers at
    tensor parallelism `tp`, or with CUDA graphs when that is 0."""
    if not eager_num_layers:
        return model
    return eager_engine_model(model, eager_num_layers, tp, profile_source)


@functools.cache
def _roofline_model(gpu_key: str, model_key: str, tp: int, real_engine: bool) -> StepTimeModel:
    coefficients = roofline_coefficients(get_gpu(gpu_key), get_model(model_key), tp)
    if real_engine:
        coefficients = engine_coefficients(coefficients, "roofline", gpu_key)
    return StepTimeModel(coefficients)


def _describe(shape: BatchShape) -> str:
    parts = []
    if shape.prefill_new_tokens:
        pairs = zip(shape.prefill_new_tokens, shape.prefill_context_tokens, strict=True)
        chunks = "+".join(f"{new}@{cached}" for new, cached in pairs)
        parts.append(f"prefill {chunks}")
    if shape.decode_context_lens:
        mean_context = sum(shape.decode_context_lens) / len(shape.decode_context_lens)
        parts.append(f"decode {len(shape.decode_context_lens)}x~{mean_context:.0f}")
    return ", ".join(parts)


def _summarize(name: str, rows: list[ValidationRecord]) -> ErrorSummary:
    errors = [row.relative_error for row in rows]
    return ErrorSummary(
        name=name,
        num_rows=len(rows),
        mape=statistics.fmean(abs(error) for error in errors),
        median_signed_error=statistics.median(errors),
        max_abs_error=max(abs(error) for error in errors),
        table_mape=_mape([(row.table_predicted_s, row.measured_s) for row in rows]),
        roofline_mape=_mape([(row.roofline_predicted_s, row.measured_s) for row in rows]),
    )


def _mape(pairs: list[tuple[float | None, float]]) -> float | None:
    errors = [
        abs(predicted / measured - 1) for predicted, measured in pairs if predicted is not None
    ]
    return statistics.fmean(errors) if errors else None
