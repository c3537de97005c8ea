"""vLLM v1's scheduler without a clock: budgets, chunked prefill, preemption (no SimPy here)."""

from sim.sched import defaults
from sim.sched.config import POLICIES, SchedulerConfig
from sim.sched.defaults import engine_limit_problem
from sim.sched.offload import OffloadConnector, OffloadStats, StepTransfers, TransferJob
from sim.sched.request import Request
from sim.sched.scheduler import Admission, Scheduler, SchedulerOutput, StepResult

__all__ = [
    "POLICIES",
    "Admission",
    "OffloadConnector",
    "OffloadStats",
    "Request",
    "Scheduler",
    "SchedulerConfig",
    "SchedulerOutput",
    "StepResult",
    "StepTransfers",
    "TransferJob",
    "defaults",
    "engine_limit_problem",
]
