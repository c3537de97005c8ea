"""vLLM v1's scheduling step, sync semantics, without a clock of its own (spec §7).

`schedule(now)` picks this step's tokens: running requests first (decodes and unfinished chunks,
preempting by recompute when blocks run out), then waiting requests in policy order within the
token budget and `max_num_seqs`. `update_from_output(output, now)` plays the fake model: each
request whose scheduled tokens reach its sequence end samples its next planned token; finished
requests free their blocks. Blocks are cached at schedule time, as vLLM's sync scheduler does.
With async scheduling (vLLM's default) the same decisions are made, but blocks filled by decode
register one step later and an EOS stop may cost one extra step; see docs in README.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from sim.kvcache import CacheObserver, PrefixCacheStats, RequestStatus
from sim.native import make_hasher, make_manager
from sim.sched.config import SchedulerConfig
from sim.sched.lazy_decode import LazyDecoders
from sim.sched.queues import FcfsQueue, PriorityQueue
from sim.sched.request import Request

# Distinct blocks whose hashes the fast path remembers (~20 MB at block size 16).
HASH_MEMO_SIZE = 65536


@dataclass(slots=True)
class Admission:
    """A request that left the waiting queue this step, with its prefix hit."""

    request: Request
    num_hit_tokens: int
    resumed: bool


@dataclass(slots=True)
class SchedulerOutput:
    """One step's batch: tokens per request (running first, then admitted) and its shape."""

    num_scheduled_tokens: dict[str, int] = field(default_factory=dict)
    scheduled: list[Request] = field(default_factory=list)
    admitted: list[Admission] = field(default_factory=list)
    preempted: list[Request] = field(default_factory=list)
    total_num_scheduled_tokens: int = 0
    # Batch shape for the cost model: prefill chunks (new tokens, tokens already in KV) and
    # the KV length of each decode.
    prefill_new_tokens: list[int] = field(default_factory=list)
    prefill_context_tokens: list[int] = field(default_factory=list)
    decode_context_lens: list[int] = field(default_factory=list)
    # Event-driven decoders that advanced this step without being listed (see lazy_decode).
    num_lazy_decodes: int = 0
    lazy_decode_kv_tokens: int = 0
    lazy_longest_context: int = 0


@dataclass(slots=True)
class StepResult:
    """What the fake model produced: the requests that sampled a token and those that finished."""

    sampled: list[Request]
    finished: list[Request]
    prefix_cache_stats: PrefixCacheStats


