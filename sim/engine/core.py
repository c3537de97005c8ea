"""One engine replica in simulated time: schedule, wait the step's cost, apply the output."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Generator
from dataclasses import dataclass
from typing import Any, Protocol

import simpy

from sim.costmodel import BatchShape, CostModel, StepTimeModel
from sim.engine.compiled import CompiledReplicas
from sim.engine.offload import OffloadSpec, TransferClock, make_connector
from sim.errors import InputError
from sim.kvcache import pool_capacity_tokens
from sim.metrics import (
    BlockEvent,
    NullRecorder,
    Recorder,
    RequestColumns,
    RequestRecord,
    StepBuffer,
    StepRecord,
)
from sim.native import RequestColumnsBuffer, StepColumnsBuffer, StepLoop
from sim.sched import (
    NativeScheduler,
    Request,
    Scheduler,
    SchedulerConfig,
    SchedulerOutput,
    StepOutput,
    apply_step_output,
    make_scheduler,
)


class _BlockEventForwarder:
    """Passes the cache's block events to the recorder as BlockEvent records."""

    __slots__ = ("recorder", "replica")

    def __init__(self, recorder: Recorder, replica: int) -> None:
        self.recorder = recorder
        self.replica = replica

    def on_block_event(
        self, kind: str, block_hash: bytes, block_id: int, num_tokens: int, now: float
    ) -> None:
        self.recorder.on_block_event(
            BlockEvent(kind, now, block_hash, block_id, num_tokens, self.replica)
        )


def request_record(
    request: Request,
    replica: int = 0,
    frontend_out_s: float | None = None,
    api_arrival_at: float | None = None,
) -> RequestRecord:
    """The finished request's row for requests.parquet, served by `replica`. With a front end
    (`frontend_out_s` given), as the client sees it: arrived at the API server at
    `api_arrival_at` (default: when the engine got it), tokens received `frontend_out_s` after
    the engine emitted them."""
    scheduled_at, first_token_at, finished_at = (
        request.first_scheduled_at,
        request.first_token_at,
        request.finished_at,
    )
    if scheduled_at is None or first_token_at is None or finished_at is None:
        raise ValueError(f"request {request.request_id!r} has no output yet; nothing to record")
    engine_arrival_at = request.arrival_at
    out_s, prefill_done_at = (
        (0.0, None) if frontend_out_s is None else (frontend_out_s, first_token_at)
    )
    arrival_at = engine_arrival_at if api_arrival_at is None else api_arrival_at
    return RequestRecord(
        request.request_id,
        request.session_id,
        request.tenant,
        arrival_at,
        scheduled_at,
        first_token_at + out_s,
        finished_at + out_s,
        request.num_prompt_tokens,
        request.num_cached_tokens,
        request.num_computed_prefill_tokens,
        request.num_output_tokens,
        request.num_preemptions,
        request.inter_token_latencies_s,
        engine_arrival_at - arrival_at,
        out_s,
        prefill_done_at,
        replica,
        request.num_host_cached_tokens,
    )


class RecordView(Protocol):
    """How finished requests are recorded: as the engine saw them (ENGINE_VIEW), or as a client
    sees them through the serving front end (FrontEndStage)."""

    def record(self, request: Request, replica: int) -> RequestRecord:
        """The finished `request`'s record, served by `replica`."""
        ...

    def columns(self, requests: RequestColumns) -> RequestColumns:
        """The same view of requests the compiled step loops recorded as the engine saw them."""
        ...


class _EngineView:
    """Records as the engine saw the requests: request_record's defaults."""

    def record(self, request: Request, replica: int) -> RequestRecord:
        """request_record of `request`, served by `replica`."""
        return request_record(request, replica)

    def columns(self, requests: RequestColumns) -> RequestColumns:
        """The engine's columns as they are."""
        return requests


ENGINE_VIEW: RecordView = _EngineView()


def check_max_model_len_fits(config: SchedulerConfig) -> None:
    """vLLM refuses to start when one max_model_len sequence does not fit its KV cache."""
    capacity_tokens = pool_capacity_tokens(config.num_gpu_blocks, config.block_size)
    if config.max_model_len > capacity_tokens:
        raise InputError(
            f"engine.max_model_len {config.max_model_len:,} is larger than the KV cache "
            f"({config.num_gpu_blocks - 1:,} usable blocks x {config.block_size} = "
            f"{capacity_tokens:,} tokens), which vLLM refuses at start-up; set max_model_len "
            "lower (unset, it is the model's context, as in vLLM) or give the cache more memory"
        )


