"""The scheduler step in compiled code (sim/native/src/scheduler.hpp) behind Scheduler's interface.

It covers sync and async scheduling with the FCFS policy and no CPU offload tier, on the
compiled cache core; `make_scheduler` gives every other configuration (the priority policy,
CPU offloading, the Python cache core, the straightforward decode path the equivalence tests
compare against) the reference Scheduler. Both decide the same, step for step
(tests/native/test_native_scheduler.py, tests/native/test_result_files.py).

The compiled step keeps each request's state in C++ and writes the Python Request back when
it hands the request to Python (the `running` and `waiting` lists, a step's scheduled,
admitted, preempted, sampled and finished requests, an abort) and on its first token
(`first_token_at`). A request read any other way mid-run (through `requests`) is current in
its identity, prompt and `first_token_at` only; `num_queued_tokens` gives the live count.
"""

from __future__ import annotations

from collections.abc import Sequence

from sim.kvcache import CacheObserver, PrefixCacheStats, RequestStatus
from sim.native import NativeKVCacheManager, SchedulerCore, StepOutput, StepUpdate
from sim.sched.config import SchedulerConfig
from sim.sched.offload import OffloadConnector
from sim.sched.request import Request
from sim.sched.scheduler import (
    HASH_MEMO_SIZE,
    Admission,
    Scheduler,
    SchedulerOutput,
    StepResult,
    check_prompt_fits,
    make_cache,
)


def native_scheduler_covers(config: SchedulerConfig, offload: OffloadConnector | None) -> bool:
    """True when the compiled scheduler runs this configuration (see the module docstring)."""
    return config.core == "native" and offload is None and config.policy == "fcfs"


