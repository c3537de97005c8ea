"""A workload: a generator config, an arrival process, a bound, a seed and a token mode.

Iterating a Workload yields RequestSpec lazily and deterministically. Arrivals come in time
order; a session's turns are yielded together right after its first turn (later turns carry
`arrival_at=None` and are released by the engine), so first turns and open-loop requests are
in non-decreasing `arrival_at` order. The arrival, content and tag streams are separate
children of the seed, and none depends on engine settings, layout or token mode: variants
that differ only there see the same requests (paired).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from itertools import islice, takewhile

import numpy as np

from workloads.arrivals import (
    ArrivalProcess,
    GammaArrivals,
    PiecewiseRateArrivals,
    PoissonArrivals,
    TraceArrivals,
)
from workloads.errors import WorkloadError
from workloads.generators.builders import SourceConfig, make_builder, source_config_problem
from workloads.generators.kind import build_arrivals
from workloads.prompt import TokenMode
from workloads.spec import RequestSpec
from workloads.synthetic_tokens import DEFAULT_VOCAB_SIZE, SyntheticTokens
from workloads.text_tokens import TextTokens
from workloads.validation import require_choice, require_int, require_number

TOKEN_MODES = ("synthetic", "text")
# Arrivals built together (sessions' tokens are made in one pass): enough to spread numpy's
# per-call cost, few enough that a workload read only in part builds little it does not use.
ARRIVALS_PER_BATCH = 64


@dataclass(slots=True, frozen=True)
class TokenConfig:
    """Token mode: "synthetic" (ids per content identity) or "text" (cl100k through a template)."""

    mode: str = "synthetic"
    chat_template: str = "chatml"
    vocab_size: int = DEFAULT_VOCAB_SIZE

    def __post_init__(self) -> None:
        require_choice("TokenConfig", "mode", self.mode, TOKEN_MODES)
        require_int("TokenConfig", "vocab_size", self.vocab_size, 2)

    def build(self) -> TokenMode:
        """A fresh token mode (each holds its own bounded caches)."""
        if self.mode == "text":
            return TextTokens(self.chat_template)
        return SyntheticTokens(self.vocab_size)


@dataclass(slots=True, frozen=True)
class Workload:
    """An iterable of RequestSpec; stops after `num_arrivals` arrivals or at `until_s`."""

    source: SourceConfig
    arrivals: ArrivalProcess
    num_arrivals: int | None = None
    until_s: float | None = None
    seed: int = 0
    tokens: TokenConfig = field(default_factory=TokenConfig)

    def __post_init__(self) -> None:
        problem = source_config_problem("Workload.source", self.source)
        if problem is not None:
            raise problem
        if not isinstance(
            self.arrivals, PoissonArrivals | GammaArrivals | PiecewiseRateArrivals | TraceArrivals
        ):
            raise WorkloadError(
                f"Workload.arrivals: {self.arrivals!r} is not allowed; use PoissonArrivals, "
                "GammaArrivals, PiecewiseRateArrivals or TraceArrivals"
            )
        if self.num_arrivals is not None:
            require_int("Workload", "num_arrivals", self.num_arrivals, 1)
        if self.until_s is not None:
            require_number("Workload", "until_s", self.until_s, 0.0, exclusive=True)
        require_int("Workload", "seed", self.seed, 0)
        finite = isinstance(self.arrivals, TraceArrivals) or (
            isinstance(self.arrivals, PiecewiseRateArrivals) and not self.arrivals.repeat
        )
        if self.num_arrivals is None and self.until_s is None and not finite:
            raise WorkloadError(
                "Workload: the arrival process never ends; set num_arrivals or until_s"
            )

    def __iter__(self) -> Iterator[RequestSpec]:
        return generate(
            self.source,
            self.arrivals,
            num_arrivals=self.num_arrivals,
            until_s=self.until_s,
            rng=np.random.default_rng(self.seed),
            tokens=self.tokens.build(),
        )


def generate(
    source: SourceConfig,
    arrivals: ArrivalProcess,
    *,
    num_arrivals: int | None,
    until_s: float | None,
    rng: np.random.Generator,
    tokens: TokenMode,
) -> Iterator[RequestSpec]:
    """Stream the requests of `source` at `arrivals`; `rng` seeds three child streams."""
    arrival_rng, content_rng, tags_rng = rng.spawn(3)
    builder = make_builder(source, content_rng, tags_rng, tokens)

    def in_bounds(arrival: tuple[int, float]) -> bool:
        index, arrival_at = arrival
        return (num_arrivals is None or index < num_arrivals) and (
            until_s is None or arrival_at < until_s
        )

    bounded = takewhile(in_bounds, enumerate(arrivals.arrival_times(arrival_rng)))
    # Arrivals are built a batch at a time: their tokens are made in one pass.
    while batch := list(islice(bounded, ARRIVALS_PER_BATCH)):
        for specs in build_arrivals(builder, batch):
            yield from specs
