"""math.fsum of many runs of floats at once, without a Python float per value.

Every finite float is an integer multiple of 2**low, `low` taken from the smallest nonzero
magnitude among them, so the values scaled by 2**-low are integers. Cut into limbs of 62 bits
(exact: each limb is some of the value's own bits), each limb is summed per run in int64, in
two halves, without rounding. A run's exact sum is then one Python int, and `float()` of an int
rounds to nearest, ties to even, as fsum rounds its exact sum: the results are fsum's, bit for
bit.
"""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt

# Scaled values stay far from float overflow, and every result far from the subnormals,
# where scaling back by 2**low would round a second time. Values near overflow go to fsum
# itself: it raises on an intermediate overflow even where the exact sum rounds to a float.
_MAX_SPAN_BITS = 900
_LOWEST_EXPONENT = -900
_HIGHEST_EXPONENT = 1000


# Runs are summed a chunk of whole runs at a time, about this many values: the scratch arrays
# stay in cache and are reused from the heap instead of being faulted in afresh per batch.
CHUNK_VALUES = 1 << 15

# Limbs of this many bits convert to int64 exactly; one limb holds a batch of inter-token gaps
# (their values span some 60 bits). A limb is summed as its upper and lower halves, each
# below 2**31 in magnitude, so a run of fewer than 2**32 values sums without overflow.
_LIMB_BITS = 62
_HALF_BITS = 31


def run_fsums(values: npt.NDArray[np.float64], counts: npt.NDArray[np.int64]) -> list[float]:
    """math.fsum of each run of `values`: the first counts[0] of them, then the next
    counts[1], and so on (a run of none sums to 0.0)."""
    ends = np.cumsum(counts)
    starts = ends - counts
    least = float(values.min(initial=math.inf))
    magnitudes = values if least >= 0.0 else np.abs(values)
    largest = float(magnitudes.max(initial=0.0))
    if largest == 0.0:
        return [0.0] * len(counts)
    smallest = least
    if not least > 0.0:  # zeros or negative values: the smallest nonzero magnitude
        smallest = float(magnitudes.min(where=magnitudes > 0.0, initial=math.inf))
    low = math.frexp(smallest)[1] - 53
    high = math.frexp(largest)[1] if math.isfinite(largest) else _HIGHEST_EXPONENT + 1
    span = high - low
    if high > _HIGHEST_EXPONENT or low < _LOWEST_EXPONENT or span > _MAX_SPAN_BITS:
        return [math.fsum(values[start:end]) for start, end in zip(starts, ends, strict=True)]
    totals: list[int] = []
    first_run = 0
    while first_run < len(counts):
        # Whole runs up to about CHUNK_VALUES values (at least one run, however long).
        first_value = int(starts[first_run])
        end_run = int(np.searchsorted(ends, first_value + CHUNK_VALUES, side="right"))
        end_run = max(end_run, first_run + 1)
        chunk = values[first_value : int(ends[end_run - 1])]
        chunk_runs = slice(first_run, end_run)
        totals += _exact_run_sums(
            chunk, starts[chunk_runs] - first_value, counts[chunk_runs], low, span
        )
        first_run = end_run
    return [math.ldexp(float(total), low) for total in totals]


def _exact_run_sums(
    values: npt.NDArray[np.float64],
    starts: npt.NDArray[np.int64],
    counts: npt.NDArray[np.int64],
    low: int,
    span: int,
) -> list[int]:
    """Each run's exact sum of `values` (runs at `starts`, `counts` long) in units of 2**low,
    as a Python int; every value is a multiple of 2**low below 2**(low + span) in magnitude."""
    # Scaling by powers of two is exact here (no overflow, no subnormal).
    rest = values * math.ldexp(1.0, -low)  # integers, |rest| < 2**span
    limb = np.empty_like(rest)
    down, up = math.ldexp(1.0, -_LIMB_BITS), math.ldexp(1.0, _LIMB_BITS)
    nonempty = counts > 0
    run_starts = starts[nonempty]
    limb_sums: list[list[int]] = []
    for _ in range(-(-span // _LIMB_BITS) - 1):
        np.multiply(rest, down, out=limb)
        np.trunc(limb, out=limb)  # the upper limbs; the remainder keeps rest's sign: exact
        np.multiply(limb, up, out=limb)
        np.subtract(rest, limb, out=limb)
        limb_sums.append(_run_sums(limb, run_starts, nonempty))
        rest -= limb
        rest *= down
    limb_sums.append(_run_sums(rest, run_starts, nonempty))
    totals = limb_sums.pop()
    while limb_sums:
        lower = limb_sums.pop()
        totals = [(upper << _LIMB_BITS) + part for upper, part in zip(totals, lower, strict=True)]
    return totals


def _run_sums(
    limbs: npt.NDArray[np.float64],
    run_starts: npt.NDArray[np.int64],
    nonempty: npt.NDArray[np.bool_],
) -> list[int]:
    """Each run's sum of `limbs` (integers below 2**_LIMB_BITS in magnitude); `run_starts` are
    where the runs with values (`nonempty`) start."""
    # Summed in int64 as two halves: neither half's run sum reaches 2**63 in magnitude.
    lower = limbs.astype(np.int64)
    upper = lower >> _HALF_BITS
    lower &= (1 << _HALF_BITS) - 1
    upper_sums = np.zeros(len(nonempty), dtype=np.int64)
    lower_sums = np.zeros(len(nonempty), dtype=np.int64)
    if len(run_starts):
        upper_sums[nonempty] = np.add.reduceat(upper, run_starts)
        lower_sums[nonempty] = np.add.reduceat(lower, run_starts)
    return [
        (high << _HALF_BITS) + part
        for high, part in zip(upper_sums.tolist(), lower_sums.tolist(), strict=True)
    ]
