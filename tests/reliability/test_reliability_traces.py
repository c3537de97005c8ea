"""Trace adapters on bad files: the corpus gives located WorkloadErrors, and fuzzed files (random
bytes, and valid records with one field broken) never raise anything but WorkloadError."""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from reliability_cases import TRACE_CASES, TRACE_DIR, BadFile, trace_format

from workloads.api import WorkloadError, read_trace
from workloads.spec import RequestSpec
from workloads.traces.azure import read_azure
from workloads.traces.dynamo import read_dynamo
from workloads.traces.fields import MAX_TRACE_TOKENS
from workloads.traces.mooncake import read_mooncake

Reader = Callable[[Path], Iterator[RequestSpec]]
READERS: dict[str, Reader] = {"mooncake": read_mooncake, "dynamo": read_dynamo, "azure": read_azure}
FUZZ = settings(
    max_examples=120,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


@pytest.mark.parametrize("case", TRACE_CASES, ids=lambda case: case.id)
def test_corpus_file_raises_workload_error_at_its_line(case: BadFile):
    """read_trace over the whole file: a WorkloadError naming the file, the line and the
    problem."""
    path = TRACE_DIR / case.name
    with pytest.raises(WorkloadError) as raised:
        for _ in read_trace(trace_format(case.name), path):
            pass
    assert (raised.value.source, raised.value.line) == (str(path), case.line)
    for fragment in case.fragments:
        assert fragment in raised.value.message


@pytest.mark.parametrize("trace_format_name", sorted(READERS))
def test_a_directory_or_a_missing_file_is_refused(trace_format_name, tmp_path):
    """Each adapter given a directory, or a path to nothing: a WorkloadError naming it."""
    reader = READERS[trace_format_name]
    with pytest.raises(WorkloadError, match="is a directory; expected a trace file") as raised:
        list(reader(tmp_path))
    assert raised.value.source == str(tmp_path)
    missing = tmp_path / "missing.jsonl"
    with pytest.raises(WorkloadError, match="no such file") as raised:
        list(reader(missing))
    assert raised.value.source == str(missing)


def _consume(reader: Reader, path: Path) -> None:
    """Read every spec; the only error allowed is a one-line WorkloadError naming the file."""
    try:
        for _ in reader(path):
            pass
    except WorkloadError as error:
        assert error.source == str(path)
        assert "\n" not in str(error)


# JSON values that are wrong for any field, and numbers at and past the edges.
junk_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.sampled_from([-1, 0, MAX_TRACE_TOKENS + 1, 2**63, 2**64, -(2**63), 10**30]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=6),
)
junk = st.recursive(
    junk_scalars,
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=4), children)
    ),
    max_leaves=6,
)


@st.composite
def broken(draw, record: dict, paths: list[tuple[str, ...]]) -> dict:
    """`record` with at most one field (a path of keys) replaced by junk or removed."""
    action = draw(st.sampled_from(["keep", "replace", "remove"]))
    if action == "keep":
        return record
    path = draw(st.sampled_from(paths))
    target = record
    for key in path[:-1]:
        target = target[key]
    if action == "replace":
        target[path[-1]] = draw(junk)
    else:
        del target[path[-1]]
    return record


@st.composite
def mooncake_record(draw, timestamp_ms: int) -> dict:
    input_length = draw(st.integers(1, 2000))
    hash_ids = draw(
        st.lists(st.integers(0, 40), min_size=math.ceil(input_length / 512), max_size=4)
    )
    record = {
        "timestamp": timestamp_ms,
        "input_length": input_length,
        "output_length": draw(st.integers(1, 40)),
        "hash_ids": hash_ids,
    }
    return draw(broken(record, [(key,) for key in record]))


@st.composite
def dynamo_record(draw, received_ms: int) -> dict:
    input_tokens = draw(st.integers(1, 100))
    request = {
        "request_id": draw(st.sampled_from(["r1", "r2", "r3"])),
        "input_tokens": input_tokens,
        "output_tokens": draw(st.integers(1, 30)),
        "cached_tokens": draw(st.integers(0, input_tokens)),
        "request_received_ms": received_ms,
        "ttft_ms": draw(st.floats(0, 1000)),
        "replay": {
            "trace_block_size": 16,
            "input_length": input_tokens,
            "input_sequence_hashes": draw(
                st.lists(
                    st.integers(0, 30),
                    min_size=math.ceil(input_tokens / 16),
                    max_size=math.ceil(input_tokens / 16),
                )
            ),
        },
    }
    event = {
        "event_type": draw(st.sampled_from(["request_end", "request_end", "tool_start"])),
        "agent_context": {"session_id": draw(st.sampled_from(["s1", "s2"]))},
        "request": request,
    }
    record = {"timestamp": received_ms, "event": event}
    paths = [("event",), ("event", "event_type"), ("event", "agent_context", "session_id")]
    paths += [("event", "request", key) for key in request]
    paths += [("event", "request", "replay", key) for key in request["replay"]]
    return draw(broken(record, paths))


