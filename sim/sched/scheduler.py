"""vLLM v1's scheduling step, sync or async, without a clock of its own (spec §7, §12).

`schedule(now)` picks this step's tokens: running requests first (decodes and unfinished chunks,
preempting by recompute when blocks run out), then waiting requests in policy order within the
token budget and `max_num_seqs`. `update_from_output(output, now)` plays the fake model: each
request whose scheduled tokens reach its sequence end samples its next planned token; finished
requests free their blocks.

With `async_scheduling` the engine schedules a step before the previous step's output is
processed (spec §7.4): a request whose last scheduled step samples a token holds an output
placeholder for it, its next decode is scheduled against the placeholder, and the block that
token fills is registered one step later. A request preempted with a step in flight waits in
the queue until that step's output (still delivered) has been processed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from sim.kvcache import CacheManager, CacheObserver, Hasher, PrefixCacheStats, RequestStatus
from sim.native import make_hasher, make_manager
from sim.sched.block_fence import BlockFreeFence
from sim.sched.config import SchedulerConfig
from sim.sched.lazy_decode import LazyDecoders
from sim.sched.offload import OffloadConnector, StepTransfers
from sim.sched.queues import FcfsQueue, PriorityQueue
from sim.sched.request import Request

# Distinct blocks whose hashes the fast path remembers (~20 MB at block size 16).
HASH_MEMO_SIZE = 65536


@dataclass(slots=True)
class Admission:
    """A request that left the waiting queue this step, with the tokens it had in KV (its
    prefix hit, GPU plus CPU tier)."""

    request: Request
    num_hit_tokens: int
    resumed: bool
    # Straight from WAITING_FOR_REMOTE_KVS: its load was admitted (and counted) earlier.
    after_load: bool = False


@dataclass(slots=True)
class SchedulerOutput:
    """One step's batch: tokens per request (running first, then admitted) and its shape."""

    num_scheduled_tokens: dict[str, int] = field(default_factory=dict)
    scheduled: list[Request] = field(default_factory=list)
    admitted: list[Admission] = field(default_factory=list)
    preempted: list[Request] = field(default_factory=list)
    total_num_scheduled_tokens: int = 0
    # A running request continued its prefill or an admission has more than one token to
    # compute (what prefill_schedule_interval times from).
    carries_prefill: bool = False
    # Requests whose chunk stops short of the sequence end: they sample nothing this step.
    partial_prefill_ids: set[str] = field(default_factory=set)
    # Batch shape for the cost model: prefill chunks (new tokens, tokens already in KV) and
    # the KV length of each decode.
    prefill_new_tokens: list[int] = field(default_factory=list)
    prefill_context_tokens: list[int] = field(default_factory=list)
    decode_context_lens: list[int] = field(default_factory=list)
    # With CPU offloading: the loads and stores this step hands to the workers (spec §13.6).
    transfers: StepTransfers | None = None
    # Event-driven decoders that advanced this step without being listed (see lazy_decode).
    num_lazy_decodes: int = 0
    lazy_decode_kv_tokens: int = 0
    lazy_longest_context: int = 0

    def add(self, request: Request, num_new_tokens: int) -> None:
        """Put `num_new_tokens` of `request` in this step's batch."""
        self.num_scheduled_tokens[request.request_id] = num_new_tokens
        self.scheduled.append(request)

    def take_back(self, request: Request) -> int:
        """Drop a preempted request from the batch; returns the tokens it had (0 if none)."""
        num_new_tokens = self.num_scheduled_tokens.pop(request.request_id, 0)
        if num_new_tokens:
            self.scheduled.remove(request)
        return num_new_tokens


@dataclass(slots=True)
class StepResult:
    """What the fake model produced: the requests that sampled a token and those that finished."""

    sampled: list[Request]
    finished: list[Request]
    prefix_cache_stats: PrefixCacheStats


