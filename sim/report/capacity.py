"""The capacity a sweep shows: the largest swept value up to which every run passes a test.

Runs are grouped by the value of one numeric swept path (all other swept settings pooled, as in
a one-dimensional load sweep). Walking the values upward, the answer is the last value before
the first one at which some seed fails (or has no finished run): the same monotone boundary
`prefixsim plan` brackets, at the sweep's resolution.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from sim.report.runs import Run, RunSet

# What a load sweep sweeps: an arrival rate (workload.arrivals.rate_per_s) or a trace's speed-up
# (workload.source.speedup). Other numeric settings (block size, KV memory) have no "stable up
# to" reading.
LOAD_PATH_SUFFIXES = ("rate_per_s", "speedup")


@dataclass(slots=True, frozen=True)
class SweptCapacity:
    """The largest passing swept value (None: the first fails) and the first failing one."""

    path: str
    passing: float | None
    failing: float | None  # None: every swept value passes


def is_stable(run: Run) -> bool:
    """The run reached a steady state and served every request it was sent."""
    return run.stable is True and run.rejected is None


def swept_capacity(
    run_set: RunSet, path: str, passes: Callable[[Run], bool] = is_stable
) -> SweptCapacity:
    """Walk the numeric values of `path` upward; stop at the first with a failing or missing run."""
    values = sorted(float(value) for value in run_set.parameter_values(path))
    passing: float | None = None
    for value in values:
        runs = [run for run in run_set.runs if float(run.parameters[path]) == value]
        if not all(run.status == "ok" and passes(run) for run in runs):
            return SweptCapacity(path, passing, value)
        passing = value
    return SweptCapacity(path, passing, None)


def load_swept_path(run_set: RunSet) -> str | None:
    """The sweep's only swept path when it is a load (an arrival rate or a trace's speed-up,
    whose capacity means something), else None."""
    if len(run_set.parameter_paths) != 1:
        return None
    (path,) = run_set.parameter_paths
    values = run_set.parameter_values(path)
    numeric = all(isinstance(v, int | float) and not isinstance(v, bool) for v in values)
    return path if numeric and path.endswith(LOAD_PATH_SUFFIXES) else None
