"""requests.parquet and steps.parquet: exact rows, typed empty files, bounded buffers."""

from __future__ import annotations

from dataclasses import fields

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from step_helpers import steps_of

from sim.metrics.parquet_sink import ParquetSink, repeated_strings
from sim.metrics.records import RequestRecord
from sim.metrics.traces import REQUESTS_SCHEMA, STEPS_SCHEMA, RequestsWriter, StepsWriter


def _record_columns() -> list[str]:
    """The requests.parquet columns that copy a RequestRecord field."""
    return [field.name for field in fields(RequestRecord) if field.name in REQUESTS_SCHEMA.names]


def test_requests_rows_hold_ids_times_counts_and_latencies(tmp_path, make_request):
    path = tmp_path / "requests.parquet"
    writer = RequestsWriter(path)
    writer.on_request_finished(
        make_request(
            request_id="chat-1",
            session_id="s1",
            tenant="acme",
            arrival_at=1.0,
            first_scheduled_at=1.5,
            first_token_at=2.25,
            finished_at=5.0,
            num_prompt_tokens=300,
            num_cached_tokens=256,
            num_computed_prefill_tokens=60,
            num_output_tokens=20,
            num_preemptions=1,
            inter_token_latencies_s=[0.25] * 18 + [0.5],
            replica=3,
        )
    )
    solo = make_request(request_id="solo")
    writer.on_request_finished(solo)
    writer.close(end_at=5.0)

    table = pq.read_table(path)
    assert table.schema == REQUESTS_SCHEMA
    assert table.to_pylist() == [
        {
            "request_id": "chat-1",
            "session_id": "s1",
            "tenant": "acme",
            "arrival_at": 1.0,
            "first_scheduled_at": 1.5,
            "first_token_at": 2.25,
            "finished_at": 5.0,
            "num_prompt_tokens": 300,
            "num_cached_tokens": 256,
            "num_computed_prefill_tokens": 60,
            "num_output_tokens": 20,
            "num_preemptions": 1,
            "ttft_s": 1.25,
            "e2e_s": 4.0,
            "queue_s": 0.5,
            "frontend_s": 0.0,
            "prefill_s": 0.75,
            "first_decode_s": 0.0,
            "decode_s": 2.75,
            "tpot_s": 2.75 / 19,  # decode time over the 19 tokens after the first
            "itl_max_s": 0.5,
            "replica": 3,
            "num_host_cached_tokens": 0,
        },
        {
            # The fixture's defaults (no session or tenant, replica 0, nothing host-cached).
            **{column: getattr(solo, column) for column in _record_columns()},
            "ttft_s": 0.5,
            "e2e_s": 2.0,
            "queue_s": 0.25,
            "frontend_s": 0.0,
            "prefill_s": 0.25,
            "first_decode_s": 0.0,
            "decode_s": 1.5,
            "tpot_s": 0.5,
            "itl_max_s": 0.5,
        },
    ]


def test_steps_rows_copy_every_step_field(tmp_path, make_step):
    path = tmp_path / "steps.parquet"
    writer = StepsWriter(path)
    step = make_step(
        step_index=4,
        started_at=0.75,
        duration_s=0.03,
        num_prefill_tokens=512,
        num_decode_tokens=7,
        num_running=8,
        num_waiting=2,
        num_free_blocks=40,
        usage=0.6,
        num_preemptions=1,
        num_queries=600,
        num_hits=96,
        num_evictions=3,
        cached_free_usage=0.25,
        replica=2,
        num_external_queries=504,
        num_external_hits=64,
    )
    writer.on_steps(steps_of(step))
    writer.close(end_at=1.0)
    assert pq.read_table(path).to_pylist() == [
        {
            "step_index": 4,
            "started_at": 0.75,
            "duration_s": 0.03,
            "num_prefill_tokens": 512,
            "num_decode_tokens": 7,
            "num_running": 8,
            "num_waiting": 2,
            "num_free_blocks": 40,
            "usage": 0.6,
            "num_preemptions": 1,
            "num_queries": 600,
            "num_hits": 96,
            "num_evictions": 3,
            "cached_free_usage": 0.25,
            "replica": 2,
            "num_external_queries": 504,
            "num_external_hits": 64,
        }
    ]


@pytest.mark.parametrize(
    ("writer_class", "file_name", "schema"),
    [
        (RequestsWriter, "requests.parquet", REQUESTS_SCHEMA),
        (StepsWriter, "steps.parquet", STEPS_SCHEMA),
    ],
)
def test_file_without_rows_still_has_typed_columns(tmp_path, writer_class, file_name, schema):
    path = tmp_path / file_name
    writer_class(path).close(end_at=0.0)
    table = pq.read_table(path)
    assert table.num_rows == 0
    assert table.schema == schema


def test_sink_writes_a_row_group_every_batch_rows_and_keeps_at_most_that_many(tmp_path):
    # batch_rows=3 and 7 rows: row groups of 3, 3 and (at close) 1.
    path = tmp_path / "numbers.parquet"
    sink = ParquetSink(path, pa.schema([("n", pa.int64())]), batch_rows=3)
    buffered_after_each_append = []
    for n in range(7):
        sink.append((n,))
        buffered_after_each_append.append(sink.num_buffered_rows)
    assert buffered_after_each_append == [1, 2, 0, 1, 2, 0, 1]
    assert sink.num_rows_written == 6
    sink.close()
    metadata = pq.read_metadata(path)
    assert metadata.num_row_groups == 3
    assert [metadata.row_group(i).num_rows for i in range(3)] == [3, 3, 1]
    assert pq.read_table(path).column("n").to_pylist() == list(range(7))


