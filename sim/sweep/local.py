"""The local backend: runs on worker processes; a worker killed under a run fails only that run."""

from __future__ import annotations

import multiprocessing
import os
import select
import signal
import threading
from collections import deque
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool

from sim.interrupts import ignore_interrupts
from sim.sweep.execute import RunJob, RunOutcome, execute_run, killed_outcome

OutcomeHandler = Callable[[RunOutcome], None]


def _pool_context() -> multiprocessing.context.BaseContext:
    # Forked workers would inherit the progress bar's thread mid-flight; a fork server started
    # with the simulator imported gives clean workers without paying the imports per worker.
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(["sim.sweep.execute"])
    return context


def _worker_setup(sweep_pid: int) -> None:
    """Each worker ignores Ctrl-C (the sweep stops it) and dies with the sweep process.

    A sweep killed with SIGKILL must leave no orphan still writing a run that a resumed sweep
    would write again; the fork server keeps its workers alive, so each watches the sweep.
    """
    ignore_interrupts()
    try:
        sweep_exited = os.pidfd_open(sweep_pid)
    except ProcessLookupError:
        _die()  # the sweep is gone already
    except (AttributeError, OSError):
        return  # no pidfd (not Linux 5.3+): an orphan finishes its current run
    threading.Thread(target=_die_when_readable, args=(sweep_exited,), daemon=True).start()


def _die_when_readable(descriptor: int) -> None:
    select.select([descriptor], [], [])
    _die()


def _die() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def _run_until_crash(
    queue: deque[RunJob], num_workers: int, on_outcome: OutcomeHandler
) -> list[RunJob]:
    """Run jobs from `queue` on a fresh pool until it is empty or a worker dies.

    Returns the jobs that were in flight when a worker died (all of them fail together).
    """
    in_flight: dict[Future[RunOutcome], RunJob] = {}
    crashed: list[RunJob] = []
    pool = ProcessPoolExecutor(
        max_workers=num_workers,
        mp_context=_pool_context(),
        initializer=_worker_setup,
        initargs=(os.getpid(),),
    )
    try:
        while in_flight or (queue and not crashed):
            while queue and not crashed and len(in_flight) < num_workers:
                job = queue.popleft()
                try:
                    in_flight[pool.submit(execute_run, job)] = job
                except BrokenProcessPool:
                    queue.appendleft(job)
                    break
            if not in_flight:
                break
            done, _ = wait(in_flight, return_when=FIRST_COMPLETED)
            for future in [future for future in in_flight if future in done]:
                job = in_flight.pop(future)
                try:
                    outcome = future.result()
                except BrokenProcessPool:
                    crashed.append(job)
                    continue
                on_outcome(outcome)
    except BaseException:
        _stop_workers(pool)
        raise
    pool.shutdown()
    return crashed


def _stop_workers(pool: ProcessPoolExecutor) -> None:
    """Kill the workers now: an interrupted sweep must not wait for the runs in flight."""
    # The pool offers no public way to stop running calls; its worker processes are these.
    for process in list(pool._processes.values()):
        process.terminate()
    pool.shutdown(wait=True, cancel_futures=True)


def run_local(jobs: list[RunJob], num_workers: int, on_outcome: OutcomeHandler) -> None:
    """Run `jobs` on `num_workers` processes (1: in this process), reporting each outcome."""
    if num_workers == 1:
        for job in jobs:
            on_outcome(execute_run(job))
        return
    queue = deque(jobs)
    while queue:
        crashed = _run_until_crash(queue, num_workers, on_outcome)
        if len(crashed) == 1:
            on_outcome(killed_outcome(crashed[0].run_id))
            continue
        # A dying worker breaks every run in flight; rerun each alone to find which one dies.
        for job in crashed:
            if _run_until_crash(deque([job]), 1, on_outcome):
                on_outcome(killed_outcome(job.run_id))
