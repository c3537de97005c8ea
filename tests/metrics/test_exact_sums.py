"""run_fsums: math.fsum of every run, bit for bit, over values of any sign and magnitude."""

from __future__ import annotations

import math
from unittest.mock import patch

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sim.metrics import exact_sums
from sim.metrics.exact_sums import run_fsums

FINITE = st.floats(allow_nan=False, allow_infinity=False, width=64)
RUNS = st.lists(st.lists(FINITE, max_size=6), max_size=6)


def _fsums_one_by_one(runs: list[list[float]]) -> list[str]:
    return [math.fsum(run).hex() for run in runs]


def _run_fsums(runs: list[list[float]]) -> list[str]:
    values = np.array([value for run in runs for value in run], dtype=np.float64)
    counts = np.array([len(run) for run in runs], dtype=np.int64)
    return [total.hex() for total in run_fsums(values, counts)]


@settings(max_examples=400, deadline=None)
@given(runs=RUNS)
def test_every_run_sums_as_fsum(runs: list[list[float]]) -> None:
    try:
        expected = _fsums_one_by_one(runs)
    except OverflowError:  # a sum beyond the largest float: run_fsums refuses it too
        with pytest.raises(OverflowError):
            _run_fsums(runs)
        return
    assert _run_fsums(runs) == expected


@settings(max_examples=200, deadline=None)
@given(runs=st.lists(st.lists(st.floats(1e-6, 100.0), max_size=40), max_size=8))
def test_inter_token_gaps_sum_as_fsum(runs: list[list[float]]) -> None:
    assert _run_fsums(runs) == _fsums_one_by_one(runs)


def test_near_overflow_raises_as_fsum_does() -> None:
    # fsum raises on an intermediate overflow although this exact sum rounds to the largest
    # float (hypothesis found it); run_fsums hands values this large to fsum itself.
    runs = [[8.988465674311579e307, 8.98846567431158e307, -9.578097130411805e52]]
    with pytest.raises(OverflowError):
        _fsums_one_by_one(runs)
    with pytest.raises(OverflowError):
        _run_fsums(runs)


def test_cancellation_and_ties_in_numbers() -> None:
    # 1e16 + 1.0 - 1e16 is 1.0 exactly (a naive sum gives 0.0); 1 + 2**-53 rounds to even (1.0)
    # while 1 + 2**-53 + 2**-60 rounds up; a run of none is 0.0; -8.5e12 needs no limb sign.
    runs = [[1e16, 1.0, -1e16], [1.0, 2.0**-53], [1.0, 2.0**-53, 2.0**-60], [], [-8.5e12, 0.25]]
    assert _run_fsums(runs) == [
        (1.0).hex(),
        (1.0).hex(),
        (1.0 + 2.0**-52).hex(),
        (0.0).hex(),
        (-8.5e12 + 0.25).hex(),
    ]
    assert _run_fsums(runs) == _fsums_one_by_one(runs)


@settings(max_examples=200, deadline=None)
@given(runs=RUNS, chunk_values=st.integers(1, 8))
def test_chunks_of_whole_runs_sum_as_fsum(runs: list[list[float]], chunk_values: int) -> None:
    """Chunks of 1..8 values (runs longer than a chunk get one of their own) change nothing."""
    try:
        expected = _fsums_one_by_one(runs)
    except OverflowError:
        return
    with patch.object(exact_sums, "CHUNK_VALUES", chunk_values):
        assert _run_fsums(runs) == expected


def test_a_batch_of_gaps_larger_than_a_chunk() -> None:
    """100,000 gaps of 2,000 requests (50 each, 1 ms + i * 1 us): 13 chunks, every sum fsum's."""
    gaps = 1e-3 + np.arange(100_000) * 1e-6
    runs = [gaps[start : start + 50].tolist() for start in range(0, 100_000, 50)]
    assert exact_sums.CHUNK_VALUES < 100_000
    assert _run_fsums(runs) == _fsums_one_by_one(runs)
