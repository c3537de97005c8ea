"""Relative-error least-squares fit of the §5.1 step-time form (cost_model.md §5.2), numpy only."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from sim.costmodel.batch import BatchShape, longest_context, step_features
from sim.costmodel.model import FeatureRanges, StepCoefficients
from sim.errors import InputError

COLUMNS = (
    "step_overhead_s",
    "per_token_s",
    "per_attention_pair_s",
    "per_kv_token_s",
    "per_decode_seq_s",
)
# Singular values below this fraction of the largest mark a column the data cannot pin down.
_RANK_TOLERANCE = 1e-7


@dataclass(frozen=True, slots=True)
class StepFeatures:
    """Features of one engine step (see `batch.step_features`), plus its longest sequence."""

    num_tokens: int
    twice_attention_pairs: int
    kv_tokens: int
    num_decodes: int
    longest_context: int | None  # unknown when only step totals were measured

    @classmethod
    def of(cls, batch: BatchShape) -> StepFeatures:
        return cls(*step_features(batch), longest_context(batch))


@dataclass(frozen=True, slots=True)
class Measurement:
    """A measured time covering one or more consecutive steps (a request's prefill chunks)."""

    steps: tuple[StepFeatures, ...]
    time_s: float
    label: str  # where it came from, e.g. "measurements.csv:7"
    kind: str = "step"  # step, request (TTFT) or decode (ITL)


@dataclass(frozen=True, slots=True)
class FitResult:
    coefficients: StepCoefficients
    fitted_columns: tuple[str, ...]  # solved from the data
    prior_columns: tuple[str, ...]  # not identifiable from the data: kept at the prior's value
    zeroed_columns: tuple[str, ...]  # came out negative, or unidentifiable without a prior
    predicted_s: tuple[float, ...]
    rms_rel_err: float
    max_rel_err: float
    covered: FeatureRanges
    unidentified_columns: tuple[str, ...] = ()  # beyond the data's rank (prior or 0 instead)


def feature_ranges(measurements: list[Measurement]) -> FeatureRanges:
    """Smallest box holding every step of every measurement.

    Steps given only as totals leave their longest sequence unknown; if no step knows it, the
    bound K + T (no sequence is longer than all KV read plus all tokens computed) stands in.
    """
    steps = [step for measurement in measurements for step in measurement.steps]
    known_longest = [s.longest_context for s in steps if s.longest_context is not None]
    longest = known_longest or [s.kv_tokens + s.num_tokens for s in steps]

    def span(values: list) -> tuple:
        return (min(values), max(values))

    return FeatureRanges(
        num_tokens=span([s.num_tokens for s in steps]),
        attention_pairs=span([s.twice_attention_pairs / 2 for s in steps]),
        kv_tokens=span([s.kv_tokens for s in steps]),
        num_decodes=span([s.num_decodes for s in steps]),
        longest_context=span(longest),
    )


def fit_step_form(
    measurements: list[Measurement],
    t_star_candidates: list[int],
    prior: StepCoefficients | None = None,
) -> FitResult:
    """Best fit over the `t_star_candidates`: non-negative coefficients minimising relative error.

    Coefficients the data cannot identify (a column of zeros, or one collinear with the others)
    take the `prior`'s value, or 0 without a prior.
    """
    if not measurements:
        raise InputError("no measurements to fit")
    if not t_star_candidates:
        raise InputError("no T* candidates to try")
    times_s = np.array([measurement.time_s for measurement in measurements])
    results = [
        _fit_with_t_star(measurements, times_s, t_star, prior)
        for t_star in sorted(set(t_star_candidates))
    ]
    return min(results, key=lambda result: result.rms_rel_err)


def design_row(steps: tuple[StepFeatures, ...], t_star: int) -> list[float]:
    """The form's five column values summed over the steps of one measurement."""
    return [
        float(len(steps)),
        float(sum(max(step.num_tokens, t_star) for step in steps)),
        sum(step.twice_attention_pairs for step in steps) / 2,
        float(sum(step.kv_tokens for step in steps)),
        float(sum(step.num_decodes for step in steps)),
    ]


def _fit_with_t_star(
    measurements: list[Measurement],
    times_s: np.ndarray,
    t_star: int,
    prior: StepCoefficients | None,
) -> FitResult:
    design = np.array([design_row(m.steps, t_star) for m in measurements])
    weighted = design / times_s[:, None]
    identifiable = _identifiable_columns(weighted)
    prior_values = (
        np.array([getattr(prior, name) for name in COLUMNS]) if prior is not None else None
    )
    values = np.zeros(len(COLUMNS))
    unidentified = [j for j in range(len(COLUMNS)) if j not in identifiable]
    if prior_values is not None:
        values[unidentified] = prior_values[unidentified]
    target = np.ones(len(times_s)) - weighted @ values
    free = list(identifiable)
    zeroed = [] if prior_values is not None else list(unidentified)
    while free:
        solution, *_ = np.linalg.lstsq(weighted[:, free], target, rcond=None)
        most_negative = int(np.argmin(solution))
        if solution[most_negative] >= 0:
            values[free] = solution
            break
        zeroed.append(free.pop(most_negative))
    predicted = design @ values
    relative_errors = predicted / times_s - 1
    coefficients = StepCoefficients(
        step_overhead_s=float(values[0]),
        per_token_s=float(values[1]),
        t_star_tokens=t_star,
        per_attention_pair_s=float(values[2]),
        per_kv_token_s=float(values[3]),
        per_decode_seq_s=float(values[4]),
    )
    return FitResult(
        coefficients=coefficients,
        fitted_columns=tuple(COLUMNS[j] for j in free),
        prior_columns=tuple(COLUMNS[j] for j in unidentified) if prior is not None else (),
        zeroed_columns=tuple(COLUMNS[j] for j in sorted(zeroed)),
        predicted_s=tuple(float(value) for value in predicted),
        rms_rel_err=float(math.sqrt(np.mean(relative_errors**2))),
        max_rel_err=float(np.max(np.abs(relative_errors))),
        covered=feature_ranges(measurements),
        unidentified_columns=tuple(COLUMNS[j] for j in unidentified),
    )


def _identifiable_columns(weighted: np.ndarray) -> list[int]:
    """Columns kept in order while each adds a direction the earlier ones do not span."""
    norms = np.linalg.norm(weighted, axis=0)
    kept: list[int] = []
    for column in range(weighted.shape[1]):
        if norms[column] == 0:
            continue
        candidate = kept + [column]
        unit_columns = weighted[:, candidate] / norms[candidate]
        singular_values = np.linalg.svd(unit_columns, compute_uv=False)
        # Fewer rows than columns give fewer singular values: the extra column is not pinned.
        full_rank = len(singular_values) == len(candidate)
        if full_rank and singular_values[-1] > _RANK_TOLERANCE * singular_values[0]:
            kept.append(column)
    return kept
