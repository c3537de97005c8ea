"""What a trace format provides: a reader of request specs and the trace's arrival times."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Protocol

from workloads.spec import RequestSpec
from workloads.synthetic_tokens import SyntheticTokens


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
