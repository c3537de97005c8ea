"""Searching a monotone feasibility boundary: bracket by doubling or halving, then bisect.

Each search assumes feasibility is monotone in the searched value (a higher arrival rate is
never easier; more replicas or KV memory never harder) and returns the best feasible value it
probed with the nearest infeasible one on the other side. Continuous searches stop when the
two are within `rel_tol` of the infeasible (or, searching a minimum, the feasible) one.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(slots=True, frozen=True)
class Bracket:
    """The answer (best feasible value probed) and the infeasible value next to it, if any."""

    feasible: float | None
    infeasible: float | None


def largest_feasible(
    is_feasible: Callable[[float], bool],
    start: float,
    *,
    rel_tol: float,
    max_doublings: int = 10,
) -> Bracket:
    """The largest feasible value > 0: doubling or halving from `start`, then bisection.

    If `start` * 2**max_doublings is still feasible, that is the answer with no infeasible
    bound; if `start` / 2**max_doublings is still infeasible, there is no answer.
    """
    _check_search(start, rel_tol)
    if is_feasible(start):
        low = start
        for _ in range(max_doublings):
            if not is_feasible(low * 2):
                high = low * 2
                break
            low *= 2
        else:
            return Bracket(low, None)
    else:
        high = start
        for _ in range(max_doublings):
            if is_feasible(high / 2):
                low = high / 2
                break
            high /= 2
        else:
            return Bracket(None, high)
    while high - low > rel_tol * high:
        middle = (low + high) / 2
        if is_feasible(middle):
            low = middle
        else:
            high = middle
    return Bracket(low, high)


def smallest_feasible(
    is_feasible: Callable[[float], bool], low: float, high: float, *, rel_tol: float
) -> Bracket:
    """The smallest feasible value in [low, high]: checks `high`, then `low`, then bisects at
    geometric midpoints."""
    _check_search(high, rel_tol)
    if not 0 < low <= high:
        raise ValueError(f"need 0 < low <= high, got low={low}, high={high}")
    if not is_feasible(high):
        return Bracket(None, high)
    if is_feasible(low):
        return Bracket(low, None)
    while high - low > rel_tol * high:
        # The range may span orders of magnitude (KV memory): split it in ratio, not in value.
        middle = math.sqrt(low * high)
        if is_feasible(middle):
            high = middle
        else:
            low = middle
    return Bracket(high, low)


def smallest_feasible_count(is_feasible: Callable[[float], bool], *, max_count: int) -> Bracket:
    """The smallest feasible integer in 1..max_count: doubling from 1, then integer bisection."""
    if max_count < 1:
        raise ValueError(f"max_count must be >= 1, got {max_count}")
    infeasible = 0
    count = 1
    while not is_feasible(count):
        infeasible = count
        if count == max_count:
            return Bracket(None, count)
        count = min(count * 2, max_count)
    feasible = count
    while feasible - infeasible > 1:
        middle = (feasible + infeasible) // 2
        if is_feasible(middle):
            feasible = middle
        else:
            infeasible = middle
    return Bracket(feasible, infeasible if infeasible > 0 else None)


def _check_search(value: float, rel_tol: float) -> None:
    if not value > 0:
        raise ValueError(f"the search starts from a positive value, got {value}")
    if not 0 < rel_tol < 1:
        raise ValueError(f"rel_tol must be in (0, 1), got {rel_tol}")