def _lines_text(draw, records: list[dict]) -> str:
    """JSON lines (NaN allowed, as json writes it), one of them maybe truncated or junk."""
    lines = [json.dumps(record) for record in records]
    if lines and draw(st.booleans()):
        index = draw(st.integers(0, len(lines) - 1))
        lines[index] = draw(
            st.one_of(
                st.just(lines[index][: draw(st.integers(0, len(lines[index])))]),
                st.text(max_size=20),
            )
        )
    return "\n".join(lines) + draw(st.sampled_from(["", "\n", "\n\n"]))


@st.composite
def mooncake_file(draw) -> str:
    times = sorted(draw(st.lists(st.integers(0, 5000), max_size=6)))
    if times and draw(st.booleans()):
        times.reverse()
    return _lines_text(draw, [draw(mooncake_record(time)) for time in times])


@st.composite
def dynamo_file(draw) -> str:
    times = draw(st.lists(st.integers(0, 5000), max_size=6))
    return _lines_text(draw, [draw(dynamo_record(time)) for time in times])


AZURE_HEADER = "TIMESTAMP,ContextTokens,GeneratedTokens"
moments = st.datetimes(min_value=datetime(2023, 1, 1), max_value=datetime(2024, 1, 1))
valid_count = st.integers(1, 3000).map(str)
azure_count = st.one_of(
    valid_count,
    valid_count,
    valid_count,
    st.integers(-3, 0).map(str),
    st.text(max_size=6).filter(lambda text: "\n" not in text),
)


@st.composite
def azure_file(draw) -> str:
    header = draw(st.sampled_from([AZURE_HEADER, AZURE_HEADER, "\ufeff" + AZURE_HEADER, "a,b,c"]))
    times = sorted(draw(st.lists(moments, max_size=6)))
    if times and draw(st.booleans()):
        times.reverse()
    rows = [
        ",".join([time.strftime("%Y-%m-%d %H:%M:%S.%f"), draw(azure_count), draw(azure_count)])
        for time in times
    ]
    if rows and draw(st.booleans()):
        rows[draw(st.integers(0, len(rows) - 1))] = draw(
            st.lists(azure_count, max_size=4).map(",".join)
        )
    return "\n".join([header, *rows]) + "\n"


@pytest.fixture(scope="module")
def scratch(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("trace_fuzz")


@pytest.mark.parametrize("trace_format_name", sorted(READERS))
@FUZZ
@given(data=st.binary(max_size=400))
def test_random_bytes_raise_only_workload_error(trace_format_name, data, scratch):
    """Any bytes, read by any adapter: specs or a WorkloadError, nothing else."""
    path = scratch / f"bytes.{trace_format_name}"
    path.write_bytes(data)
    _consume(READERS[trace_format_name], path)


# Each format's fuzzed files: valid records with one field broken or a line cut short.
# Mooncake lines sorted or not; Dynamo request_end events with a nested field broken; Azure CSV
# rows with random timestamps, counts, junk cells and column counts.
FUZZED_FILES = {
    "mooncake": (mooncake_file, "fuzz_mooncake.jsonl"),
    "dynamo": (dynamo_file, "fuzz_dynamo.jsonl"),
    "azure": (azure_file, "fuzz_azure.csv"),
}


@pytest.mark.parametrize("trace_format_name", sorted(FUZZED_FILES))
@FUZZ
@given(data=st.data())
def test_fuzzed_file_raises_only_workload_error(trace_format_name, data, scratch):
    """A fuzzed file of each format, read by its adapter: specs or a WorkloadError."""
    strategy, name = FUZZED_FILES[trace_format_name]
    path = scratch / name
    path.write_text(data.draw(strategy()))
    _consume(READERS[trace_format_name], path)
