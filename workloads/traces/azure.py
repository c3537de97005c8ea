"""Azure LLM inference trace CSVs (2023): arrival times and token counts only.

The trace has no content hashes, so every prompt is unique tokens (no prefix sharing); use it
for arrival processes and lengths. Arrivals are seconds from the first row's timestamp.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime

from workloads.errors import WorkloadError
from workloads.spec import RequestSpec, Segment
from workloads.synthetic_tokens import SyntheticTokens
from workloads.traces.blocks import counted_trace_specs
from workloads.traces.fields import (
    MAX_TRACE_TOKENS,
    ReplayOptions,
    check_trace_path,
    open_trace,
    replay_options,
)
from workloads.traces.trace_format import TraceFormat, arrival_times_of

AZURE_HEADER = ("TIMESTAMP", "ContextTokens", "GeneratedTokens")
_SECONDS_FORMAT = "%Y-%m-%d %H:%M:%S"


@dataclass(slots=True, frozen=True)
class AzureRecord:
    """One validated CSV row; `arrival_s` is seconds after the first row."""

    line: int
    arrival_s: float
    context_tokens: int
    generated_tokens: int


def iter_azure_records(path: str | os.PathLike[str]) -> Iterator[AzureRecord]:
    """Validated rows in file order; timestamps must not decrease."""
    return _records(check_trace_path(path))


def _records(source: str) -> Iterator[AzureRecord]:
    lines = open_trace(source)
    header = next(lines, None)
    if header is None or not header[1].strip():
        raise WorkloadError("the file is empty; expected a CSV header", source=source, line=1)
    columns = tuple(column.strip() for column in header[1].lstrip("\ufeff").split(","))
    if columns != AZURE_HEADER:
        raise WorkloadError(
            f"header {','.join(columns)!r} is not {','.join(AZURE_HEADER)!r}",
            source=source,
            line=1,
        )
    start_at: datetime | None = None
    previous_s = 0.0
    found = False
    for line, text in lines:
        if not text.strip():
            continue
        fields = [field.strip() for field in text.split(",")]
        if len(fields) != len(AZURE_HEADER):
            raise WorkloadError(
                f"{len(fields)} columns; expected {len(AZURE_HEADER)}", source=source, line=line
            )
        stamp = _parse_timestamp(fields[0], source, line)
        if start_at is None:
            start_at = stamp
        arrival_s = (stamp - start_at).total_seconds()
        if arrival_s < previous_s:
            raise WorkloadError(
                f"TIMESTAMP {fields[0]!r} is earlier than the previous row; the trace must be "
                "sorted by time",
                source=source,
                line=line,
            )
        previous_s = arrival_s
        found = True
        yield AzureRecord(
            line,
            arrival_s,
            _parse_count("ContextTokens", fields[1], source, line),
            _parse_count("GeneratedTokens", fields[2], source, line),
        )
    if not found:
        raise WorkloadError("the file holds no rows after the header", source=source)


def _parse_timestamp(text: str, source: str, line: int) -> datetime:
    whole, _, fraction = text.partition(".")
    try:
        stamp = datetime.strptime(whole, _SECONDS_FORMAT)
    except ValueError:
        stamp = None
    if stamp is None or not (_is_ascii_digits(fraction) or fraction == ""):
        raise WorkloadError(
            f"TIMESTAMP {text!r} is not 'YYYY-MM-DD HH:MM:SS[.fraction]'", source=source, line=line
        )
    # The trace has 7 fractional digits; datetime keeps microseconds, which is precise enough.
    microseconds = round(int(fraction.ljust(7, "0")[:7]) / 10) if fraction else 0
    return stamp.replace(microsecond=min(microseconds, 999_999))


def _is_ascii_digits(text: str) -> bool:
    # str.isdigit() also takes digits int() refuses, such as a superscript '²'.
    return text.isascii() and text.isdigit()


def _parse_count(name: str, text: str, source: str, line: int) -> int:
    if not _is_ascii_digits(text) or not 1 <= int(text) <= MAX_TRACE_TOKENS:
        raise WorkloadError(
            f"{name}: {text!r} is not allowed; use an integer in 1..{MAX_TRACE_TOKENS}",
            source=source,
            line=line,
        )
    return int(text)


def read_azure(
    path: str | os.PathLike[str],
    *,
    namespace: str | None = None,
    speedup: float = 1.0,
    max_requests: int | None = None,
    tokens: SyntheticTokens | None = None,
) -> Iterator[RequestSpec]:
    """Open-loop specs with unique prompt and output tokens of the trace's lengths, streamed."""
    options = replay_options(path, namespace, speedup, max_requests, tokens)
    return counted_trace_specs(
        iter_azure_records(path),
        options,
        lambda index, record, _batch: _prompt(options, index, record),
        lambda record: record.generated_tokens,
    )


def _prompt(options: ReplayOptions, index: int, record: AzureRecord) -> list[Segment]:
    prompt_id = f"{options.namespace}/prompt/{index}"
    return [Segment("prompt", prompt_id, options.tokens.tokens(prompt_id, record.context_tokens))]


TRACE_FORMAT = TraceFormat(
    "azure",
    "Azure LLM inference CSV: TIMESTAMP, ContextTokens, GeneratedTokens (no prefix reuse)",
    read_azure,
    arrival_times_of(iter_azure_records),
)