def test_extend_cuts_the_same_row_groups_as_appending_row_by_row(tmp_path):
    # batch_rows=3: extend by 2, then by 5 (crossing two batch edges) gives groups 3, 3, 1.
    path = tmp_path / "numbers.parquet"
    sink = ParquetSink(path, pa.schema([("n", pa.int64())]), batch_rows=3)
    sink.extend([(0,), (1,)])
    assert sink.num_buffered_rows == 2
    sink.extend([(n,) for n in range(2, 7)])
    assert (sink.num_rows_written, sink.num_buffered_rows) == (6, 1)
    sink.close()
    metadata = pq.read_metadata(path)
    assert [metadata.row_group(i).num_rows for i in range(3)] == [3, 3, 1]
    assert pq.read_table(path).column("n").to_pylist() == list(range(7))


def test_dictionary_columns_and_encodings_read_back_as_the_plain_schema(tmp_path):
    # Keys ["b", None, "a"] repeated twice as a dictionary column, a row appended after them
    # (cast to the dictionary), a delta-encoded counter and a byte-stream-split float with the
    # only statistics; batch 4.
    schema = pa.schema([("key", pa.string()), ("n", pa.int64()), ("at", pa.float64())])
    path = tmp_path / "keys.parquet"
    sink = ParquetSink(
        path,
        schema,
        batch_rows=4,
        column_encoding={"n": "DELTA_BINARY_PACKED", "at": "BYTE_STREAM_SPLIT"},
        dictionary_columns=("key",),
        statistics_columns=("at",),
    )
    keys = repeated_strings(["b", None, "a"], 2)
    assert (keys.dictionary.to_pylist(), keys.indices.to_pylist()) == (
        ["a", "b"],
        [1, None, 0, 1, None, 0],
    )
    sink.extend_columns(
        [keys, pa.array(range(6), pa.int64()), pa.array([0.5 * n for n in range(6)])]
    )
    sink.append(("c", 6, 3.0))
    sink.close()
    table = pq.read_table(path)
    assert table.schema == schema
    assert table.to_pydict() == {
        "key": ["b", None, "a", "b", None, "a", "c"],
        "n": list(range(7)),
        "at": [0.0, 0.5, 1.0, 1.5, 2.0, 2.5, 3.0],
    }
    first_group = pq.read_metadata(path).row_group(0)
    assert [first_group.column(i).encodings for i in range(3)] == [
        ("PLAIN", "RLE", "RLE_DICTIONARY"),
        ("RLE", "DELTA_BINARY_PACKED"),
        ("RLE", "BYTE_STREAM_SPLIT"),
    ]
    assert [first_group.column(i).is_stats_set for i in range(3)] == [False, False, True]


def test_row_of_the_wrong_width_is_refused_at_flush(tmp_path):
    sink = ParquetSink(tmp_path / "x.parquet", pa.schema([("a", pa.int64()), ("b", pa.int64())]))
    sink.append((1, 2))
    sink.append((3,))
    with pytest.raises(ValueError):
        sink.flush()


def test_writer_buffer_is_bounded_by_batch_rows(tmp_path, make_step):
    writer = StepsWriter(tmp_path / "steps.parquet", batch_rows=4)
    peak_buffered = 0
    for index in range(10):
        writer.on_steps(steps_of(make_step(step_index=index)))
        peak_buffered = max(peak_buffered, writer.sink.num_buffered_rows)
    assert peak_buffered == 3
    assert writer.sink.num_rows_written == 8
    assert writer.sink.num_buffered_rows == 2


def test_file_appears_under_its_name_only_at_close(tmp_path, make_step):
    path = tmp_path / "steps.parquet"
    writer = StepsWriter(path, batch_rows=1)
    writer.on_steps(steps_of(make_step()))
    assert not path.exists()
    assert [p.name for p in tmp_path.iterdir()] == [".steps.parquet.partial"]
    writer.close(end_at=1.0)
    assert [p.name for p in tmp_path.iterdir()] == ["steps.parquet"]


def test_batch_rows_below_one_is_rejected(tmp_path):
    with pytest.raises(ValueError, match="batch_rows must be >= 1, got 0"):
        ParquetSink(tmp_path / "x.parquet", pa.schema([("n", pa.int64())]), batch_rows=0)


def test_column_chunks_spanning_row_groups_give_the_same_file_as_rows(tmp_path):
    # batch_rows=5: chunks of 7, 3 and 11 rows make groups 5, 5, 5, 5, 1, byte for byte the
    # file that appending the 21 rows one by one writes.
    schema = pa.schema([("n", pa.int64()), ("s", pa.string())])
    rows = [(n, f"v{n % 4}") for n in range(21)]
    by_rows = ParquetSink(tmp_path / "rows.parquet", schema, batch_rows=5)
    for row in rows:
        by_rows.append(row)
    by_rows.close()
    by_chunks = ParquetSink(tmp_path / "chunks.parquet", schema, batch_rows=5)
    for start, stop in ((0, 7), (7, 10), (10, 21)):
        chunk = rows[start:stop]
        by_chunks.extend_columns([pa.array([n for n, _ in chunk]), pa.array([s for _, s in chunk])])
    assert (by_chunks.num_rows_written, by_chunks.num_buffered_rows) == (20, 1)
    by_chunks.close()
    metadata = pq.read_metadata(tmp_path / "chunks.parquet")
    assert [metadata.row_group(i).num_rows for i in range(5)] == [5, 5, 5, 5, 1]
    assert (tmp_path / "chunks.parquet").read_bytes() == (tmp_path / "rows.parquet").read_bytes()
