"""StepColumns: StepRecord's fields as equal-length int64/float64 arrays, built from records and
turned back into the same records."""

from dataclasses import fields
from dataclasses import replace as _replace

import numpy as np
import pytest

from sim.metrics import StepColumns, StepRecord


def _record(index: int) -> StepRecord:
    return StepRecord(
        step_index=index,
        started_at=0.25 * index,
        duration_s=0.125,
        num_prefill_tokens=100 + index,
        num_decode_tokens=7,
        num_running=3,
        num_waiting=2,
        num_free_blocks=40 - index,
        usage=0.5,
        num_preemptions=0,
        num_queries=64,
        num_hits=32,
        num_evictions=1,
        replica=1,
        cached_free_usage=0.0625,
        num_external_queries=16,
        num_external_hits=8,
    )


def test_columns_have_step_record_field_names_in_order() -> None:
    assert [f.name for f in fields(StepColumns)] == [f.name for f in fields(StepRecord)]


def test_from_records_makes_typed_columns_and_round_trips() -> None:
    records = [_record(index) for index in (1, 2, 3)]
    columns = StepColumns.from_records(records)
    assert len(columns) == 3
    assert columns.step_index.dtype == np.int64
    assert columns.usage.dtype == np.float64
    assert columns.num_prefill_tokens.tolist() == [101, 102, 103]
    assert columns.started_at.tolist() == [0.25, 0.5, 0.75]
    assert columns.records() == records
    assert columns.slice(1, 3).records() == records[1:]


def test_empty_columns() -> None:
    columns = StepColumns.from_records([])
    assert len(columns) == 0
    assert columns.records() == []


def test_mismatched_column_is_rejected() -> None:
    good = StepColumns.from_records([_record(1), _record(2)])
    with pytest.raises(ValueError, match=r"StepColumns.num_hits: a 1-D int64 array of length 2"):
        StepColumns(
            **{
                f.name: np.zeros(1, dtype=np.int64)
                if f.name == "num_hits"
                else getattr(good, f.name)
                for f in fields(StepColumns)
            }
        )


def test_split_by_replica_is_right_for_each_batch_in_turn() -> None:
    # Two batches of steps on replicas 1, 0, 1 and 0, 2: each split is its own, also when the
    # first batch is split again after the second.
    first = StepColumns.from_records([_record(1), _replace(_record(2), replica=0), _record(3)])
    second = StepColumns.from_records(
        [_replace(_record(4), replica=0), _replace(_record(5), replica=2)]
    )

    def split(steps: StepColumns) -> list[tuple[int, list[int]]]:
        return [(replica, part.step_index.tolist()) for replica, part in steps.by_replica()]

    assert split(first) == [(0, [2]), (1, [1, 3])]
    assert split(second) == [(0, [4]), (2, [5])]
    assert split(first) == [(0, [2]), (1, [1, 3])]
