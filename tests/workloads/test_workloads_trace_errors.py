"""Malformed trace input: each error names the file, the line and the problem."""

from __future__ import annotations

import gzip
import json

import pytest

from workloads.api import WorkloadError, read_azure, read_dynamo, read_mooncake, read_trace
from workloads.arrivals import TraceArrivals

GOOD = '{"timestamp": 0, "input_length": 600, "output_length": 5, "hash_ids": [1, 2]}'


@pytest.mark.parametrize(
    ("second_line", "message"),
    [
        (
            '{"timestamp": 5, "input_length": 6',
            r"invalid JSON \(Expecting ',' delimiter at column 35\)",
        ),
        ("[1, 2]", r"expected a JSON object, got list"),
        (
            '{"timestamp": 5, "input_length": "600", "output_length": 5, "hash_ids": [1]}',
            r"input_length: '600' is not an integer",
        ),
        (
            '{"timestamp": 5, "input_length": -3, "output_length": 5, "hash_ids": []}',
            r"input_length: -3 is out of range; allowed 1\.\.16777216",
        ),
        (
            '{"timestamp": 5, "input_length": 99999999, "output_length": 5, "hash_ids": [1]}',
            r"input_length: 99999999 is out of range",
        ),
        (
            '{"timestamp": NaN, "input_length": 6, "output_length": 5, "hash_ids": [1]}',
            r"timestamp: nan is not allowed; use a finite number >= 0",
        ),
        (
            '{"timestamp": 5, "input_length": 6, "output_length": true, "hash_ids": [1]}',
            r"output_length: True is not an integer",
        ),
        (
            '{"timestamp": 5, "input_length": 6, "output_length": 5, "hash_ids": [1.5]}',
            r"hash_ids: 1.5 is not a non-negative 64-bit integer",
        ),
        (
            '{"timestamp": 5, "input_length": 600, "output_length": 5, "hash_ids": [1]}',
            r"1 block hashes for 600 tokens; expected 2 at trace block size 512",
        ),
        ('{"input_length": 6, "output_length": 5, "hash_ids": [1]}', r"missing field 'timestamp'"),
    ],
)
def test_malformed_mooncake_lines_name_file_and_line(
    tmp_path, second_line: str, message: str
) -> None:
    trace = tmp_path / "bad.jsonl"
    trace.write_text(f"{GOOD}\n{second_line}\n")
    with pytest.raises(WorkloadError, match=rf"bad\.jsonl:2: {message}") as caught:
        list(read_mooncake(trace))
    assert (caught.value.line, caught.value.source) == (2, str(trace))


def test_unsorted_mooncake_timestamps_are_rejected(tmp_path) -> None:
    trace = tmp_path / "unsorted.jsonl"
    trace.write_text(GOOD.replace('"timestamp": 0', '"timestamp": 9') + "\n" + GOOD + "\n")
    with pytest.raises(
        WorkloadError, match=r"unsorted\.jsonl:2: timestamp 0 is earlier than the previous 9"
    ):
        list(read_mooncake(trace))


def test_the_requests_before_a_bad_line_come_before_its_error(tmp_path) -> None:
    """Requests are read ahead in batches, yet the two good lines before a bad third are
    handed out before the bad line's error, as reading line by line would."""
    trace = tmp_path / "third.jsonl"
    trace.write_text(f"{GOOD}\n{GOOD}\nnot json\n")
    specs = read_mooncake(trace)
    assert [next(specs).request_id, next(specs).request_id] == ["third-0", "third-1"]
    with pytest.raises(WorkloadError, match=r"third\.jsonl:3: "):
        next(specs)


def test_empty_files_directories_and_missing_files(tmp_path) -> None:
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n\n")
    with pytest.raises(WorkloadError, match=r"empty\.jsonl: the file holds no records"):
        list(read_mooncake(empty))
    with pytest.raises(WorkloadError, match=r"is a directory; expected a trace file"):
        read_mooncake(tmp_path)
    with pytest.raises(WorkloadError, match=r"nope\.csv: no such file"):
        read_azure(tmp_path / "nope.csv")
    binary = tmp_path / "binary.jsonl"
    binary.write_bytes(GOOD.encode() + b"\n\xff\xfe\n")
    with pytest.raises(WorkloadError, match=r"binary\.jsonl:2: not UTF-8 text"):
        list(read_mooncake(binary))