def make_cache(
    config: SchedulerConfig, core: str, observer: CacheObserver | None, *, memo_size: int
) -> tuple[Hasher, CacheManager]:
    """The block hasher and KV cache manager of `core` sized by `config`."""
    hasher = make_hasher(
        core,
        config.hash_algo,
        config.block_size,
        config.hash_seed,
        memo_size=memo_size,
        identity=config.block_identity,
    )
    manager = make_manager(
        core,
        config.num_gpu_blocks,
        config.block_size,
        max_model_len=config.max_model_len,
        enable_caching=config.enable_caching,
        watermark=config.watermark,
        observer=observer,
    )
    return hasher, manager


def check_prompt_fits(request: Request, max_model_len: int) -> None:
    """vLLM rejects a prompt of max_model_len tokens or more (ValueError naming both)."""
    if request.num_prompt_tokens >= max_model_len:
        raise ValueError(
            f"request {request.request_id!r}: prompt of {request.num_prompt_tokens} tokens "
            f"must be shorter than max_model_len {max_model_len}"
        )


class Scheduler:
    """Running-first continuous batching with chunked prefill and preemption by recompute."""

    def __init__(
        self,
        config: SchedulerConfig,
        observer: CacheObserver | None = None,
        *,
        fast_decode_path: bool = False,
        offload: OffloadConnector | None = None,
    ) -> None:
        self.config = config
        self.offload = offload
        self.async_scheduling = config.async_scheduling
        # True takes decode tokens inside a held block without the general allocate_slots and,
        # with sync scheduling, advances steady decoders event by event (LazyDecoders); False
        # is the straightforward path that the equivalence tests compare against. Request
        # state is exact between steps only in the straightforward path (lazy requests catch
        # up when due). Lazy decoders skip the per-step bookkeeping the offload connector needs.
        self.fast_decode_path = fast_decode_path
        self.lazy = (
            LazyDecoders(config.block_size)
            if fast_decode_path and not config.async_scheduling and offload is None
            else None
        )
        self.hasher, self.kv_cache_manager = make_cache(
            config, config.core, observer, memo_size=HASH_MEMO_SIZE if fast_decode_path else 0
        )
        self.waiting: FcfsQueue | PriorityQueue = (
            PriorityQueue() if config.policy == "priority" else FcfsQueue()
        )
        self.running: list[Request] = []
        self.requests: dict[str, Request] = {}
        # Ids finished or aborted since the last schedule(): the engine runs one more (flush)
        # step for them (spec §12.3).
        self.finished_req_ids: set[str] = set()
        self.num_preemptions = 0
        # prefill_schedule_interval (spec §12.8): steps that scheduled tokens, the last of them
        # that carried prefill, whether the last unheld step left requests waiting, and the
        # requests the waiting pass skipped (async: output in flight) and not yet admitted.
        self.num_executed_steps = 0
        self.last_prefill_step = -config.prefill_schedule_interval
        self.prefill_capacity_bound = False
        self.deferred_ids: set[str] = set()
        # With CPU offloading (spec §13.7): waiting requests that hold blocks (a load in flight
        # or done) are tried first; ids whose load is reported done; requests aborted during a
        # load, whose blocks stay until it ends; requests whose prefill is not fully
        # scheduled yet (async-load admissions leave their remaining blocks free); requests
        # finished or aborted since the last schedule, in that order.
        self.kv_holding: FcfsQueue | PriorityQueue = (
            PriorityQueue() if config.policy == "priority" else FcfsQueue()
        )
        self.loaded_ids: set[str] = set()
        self.aborted_while_loading: dict[str, Request] = {}
        self.inflight_prefills: dict[str, Request] = {}
        self.finished_since_schedule: list[Request] = []
        # A connector that loads KV counts as a consumer: with two steps in flight vLLM defers
        # block frees until the steps writing the blocks are processed (spec §13.9).
        self.block_fence = (
            BlockFreeFence() if offload is not None and config.async_scheduling else None
        )

    @property
    def has_unfinished_requests(self) -> bool:
        """True while anything is waiting or running."""
        return bool(self.running) or len(self.waiting) > 0 or len(self.kv_holding) > 0

    @property
    def num_running(self) -> int:
        """Running requests."""
        return len(self.running)

    @property
    def num_waiting(self) -> int:
        """Waiting requests (those holding blocks for a CPU-tier load not counted)."""
        return len(self.waiting)

    @property
    def num_queued_tokens(self) -> int:
        """Tokens of unfinished requests not yet scheduled: mostly prompts still to prefill.

        With async scheduling a decode step in flight has computed a token that is not appended
        yet (its output placeholder): counted, so that a decoding request is 1 either way.
        """
        return sum(
            request.num_tokens + request.num_output_placeholders - request.num_computed_tokens
            for request in self.requests.values()
        )

    @property
    def has_offload_work(self) -> bool:
        """With CPU offloading the engine also steps while a transfer is in flight, a request
        aborted during its load still holds blocks, or a finish is still to be planned."""
        offload = self.offload
        return offload is not None and (
            offload.has_jobs_in_flight
            or bool(self.aborted_while_loading)
            or bool(self.finished_since_schedule)
        )

    @property
    def has_requests(self) -> bool:
        """True while the engine loop steps: requests unfinished or a finish to flush (§12.3)."""
        return self.has_unfinished_requests or bool(self.finished_req_ids) or self.has_offload_work

    def add_request(self, request: Request) -> None:
        """Queue a new request (its prompt must be shorter than max_model_len)."""
        check_prompt_fits(request, self.config.max_model_len)
        self.requests[request.request_id] = request
        self.waiting.add(request)
        if self.offload is not None:
            self.offload.add_request(request)

    def abort_request(self, request_id: str, now: float = 0.0) -> Request | None:
        """Drop a request wherever it is and free its blocks; None (nothing changes) for an
        unknown or already finished id, as vLLM ignores those (spec §12.2)."""
        request = self.requests.pop(request_id, None)
        if request is None:
            return None
        if self.lazy is not None and request.lazy_sync_step >= 0:
            self.lazy.materialize(request)
        if request.status is RequestStatus.RUNNING:
            self.running.remove(request)
        elif self._holds_blocks(request):
            self.kv_holding.remove(request)
        else:
            self.waiting.remove(request)
        loading = (
            request.status is RequestStatus.WAITING_FOR_REMOTE_KVS
            and request.request_id not in self.loaded_ids
        )
        if loading:
            self.aborted_while_loading[request.request_id] = request  # freed when it lands
        else:
            self._free_blocks(request)
        self.deferred_ids.discard(request_id)
        request.status = RequestStatus.FINISHED_ABORTED
        request.finished_at = now
        self.finished_req_ids.add(request_id)
        self._offload_finished(request)
        return request

    def reset_prefix_cache(self, now: float = 0.0, *, reset_external: bool = False) -> bool:
        """vLLM's `reset_prefix_cache` between steps, running requests left alone: the GPU
        cache is reset only if no request holds blocks (the result); with `reset_external`
        the CPU tier is reset whatever the GPU reset did (spec §13.9)."""
        reset = self.kv_cache_manager.reset_prefix_cache(now)
        if reset_external and self.offload is not None:
            self.offload.reset()
        return reset

    @staticmethod
    def _holds_blocks(request: Request) -> bool:
        # Waiting requests with blocks: a load in flight, or done but not yet scheduled.
        return (
            request.num_computed_tokens > 0
            or request.status is RequestStatus.WAITING_FOR_REMOTE_KVS
        )

    def _free_blocks(self, request: Request) -> None:
        """Release the request's blocks, or fence them while a step in flight writes them."""
        fence = self.block_fence
        if fence is None:
            self.kv_cache_manager.free(request)
        else:
            fence.free(request, self.kv_cache_manager)

    def _offload_finished(self, request: Request) -> None:
        if self.offload is None:
            return
        self.loaded_ids.discard(request.request_id)
        self.inflight_prefills.pop(request.request_id, None)
        self.offload.request_finished(request.request_id)
        self.finished_since_schedule.append(request)

    def schedule(self, now: float = 0.0) -> SchedulerOutput:
        """Choose this step's requests and token counts, allocating their KV blocks."""
        output = SchedulerOutput()
        threshold = self._long_prefill_threshold()
        hold_prefill = self._hold_prefill()
        budget = self.config.max_num_batched_tokens
        if self.lazy is not None:
            budget = self._advance_lazy_decoders(output, budget, threshold)
        budget = self._schedule_running(output, budget, threshold, hold_prefill, now)
        if not output.preempted:
            self._schedule_waiting(output, budget, threshold, hold_prefill, now)
            if not hold_prefill:
                num_waiting = len(self.waiting) + len(self.kv_holding)
                self.prefill_capacity_bound = num_waiting > len(self.deferred_ids)
        if self.offload is not None:
            output.transfers = self._plan_transfers(output)
        self._update_after_schedule(output)
        if self.block_fence is not None and output.total_num_scheduled_tokens:
            self.block_fence.step_scheduled(output.scheduled)
        if self.inflight_prefills:
            for request in output.scheduled:
                if not request.is_prefill_chunk:
                    self.inflight_prefills.pop(request.request_id, None)
        self.finished_req_ids.clear()
        return output

    def _long_prefill_threshold(self) -> int:
        """The step's chunk cap: none when at most one request is eligible (spec §12.1),
        raised to a fair share of the budget when adaptive (§12.8)."""
        config = self.config
        num_eligible = len(self.running) + len(self.waiting) + len(self.kv_holding)
        if num_eligible <= 1:
            return 0
        threshold = config.long_prefill_token_threshold
        if threshold > 0 and config.long_prefill_token_threshold_adaptive:
            threshold = max(threshold, config.max_num_batched_tokens // num_eligible)
        return threshold

    def _hold_prefill(self) -> bool:
        """prefill_schedule_interval (spec §12.8): hold this step's prefill while a running
        request decodes and fewer than the interval's executed steps passed since the last
        prefill, unless the last unheld step could not drain the queue."""
        interval = self.config.prefill_schedule_interval
        return (
            interval > 1
            and not self.prefill_capacity_bound
            and self.num_executed_steps + 1 - self.last_prefill_step < interval
            and any(not request.is_prefill_chunk for request in self.running)
        )

    def _advance_lazy_decoders(self, output: SchedulerOutput, budget: int, threshold: int) -> int:
        """Let the lazy decoders take this step implicitly, or bring them all up to date when
        the step could run short; returns the budget left."""
        lazy = self.lazy
        assert lazy is not None
        step = lazy.num_completed_steps + 1
        lazy.pop_due(step)
        if lazy.num_lazy and not self._lazy_step_is_safe(budget, threshold):
            lazy.materialize_all(self.running)
        num_lazy = lazy.num_lazy
        if num_lazy:
            output.num_lazy_decodes = num_lazy
            output.lazy_decode_kv_tokens = lazy.kv_tokens(step)
            output.lazy_longest_context = lazy.longest_context(step)
        return budget - num_lazy

    def _schedule_running(
        self,
        output: SchedulerOutput,
        budget: int,
        threshold: int,
        hold_prefill: bool,
        now: float,
    ) -> int:
        """The running pass: serve running requests in order; returns the budget left."""
        running = self.running
        manager = self.kv_cache_manager
        max_model_len = self.config.max_model_len
        fast_decode_path = self.fast_decode_path
        index = 0
        while index < len(running) and budget > 0:
            request = running[index]
            if (
                request.lazy_sync_step >= 0
                or self._output_limit_in_flight(request)
                or (hold_prefill and request.is_prefill_chunk)
            ):
                index += 1
                continue
            num_computed = request.num_computed_tokens
            num_new_tokens = request.num_tokens + request.num_output_placeholders - num_computed
            if (
                fast_decode_path
                and num_new_tokens == 1
                and num_computed < max_model_len - 1
                and manager.allocate_one_slot(request, now)
            ):
                # A decode token (or a prefill's last): the same blocks and caching as
                # allocate_slots, done lean. (If it needs a block and none is free, the
                # general path below preempts.)
                if request.is_prefill_chunk:
                    output.carries_prefill = True
                output.add(request, 1)
                budget -= 1
                index += 1
                continue
            if 0 < threshold < num_new_tokens:
                num_new_tokens = threshold
            num_new_tokens = min(num_new_tokens, budget, max_model_len - 1 - num_computed)
            if num_new_tokens <= 0:
                index += 1
                continue
            allocated, index, returned = self._allocate_or_preempt(
                request, num_new_tokens, index, output, now
            )
            budget += returned
            if allocated:
                if request.is_prefill_chunk:
                    output.carries_prefill = True
                output.add(request, num_new_tokens)
                budget -= num_new_tokens
                index += 1
            elif self.config.policy != "priority" or request.status is not RequestStatus.PREEMPTED:
                break
            # Under priority a request that preempted itself ends nothing: the pass goes on
            # with the next running request, now at `index` (spec §12.6).
        return budget

    def _output_limit_in_flight(self, request: Request) -> bool:
        """Async: the steps in flight already sample the request's last token, so vLLM
        schedules no further step for it (spec §7.4)."""
        placeholders = request.num_output_placeholders
        return (
            placeholders > 0
            and request.num_computed_tokens + 2 - placeholders
            >= request.num_prompt_tokens + request.max_tokens
        )

    def _allocate_or_preempt(
        self,
        request: Request,
        num_new_tokens: int,
        index: int,
        output: SchedulerOutput,
        now: float,
    ) -> tuple[bool, int, int]:
        """Allocate the request's blocks, preempting victims until they fit or the request
        itself is the victim. Returns (allocated, its index in running now, tokens that
        preempted requests gave back to the budget)."""
        running = self.running
        returned = 0
        fence = self.block_fence
        while self.kv_cache_manager.allocate_slots(request, num_new_tokens, now=now) is None:
            victim = self._pick_victim()
            if fence is not None and not fence.can_free_now(victim):
                return False, index, returned  # its free would come too late to help
            position = running.index(victim)
            del running[position]
            if position < index:
                index -= 1
            returned += output.take_back(victim)
            self._preempt(victim, now)
            output.preempted.append(victim)
            if victim is request:
                return False, index, returned
        return True, index, returned

    def _lazy_step_is_safe(self, budget: int, threshold: int) -> bool:
        """True when this step cannot run out of budget or blocks before every running request
        is served: then lazy requests can skip it, as nothing they could be part of happens."""
        lazy = self.lazy
        assert lazy is not None
        manager = self.kv_cache_manager
        max_model_len = self.config.max_model_len
        block_size = self.config.block_size
        demand = lazy.num_lazy
        blocks_needed = 0
        for request in self.running:
            if request.lazy_sync_step >= 0:
                continue
            num_computed = request.num_computed_tokens
            num_new_tokens = request.num_tokens - num_computed
            if 0 < threshold < num_new_tokens:
                num_new_tokens = threshold
            num_new_tokens = min(num_new_tokens, max_model_len - 1 - num_computed)
            if num_new_tokens <= 0:
                continue
            demand += num_new_tokens
            num_slots = min(num_computed + num_new_tokens, max_model_len)
            num_held = manager.num_held_blocks(request.request_id)
            if num_slots > num_held * block_size:
                blocks_needed += -(-num_slots // block_size) - num_held
        return demand <= budget and blocks_needed <= manager.num_free_blocks

    def _schedule_waiting(
        self,
        output: SchedulerOutput,
        budget: int,
        threshold: int,
        hold_prefill: bool,
        now: float,
    ) -> None:
        """The waiting pass: admit requests in policy order until one does not fit (head of
        line). A request whose pre-preemption step is still in flight (async) is skipped for
        the step. With a CPU tier (spec §13.7, vLLM's connector path) requests holding blocks
        go first; a CPU hit is admitted as an async load that waits in WAITING_FOR_REMOTE_KVS
        (or, within the sync-load budget, runs at once); a request whose hit is still being
        stored or loaded, or whose own transfers are in flight, is skipped."""
        config = self.config
        manager = self.kv_cache_manager
        offload = self.offload
        running = self.running
        skipped_holding: list[Request] = []
        skipped_waiting: list[Request] = []

        def skip(queue: FcfsQueue | PriorityQueue) -> None:
            request = queue.pop()
            self.deferred_ids.add(request.request_id)
            (skipped_holding if self._holds_blocks(request) else skipped_waiting).append(request)

        while budget > 0:
            queue = self.kv_holding if len(self.kv_holding) else self.waiting
            if not len(queue) or len(running) >= config.max_num_admitted_seqs:
                break
            request = queue.peek()
            after_load = request.status is RequestStatus.WAITING_FOR_REMOTE_KVS
            if after_load:
                if request.request_id not in self.loaded_ids:
                    skip(queue)
                    continue
                self._finish_load(request, now)
            if request.num_stale_output_tokens:
                skip(queue)  # async: its pre-preemption step is still in flight (spec §12.8)
                continue
            looked_up = request.num_computed_tokens == 0
            num_external = 0
            if looked_up:
                hit_blocks, num_hit_tokens = manager.get_computed_blocks(request)
                if offload is not None:
                    found = offload.lookup(request, num_hit_tokens)
                    if request.skip_reading_prefix_cache:
                        found = 0
                    if found is None:
                        skip(queue)
                        continue
                    num_external = found
            else:
                hit_blocks, num_hit_tokens = [], 0
            num_computed = request.num_computed_tokens + num_hit_tokens + num_external
            load_async = num_external > 0 and not (
                offload is not None and offload.is_sync_load(request.request_id)
            )
            reserved = 0
            if not load_async and hold_prefill and num_computed < request.num_tokens - 1:
                break
            if load_async:
                num_new_tokens = 0
                reserved = sum(
                    manager.num_blocks_to_allocate(
                        held.request_id, min(held.num_tokens, config.max_model_len), ()
                    )
                    for held in self.inflight_prefills.values()
                )
            else:
                chunk = self._prefill_chunk(request.num_tokens - num_computed, threshold, budget)
                if chunk is None:
                    break
                num_new_tokens = chunk
            new_blocks = manager.allocate_slots(
                request,
                num_new_tokens,
                num_hit_tokens,
                hit_blocks,
                full_sequence_must_fit=config.scheduler_reserve_full_isl,
                has_running_requests=bool(running),
                num_external_computed_tokens=num_external,
                delay_cache_blocks=load_async,
                reserved_blocks=reserved,
                now=now,
            )
            if new_blocks is None:
                break  # head-of-line blocking on KV capacity
            if offload is not None:
                offload.after_admission(
                    request, manager.get_block_ids(request.request_id), num_hit_tokens, num_external
                )
            if looked_up:
                if offload is not None:
                    offload.record_admission(
                        request, num_hit_tokens, num_external, preempted=request.num_preemptions > 0
                    )
                    if request.num_cached_tokens < 0:
                        request.num_host_cached_tokens = num_external
                manager.record_prefix_cache_stats(request, num_hit_tokens)
            if load_async:
                request.status = RequestStatus.WAITING_FOR_REMOTE_KVS
                request.num_computed_tokens = num_computed
                self.inflight_prefills[request.request_id] = request
                skip(queue)
                continue
            queue.pop()
            self._admit(output, request, num_computed, num_new_tokens, now, after_load=after_load)
            if offload is not None and num_computed + num_new_tokens < request.num_tokens:
                self.inflight_prefills[request.request_id] = request
            budget -= num_new_tokens
        if skipped_holding:
            self.kv_holding.prepend_all(skipped_holding)
        if skipped_waiting:
            self.waiting.prepend_all(skipped_waiting)

    def _prefill_chunk(self, num_remaining: int, threshold: int, budget: int) -> int | None:
        """Tokens a waiting request gets this step: its remaining prefill, capped by the
        long-prefill threshold and the budget; None when it must not be chunked and does not
        fit (the waiting pass stops there)."""
        num_new_tokens = num_remaining
        if 0 < threshold < num_new_tokens:
            num_new_tokens = threshold
        if not self.config.enable_chunked_prefill and num_new_tokens > budget:
            return None
        return min(num_new_tokens, budget)

    def _update_after_schedule(self, output: SchedulerOutput) -> None:
        """Advance each scheduled request's progress and record the batch shape."""
        num_scheduled = output.num_scheduled_tokens
        decode_context_lens = output.decode_context_lens
        async_scheduling = self.async_scheduling
        total = 0
        for request in output.scheduled:
            num_new_tokens = num_scheduled[request.request_id]
            num_computed = request.num_computed_tokens
            sequence_end = request.num_tokens + request.num_output_placeholders
            if (
                num_new_tokens == 1
                and num_computed == sequence_end - 1
                and sequence_end > request.num_prompt_tokens
            ):
                decode_context_lens.append(num_computed)
            else:
                output.prefill_new_tokens.append(num_new_tokens)
                output.prefill_context_tokens.append(num_computed)
                request.num_computed_prefill_tokens += num_new_tokens
            num_computed += num_new_tokens
            request.num_computed_tokens = num_computed
            total += num_new_tokens
            request.is_prefill_chunk = num_computed < sequence_end
            if request.is_prefill_chunk:
                output.partial_prefill_ids.add(request.request_id)
            elif async_scheduling:
                request.num_output_placeholders += 1
            if async_scheduling:
                request.num_in_flight_tokens += num_new_tokens
        output.total_num_scheduled_tokens = total + output.num_lazy_decodes
        if output.total_num_scheduled_tokens:
            self.num_executed_steps += 1
            if output.carries_prefill:
                self.last_prefill_step = self.num_executed_steps

    def _admit(
        self,
        output: SchedulerOutput,
        request: Request,
        num_computed: int,
        num_new_tokens: int,
        now: float,
        *,
        after_load: bool = False,
    ) -> None:
        """Move an admitted request into running: `num_computed` tokens already in KV (its
        hit), `num_new_tokens` scheduled."""
        self.deferred_ids.discard(request.request_id)
        self.running.append(request)
        if num_computed < request.num_tokens - 1:
            output.carries_prefill = True
        resumed = request.status is RequestStatus.PREEMPTED
        output.admitted.append(Admission(request, num_computed, resumed, after_load))
        request.status = RequestStatus.RUNNING
        request.num_computed_tokens = num_computed
        if request.num_cached_tokens < 0:
            request.num_cached_tokens = num_computed
        if request.first_scheduled_at is None:
            request.first_scheduled_at = now
        output.add(request, num_new_tokens)

    def _finish_load(self, request: Request, now: float) -> None:
        """A load reported done: its blocks enter the GPU cache; a hit that covers the whole
        sequence recomputes its last token; the request waits again, ready to run."""
        self.loaded_ids.discard(request.request_id)
        if self.kv_cache_manager.enable_caching:
            self.kv_cache_manager.cache_blocks(request, request.num_computed_tokens, now)
        if request.num_computed_tokens == request.num_tokens:
            request.num_computed_tokens -= 1
        request.status = (
            RequestStatus.PREEMPTED if request.num_preemptions else RequestStatus.WAITING
        )

    def _plan_transfers(self, output: SchedulerOutput) -> StepTransfers:
        offload = self.offload
        assert offload is not None
        manager = self.kv_cache_manager
        scheduled = [
            (
                request,
                output.num_scheduled_tokens[request.request_id],
                manager.get_block_ids(request.request_id),
            )
            for request in output.scheduled
        ]
        transfers = offload.plan_step(
            scheduled,
            {admission.request.request_id for admission in output.admitted},
            [request.request_id for request in output.preempted],
            self.finished_since_schedule,
        )
        self.finished_since_schedule = []
        return transfers

    def _pick_victim(self) -> Request:
        # FCFS preempts the last running request; priority the largest (priority, arrival),
        # the earliest in running among equals (spec §12.5).
        if self.config.policy == "priority":
            return max(self.running, key=Request.victim_key)
        return self.running[-1]

    def _preempt(self, request: Request, now: float) -> None:
        self.inflight_prefills.pop(request.request_id, None)
        self._free_blocks(request)
        request.status = RequestStatus.PREEMPTED
        request.num_computed_tokens = 0
        request.num_stale_output_tokens = request.num_in_flight_tokens
        request.num_output_placeholders = 0
        request.num_preemptions += 1
        self.num_preemptions += 1
        self.waiting.prepend(request)

    def update_from_output(
        self, output: SchedulerOutput, now: float = 0.0, completed_jobs: Sequence[int] = ()
    ) -> StepResult:
        """Sample one planned token for each request that reached its end; free finished ones;
        then apply the offload transfers the workers report done in this step.

        With async scheduling `output` is the oldest step in flight: requests aborted or
        finished since are skipped, and a preempted request still receives its token.
        """
        sampled: list[Request] = []
        finished: list[Request] = []
        max_model_len = self.config.max_model_len
        async_scheduling = self.async_scheduling
        partial_prefill_ids = output.partial_prefill_ids
        num_scheduled = output.num_scheduled_tokens
        manager = self.kv_cache_manager
        lazy = self.lazy
        if lazy is not None:
            lazy.record_step_end(now)
        if self.block_fence is not None and output.total_num_scheduled_tokens:
            self.block_fence.step_processed(manager)
        for request in output.scheduled:
            request_id = request.request_id
            stale = False
            if async_scheduling:
                if request.status.is_finished:
                    continue  # aborted while its step was in flight
                num_new_tokens = num_scheduled[request_id]
                request.num_in_flight_tokens -= num_new_tokens
                if request.num_stale_output_tokens:
                    request.num_stale_output_tokens -= num_new_tokens
                    stale = True
            if request_id in partial_prefill_ids:
                continue
            num_output_tokens = request.num_output_tokens
            request.append_output_token_ids((request.planned_output_token_ids[num_output_tokens],))
            last_token_at = request.last_token_at
            if last_token_at is None:
                request.first_token_at = now
            else:
                request.inter_token_latencies_s.append(now - last_token_at)
            request.last_token_at = now
            sampled.append(request)
            if not stale and request.num_output_placeholders:
                request.num_output_placeholders -= 1
                if manager.enable_caching:
                    # The block this token completes registers now, a step after sync would.
                    manager.cache_blocks(
                        request, request.num_computed_tokens - request.num_in_flight_tokens, now
                    )
            if num_output_tokens + 1 >= request.max_tokens or request.num_tokens >= max_model_len:
                self._finish(request, now)
                finished.append(request)
        if finished:
            self._drop_finished(finished)
        if self.offload is not None and completed_jobs:
            for request_id in self.offload.complete(completed_jobs):
                aborted = self.aborted_while_loading.pop(request_id, None)
                if aborted is not None:
                    self._free_blocks(aborted)
                else:
                    self.loaded_ids.add(request_id)
        if lazy is not None:
            step = lazy.num_completed_steps
            for request in sampled:
                if request.status is RequestStatus.RUNNING:
                    lazy.try_make_lazy(request, step, max_model_len)
        return StepResult(sampled, finished, manager.make_prefix_cache_stats())

    def _finish(self, request: Request, now: float) -> None:
        """A request that produced its last token: blocks freed at once, in step order."""
        del self.requests[request.request_id]
        self._free_blocks(request)
        self.finished_req_ids.add(request.request_id)
        self.deferred_ids.discard(request.request_id)
        request.finished_at = now
        self._offload_finished(request)

    def _drop_finished(self, finished: list[Request]) -> None:
        """Take finished requests out of their queues (after the step's walk, as vLLM does)."""
        for request in finished:
            if request.status is RequestStatus.PREEMPTED:
                self.waiting.remove(request)  # async: finished by a step scheduled before
            else:
                self.running.remove(request)
            request.status = RequestStatus.FINISHED_LENGTH_CAPPED
