"""vLLM v1's scheduler without a clock: budgets, chunked prefill, preemption (no SimPy here)."""

from sim.native import StepOutput, StepUpdate
from sim.sched import defaults
from sim.sched.config import POLICIES, SchedulerConfig
from sim.sched.defaults import engine_limit_problem
from sim.sched.native_scheduler import (
    NativeScheduler,
    apply_step_output,
    make_scheduler,
    native_scheduler_covers,
)
from sim.sched.offload import OffloadConnector, OffloadStats, StepTransfers, TransferJob
from sim.sched.request import Request
from sim.sched.scheduler import Admission, Scheduler, SchedulerOutput, StepResult

__all__ = [
    "POLICIES",
    "Admission",
    "NativeScheduler",
    "OffloadConnector",
    "OffloadStats",
    "Request",
    "Scheduler",
    "SchedulerConfig",
    "SchedulerOutput",
    "StepOutput",
    "StepResult",
    "StepTransfers",
    "StepUpdate",
    "TransferJob",
    "apply_step_output",
    "defaults",
    "engine_limit_problem",
    "make_scheduler",
    "native_scheduler_covers",
]
