"""run_fsums: math.fsum of every run, bit for bit, over values of any sign and magnitude."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

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
