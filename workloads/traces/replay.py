"""The trace-format registry and one entry point for trace replays: pick the reader by name.

Adding a format: a module with its reader and a `TraceFormat`, and one line in `_FORMATS`.
Scenario validation, the CLI's `--format` choices and docs/trace_formats.md follow from here.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

from workloads.spec import RequestSpec
from workloads.synthetic_tokens import SyntheticTokens
from workloads.traces import azure, dynamo, mooncake
from workloads.traces.trace_format import TraceFormat
from workloads.validation import require_choice

_FORMATS = (mooncake.TRACE_FORMAT, dynamo.TRACE_FORMAT, azure.TRACE_FORMAT)

TRACE_FORMAT_REGISTRY: dict[str, TraceFormat] = {form.name: form for form in _FORMATS}
TRACE_FORMATS = tuple(TRACE_FORMAT_REGISTRY)


def get_trace_format(where: str, name: str) -> TraceFormat:
    """The registered format called `name`; a WorkloadError naming `where` otherwise."""
    require_choice(where, "trace_format", name, TRACE_FORMATS)
    return TRACE_FORMAT_REGISTRY[name]


def read_trace(
    trace_format: str,
    path: str | os.PathLike[str],
    *,
    speedup: float = 1.0,
    max_requests: int | None = None,
    namespace: str | None = None,
    tokens: SyntheticTokens | None = None,
) -> Iterator[RequestSpec]:
    """The specs of a trace in `trace_format`, with its reader's defaults for the rest."""
    reader = get_trace_format("read_trace", trace_format).read
    return reader(
        path, speedup=speedup, max_requests=max_requests, namespace=namespace, tokens=tokens
    )


def trace_format_summaries() -> str:
    """Each registered format with what it holds, for help texts and the schema."""
    return "; ".join(f"{form.name} ({form.summary})" for form in _FORMATS)
