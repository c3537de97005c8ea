"""The Ray backend: each run is a Ray task on the cluster at RAY_ADDRESS, or on a local one.

On a real cluster every node must see the results directory (a shared filesystem), since
tasks write their run directories themselves.
"""

from __future__ import annotations

import os
from collections.abc import Callable

from sim.errors import InputError
from sim.sweep.execute import RunJob, RunOutcome, execute_run, killed_outcome, one_line

OutcomeHandler = Callable[[RunOutcome], None]


def _outcome_of_task_error(run_id: str, error: Exception) -> RunOutcome:
    import ray.exceptions

    died = (
        ray.exceptions.WorkerCrashedError,
        ray.exceptions.NodeDiedError,
        ray.exceptions.OutOfMemoryError,
    )
    if isinstance(error, died):
        return killed_outcome(run_id)
    return RunOutcome(run_id, one_line(f"{type(error).__name__}: {error}"), "exception")


def check_ray_available() -> None:
    """Refuse `--backend ray` before anything is written when Ray is not installed."""
    try:
        import ray  # noqa: F401
    except ImportError:
        raise InputError(
            "--backend ray needs Ray; install it with: pip install 'prefixsim[ray]'"
        ) from None


def run_ray(jobs: list[RunJob], num_workers: int, on_outcome: OutcomeHandler) -> None:
    """Run `jobs` as Ray tasks, reporting each outcome as it finishes.

    Uses an already connected Ray as is; otherwise connects to RAY_ADDRESS, or starts a local
    cluster of `num_workers` CPUs that is shut down at the end.
    """
    check_ray_available()
    import ray
    import ray.exceptions

    connected_here = not ray.is_initialized()
    if connected_here:
        address = os.environ.get("RAY_ADDRESS")
        if address:
            ray.init(address=address)
        else:
            ray.init(num_cpus=num_workers, include_dashboard=False, log_to_driver=False)
    try:
        # A retried task would run (and die) again; the sweep records the death instead.
        remote_run = ray.remote(num_cpus=1, max_retries=0)(execute_run)
        pending = {remote_run.remote(job): job for job in jobs}
        while pending:
            done, _ = ray.wait(list(pending), num_returns=1)
            for reference in done:
                job = pending.pop(reference)
                try:
                    outcome = ray.get(reference)
                except ray.exceptions.RayError as error:
                    outcome = _outcome_of_task_error(job.run_id, error)
                on_outcome(outcome)
    finally:
        if connected_here:
            ray.shutdown()
