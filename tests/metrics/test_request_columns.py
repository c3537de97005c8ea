"""RequestColumns: a batch of finished requests as columns, every derived latency equal to the
one RequestRecord computes for each request."""

from __future__ import annotations

import math
from array import array
from dataclasses import replace
from typing import Any

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from record_factories import build_request

from sim.metrics.records import RequestBatcher, RequestColumns, RequestRecord

TIMES = st.floats(0.0, 1e4, allow_nan=False, allow_infinity=False)
GAPS = st.lists(st.floats(0.0, 50.0, allow_nan=False, allow_infinity=False), max_size=12)


@st.composite
def requests(draw: st.DrawFn) -> RequestRecord:
    arrival_at = draw(TIMES)
    gaps = draw(GAPS)
    return build_request(
        request_id=draw(st.sampled_from(("a", "b", "ü"))),
        session_id=draw(st.none() | st.sampled_from(("a", "b", "ü"))),
        arrival_at=arrival_at,
        first_scheduled_at=arrival_at + draw(TIMES),
        first_token_at=arrival_at + draw(TIMES),
        finished_at=arrival_at + draw(TIMES),
        frontend_in_s=draw(st.floats(0.0, 0.1)),
        frontend_out_s=draw(st.floats(0.0, 0.1)),
        prefill_done_at=draw(st.none() | TIMES),
        num_prompt_tokens=draw(st.integers(1, 10**6)),
        num_output_tokens=draw(st.integers(1, 10**4)),
        num_preemptions=draw(st.integers(0, 9)),
        replica=draw(st.integers(0, 7)),
        inter_token_latencies_s=array("d", gaps) if draw(st.booleans()) else gaps,
    )


@settings(max_examples=150, deadline=None)
@given(records=st.lists(requests(), max_size=8))
def test_every_column_equals_the_records_values(records: list[RequestRecord]) -> None:
    columns = RequestColumns.from_records(records)
    assert len(columns) == len(records)
    assert columns.request_id == [record.request_id for record in records]
    assert columns.session_id == [record.session_id for record in records]
    for name in (
        "arrival_at",
        "finished_at",
        "num_prompt_tokens",
        "replica",
        "ttft_s",
        "frontend_s",
        "prefill_s",
        "first_decode_s",
        "e2e_s",
        "queue_s",
        "engine_prefill_s",
        "decode_s",
        "inference_s",
    ):
        assert getattr(columns, name).tolist() == [getattr(r, name) for r in records], name
    assert columns.has_tpot.tolist() == [record.tpot_s is not None for record in records]
    assert columns.tpot_s.tolist() == [record.tpot_s or 0.0 for record in records]
    assert columns.itl_max_s.tolist() == [record.itl_max_s or 0.0 for record in records]
    assert columns.num_gaps.tolist() == [len(r.inter_token_latencies_s) for r in records]
    gaps = [gap for record in records for gap in record.inter_token_latencies_s]
    assert columns.inter_token_latencies_s.tolist() == gaps
    sums = [math.fsum(record.inter_token_latencies_s) for record in records]
    assert columns.gap_sums_s().tolist() == sums


def test_two_requests_in_numbers() -> None:
    # r1: prefill done in its first-token step (prefill_done_at None), one token, no gap;
    # r2: 4 tokens, gaps 0.1, 0.2, 0.3 (exact sum 0.6), TPOT (3.0 - 1.5) / 3 = 0.5.
    first = build_request(
        request_id="r1", first_token_at=0.5, finished_at=0.5, num_output_tokens=1,
        inter_token_latencies_s=[],
    )  # fmt: skip
    second = build_request(
        request_id="r2", arrival_at=1.0, first_scheduled_at=1.25, first_token_at=1.5,
        finished_at=3.0, prefill_done_at=1.375, inter_token_latencies_s=array("d", [0.1, 0.2, 0.3]),
    )  # fmt: skip
    columns = RequestColumns.from_records([first, second])
    assert columns.prefill_done_at.tolist() == [0.5, 1.375]
    assert columns.ttft_s.tolist() == [0.5, 0.5]
    assert columns.prefill_s.tolist() == [0.25, 0.125]
    assert columns.first_decode_s.tolist() == [0.0, 0.125]
    assert columns.has_tpot.tolist() == [False, True]
    assert columns.tpot_s.tolist() == [0.0, 0.5]
    assert columns.itl_max_s.tolist() == [0.0, 0.3]
    assert columns.gap_sums_s().tolist() == [0.0, 0.6]
    assert np.array_equal(columns.num_gaps, [0, 3])