class NativeScheduler:
    """vLLM's FCFS scheduling step (sync or async) in C++, on the compiled KV cache manager."""

    offload: OffloadConnector | None = None
    # Request state is exact after every step (no lazy decoders), as on either reference path.
    fast_decode_path = True

    def __init__(self, config: SchedulerConfig, observer: CacheObserver | None = None) -> None:
        self.config = config
        self.async_scheduling = config.async_scheduling
        self.hasher, manager = make_cache(config, "native", observer, memo_size=HASH_MEMO_SIZE)
        assert isinstance(manager, NativeKVCacheManager)
        self.kv_cache_manager = manager
        self.requests: dict[str, Request] = {}
        self.core = SchedulerCore(
            manager,
            max_num_batched_tokens=config.max_num_batched_tokens,
            max_num_admitted_seqs=config.max_num_admitted_seqs,
            max_model_len=config.max_model_len,
            enable_chunked_prefill=config.enable_chunked_prefill,
            long_prefill_token_threshold=config.long_prefill_token_threshold,
            long_prefill_token_threshold_adaptive=config.long_prefill_token_threshold_adaptive,
            scheduler_reserve_full_isl=config.scheduler_reserve_full_isl,
            prefill_schedule_interval=config.prefill_schedule_interval,
            async_scheduling=config.async_scheduling,
            requests=self.requests,
            running_status=RequestStatus.RUNNING,
            preempted_status=RequestStatus.PREEMPTED,
            finished_status=RequestStatus.FINISHED_LENGTH_CAPPED,
            admission_type=Admission,
            stats_type=PrefixCacheStats,
        )
        # Ids finished or aborted since the last schedule(): the engine runs one more (flush)
        # step for them (spec §12.3).
        self.finished_req_ids: set[str] = set()
        # Requests aborted while a CPU-tier load was in flight: never, without a CPU tier.
        self.aborted_while_loading: dict[str, Request] = {}

    @property
    def running(self) -> list[Request]:
        """Running requests in scheduling order (a copy)."""
        return self.core.running()

    @property
    def waiting(self) -> list[Request]:
        """Waiting requests in the order they are tried (a copy)."""
        return self.core.waiting()

    @property
    def num_running(self) -> int:
        """Running requests."""
        return self.core.num_running

    @property
    def num_waiting(self) -> int:
        """Waiting requests."""
        return self.core.num_waiting

    @property
    def num_queued_tokens(self) -> int:
        """Tokens of unfinished requests not yet scheduled, an output placeholder counting
        as one (see SchedulerReplica.num_queued_tokens)."""
        return self.core.num_queued_tokens

    @property
    def num_preemptions(self) -> int:
        """Preemptions so far."""
        return self.core.num_preemptions

    @property
    def has_unfinished_requests(self) -> bool:
        """True while anything is waiting or running."""
        return bool(self.requests)

    @property
    def has_requests(self) -> bool:
        """True while the engine loop steps: requests unfinished or a finish to flush (§12.3)."""
        return bool(self.requests) or bool(self.finished_req_ids)

    @property
    def has_offload_work(self) -> bool:
        """Never: runs with a CPU tier use the reference Scheduler."""
        return False

    def add_request(self, request: Request) -> None:
        """Queue a new request (its prompt must be shorter than max_model_len)."""
        check_prompt_fits(request, self.config.max_model_len)
        self.requests[request.request_id] = request
        self.core.add_request(request)

    def abort_request(self, request_id: str, now: float = 0.0) -> Request | None:
        """Drop a request wherever it is and free its blocks; None for an unknown id."""
        request = self.requests.pop(request_id, None)
        if request is None:
            return None
        self.core.remove(request)
        self.kv_cache_manager.free(request)
        request.status = RequestStatus.FINISHED_ABORTED
        request.finished_at = now
        self.finished_req_ids.add(request_id)
        return request

    def reset_prefix_cache(self, now: float = 0.0, *, reset_external: bool = False) -> bool:
        """vLLM's `reset_prefix_cache` between steps: the cache is reset only if no request
        holds blocks (the result); there is no CPU tier for `reset_external` to reset."""
        return self.kv_cache_manager.reset_prefix_cache(now)

    def schedule(self, now: float = 0.0) -> StepOutput:
        """Choose this step's requests and token counts, allocating their KV blocks."""
        output = self.core.schedule(now)
        self.finished_req_ids.clear()
        return output

    def update_from_output(
        self, output: StepOutput, now: float = 0.0, completed_jobs: Sequence[int] = ()
    ) -> StepUpdate:
        """Sample one planned token for each request that reached its end; free finished ones.
        (`completed_jobs` are offload transfers, which this scheduler never has.) The result
        reads as a StepResult; its request lists are built when read."""
        if completed_jobs:
            raise ValueError("the compiled scheduler runs without a CPU offload tier")
        result = self.core.update_from_output(output, now)
        self.finished_req_ids.update(request.request_id for request in result.finished)
        return result


def make_scheduler(
    config: SchedulerConfig,
    observer: CacheObserver | None = None,
    *,
    fast_decode_path: bool = True,
    offload: OffloadConnector | None = None,
) -> Scheduler | NativeScheduler:
    """The compiled scheduler where it covers `config`, else the reference Scheduler.
    `fast_decode_path=False` asks for the reference's straightforward path (what equivalence
    tests compare against)."""
    if fast_decode_path and native_scheduler_covers(config, offload):
        return NativeScheduler(config, observer)
    return Scheduler(config, observer, fast_decode_path=fast_decode_path, offload=offload)


def apply_step_output(
    scheduler: Scheduler | NativeScheduler,
    output: SchedulerOutput | StepOutput,
    now: float,
    completed_jobs: Sequence[int] = (),
) -> StepResult | StepUpdate:
    """`scheduler.update_from_output` for either scheduler and the output it scheduled."""
    if isinstance(scheduler, NativeScheduler):
        assert isinstance(output, StepOutput)
        return scheduler.update_from_output(output, now, completed_jobs)
    assert isinstance(output, SchedulerOutput)
    return scheduler.update_from_output(output, now, completed_jobs)
