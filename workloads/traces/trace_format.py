"""What a trace format provides: a reader of request specs and the trace's arrival times."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Protocol

from workloads.spec import RequestSpec
from workloads.synthetic_tokens import SyntheticTokens


class _TimedRecord(Protocol):
    @property
    def arrival_s(self) -> float: ...


def arrival_times_of(
    iter_records: Callable[[str | os.PathLike[str]], Iterator[_TimedRecord]],
) -> Callable[[str | os.PathLike[str]], Iterator[float]]:
    """Arrival times from a reader of records that carry `arrival_s` (in file order)."""
    return lambda path: (record.arrival_s for record in iter_records(path))


class TraceReader(Protocol):
    """The options every trace reader takes (readers may add their own, with defaults)."""

    def __call__(
        self,
        path: str | os.PathLike[str],
        *,
        namespace: str | None = None,
        speedup: float = 1.0,
        max_requests: int | None = None,
        tokens: SyntheticTokens | None = None,
    ) -> Iterator[RequestSpec]: ...


@dataclass(slots=True, frozen=True)
class TraceFormat:
    """One trace format: its name in scenarios and on the command line, and how to read it."""

    name: str
    summary: str  # one line for docs and --help
    read: TraceReader
    # Seconds from the trace's first request, in arrival order (trace-driven arrival processes).
    arrival_times_s: Callable[[str | os.PathLike[str]], Iterator[float]]
