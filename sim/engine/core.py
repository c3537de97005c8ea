"""One engine replica in simulated time: schedule, wait the step's cost, apply the output."""

from __future__ import annotations

from collections.abc import Callable, Generator
from typing import Any

import simpy

from sim.costmodel.batch import BatchShape
from sim.costmodel.model import CostModel
from sim.engine.offload import OffloadSpec, TransferClock, make_connector
from sim.errors import InputError
from sim.metrics import BlockEvent, NullRecorder, Recorder, RequestRecord, StepRecord
from sim.sched import Request, Scheduler, SchedulerConfig, SchedulerOutput


class _BlockEventForwarder:
    """Passes the cache's block events to the recorder as BlockEvent records."""

    __slots__ = ("recorder",)

    def __init__(self, recorder: Recorder) -> None:
        self.recorder = recorder

    def on_block_event(
        self, kind: str, block_hash: bytes, block_id: int, num_tokens: int, now: float
    ) -> None:
        self.recorder.on_block_event(BlockEvent(kind, now, block_hash, block_id, num_tokens))


def request_record(request: Request) -> RequestRecord:
    """The finished request's row for requests.parquet."""
    return RequestRecord(
        request_id=request.request_id,
        session_id=request.session_id,
        tenant=request.tenant,
        arrival_at=request.arrival_at,
        first_scheduled_at=request.first_scheduled_at,
        first_token_at=request.first_token_at,
        finished_at=request.finished_at,
        num_prompt_tokens=request.num_prompt_tokens,
        num_cached_tokens=request.num_cached_tokens,
        num_computed_prefill_tokens=request.num_computed_prefill_tokens,
        num_output_tokens=request.num_output_tokens,
        num_preemptions=request.num_preemptions,
        inter_token_latencies_s=request.inter_token_latencies_s,
        num_host_cached_tokens=request.num_host_cached_tokens,
    )


def check_max_model_len_fits(config: SchedulerConfig) -> None:
    """vLLM refuses to start when one max_model_len sequence does not fit its KV cache."""
    capacity_tokens = (config.num_gpu_blocks - 1) * config.block_size
    if config.max_model_len > capacity_tokens:
        raise InputError(
            f"engine.max_model_len {config.max_model_len} is larger than the KV cache "
            f"({config.num_gpu_blocks - 1} usable blocks x {config.block_size} = "
            f"{capacity_tokens} tokens), which vLLM refuses at start-up; lower "
            "max_model_len or give the cache more memory"
        )