def test_bad_adapter_options_name_the_option(tmp_path) -> None:
    with pytest.raises(WorkloadError, match=r"speedup: 0 is not allowed; use a finite number > 0"):
        read_mooncake(tmp_path / "x.jsonl", speedup=0)
    with pytest.raises(WorkloadError, match=r"max_requests: 0 is not allowed; use an int >= 1"):
        read_azure(tmp_path / "x.csv", max_requests=0)
    with pytest.raises(WorkloadError, match=r"read_mooncake.trace_block_size: 0 is not allowed"):
        read_mooncake(tmp_path / "x.jsonl", trace_block_size=0)


HEADER = "TIMESTAMP,ContextTokens,GeneratedTokens"


@pytest.mark.parametrize(
    ("content", "line", "message"),
    [
        ("", 1, r"the file is empty; expected a CSV header"),
        (
            "time,in,out\n",
            1,
            r"header 'time,in,out' is not 'TIMESTAMP,ContextTokens,GeneratedTokens'",
        ),
        (f"{HEADER}\n", None, r"the file holds no rows after the header"),
        (f"{HEADER}\n2023-11-16 18:15:46.68,374\n", 2, r"2 columns; expected 3"),
        (
            f"{HEADER}\n2023-13-16 18:15:46.68,374,44\n",
            2,
            r"TIMESTAMP '2023-13-16 18:15:46.68' is not 'YYYY-MM-DD HH:MM:SS\[.fraction\]'",
        ),
        (
            f"{HEADER}\n2023-11-16 18:15:46.68,-374,44\n",
            2,
            r"ContextTokens: '-374' is not allowed; use an integer in 1\.\.16777216",
        ),
        (
            f"{HEADER}\n2023-11-16 18:15:46.68,374,4.5\n",
            2,
            r"GeneratedTokens: '4.5' is not allowed",
        ),
        # A superscript passes str.isdigit() but not int(): found by the fuzzed-file test.
        (
            f"{HEADER}\n2023-11-16 18:15:46.68,374,4\u00b2\n",
            2,
            r"GeneratedTokens: '4\u00b2' is not allowed",
        ),
        (
            f"{HEADER}\n2023-11-16 18:15:46.\u00b2,374,4\n",
            2,
            r"TIMESTAMP '2023-11-16 18:15:46.\u00b2' is not 'YYYY-MM-DD HH:MM:SS\[.fraction\]'",
        ),
        (
            f"{HEADER}\n2023-11-16 18:15:47,1,1\n2023-11-16 18:15:46.5,1,1\n",
            3,
            r"TIMESTAMP '2023-11-16 18:15:46.5' is earlier than the previous row",
        ),
    ],
)
def test_malformed_azure_rows(tmp_path, content: str, line: int | None, message: str) -> None:
    trace = tmp_path / "bad.csv"
    trace.write_text(content)
    location = f"bad\\.csv:{line}: " if line is not None else "bad\\.csv: "
    with pytest.raises(WorkloadError, match=location + message):
        list(read_azure(trace))


def _dynamo_line(**request_overrides: object) -> str:
    request = {
        "request_id": "r1",
        "input_tokens": 20,
        "output_tokens": 4,
        "cached_tokens": 0,
        "request_received_ms": 1000,
        "replay": {"trace_block_size": 16, "input_length": 20, "input_sequence_hashes": [11, 12]},
    }
    request.update(request_overrides)
    event = {"event_type": "request_end", "agent_context": {"session_id": "s"}, "request": request}
    return json.dumps({"timestamp": 1, "event": event})


