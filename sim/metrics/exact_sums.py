"""math.fsum of many runs of floats at once, without a Python float per value.

Every finite float is an integer multiple of 2**low, `low` taken from the smallest nonzero
magnitude among them, so the values scaled by 2**-low are integers. Cut into limbs of a few
dozen bits (exact: each limb is some of the value's own bits), each limb is summed per run in
int64 without rounding. A run's exact sum is then one Python int, and `float()` of an int
rounds to nearest, ties to even, as fsum rounds its exact sum: the results are fsum's, bit for
bit.
"""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt

# Scaled values stay far from float overflow, and every result far from the subnormals,
# where scaling back by 2**low would round a second time.
_MAX_SPAN_BITS = 900
_LOWEST_EXPONENT = -900


def run_fsums(values: npt.NDArray[np.float64], counts: npt.NDArray[np.int64]) -> list[float]:
    """math.fsum of each run of `values`: the first counts[0] of them, then the next
    counts[1], and so on (a run of none sums to 0.0)."""
    ends = np.cumsum(counts)
    starts = ends - counts
    magnitudes = values if values.min(initial=0.0) >= 0.0 else np.abs(values)
    largest = float(magnitudes.max(initial=0.0))
    if largest == 0.0:
        return [0.0] * len(counts)
    smallest = float(magnitudes.min(where=magnitudes > 0.0, initial=math.inf))
    low = math.frexp(smallest)[1] - 53
    span = math.frexp(largest)[1] - low
    if not math.isfinite(largest) or low < _LOWEST_EXPONENT or span > _MAX_SPAN_BITS:
        return [math.fsum(values[start:end]) for start, end in zip(starts, ends, strict=True)]
    # A limb below 2**limb_bits: a running sum over every value stays below 2**62.
    limb_bits = 62 - len(values).bit_length()
    limb_scale = float(2**limb_bits)
    rest = np.ldexp(values, -low)  # integers, |rest| < 2**span
    limb_sums: list[list[int]] = []
    for _ in range(-(-span // limb_bits) - 1):
        upper = np.trunc(rest / limb_scale)  # the remainder keeps rest's sign: exact
        limb_sums.append(_run_sums((rest - upper * limb_scale).astype(np.int64), starts, ends))
        rest = upper
    limb_sums.append(_run_sums(rest.astype(np.int64), starts, ends))
    totals = limb_sums.pop()
    while limb_sums:
        lower = limb_sums.pop()
        totals = [(upper << limb_bits) + part for upper, part in zip(totals, lower, strict=True)]
    return [math.ldexp(float(total), low) for total in totals]


def _run_sums(
    limbs: npt.NDArray[np.int64], starts: npt.NDArray[np.int64], ends: npt.NDArray[np.int64]
) -> list[int]:
    """Each run's sum of `limbs`."""
    running = np.zeros(len(limbs) + 1, dtype=np.int64)
    np.cumsum(limbs, out=running[1:])
    sums: list[int] = (running[ends] - running[starts]).tolist()
    return sums