@settings(max_examples=100, deadline=None)
@given(records=st.lists(requests(), max_size=8))
def test_by_replica_keeps_each_replicas_requests_and_gaps_in_order(
    records: list[RequestRecord],
) -> None:
    columns = RequestColumns.from_records(records)
    split = list(columns.by_replica())
    assert [replica for replica, _ in split] == sorted({record.replica for record in records})
    for replica, part in split:
        own = [record for record in records if record.replica == replica]
        expected = RequestColumns.from_records(own)
        assert part.request_id == expected.request_id
        assert part.session_id == expected.session_id
        assert part.tenant == expected.tenant
        for name in ("arrival_at", "finished_at", "prefill_done_at", "num_gaps", "replica"):
            assert getattr(part, name).tolist() == getattr(expected, name).tolist(), name
        assert part.inter_token_latencies_s.tolist() == expected.inter_token_latencies_s.tolist()


def test_by_replica_in_numbers() -> None:
    # r1 and r3 on replica 1 (gaps 0.1 / 0.3, 0.4), r2 on replica 0 (gap 0.2).
    records = [
        build_request(request_id="r1", replica=1, inter_token_latencies_s=[0.1]),
        build_request(request_id="r2", replica=0, inter_token_latencies_s=[0.2]),
        build_request(request_id="r3", replica=1, inter_token_latencies_s=[0.3, 0.4]),
    ]
    split = list(RequestColumns.from_records(records).by_replica())
    assert [(replica, part.request_id) for replica, part in split] == [
        (0, ["r2"]),
        (1, ["r1", "r3"]),
    ]
    assert split[1][1].inter_token_latencies_s.tolist() == [0.1, 0.3, 0.4]
    assert split[1][1].num_gaps.tolist() == [1, 2]


def test_batcher_hands_over_whole_batches_in_order() -> None:
    """Batches of 2: the second of three requests fills a batch (r0, r1); the third waits and
    is taken alone; an empty batcher gives None."""
    batcher = RequestBatcher(2)
    filled = [batcher.add(build_request(request_id=f"r{index}")) for index in range(2)]
    assert filled == [False, True]
    first = batcher.take()
    assert first is not None and first.request_id == ["r0", "r1"]
    assert batcher.add(build_request(request_id="r2", num_output_tokens=7)) is False
    second = batcher.take()
    assert second is not None and second.request_id == ["r2"]
    assert second.num_output_tokens.tolist() == [7]
    assert batcher.take() is None


@st.composite
def engine_records(draw: st.DrawFn) -> RequestRecord:
    """A record as request_record makes one: without a front end (out 0 s, prefill_done_at
    None) or with one (out > 0 s, prefill_done_at the engine's first-token time); gaps as
    array("d")."""
    record = draw(requests())
    gaps = array("d", record.inter_token_latencies_s)
    if draw(st.booleans()):
        return replace(
            record,
            frontend_in_s=0.0,
            frontend_out_s=0.0,
            prefill_done_at=None,
            inter_token_latencies_s=gaps,
        )
    out_s = draw(st.floats(1e-6, 0.1))
    return replace(
        record,
        frontend_out_s=out_s,
        prefill_done_at=record.first_token_at - out_s,
        inter_token_latencies_s=gaps,
    )


@settings(max_examples=150, deadline=None)
@given(records=st.lists(engine_records(), max_size=8))
def test_records_gives_back_the_records_the_columns_were_made_from(
    records: list[RequestRecord],
) -> None:
    assert RequestColumns.from_records(records).records() == records