@pytest.mark.parametrize(
    ("line", "message"),
    [
        (_dynamo_line(cached_tokens=21), r"cached_tokens: 21 is out of range; allowed 0\.\.20"),
        (
            _dynamo_line(
                replay={"trace_block_size": 32, "input_length": 20, "input_sequence_hashes": [1]}
            ),
            r"trace_block_size: 32 differs from the expected 16",
        ),
        (
            _dynamo_line(
                replay={"trace_block_size": 16, "input_length": 20, "input_sequence_hashes": [1]}
            ),
            r"1 block hashes for 20 tokens; expected 2 at trace block size 16",
        ),
        (
            _dynamo_line(
                replay={"trace_block_size": 16, "input_length": 21, "input_sequence_hashes": [1]}
            ),
            r"input_length 21 differs from the request's input_tokens 20",
        ),
        (_dynamo_line(request_received_ms="soon"), r"request_received_ms: 'soon' is not a number"),
        ('{"timestamp": 1, "event": []}', r"event: expected an object, got list"),
        # A later schema's fields may mean other things: refused, not read as v1.
        (
            '{"timestamp": 1, "event": {"schema": "dynamo.request.trace.v2", '
            '"event_type": "request_end"}}',
            r"event.schema 'dynamo.request.trace.v2' is not the trace schema this reader knows "
            r"\(dynamo.request.trace.v1\)",
        ),
    ],
)
def test_malformed_dynamo_events(tmp_path, line: str, message: str) -> None:
    trace = tmp_path / "bad.jsonl"
    trace.write_text(_dynamo_line() + "\n" + line + "\n")
    with pytest.raises(WorkloadError, match=rf"bad\.jsonl:2: {message}"):
        list(read_dynamo(trace))


def test_dynamo_trace_without_requests_is_rejected(tmp_path) -> None:
    trace = tmp_path / "tools.jsonl"
    trace.write_text('{"timestamp": 1, "event": {"event_type": "tool_start"}}\n')
    with pytest.raises(WorkloadError, match=r"tools\.jsonl: the trace holds no request_end events"):
        list(read_dynamo(trace))
    with pytest.raises(WorkloadError, match=r"tools\.jsonl: the trace holds no request_end events"):
        list(TraceArrivals(str(trace), "dynamo").arrival_times(None))


def test_read_trace_dispatches_by_format(traces_dir) -> None:
    dynamo = list(
        read_trace("dynamo", traces_dir / "dynamo-pi-agent/pi_request_trace.jsonl", max_requests=3)
    )
    assert [spec.num_prompt_tokens for spec in dynamo] == [15, 4736, 5688]
    azure = read_trace(
        "azure", traces_dir / "azure-llm-2023/AzureLLMInferenceTrace_code.csv", speedup=2.0
    )
    assert next(azure).num_prompt_tokens == 4808
    with pytest.raises(
        WorkloadError,
        match=r"read_trace.trace_format: 'sharegpt' is not allowed; allowed: mooncake, dynamo, az",
    ):
        read_trace("sharegpt", traces_dir)


def test_a_gzipped_trace_reads_like_the_plain_file_and_keeps_its_namespace(tmp_path) -> None:
    second = '{"timestamp": 7, "input_length": 700, "output_length": 3, "hash_ids": [1, 3]}'
    plain = tmp_path / "chat.jsonl"
    plain.write_text(f"{GOOD}\n{second}\n")
    packed = tmp_path / "chat.jsonl.gz"
    packed.write_bytes(gzip.compress(plain.read_bytes()))
    # Same namespace "chat", so equal hash ids give equal token ids in both readings.
    assert list(read_mooncake(packed)) == list(read_mooncake(plain))
    assert [spec.num_prompt_tokens for spec in read_mooncake(packed)] == [600, 700]


def test_a_corrupt_gzip_trace_is_a_one_line_error(tmp_path) -> None:
    truncated = tmp_path / "cut.jsonl.gz"
    truncated.write_bytes(gzip.compress(((GOOD + "\n") * 50).encode())[:40])
    with pytest.raises(WorkloadError, match=r"cut\.jsonl\.gz:1: not a readable gzip file"):
        list(read_mooncake(truncated))
    not_gzip = tmp_path / "plain.jsonl.gz"
    not_gzip.write_text(GOOD + "\n")
    with pytest.raises(WorkloadError, match=r"plain\.jsonl\.gz:1: not a readable gzip file"):
        list(read_mooncake(not_gzip))