def compiled_loop_covers(scheduler: Scheduler | NativeScheduler, cost_model: CostModel) -> bool:
    """True when the compiled step loop runs a replica: the compiled scheduler (FCFS, no CPU
    tier) and the linear step-time model. Everything else runs EngineCore's Python loop."""
    return isinstance(scheduler, NativeScheduler) and type(cost_model) is StepTimeModel


def _make_step_loop(
    scheduler: NativeScheduler,
    cost_model: StepTimeModel,
    buffer: StepColumnsBuffer,
    request_buffer: RequestColumnsBuffer,
    replica: int,
) -> StepLoop:
    coefficients = cost_model.coefficients
    return StepLoop(
        scheduler.core,
        scheduler.kv_cache_manager,
        scheduler.requests,
        step_overhead_s=coefficients.step_overhead_s,
        per_token_s=coefficients.per_token_s,
        t_star_tokens=coefficients.t_star_tokens,
        half_pair_s=cost_model._half_pair_s,
        per_kv_token_s=coefficients.per_kv_token_s,
        per_decode_seq_s=coefficients.per_decode_seq_s,
        cost_model=cost_model,
        covered=cost_model.covered,
        buffer=buffer,
        request_buffer=request_buffer,
        replica=replica,
        async_scheduling=scheduler.async_scheduling,
    )


class QueueFullError(ValueError):
    """vLLM's front end turned a request away (HTTP 503): max_num_queued_reqs or
    max_num_queued_tokens reached (spec §12.8). The request never reaches the cache."""


@dataclass(slots=True)
class _Batch:
    """A scheduled step on its way through the GPU, with what its step record needs."""

    output: SchedulerOutput | StepOutput
    started_at: float
    duration_s: float
    num_running: int
    num_waiting: int
    num_preemptions: int
    num_evictions: int

    @property
    def ends_at(self) -> float:
        return self.started_at + self.duration_s


