"""The Done-when bounds of `make bench`, each on one figure of one benchmark."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from sim.bench import Figures


@dataclass(slots=True, frozen=True)
class Target:
    """`low <= value <= high` for a figure (an absent bound does not apply)."""

    description: str
    benchmark: str
    figure: str
    low: float | None = None
    high: float | None = None

    def is_met(self, value: float) -> bool:
        """Whether `value` lies within the bounds."""
        return (self.low is None or value >= self.low) and (self.high is None or value <= self.high)


TARGETS = (
    Target(
        "1 h of 20 req/s chat simulates at least 1000x faster than real time",
        "engine",
        "simulated per CPU second",
        low=1000.0,
    ),
    Target(
        "Mooncake conversation, 8 replicas: prefixsim CPU time at most Dynamo mocker's",
        "dynamo",
        "conversation native / dynamo CPU",
        high=1.0,
    ),
    Target(
        "Mooncake arXiv 1,000 requests: prefixsim CPU time at most Dynamo mocker's",
        "dynamo",
        "arxiv-1000 native / dynamo CPU",
        high=1.0,
    ),
    Target(
        "Mooncake conversation: both computed the same prefill tokens (within 0.5%)",
        "dynamo",
        "conversation prefill gap",
        high=0.5,
    ),
    Target(
        "Mooncake arXiv 1,000: both computed the same prefill tokens (within 0.5%)",
        "dynamo",
        "arxiv-1000 prefill gap",
        high=0.5,
    ),
    Target(
        "the engine benchmark's chat arrives at 20 req/s (within 5%)",
        "engine",
        "request rate (simulated)",
        low=19.0,
        high=21.0,
    ),
    Target(
        "a 1M-request replay stays under 1 GiB peak memory",
        "replay",
        "cache-only 1M peak RSS",
        high=1024.0,
    ),
    Target(
        "cache replay within 3x of the hash-only floor",
        "cache",
        "replay / hashing time",
        high=3.0,
    ),
)


def target_lines(
    results: dict[str, Figures],
    format_value: Callable[[float | int], str],
    targets: tuple[Target, ...] = TARGETS,
) -> list[str]:
    """One PASS/FAIL line per target whose benchmark ran, with the measured figure."""
    lines = []
    for target in targets:
        figures = results.get(target.benchmark)
        if figures is None:
            continue
        figure = figures.get(target.figure)
        if figure is None:
            lines.append(
                f"FAIL  {target.description}: {target.benchmark} did not report {target.figure!r}"
            )
            continue
        verdict = "PASS" if target.is_met(figure.value) else "FAIL"
        measured = f"{format_value(figure.value)} {figure.unit}".rstrip()
        lines.append(
            f"{verdict}  {target.description}: {target.benchmark} {target.figure} = {measured}"
        )
    return lines
