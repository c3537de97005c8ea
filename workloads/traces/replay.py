"""One entry point for trace replays: pick the adapter by format name."""

from __future__ import annotations

import os
from collections.abc import Iterator

from workloads.spec import RequestSpec
from workloads.synthetic_tokens import SyntheticTokens
from workloads.traces.azure import read_azure
from workloads.traces.dynamo import read_dynamo
from workloads.traces.mooncake import read_mooncake
from workloads.validation import require_choice

TRACE_FORMATS = ("mooncake", "dynamo", "azure")


def read_trace(
    trace_format: str,
    path: str | os.PathLike[str],
    *,
    speedup: float = 1.0,
    max_requests: int | None = None,
    namespace: str | None = None,
    tokens: SyntheticTokens | None = None,
) -> Iterator[RequestSpec]:
    """The specs of a trace in `trace_format`, with each adapter's defaults for the rest."""
    require_choice("read_trace", "trace_format", trace_format, TRACE_FORMATS)
    if trace_format == "mooncake":
        reader = read_mooncake
    elif trace_format == "dynamo":
        reader = read_dynamo
    else:
        reader = read_azure
    return reader(
        path, speedup=speedup, max_requests=max_requests, namespace=namespace, tokens=tokens
    )
