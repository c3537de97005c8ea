"""One sweep run, wherever a backend executes it: it returns an outcome and never raises.

Test hook: the environment variable PREFIXSIM_TEST_KILL_RUN=<run_id> makes the process that
picks up that run kill itself with SIGKILL before it writes anything, as the OOM killer would.
The sweep driver reads the variable and marks the job, so the hook reaches pool and Ray workers
alike. With -j 1 runs execute in the sweep process itself, so there the hook kills the whole
sweep (tests use that to interrupt a sweep midway).
"""

from __future__ import annotations

import os
import signal
from dataclasses import dataclass
from pathlib import Path

from sim.config import Scenario
from sim.errors import InputError, one_line_warnings
from sim.runner import run_scenario

KILL_RUN_ENV = "PREFIXSIM_TEST_KILL_RUN"
KILLED_MESSAGE = "the process running it died (killed by a signal, e.g. out of memory)"


@dataclass(slots=True)
class RunJob:
    """What a worker needs for one run (paths absolute: workers may start elsewhere)."""

    run_id: str
    scenario: Scenario
    base_dir: Path
    run_dir: Path
    kill_for_test: bool = False


@dataclass(slots=True)
class RunOutcome:
    """How a run ended: `error` is None on success; `kind` is 'input', 'exception' or 'killed'."""

    run_id: str
    error: str | None = None
    kind: str | None = None


def one_line(text: str) -> str:
    """`text` with line breaks and runs of spaces collapsed, for error records."""
    return " ".join(text.split())


def killed_outcome(run_id: str) -> RunOutcome:
    """The outcome of a run whose process died under it."""
    return RunOutcome(run_id, KILLED_MESSAGE, "killed")


def execute_run(job: RunJob) -> RunOutcome:
    """Simulate one run into its run directory; failures come back as an outcome."""
    if job.kill_for_test:
        os.kill(os.getpid(), signal.SIGKILL)
    try:
        with one_line_warnings():  # in a worker process too, not only under the CLI
            run_scenario(job.scenario, job.base_dir, run_dir=job.run_dir)
    except InputError as error:
        return RunOutcome(job.run_id, one_line(str(error)), "input")
    except Exception as error:
        return RunOutcome(job.run_id, one_line(f"{type(error).__name__}: {error}"), "exception")
    return RunOutcome(job.run_id)
