"""The step-time form of cost_model.md §5.1 and the `CostModel` protocol the engine codes against.

    step_s = b0 + b1 * max(T, T*) + b2 * S + b3 * K + b4 * B_dec

with T tokens computed, S causal attention pairs of the prefill chunks, K KV tokens read, B_dec
decode sequences (see `batch.step_features`).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, fields
from typing import Protocol

from sim.costmodel.batch import BatchShape, longest_context, step_features


class CostModel(Protocol):
    """What the engine asks of a cost model: seconds per scheduled step."""

    def step_time_s(self, batch: BatchShape) -> float: ...


class OutOfRangeWarning(UserWarning):
    """A simulated step lies outside the feature ranges a profile was fitted on."""


@dataclass(frozen=True, slots=True)
class StepCoefficients:
    """Coefficients of the §5.1 form, in seconds."""

    step_overhead_s: float  # b0
    per_token_s: float  # b1
    t_star_tokens: int  # T*: below it a step is weight-streaming bound
    per_attention_pair_s: float  # b2
    per_kv_token_s: float  # b3
    per_decode_seq_s: float  # b4


@dataclass(frozen=True, slots=True)
class FeatureRanges:
    """Inclusive (min, max) of each step feature seen when a profile was fitted."""

    num_tokens: tuple[float, float]
    attention_pairs: tuple[float, float]
    kv_tokens: tuple[float, float]
    num_decodes: tuple[float, float]
    longest_context: tuple[float, float]

    def violations(
        self,
        num_tokens: int,
        twice_attention_pairs: int,
        kv_tokens: int,
        num_decodes: int,
        longest: int,
    ) -> list[str]:
        """'feature=value not in [min, max]' for every feature outside its range."""
        values = {
            "num_tokens": num_tokens,
            "attention_pairs": twice_attention_pairs / 2,
            "kv_tokens": kv_tokens,
            "num_decodes": num_decodes,
            "longest_context": longest,
        }
        messages = []
        for feature in fields(self):
            low, high = getattr(self, feature.name)
            value = values[feature.name]
            if not low <= value <= high:
                messages.append(f"{feature.name}={value:g} not in [{low:g}, {high:g}]")
        return messages


class StepTimeModel:
    """The §5.1 form; warns once when asked about a step outside `covered` (if given)."""

    __slots__ = ("coefficients", "covered", "label", "_half_pair_s", "_warned")

    def __init__(
        self,
        coefficients: StepCoefficients,
        *,
        covered: FeatureRanges | None = None,
        label: str = "cost model",
    ) -> None:
        self.coefficients = coefficients
        self.covered = covered
        self.label = label
        self._half_pair_s = coefficients.per_attention_pair_s * 0.5
        self._warned = covered is None

    def step_time_s(self, batch: BatchShape) -> float:
        num_tokens, twice_pairs, kv_tokens, num_decodes = step_features(batch)
        if not self._warned:
            self._check_range(
                num_tokens, twice_pairs, kv_tokens, num_decodes, longest_context(batch)
            )
        return self.features_time_s(num_tokens, twice_pairs, kv_tokens, num_decodes)

    def features_time_s(
        self, num_tokens: int, twice_pairs: int, kv_tokens: int, num_decodes: int
    ) -> float:
        """Seconds of a step with these `step_features` (for callers that reuse them)."""
        c = self.coefficients
        return (
            c.step_overhead_s
            + c.per_token_s * max(num_tokens, c.t_star_tokens)
            + self._half_pair_s * twice_pairs
            + c.per_kv_token_s * kv_tokens
            + c.per_decode_seq_s * num_decodes
        )

    def _check_range(
        self, num_tokens: int, twice_pairs: int, kv_tokens: int, num_decodes: int, longest: int
    ) -> None:
        problems = (
            self.covered.violations(num_tokens, twice_pairs, kv_tokens, num_decodes, longest)
            if self.covered is not None
            else []
        )
        if problems:
            self._warned = True
            warnings.warn(
                f"{self.label}: step outside the range it was fitted on "
                f"({'; '.join(problems)}); the prediction is an extrapolation "
                "(warned once per model)",
                OutOfRangeWarning,
                stacklevel=3,
            )