class Scheduler:
    """Running-first continuous batching with chunked prefill and preemption by recompute."""

    def __init__(
        self,
        config: SchedulerConfig,
        observer: CacheObserver | None = None,
        *,
        fast_decode_path: bool = False,
    ) -> None:
        self.config = config
        # True skips allocate_slots for decode tokens inside a held block and advances steady
        # decoders event by event (LazyDecoders); False is the straightforward path that the
        # equivalence tests compare against. Request state is exact between steps only in the
        # straightforward path (lazy requests catch up when due).
        self.fast_decode_path = fast_decode_path
        self.lazy = LazyDecoders(config.block_size) if fast_decode_path else None
        self.hasher = make_hasher(
            config.core,
            config.hash_algo,
            config.block_size,
            config.hash_seed,
            memo_size=HASH_MEMO_SIZE if fast_decode_path else 0,
        )
        self.kv_cache_manager = make_manager(
            config.core,
            config.num_gpu_blocks,
            config.block_size,
            max_model_len=config.max_model_len,
            enable_caching=config.enable_caching,
            watermark=config.watermark,
            observer=observer,
        )
        self.waiting: FcfsQueue | PriorityQueue = (
            PriorityQueue() if config.policy == "priority" else FcfsQueue()
        )
        self.running: list[Request] = []
        self.requests: dict[str, Request] = {}
        self.num_preemptions = 0
        self.num_added = 0

    @property
    def has_unfinished_requests(self) -> bool:
        """True while anything is waiting or running."""
        return bool(self.running) or len(self.waiting) > 0

    def add_request(self, request: Request) -> None:
        """Queue a new request (its prompt must be shorter than max_model_len)."""
        if request.num_prompt_tokens >= self.config.max_model_len:
            raise ValueError(
                f"request {request.request_id!r}: prompt of {request.num_prompt_tokens} tokens "
                f"must be shorter than max_model_len {self.config.max_model_len}"
            )
        self.num_added += 1
        request.arrival_seq = self.num_added
        self.requests[request.request_id] = request
        self.waiting.add(request)

    def abort_request(self, request_id: str, now: float = 0.0) -> Request:
        """Drop a request wherever it is and free its blocks."""
        request = self.requests.pop(request_id)
        if self.lazy is not None and request.lazy_sync_step >= 0:
            self.lazy.materialize(request)
        if request.status is RequestStatus.RUNNING:
            self.running.remove(request)
        else:
            self.waiting.remove(request)
        self.kv_cache_manager.free(request)
        request.status = RequestStatus.FINISHED_ABORTED
        request.finished_at = now
        return request

    def schedule(self, now: float = 0.0) -> SchedulerOutput:
        """Choose this step's requests and token counts, allocating their KV blocks."""
        config = self.config
        manager = self.kv_cache_manager
        output = SchedulerOutput()
        num_scheduled = output.num_scheduled_tokens
        budget = config.max_num_batched_tokens
        threshold = config.long_prefill_token_threshold
        max_model_len = config.max_model_len
        running = self.running

        fast_decode_path = self.fast_decode_path
        lazy = self.lazy
        if lazy is not None:
            step = lazy.num_completed_steps + 1
            lazy.pop_due(step)
            if lazy.num_lazy and not self._lazy_step_is_safe(budget):
                lazy.materialize_all(running)
            num_lazy = lazy.num_lazy
            if num_lazy:
                budget -= num_lazy
                output.num_lazy_decodes = num_lazy
                output.lazy_decode_kv_tokens = lazy.kv_tokens(step)
                output.lazy_longest_context = lazy.longest_context(step)
        index = 0
        while index < len(running) and budget > 0:
            request = running[index]
            if request.lazy_sync_step >= 0:
                index += 1  # advances implicitly this step
                continue
            num_computed = request.num_computed_tokens
            num_new_tokens = len(request.all_token_ids) - num_computed
            if (
                fast_decode_path
                and num_new_tokens == 1
                and num_computed < max_model_len - 1
                and manager.allocate_one_slot(request, now)
            ):
                # A decode token: the same blocks and caching as allocate_slots, done lean.
                # (If it needs a block and none is free, the general path below preempts.)
                num_scheduled[request.request_id] = 1
                output.scheduled.append(request)
                budget -= 1
                index += 1
                continue
            if 0 < threshold < num_new_tokens:
                num_new_tokens = threshold
            num_new_tokens = min(num_new_tokens, budget, max_model_len - 1 - num_computed)
            if num_new_tokens <= 0:
                index += 1
                continue
            while True:
                new_blocks = manager.allocate_slots(request, num_new_tokens, now=now)
                if new_blocks is not None:
                    break
                victim = self._pick_victim()
                position = running.index(victim)
                del running[position]
                if position < index:
                    index -= 1
                if victim.request_id in num_scheduled:
                    budget += num_scheduled.pop(victim.request_id)
                    output.scheduled.remove(victim)
                self._preempt(victim, now)
                output.preempted.append(victim)
                if victim is request:
                    break
            if new_blocks is None:
                break
            num_scheduled[request.request_id] = num_new_tokens
            output.scheduled.append(request)
            budget -= num_new_tokens
            index += 1

        if not output.preempted:
            self._schedule_waiting(output, budget, now)

        decode_context_lens = output.decode_context_lens
        total = 0
        for request in output.scheduled:
            num_new_tokens = num_scheduled[request.request_id]
            num_computed = request.num_computed_tokens
            num_tokens = len(request.all_token_ids)
            if (
                num_new_tokens == 1
                and num_computed == num_tokens - 1
                and (num_tokens > request.num_prompt_tokens)
            ):
                decode_context_lens.append(num_computed)
            else:
                output.prefill_new_tokens.append(num_new_tokens)
                output.prefill_context_tokens.append(num_computed)
                request.num_computed_prefill_tokens += num_new_tokens
            request.num_computed_tokens = num_computed + num_new_tokens
            total += num_new_tokens
        output.total_num_scheduled_tokens = total + output.num_lazy_decodes
        return output

    def _lazy_step_is_safe(self, budget: int) -> bool:
        """True when this step cannot run out of budget or blocks before every running request
        is served: then lazy requests can skip it, as nothing they could be part of happens."""
        config = self.config
        manager = self.kv_cache_manager
        threshold = config.long_prefill_token_threshold
        max_model_len = config.max_model_len
        block_size = config.block_size
        demand = self.lazy.num_lazy
        blocks_needed = 0
        for request in self.running:
            if request.lazy_sync_step >= 0:
                continue
            num_computed = request.num_computed_tokens
            num_new_tokens = len(request.all_token_ids) - num_computed
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

    def _schedule_waiting(self, output: SchedulerOutput, budget: int, now: float) -> None:
        config = self.config
        manager = self.kv_cache_manager
        waiting = self.waiting
        running = self.running
        threshold = config.long_prefill_token_threshold
        while budget > 0 and len(waiting) > 0 and len(running) < config.max_num_seqs:
            request = waiting.peek()
            if request.num_computed_tokens == 0:
                hit_blocks, num_hit_tokens = manager.get_computed_blocks(request)
            else:
                hit_blocks, num_hit_tokens = [], 0
            num_computed = request.num_computed_tokens + num_hit_tokens
            num_new_tokens = request.num_tokens - num_computed
            if 0 < threshold < num_new_tokens:
                num_new_tokens = threshold
            if not config.enable_chunked_prefill and num_new_tokens > budget:
                break
            num_new_tokens = min(num_new_tokens, budget)
            new_blocks = manager.allocate_slots(
                request,
                num_new_tokens,
                num_hit_tokens,
                hit_blocks,
                full_sequence_must_fit=config.scheduler_reserve_full_isl,
                has_running_requests=bool(running),
                now=now,
            )
            if new_blocks is None:
                break  # head-of-line blocking on KV capacity
            manager.record_prefix_cache_stats(request, num_hit_tokens)
            waiting.pop()
            running.append(request)
            resumed = request.status is RequestStatus.PREEMPTED
            request.status = RequestStatus.RUNNING
            request.num_computed_tokens = num_computed
            if request.num_cached_tokens < 0:
                request.num_cached_tokens = num_computed
            if request.first_scheduled_at is None:
                request.first_scheduled_at = now
            output.admitted.append(Admission(request, num_hit_tokens, resumed))
            output.num_scheduled_tokens[request.request_id] = num_new_tokens
            output.scheduled.append(request)
            budget -= num_new_tokens

    def _pick_victim(self) -> Request:
        # FCFS preempts the last running request; priority the largest (priority, arrival).
        if self.config.policy == "priority":
            return max(self.running, key=Request.sort_key)
        return self.running[-1]

    def _preempt(self, request: Request, now: float) -> None:
        self.kv_cache_manager.free(request)
        request.status = RequestStatus.PREEMPTED
        request.num_computed_tokens = 0
        request.num_preemptions += 1
        self.num_preemptions += 1
        self.waiting.prepend(request)

    def update_from_output(self, output: SchedulerOutput, now: float = 0.0) -> StepResult:
        """Sample one planned token for each request that reached its end; free finished ones."""
        sampled: list[Request] = []
        finished: list[Request] = []
        max_model_len = self.config.max_model_len
        lazy = self.lazy
        if lazy is not None:
            lazy.record_step_end(now)
        for request in output.scheduled:
            token_ids = request.all_token_ids
            if request.num_computed_tokens < len(token_ids):
                continue  # a prefill chunk that has not reached the end of the sequence
            num_output_tokens = len(token_ids) - request.num_prompt_tokens
            request.append_output_token_ids((request.planned_output_token_ids[num_output_tokens],))
            last_token_at = request.last_token_at
            if last_token_at is None:
                request.first_token_at = now
            else:
                request.inter_token_latencies_s.append(now - last_token_at)
            request.last_token_at = now
            sampled.append(request)
            if num_output_tokens + 1 >= request.max_tokens or len(token_ids) >= max_model_len:
                finished.append(request)
        for request in finished:
            self.running.remove(request)
            del self.requests[request.request_id]
            self.kv_cache_manager.free(request)
            request.status = RequestStatus.FINISHED_LENGTH_CAPPED
            request.finished_at = now
        if lazy is not None:
            step = lazy.num_completed_steps
            for request in sampled:
                if request.status is RequestStatus.RUNNING:
                    lazy.try_make_lazy(request, step, max_model_len)
        return StepResult(sampled, finished, self.kv_cache_manager.make_prefix_cache_stats())
