"""Mooncake lines are decoded in one pass (msgspec); a line it refuses is read by json and
RecordReader, the reference. Any file must give what the reference alone gives: the same
records, or the same error at the same line."""

from __future__ import annotations

import json
from pathlib import Path

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import workloads.traces.mooncake as mooncake
from workloads.api import WorkloadError
from workloads.traces.mooncake import iter_mooncake_records


class _RefusesEveryLine:
    """A decoder that sends every line to the reference path."""

    def decode(self, raw: bytes) -> object:
        raise msgspec.DecodeError("reference path")


def _outcome(path: Path) -> tuple[str, object]:
    try:
        return "records", list(iter_mooncake_records(path, trace_block_size=4))
    except WorkloadError as error:
        return "error", (str(error), error.line)


# Where the one-pass decoder's checks and the reference's meet.
BOUNDARIES = (
    *(-1, 0, 1, 2**24, 2**24 + 1, 2**63, 2**64 - 1, 2**64, 10**30, 10**400),
    *(True, False, None, 1.5, -0.0, "1", float("nan"), float("inf")),
    *([2**64 - 1], [2**64], [-1], [1.0], [True], [None]),
)
ODD_VALUES = st.one_of(
    st.sampled_from(BOUNDARIES),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.booleans(),
    st.none(),
    st.text(max_size=3),
    st.lists(st.integers(min_value=-3, max_value=2**65), max_size=4),
    st.lists(st.one_of(st.floats(), st.booleans(), st.text(max_size=2)), max_size=3),
)
FIELDS = ("timestamp", "input_length", "output_length", "hash_ids")


@st.composite
def _line(draw: st.DrawFn) -> str:
    kind = draw(st.sampled_from(["good", "good", "odd field", "odd field", "missing", "raw"]))
    if kind == "raw":
        return draw(
            st.sampled_from(["", "   ", "[1, 2]", "null", '{"timestamp": 1', "\ufeff{}", "{}"])
        )
    input_length = draw(st.integers(min_value=1, max_value=12))
    record: dict[str, object] = {
        "timestamp": draw(st.one_of(st.integers(0, 50), st.floats(0, 50))),
        "input_length": input_length,
        "output_length": draw(st.integers(min_value=1, max_value=9)),
        "hash_ids": draw(
            st.lists(
                st.integers(min_value=0, max_value=2**64 - 1),
                min_size=-(-input_length // 4),
                max_size=-(-input_length // 4),
            )
        ),
    }
    if kind == "odd field":
        record[draw(st.sampled_from(FIELDS))] = draw(ODD_VALUES)
    if kind == "missing":
        del record[draw(st.sampled_from(FIELDS))]
    if draw(st.booleans()):
        record["extra"] = draw(ODD_VALUES)
    return json.dumps(record)


def _both_outcomes(trace: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[object, object]:
    fast = _outcome(trace)
    with monkeypatch.context() as patch:
        patch.setattr(mooncake, "_LINE_DECODER", _RefusesEveryLine())
        return fast, _outcome(trace)


@pytest.mark.parametrize("field", FIELDS)
@pytest.mark.parametrize("value", BOUNDARIES, ids=repr)
def test_each_field_at_each_boundary_equals_the_reference(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, field: str, value: object
) -> None:
    record = {"timestamp": 3, "input_length": 5, "output_length": 2, "hash_ids": [9, 4]}
    trace = tmp_path / "trace.jsonl"
    trace.write_text(json.dumps(record) + "\n" + json.dumps({**record, field: value}) + "\n")
    fast, reference = _both_outcomes(trace, monkeypatch)
    assert fast == reference


@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(lines=st.lists(_line(), min_size=1, max_size=6))
def test_one_pass_decoding_equals_the_reference(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, lines: list[str]
) -> None:
    trace = tmp_path / "trace.jsonl"
    trace.write_text("\n".join(lines) + "\n")
    fast, reference = _both_outcomes(trace, monkeypatch)
    assert fast == reference


def test_reference_path_reads_what_only_json_reads(tmp_path: Path) -> None:
    # NaN in a field the reader ignores: msgspec refuses the line, json reads it.
    trace = tmp_path / "nan.jsonl"
    trace.write_text(
        '{"timestamp": 2, "input_length": 5, "output_length": 3, "hash_ids": [7, 2], "note": NaN}\n'
    )
    (record,) = iter_mooncake_records(trace, trace_block_size=4)
    assert (record.line, record.arrival_s, record.input_length, record.hash_ids) == (
        1,
        0.002,
        5,
        [7, 2],
    )


def test_hash_ids_beyond_64_bits_are_refused(tmp_path: Path) -> None:
    trace = tmp_path / "wide.jsonl"
    trace.write_text(
        '{"timestamp": 0, "input_length": 5, "output_length": 3, '
        f'"hash_ids": [{2**64 - 1}, {2**64}]}}\n'
    )
    with pytest.raises(
        WorkloadError, match=rf"wide\.jsonl:1: hash_ids: {2**64} is not a non-negative 64-bit"
    ):
        list(iter_mooncake_records(trace, trace_block_size=4))


def test_timestamp_beyond_any_float_is_refused(tmp_path: Path) -> None:
    trace = tmp_path / "far.jsonl"
    trace.write_text(
        f'{{"timestamp": {10**400}, "input_length": 5, "output_length": 3, "hash_ids": [1, 2]}}\n'
    )
    with pytest.raises(WorkloadError, match=r"far\.jsonl:1: timestamp: 1000\d+ is not allowed"):
        list(iter_mooncake_records(trace, trace_block_size=4))
