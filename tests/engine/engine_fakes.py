"""A constant-time cost model, a linear one, and a collecting recorder for the engine tests.

Step times are dyadic (0.25 s) so sums of step times are exact in binary floating point and
timings can be compared with ==.
"""

from __future__ import annotations

from sim.costmodel import FeatureRanges, StepCoefficients, StepTimeModel
from sim.costmodel.batch import BatchShape, step_features
from sim.metrics import BlockEvent, NullRecorder, RequestRecord, StepColumns, StepRecord

STEP_TIME_S = 0.25

# A linear step-time model (what the compiled step loop evaluates itself).
LINEAR = StepTimeModel(
    StepCoefficients(
        step_overhead_s=0.01,
        per_token_s=0.0001,
        t_star_tokens=64,
        per_attention_pair_s=1e-9,
        per_kv_token_s=1e-7,
        per_decode_seq_s=1e-5,
    )
)


def linear_fitted_on(
    num_tokens: tuple[float, float] = (1, 100),
    longest_context: tuple[float, float] = (0, 1e9),
) -> StepTimeModel:
    """LINEAR, labelled "test profile", fitted on steps of `num_tokens` tokens and
    `longest_context` (every other feature wide open); a fresh one warns once."""
    covered = FeatureRanges(
        num_tokens=num_tokens,
        attention_pairs=(0, 1e9),
        kv_tokens=(0, 1e9),
        num_decodes=(0, 256),
        longest_context=longest_context,
    )
    return StepTimeModel(LINEAR.coefficients, covered=covered, label="test profile")


class ConstantStepCost:
    """Every engine step takes the same time, whatever the batch."""

    def __init__(self, step_time_s: float) -> None:
        self.duration_s = step_time_s

    def step_time_s(self, batch: BatchShape) -> float:
        return self.duration_s


class CollectingRecorder(NullRecorder):
    """Keeps every block event, step and finished request (requests keyed by id)."""

    def __init__(self) -> None:
        self.steps: list[StepRecord] = []
        self.requests: dict[str, RequestRecord] = {}
        self.block_events: list[BlockEvent] = []
        self.closed_at: float | None = None

    def on_block_event(self, event: BlockEvent) -> None:
        self.block_events.append(event)

    def on_steps(self, steps: StepColumns) -> None:
        self.steps.extend(steps.records())

    def on_request_finished(self, request: RequestRecord) -> None:
        self.requests[request.request_id] = request

    def close(self, end_at: float) -> None:
        self.closed_at = end_at

    @property
    def num_queries(self) -> int:
        return sum(step.num_queries for step in self.steps)

    @property
    def num_hits(self) -> int:
        return sum(step.num_hits for step in self.steps)


class TokenCountStepCost:
    """A step costs 0.25 s + 2^-12 s per token computed + 2^-16 s per KV token read (all
    dyadic, so every sum stays exact): times depend on the batch, context lengths included."""

    def step_time_s(self, batch: BatchShape) -> float:
        num_tokens, _, kv_tokens, _ = step_features(batch)
        return 0.25 + num_tokens * 2.0**-12 + kv_tokens * 2.0**-16
