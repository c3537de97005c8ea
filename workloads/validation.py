"""Field checks for configuration dataclasses; each failure names the field and what is allowed."""

from __future__ import annotations

import math
from collections.abc import Sequence

from workloads.errors import WorkloadError


def require_int(owner: str, name: str, value: object, minimum: int) -> None:
    """`value` must be an int (not a bool) >= minimum."""
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise WorkloadError(f"{owner}.{name}: {value!r} is not allowed; use an int >= {minimum}")


def require_number(
    owner: str, name: str, value: object, minimum: float, *, exclusive: bool = False
) -> None:
    """`value` must be a finite real number >= minimum (> minimum when exclusive)."""
    relation = ">" if exclusive else ">="
    valid = (
        isinstance(value, int | float)
        and not isinstance(value, bool)
        and math.isfinite(value)
        and (value > minimum if exclusive else value >= minimum)
    )
    if not valid:
        raise WorkloadError(
            f"{owner}.{name}: {value!r} is not allowed; use a finite number {relation} {minimum}"
        )


def require_fraction(owner: str, name: str, value: object) -> None:
    """`value` must be a number in [0, 1]."""
    require_number(owner, name, value, 0.0)
    if value > 1.0:  # type: ignore[operator]
        raise WorkloadError(f"{owner}.{name}: {value!r} is not allowed; use a number in [0, 1]")


def require_choice(owner: str, name: str, value: object, allowed: Sequence[str]) -> None:
    """`value` must be one of `allowed`."""
    if value not in allowed:
        raise WorkloadError(
            f"{owner}.{name}: {value!r} is not allowed; allowed: {', '.join(allowed)}"
        )