class EngineCore:
    """A vLLM engine replica: a Scheduler whose steps take `cost_model` time in a SimPy env.

    Same-time rule: a step that starts at time t sees every request submitted at or before t
    (the loop yields once to let pending same-time events run before it schedules).
    With async scheduling (the scheduler config's `async_scheduling`) the loop keeps up to two
    steps in flight as vLLM's engine core does: step k+1 is scheduled as soon as step k is
    launched, and step k's output is processed when it ends, while k+1 runs on the GPU.
    Steps that schedule nothing (vLLM's flush steps) take no time and are not recorded.
    With CPU offloading an empty step is applied and recorded like any other (its admissions
    may start loads; with async scheduling it queues behind the step in flight), and once
    only empty steps are left the loop waits for the next transfer to finish or a request to
    arrive, as vLLM's engine polls transfers in empty steps.

    Where `compiled_loop_covers` the configuration, the same loop runs in C++ (StepLoop),
    many steps per SimPy event (sim/engine/compiled.py: `compiled_replicas` runs the loops of
    one clock's replicas together), in the same order as the Python loop. `on_request_finished`
    then runs at the finishing step's time for requests of a session; for others it may run
    later, before any other event. The compiled loops write finished requests' records as
    columns, which reach the recorder in batches (`on_requests_finished`).
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
        replica: int = 0,
        step_buffer: StepBuffer | None = None,
        compiled_loop: bool = True,
        compiled_replicas: CompiledReplicas | None = None,
        record_view: RecordView = ENGINE_VIEW,
    ) -> None:
        check_max_model_len_fits(config)
        self.record_view = record_view
        self.env = env
        self.replica = replica  # stamped on every record this replica hands the recorder
        self.recorder = recorder if recorder is not None else NullRecorder()
        # Steps reach the recorder in batches, through a buffer the cluster's engines share.
        self.step_buffer = step_buffer if step_buffer is not None else StepBuffer(self.recorder)
        observer = _BlockEventForwarder(self.recorder, replica) if record_block_events else None
        self.record_block_events = record_block_events
        self.transfer_clock = TransferClock(offload) if offload is not None else None
        connector = None
        if offload is not None and self.transfer_clock is not None:
            tier_recorder = self.recorder if record_block_events else None
            connector = make_connector(
                offload,
                config.block_size,
                tier_recorder,
                self.transfer_clock,
                gpu_prefix_caching=config.enable_caching,
                replica=replica,
            )
        self.scheduler = make_scheduler(
            config, observer, fast_decode_path=fast_decode_path, offload=connector
        )
        self._queue_limited = (
            config.max_num_queued_reqs is not None or config.max_num_queued_tokens is not None
        )
        # The external counters already written to step records.
        self._external_recorded = (0, 0)
        self.cost_model = cost_model
        self.on_request_finished = on_request_finished
        self.on_step = on_step
        self._num_steps = 0
        self.num_queue_full_rejections = 0
        self._wakeup: simpy.Event | None = None
        self._gpu_free_at = 0.0
        # Steps launched but not yet processed, newest first (at most 2 with async scheduling).
        self._in_flight: deque[_Batch] = deque()
        self._loop: StepLoop | None = None
        if compiled_loop and compiled_loop_covers(self.scheduler, cost_model):
            assert isinstance(self.scheduler, NativeScheduler)
            assert isinstance(cost_model, StepTimeModel)
            if compiled_replicas is None:
                compiled_replicas = CompiledReplicas(env, self.step_buffer)
            self._loop = _make_step_loop(
                self.scheduler,
                cost_model,
                compiled_replicas.columns,
                compiled_replicas.request_columns,
                replica,
            )
            self._compiled = compiled_replicas
            self._compiled_index = compiled_replicas.add(self, self._loop)
        else:
            if compiled_replicas is not None:
                compiled_replicas.add_python_loop()
            self.step_buffer.attach_engine()  # the Python loop says when it idles
            self.process = env.process(self._run())

    @property
    def num_steps(self) -> int:
        """Engine steps applied so far."""
        return self._loop.num_steps if self._loop is not None else self._num_steps

    @property
    def hasher(self):
        """The block hasher requests for this replica must be built with."""
        return self.scheduler.hasher

    def submit(self, request: Request) -> None:
        """Queue a request now; wakes the loop if it is idle. Raises QueueFullError when the
        front end's queue limits turn it away."""
        if self._queue_limited:
            problem = self._queue_limit_problem()
            if problem is not None:
                self.num_queue_full_rejections += 1
                raise QueueFullError(f"request {request.request_id!r} rejected: {problem}")
        self.scheduler.add_request(request)
        loop = self._loop
        if loop is not None:
            if request.session_id is not None and self.on_request_finished is not None:
                loop.stop_on_finish_of(request)  # its next turn is released at its finish
            self._compiled.wake(self._compiled_index)
        elif self._wakeup is not None and not self._wakeup.triggered:
            self._wakeup.succeed()

    def _queue_limit_problem(self) -> str | None:
        """Why vLLM's API server would reject one more request now, if it would."""
        config = self.scheduler.config
        requests = self.scheduler.requests
        if (
            config.max_num_queued_reqs is not None
            and len(requests) + 1 > config.max_num_queued_reqs
        ):
            limit = config.max_num_queued_reqs
            return f"{len(requests)} unfinished requests, max_num_queued_reqs {limit}"
        if config.max_num_queued_tokens is not None:
            # The front end knows a request has left prefill only from its first token.
            queued = sum(
                request.num_prompt_tokens
                for request in requests.values()
                if request.first_token_at is None
            )
            if queued >= config.max_num_queued_tokens:
                limit = config.max_num_queued_tokens
                return f"{queued} prompt tokens in prefill, max_num_queued_tokens {limit}"
        return None

    def _run(self) -> Generator[simpy.Event, Any, None]:
        env = self.env
        scheduler = self.scheduler
        in_flight = self._in_flight
        max_in_flight = 2 if scheduler.async_scheduling else 1
        clock = self.transfer_clock
        while True:
            if scheduler.has_unfinished_requests or scheduler.has_offload_work:
                if env.peek() == env.now:
                    yield env.timeout(0)
                batch = self._launch_step(env.now)
                if clock is not None and not batch.output.total_num_scheduled_tokens:
                    if max_in_flight == 1:
                        if batch.duration_s:
                            yield env.timeout(batch.duration_s)  # a flush the step waits for
                        if not self._process_step(batch, env.now):
                            yield from self._await_transfer_or_arrival(clock)
                        continue
                    in_flight.appendleft(batch)
                    if len(in_flight) < max_in_flight:
                        continue
                elif batch.output.total_num_scheduled_tokens:
                    in_flight.appendleft(batch)
                    if len(in_flight) < max_in_flight:
                        continue  # async: schedule the next step before this one's output
                elif not in_flight:
                    if not batch.output.preempted:
                        raise RuntimeError(
                            "engine step scheduled nothing while requests are unfinished"
                        )
                    continue  # a request preempted itself; vLLM's next iteration goes on
            elif not in_flight:
                self.step_buffer.engine_idle()
                self._wakeup = env.event()
                yield self._wakeup
                self._wakeup = None
                self.step_buffer.engine_busy()
                continue
            batch = in_flight.pop()
            if batch.started_at == env.now:
                yield env.timeout(batch.duration_s)
            elif batch.ends_at > env.now:
                yield env.timeout(batch.ends_at - env.now)
            load_reported = self._process_step(batch, env.now)
            if (
                clock is not None
                and not load_reported
                and not batch.output.total_num_scheduled_tokens
                and not any(queued.output.total_num_scheduled_tokens for queued in in_flight)
            ):
                yield from self._await_transfer_or_arrival(clock)  # async: only empty steps left

    def _launch_step(self, now: float) -> _Batch:
        """Schedule a step; it runs on the GPU once the previous one ends (an empty step takes
        no time)."""
        scheduler = self.scheduler
        block_pool = scheduler.kv_cache_manager.block_pool
        num_preemptions_before = scheduler.num_preemptions
        num_evictions_before = block_pool.num_evictions
        clock = self.transfer_clock
        if clock is not None:
            clock.now = now
        output = scheduler.schedule(now)
        started_at = now
        duration_s = 0.0
        if clock is not None and output.transfers is not None:
            duration_s = clock.flush_wait_s(output.transfers, now)
            duration_s += clock.sync_load_wait_s(output.transfers)
        if output.total_num_scheduled_tokens:
            duration_s += self.cost_model.step_time_s(
                BatchShape(
                    output.prefill_new_tokens,
                    output.prefill_context_tokens,
                    output.decode_context_lens,
                    output.num_lazy_decodes,
                    output.lazy_decode_kv_tokens,
                    output.lazy_longest_context,
                )
            )
            started_at = max(now, self._gpu_free_at)
            self._gpu_free_at = started_at + duration_s
        return _Batch(
            output,
            started_at,
            duration_s,
            scheduler.num_running,
            scheduler.num_waiting,
            scheduler.num_preemptions - num_preemptions_before,
            block_pool.num_evictions - num_evictions_before,
        )

    def _process_step(self, batch: _Batch, now: float) -> bool:
        """Apply a finished step's output and record it; True when it reported a load done
        (the next step schedules that request, so an idle loop must not wait)."""
        scheduler = self.scheduler
        kv_cache_manager = scheduler.kv_cache_manager
        output = batch.output
        clock = self.transfer_clock
        done: list[int] = []
        if clock is not None and output.transfers is not None:
            clock.submit(output.transfers, batch.ends_at)
            done = clock.take_done(now, output.transfers.flush)
            clock.now = now
            self._record_loads(done, now)
        offload = scheduler.offload
        load_reported = offload is not None and any(
            not offload.jobs[job_id].is_store for job_id in done
        )
        result = apply_step_output(scheduler, output, now, done)
        stats = result.prefix_cache_stats
        external_queries, external_hits = self._external_delta()
        self._num_steps += 1
        self.step_buffer.add(
            StepRecord(
                step_index=self._num_steps,
                started_at=batch.started_at,
                duration_s=batch.duration_s,
                num_prefill_tokens=sum(output.prefill_new_tokens),
                num_decode_tokens=len(output.decode_context_lens) + output.num_lazy_decodes,
                num_running=batch.num_running,
                num_waiting=batch.num_waiting,
                num_free_blocks=kv_cache_manager.num_free_blocks,
                usage=kv_cache_manager.usage,
                num_preemptions=batch.num_preemptions,
                num_queries=stats.queries,
                num_hits=stats.hits,
                num_evictions=batch.num_evictions,
                num_external_queries=external_queries,
                num_external_hits=external_hits,
                replica=self.replica,
                cached_free_usage=kv_cache_manager.block_pool.cached_free_usage,
            )
        )
        for request in result.finished:
            self._hand_over_finished(request)
        if self.on_step is not None:
            self.on_step(now)
        return load_reported

    def _hand_over_finished(self, request: Request) -> None:
        """A finished request to the recorder and the `on_request_finished` callback."""
        self.recorder.on_request_finished(self.record_view.record(request, self.replica))
        if self.on_request_finished is not None:
            self.on_request_finished(request)

    def _external_delta(self) -> tuple[int, int]:
        """The CPU tier's query and hit tokens counted since the last step record."""
        offload = self.scheduler.offload
        if offload is None:
            return 0, 0
        queries, hits = offload.stats.queries, offload.stats.hits
        recorded_queries, recorded_hits = self._external_recorded
        self._external_recorded = (queries, hits)
        return queries - recorded_queries, hits - recorded_hits

    def _await_transfer_or_arrival(self, clock: TransferClock) -> Generator[simpy.Event, Any, None]:
        """After a step with nothing to compute: vLLM keeps polling in empty steps; the sim
        jumps to the next transfer completion, or to a new request if one comes first."""
        env = self.env
        next_finish_s = clock.next_finish_s()
        if next_finish_s is None:
            scheduler = self.scheduler
            assert isinstance(scheduler, Scheduler)  # offload runs use the reference scheduler
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
                    self.recorder.on_block_event(
                        BlockEvent("cpu_loaded", at, key, -1, 0, self.replica)
                    )