# Two requests as the compiled loops write them: r1 (session s, 3 gaps) and r2 (1 gap).
ENGINE_COLUMNS: dict[str, Any] = {
    "request_id": ["r1", "r2"],
    "session_id": ["s", None],
    "tenant": [None, "t"],
    "arrival_at": np.array([0.0, 1.0]),
    "first_scheduled_at": np.array([0.25, 1.25]),
    "first_token_at": np.array([0.5, 1.5]),
    "finished_at": np.array([2.0, 3.0]),
    "num_prompt_tokens": np.array([100, 200]),
    "num_cached_tokens": np.array([0, 16]),
    "num_computed_prefill_tokens": np.array([100, 184]),
    "num_output_tokens": np.array([4, 2]),
    "num_preemptions": np.array([0, 1]),
    "replica": np.array([0, 1]),
    "inter_token_latencies_s": np.array([0.5, 0.5, 0.5, 1.5]),
    "num_gaps": np.array([3, 1]),
}


def test_from_engine_in_numbers() -> None:
    # The engine's view, as without a front end: out 0 s, prefill done in the first-token step,
    # nothing loaded from a CPU tier.
    columns = RequestColumns.from_engine(ENGINE_COLUMNS)
    expected = [
        build_request(request_id="r1", session_id="s", num_output_tokens=4,
                      inter_token_latencies_s=array("d", [0.5, 0.5, 0.5])),
        build_request(request_id="r2", tenant="t", arrival_at=1.0, first_scheduled_at=1.25,
                      first_token_at=1.5, finished_at=3.0, num_prompt_tokens=200,
                      num_cached_tokens=16, num_computed_prefill_tokens=184, num_output_tokens=2,
                      num_preemptions=1, replica=1, inter_token_latencies_s=array("d", [1.5])),
    ]  # fmt: skip
    assert columns.records() == expected
    assert columns.prefill_done_at.tolist() == [0.5, 1.5]
    assert columns.frontend_out_s.tolist() == [0.0, 0.0]
    assert columns.num_host_cached_tokens.tolist() == [0, 0]


def test_through_front_end_in_numbers() -> None:
    # r1 reached the API server at -0.125 s (the engine got it at 0), r2 has no API arrival
    # (NaN: it arrived when the engine got it); tokens reach the client 0.25 s after the engine
    # emitted them; the prefill finished in the engine's first-token step (0.5 s, 1.5 s).
    engine = RequestColumns.from_engine(ENGINE_COLUMNS)
    client = engine.through_front_end([-0.125, math.nan], 0.25)
    assert client.arrival_at.tolist() == [-0.125, 1.0]
    assert client.frontend_in_s.tolist() == [0.125, 0.0]
    assert client.first_token_at.tolist() == [0.75, 1.75]
    assert client.finished_at.tolist() == [2.25, 3.25]
    assert client.frontend_out_s.tolist() == [0.25, 0.25]
    assert client.prefill_done_at.tolist() == [0.5, 1.5]
    assert client.ttft_s.tolist() == [0.875, 0.75]
    assert client.request_id == ["r1", "r2"]


def test_batcher_keeps_records_and_column_batches_in_order() -> None:
    """Batches of 3: r0 alone, then r1 and r2 as columns fill a batch (r0, r1, r2, gaps end to
    end); r3 as columns, then r4 alone, are taken together."""
    batcher = RequestBatcher(3)
    assert not batcher.add(build_request(request_id="r0", inter_token_latencies_s=[0.5]))
    pair = [
        build_request(request_id="r1", inter_token_latencies_s=[0.25, 0.125]),
        build_request(request_id="r2", inter_token_latencies_s=[]),
    ]
    assert batcher.add_columns(RequestColumns.from_records(pair))
    first = batcher.take()
    assert first is not None and first.request_id == ["r0", "r1", "r2"]
    assert first.inter_token_latencies_s.tolist() == [0.5, 0.25, 0.125]
    assert first.num_gaps.tolist() == [1, 2, 0]
    assert not batcher.add_columns(RequestColumns.from_records([build_request(request_id="r3")]))
    assert not batcher.add(build_request(request_id="r4"))
    second = batcher.take()
    assert second is not None and second.request_id == ["r3", "r4"]
    assert second.num_gaps.tolist() == [3, 3]
    assert batcher.take() is None