class EngineCore:
    """A vLLM engine replica: a Scheduler whose steps take `cost_model` time in a SimPy env.

    Same-time rule: a step that starts at time t sees every request submitted at or before t
    (the loop yields once to let pending same-time events run before it schedules).
    """

    def __init__(
        self,
        env: simpy.Environment,
        config: SchedulerConfig,
        cost_model: CostModel,
        *,
        recorder: Recorder | None = None,
        record_block_events: bool = True,
        on_request_finished: Callable[[Request], None] | None = None,
        on_step: Callable[[float], None] | None = None,
        fast_decode_path: bool = True,
        offload: OffloadSpec | None = None,
    ) -> None:
        check_max_model_len_fits(config)
        self.env = env
        self.recorder = recorder if recorder is not None else NullRecorder()
        observer = _BlockEventForwarder(self.recorder) if record_block_events else None
        self.transfer_clock = TransferClock(offload) if offload is not None else None
        connector = (
            make_connector(
                offload,
                config.block_size,
                self.recorder if record_block_events else None,
                self.transfer_clock,
            )
            if offload is not None and self.transfer_clock is not None
            else None
        )
        self.record_block_events = record_block_events
        self.scheduler = Scheduler(
            config, observer=observer, fast_decode_path=fast_decode_path, offload=connector
        )
        self.cost_model = cost_model
        self.on_request_finished = on_request_finished
        self.on_step = on_step
        self.num_steps = 0
        self._wakeup: simpy.Event | None = None
        self.process = env.process(self._run())

    @property
    def hasher(self):
        """The block hasher requests for this replica must be built with."""
        return self.scheduler.hasher

    def submit(self, request: Request) -> None:
        """Queue a request now; wakes the loop if it is idle."""
        self.scheduler.add_request(request)
        if self._wakeup is not None and not self._wakeup.triggered:
            self._wakeup.succeed()

    def _run(self) -> Generator[simpy.Event, Any, None]:
        env = self.env
        scheduler = self.scheduler
        kv_cache_manager = scheduler.kv_cache_manager
        block_pool = kv_cache_manager.block_pool
        recorder = self.recorder
        cost_model = self.cost_model
        clock = self.transfer_clock
        offload_stats = scheduler.offload.stats if scheduler.offload is not None else None
        while True:
            if not (scheduler.has_unfinished_requests or scheduler.has_offload_work):
                self._wakeup = env.event()
                yield self._wakeup
                self._wakeup = None
            if env.peek() == env.now:
                yield env.timeout(0)
            started_at = env.now
            num_preemptions_before = scheduler.num_preemptions
            num_evictions_before = block_pool.num_evictions
            external_before = (
                (offload_stats.queries, offload_stats.hits) if offload_stats is not None else (0, 0)
            )
            if clock is not None:
                clock.now = started_at
            output = scheduler.schedule(started_at)
            if output.total_num_scheduled_tokens == 0:
                if output.preempted:
                    continue  # a request preempted itself; vLLM's next iteration goes on
                if clock is None:
                    raise RuntimeError(
                        "engine step scheduled nothing while requests are unfinished"
                    )
            num_running = len(scheduler.running)
            num_waiting = len(scheduler.waiting)
            if output.total_num_scheduled_tokens:
                duration_s = cost_model.step_time_s(
                    BatchShape(
                        output.prefill_new_tokens,
                        output.prefill_context_tokens,
                        output.decode_context_lens,
                        output.num_lazy_decodes,
                        output.lazy_decode_kv_tokens,
                        output.lazy_longest_context,
                    )
                )
            else:
                duration_s = 0.0  # an empty step that only polls transfers
            if clock is not None and output.transfers is not None:
                duration_s += clock.flush_wait_s(output.transfers, started_at)
            yield env.timeout(duration_s)
            finished_at = env.now
            done: list[int] = []
            if clock is not None and output.transfers is not None:
                clock.submit(output.transfers, finished_at)
                done = clock.take_done(finished_at, output.transfers.flush)
                clock.now = finished_at
                self._record_loads(done, finished_at)
            result = scheduler.update_from_output(output, finished_at, done)
            stats = result.prefix_cache_stats
            self.num_steps += 1
            recorder.on_step(
                StepRecord(
                    step_index=self.num_steps,
                    started_at=started_at,
                    duration_s=duration_s,
                    num_prefill_tokens=sum(output.prefill_new_tokens),
                    num_decode_tokens=len(output.decode_context_lens) + output.num_lazy_decodes,
                    num_running=num_running,
                    num_waiting=num_waiting,
                    num_free_blocks=kv_cache_manager.num_free_blocks,
                    usage=kv_cache_manager.usage,
                    num_preemptions=scheduler.num_preemptions - num_preemptions_before,
                    num_queries=stats.queries,
                    num_hits=stats.hits,
                    num_evictions=block_pool.num_evictions - num_evictions_before,
                    num_external_queries=(
                        offload_stats.queries - external_before[0] if offload_stats else 0
                    ),
                    num_external_hits=(
                        offload_stats.hits - external_before[1] if offload_stats else 0
                    ),
                )
            )
            for request in result.finished:
                recorder.on_request_finished(request_record(request))
                if self.on_request_finished is not None:
                    self.on_request_finished(request)
            if self.on_step is not None:
                self.on_step(finished_at)
            if clock is not None and not output.total_num_scheduled_tokens:
                yield from self._await_transfer_or_arrival(clock, output)

    def _await_transfer_or_arrival(
        self, clock: TransferClock, output: SchedulerOutput
    ) -> Generator[simpy.Event, Any, None]:
        """After a step with nothing to compute: vLLM keeps polling in empty steps; the sim
        jumps to the next transfer completion, or to a new request if one comes first."""
        env = self.env
        next_finish_s = clock.next_finish_s()
        if next_finish_s is None:
            scheduler = self.scheduler
            # A load reported done, or leftovers of a finished request, are taken up by the
            # next step; anything else waiting with no transfer in flight cannot progress.
            if scheduler.has_unfinished_requests and not (
                scheduler.loaded_ids or scheduler.has_offload_work
            ):
                raise RuntimeError("engine step scheduled nothing while requests are unfinished")
            return
        self._wakeup = env.event()
        yield env.timeout(max(0.0, next_finish_s - env.now)) | self._wakeup
        self._wakeup = None

    def _record_loads(self, done: list[int], at: float) -> None:
        """cpu_loaded events for the loads among the jobs reported done."""
        offload = self.scheduler.offload
        if offload is None or not self.record_block_events:
            return
        for job_id in done:
            job = offload.jobs[job_id]
            if not job.is_store:
                for key in job.keys:
                    self.recorder.on_block_event(BlockEvent("cpu_loaded", at, key, -1, 0))
