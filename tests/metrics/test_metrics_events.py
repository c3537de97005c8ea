"""events.parquet: stored / hit / evicted rows with age since stored and idle time."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sim.metrics.events import EVENTS_SCHEMA, EventsWriter
from sim.metrics.records import BlockEvent

HASH_A = bytes.fromhex("00ff10")
HASH_B = bytes.fromhex("abcd")


def test_block_lifecycle_rows_with_age_and_idle(tmp_path):
    # Block 5 (hash A, 32 tokens): stored at 1.0, hit at 3.0 and 4.5, evicted at 10.0.
    # Block 9 (hash B) is stored again after its eviction, so its clock restarts.
    path = tmp_path / "events.parquet"
    writer = EventsWriter(path)
    for event in [
        BlockEvent("stored", 1.0, HASH_A, 5, 32),
        BlockEvent("stored", 2.0, HASH_B, 9, 16),
        BlockEvent("hit", 3.0, HASH_A, 5, 32),
        BlockEvent("hit", 4.5, HASH_A, 5, 32),
        BlockEvent("evicted", 6.0, HASH_B, 9, 16),
        BlockEvent("stored", 7.0, HASH_B, 9, 16),
        BlockEvent("evicted", 10.0, HASH_A, 5, 32),
    ]:
        writer.on_block_event(event)
    assert writer.num_tracked_blocks == 1  # only block 9 is still cached
    writer.close(end_at=10.0)

    rows = pq.read_table(path).to_pylist()
    assert [
        (r["at"], r["kind"], r["block_id"], r["age_since_stored_s"], r["idle_s"]) for r in rows
    ] == [
        (1.0, "stored", 5, None, None),
        (2.0, "stored", 9, None, None),
        (3.0, "hit", 5, 2.0, 2.0),
        (4.5, "hit", 5, 3.5, 1.5),
        (6.0, "evicted", 9, 4.0, 4.0),
        (7.0, "stored", 9, None, None),
        (10.0, "evicted", 5, 9.0, 5.5),
    ]
    assert rows[0]["block_hash"] == "00ff10"
    assert rows[1]["block_hash"] == "abcd"
    assert rows[0]["num_tokens"] == 32


def test_event_for_a_block_never_seen_stored_has_null_times(tmp_path):
    path = tmp_path / "events.parquet"
    writer = EventsWriter(path)
    writer.on_block_event(BlockEvent("hit", 2.0, HASH_A, 3, 16))
    writer.on_block_event(BlockEvent("evicted", 3.0, HASH_A, 3, 16))
    writer.close(end_at=3.0)
    rows = pq.read_table(path).to_pylist()
    assert [(r["age_since_stored_s"], r["idle_s"]) for r in rows] == [(None, None), (None, None)]


def test_empty_events_file_keeps_schema(tmp_path):
    path = tmp_path / "events.parquet"
    EventsWriter(path).close(end_at=0.0)
    assert pq.read_table(path).schema == EVENTS_SCHEMA


def test_unknown_kind_is_rejected(tmp_path):
    writer = EventsWriter(tmp_path / "events.parquet")
    with pytest.raises(ValueError, match="'touched' is not one of"):
        writer.on_block_event(BlockEvent("touched", 0.0, HASH_A, 1, 16))


@settings(max_examples=60, deadline=None)
@given(
    steps=st.lists(
        st.tuples(st.sampled_from(["stored", "hit", "evicted"]), st.integers(1, 6)),
        max_size=60,
    )
)
def test_tracking_stays_within_pool_and_idle_never_exceeds_age(steps):
    # Invariant: with non-decreasing times, 0 <= idle_s <= age_since_stored_s, and the writer
    # tracks at most one entry per block id of a 6-block pool.
    with tempfile.TemporaryDirectory() as out_dir:
        path = Path(out_dir) / "events.parquet"
        writer = EventsWriter(path, batch_rows=7)
        for index, (kind, block_id) in enumerate(steps):
            writer.on_block_event(BlockEvent(kind, index * 0.5, bytes([block_id]), block_id, 16))
            assert writer.num_tracked_blocks <= 6
            assert writer.sink.num_buffered_rows < 7
        writer.close(end_at=len(steps) * 0.5)
        rows = pq.read_table(path).to_pylist()
    assert len(rows) == len(steps)
    for row in rows:
        if row["age_since_stored_s"] is not None:
            assert 0.0 <= row["idle_s"] <= row["age_since_stored_s"]
