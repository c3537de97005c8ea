"""vLLM's OffloadingConnector, scheduler side (spec §13.6-13.9): it decides what the CPU tier
adds to an admission, turns each step's newly computed prompt chunks into store jobs, tracks
the transfer jobs in flight and applies their completion to the tier.

The scheduler calls it at the points vLLM's scheduler calls the connector: `lookup` when a
request with nothing computed is examined, `after_admission` once its blocks are allocated,
`plan_step` at the end of `schedule()`, `request_finished` when a request finishes or is
aborted, and `complete` with the jobs the transfer model reports done.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from sim.kvcache import CacheRequest, CpuOffloadTier, RequestStatus, external_hit_tokens


@dataclass(slots=True)
class TransferJob:
    """One load (CPU -> GPU, for one admission) or store (GPU -> CPU, one request's new chunks
    in one step); `keys` are the chunks moved."""

    job_id: int
    request_id: str
    keys: list[bytes]
    is_store: bool
    # A load done inside the step that admits its request, before the forward (spec §13.7.6).
    is_sync_load: bool = False


@dataclass(slots=True)
class StepTransfers:
    """The jobs one step hands to the workers, and earlier jobs it must wait for (flush)."""

    loads: list[TransferJob] = field(default_factory=list)
    stores: list[TransferJob] = field(default_factory=list)
    flush: set[int] = field(default_factory=set)


@dataclass(slots=True)
class OffloadStats:
    """Counters with vLLM's meaning: external_prefix_cache_* for admissions that are not
    re-admissions after preemption (those go to preempted_*), host tokens by source."""

    queries: int = 0
    hits: int = 0
    preempted_queries: int = 0
    preempted_hits: int = 0
    host_hit_tokens: int = 0
    allocation_failures: int = 0
    chunks_loaded: int = 0
    chunks_stored: int = 0


@dataclass(slots=True)
class _RequestState:
    request: CacheRequest
    next_stored_chunk: int = 0
    block_ids: list[int] = field(default_factory=list)
    jobs: set[int] = field(default_factory=set)
    finished: bool = False


class OffloadConnector:
    """The connector for one engine's CPU tier, one GPU block per chunk."""

    def __init__(
        self,
        tier: CpuOffloadTier,
        tokens_per_chunk: int,
        *,
        offload_prompt_only: bool = True,
        gpu_prefix_caching: bool = True,
        sync_load_budget_bytes: int = 0,
        kv_bytes_per_token: int = 0,
    ) -> None:
        self.tier = tier
        self.tokens_per_chunk = tokens_per_chunk
        self.offload_prompt_only = offload_prompt_only
        self.states: dict[str, _RequestState] = {}
        self.jobs: dict[int, TransferJob] = {}
        self.next_job_id = 0
        self.stats = OffloadStats()
        # Chunks being loaded, which defer other requests' hits on them; vLLM tracks them only
        # with GPU prefix caching on (without it a second load of the same chunk is harmless).
        self.loading_keys: set[bytes] = set()
        self.track_loading = gpu_prefix_caching
        # Store jobs of finished requests by the GPU blocks they read: reusing such a block
        # makes the step wait for the job (a flush).
        self.jobs_reading_block: dict[int, set[int]] = {}
        self.job_block_ids: dict[int, list[int]] = {}
        self.step = StepTransfers()
        self.step_allocated_block_ids: set[int] = set()
        # Sync loads (spec §13.7.6, off at 0): the per-step byte budget (one worker's bytes),
        # the requests whose hit it took this step and the bytes they took.
        self.sync_load_budget_bytes = sync_load_budget_bytes
        self.kv_bytes_per_token = kv_bytes_per_token
        self.sync_load_ids: set[str] = set()
        self.sync_load_bytes = 0
        # After a reset: jobs in flight then, whose reports the tier ignores (the engine steps
        # until all are in), and which of them were async loads of waiting requests.
        self.reset_fence: set[int] = set()
        self.stale_loads: dict[int, str] = {}

    @property
    def has_jobs_in_flight(self) -> bool:
        """True while any transfer is unreported: the engine keeps stepping (§13.9)."""
        return bool(self.jobs) or bool(self.reset_fence)

    def reset(self) -> None:
        """vLLM's connector reset (spec §13.9): every job in flight is flushed by the next step
        and its report ignored; finished requests get their finish now and are forgotten; the
        tier is emptied at once; live requests offer from chunk 0 again."""
        self.step.flush.update(self.jobs)
        for request_id, state in list(self.states.items()):
            if state.request.status.is_finished:
                if not state.finished:
                    self.tier.request_finished(request_id)
                del self.states[request_id]
        self.tier.reset()
        for state in self.states.values():
            state.next_stored_chunk = 0
            state.jobs.clear()
        self.reset_fence.update(self.jobs)
        self.stale_loads.update(
            (job_id, job.request_id)
            for job_id, job in self.jobs.items()
            if not job.is_store and not job.is_sync_load
        )
        self.jobs.clear()
        self.jobs_reading_block.clear()
        self.job_block_ids.clear()
        self.loading_keys.clear()

    def add_request(self, request: CacheRequest) -> None:
        """A request reached the scheduler."""
        self.states[request.request_id] = _RequestState(request)

    def has_own_jobs(self, request_id: str) -> bool:
        """Whether the request still has transfers in flight."""
        state = self.states.get(request_id)
        return state is not None and bool(state.jobs)

    def lookup(self, request: CacheRequest, num_local_hit_tokens: int) -> int | None:
        """Tokens the CPU tier adds after the GPU hit, or None: skip the request this step.

        A (re)admission restarts the request's stores at chunk 0; a request with transfers
        still in flight (stores left from before a preemption) is skipped.
        """
        state = self.states[request.request_id]
        state.block_ids.clear()
        state.next_stored_chunk = 0
        if state.jobs:
            return None
        found = (
            0
            if request.skip_reading_prefix_cache
            else external_hit_tokens(
                self.tier,
                request.block_hashes,
                num_local_hit_tokens,
                request.num_tokens,
                self.tokens_per_chunk,
                self.loading_keys,
            )
        )
        self._reserve_sync_load(request, num_local_hit_tokens, found)
        return found

    def _reserve_sync_load(
        self, request: CacheRequest, num_local_hit_tokens: int, found: int | None
    ) -> None:
        """Take the step's sync-load budget for this hit if it fits and leaves a token to
        compute; reserved at lookup, as vLLM does, even if the allocation then fails."""
        self.sync_load_ids.discard(request.request_id)
        if (
            not self.sync_load_budget_bytes
            or not found
            or num_local_hit_tokens + found >= request.num_tokens
        ):
            return
        num_bytes = found * self.kv_bytes_per_token
        if self.sync_load_bytes + num_bytes > self.sync_load_budget_bytes:
            return
        self.sync_load_bytes += num_bytes
        self.sync_load_ids.add(request.request_id)

    def is_sync_load(self, request_id: str) -> bool:
        """Whether the request's CPU hit found at its lookup this step is loaded in the step."""
        return request_id in self.sync_load_ids

    def after_admission(
        self,
        request: CacheRequest,
        block_ids: Sequence[int],
        num_local_hit_tokens: int,
        num_external_tokens: int,
    ) -> None:
        """Blocks were allocated for an admission: start its load if the CPU tier hit."""
        self.step_allocated_block_ids.update(block_ids)
        if num_external_tokens == 0:
            return
        state = self.states[request.request_id]
        tokens_per_chunk = self.tokens_per_chunk
        first = num_local_hit_tokens // tokens_per_chunk
        end = -(-(num_local_hit_tokens + num_external_tokens) // tokens_per_chunk)
        keys = list(request.block_hashes[first:end])
        self.tier.prepare_load(request.request_id, keys, first)
        job = self._new_job(request.request_id, keys, is_store=False)
        job.is_sync_load = request.request_id in self.sync_load_ids
        self.step.loads.append(job)
        if self.track_loading and not job.is_sync_load:  # a sync load is over before others look
            self.loading_keys.update(keys)
        state.next_stored_chunk = end
        self.stats.chunks_loaded += len(keys)

    def record_admission(
        self,
        request: CacheRequest,
        num_local_hit_tokens: int,
        num_external_tokens: int,
        *,
        preempted: bool,
    ) -> None:
        """The external counters of one admission that looked the request up."""
        queries = request.num_tokens - num_local_hit_tokens
        stats = self.stats
        if preempted:
            stats.preempted_queries += queries
            stats.preempted_hits += num_external_tokens
        else:
            stats.queries += queries
            stats.hits += num_external_tokens
            stats.host_hit_tokens += num_external_tokens

    def plan_step(
        self,
        scheduled: Sequence[tuple[CacheRequest, int, Sequence[int]]],
        admitted_ids: set[str],
        preempted_ids: Iterable[str],
        finished: Sequence[CacheRequest],
    ) -> StepTransfers:
        """The step's transfers: this step's loads, a store job per request with new prompt
        chunks (scheduled requests in batch order, then requests finished since the last
        step), and the jobs to flush. `scheduled` holds (request, tokens scheduled, its GPU
        block ids) before its progress is advanced; admitted requests report all their blocks
        as newly allocated, running ones only the blocks added since the last step."""
        step = self.step
        for request, _, block_ids in scheduled:
            state = self.states[request.request_id]
            if request.request_id in admitted_ids:
                self.step_allocated_block_ids.update(block_ids)
            else:
                self.step_allocated_block_ids.update(block_ids[len(state.block_ids) :])
            state.block_ids = list(block_ids)
        batch_load_ids = {job.job_id for job in step.loads}
        for request_id in preempted_ids:
            preempted = self.states.get(request_id)
            if preempted is not None:
                step.flush.update(preempted.jobs - batch_load_ids)
        for block_id in self.step_allocated_block_ids & self.jobs_reading_block.keys():
            step.flush.update(self.jobs_reading_block[block_id])
        for request, num_scheduled, _ in scheduled:
            self._plan_store(request, request.num_computed_tokens + num_scheduled)
        for request in finished:
            if request.status is RequestStatus.FINISHED_ABORTED:
                self._plan_store(request, request.num_computed_tokens)
            else:
                self._plan_store(request, max(request.num_prompt_tokens, request.num_tokens - 1))
        for request in finished:
            done = self.states.get(request.request_id)
            if done is None:
                continue
            done.finished = True
            self.tier.request_finished(request.request_id)
            if not done.jobs:
                del self.states[request.request_id]
        self.step = StepTransfers()
        self.step_allocated_block_ids = set()
        self.sync_load_ids = set()
        self.sync_load_bytes = 0
        return step

    def request_finished(self, request_id: str) -> None:
        """The request finished or was aborted: its stores in flight now guard their blocks."""
        state = self.states.get(request_id)
        if state is None:
            return
        for job_id in state.jobs:
            for block_id in self.job_block_ids.get(job_id, ()):
                self.jobs_reading_block.setdefault(block_id, set()).add(job_id)

    def complete(self, job_ids: Iterable[int]) -> list[str]:
        """Apply finished transfers to the tier; returns the requests whose async load is
        done."""
        loaded: list[str] = []
        for job_id in job_ids:
            if job_id in self.reset_fence:
                self.reset_fence.discard(job_id)
                stale_load = self.stale_loads.pop(job_id, None)
                if stale_load is not None:  # its request still waits for the report
                    loaded.append(stale_load)
                continue
            job = self.jobs.pop(job_id)
            state = self.states[job.request_id]
            if job.is_store:
                self.tier.complete_store(job.keys)
            else:
                self.tier.complete_load(job.keys)
                self.loading_keys.difference_update(job.keys)
                if not job.is_sync_load:  # a sync load's request is running already
                    loaded.append(job.request_id)
            for block_id in self.job_block_ids.pop(job_id, ()):
                readers = self.jobs_reading_block.get(block_id)
                if readers is not None:
                    readers.discard(job_id)
                    if not readers:
                        del self.jobs_reading_block[block_id]
            state.jobs.discard(job_id)
            if state.finished and not state.jobs:
                del self.states[job.request_id]
        return loaded

    def _plan_store(self, request: CacheRequest, end_tokens: int) -> None:
        state = self.states.get(request.request_id)
        if state is None:
            return
        offloadable = min(end_tokens, request.num_tokens)
        if self.offload_prompt_only:
            offloadable = min(offloadable, request.num_prompt_tokens)
        num_chunks = min(
            offloadable // self.tokens_per_chunk,
            len(state.block_ids),
            len(request.block_hashes),
        )
        first = state.next_stored_chunk
        if num_chunks <= first:
            return
        plan = self.tier.prepare_store(
            request.request_id, request.block_hashes[first:num_chunks], first
        )
        if plan is None:
            self.stats.allocation_failures += 1
            return
        state.next_stored_chunk = num_chunks
        if not plan.stored:
            return
        job = self._new_job(request.request_id, plan.stored, is_store=True)
        self.step.stores.append(job)
        self.stats.chunks_stored += len(plan.stored)
        stored = set(plan.stored)
        block_ids = [
            block_id
            for key, block_id in zip(
                request.block_hashes[first:num_chunks], state.block_ids[first:], strict=False
            )
            if key in stored
        ]
        self.job_block_ids[job.job_id] = block_ids
        if state.finished or request.status.is_finished:
            for block_id in block_ids:
                self.jobs_reading_block.setdefault(block_id, set()).add(job.job_id)
                if block_id in self.step_allocated_block_ids:
                    self.step.flush.add(job.job_id)

    def _new_job(self, request_id: str, keys: list[bytes], *, is_store: bool) -> TransferJob:
        job = TransferJob(self.next_job_id, request_id, keys, is_store)
        self.next_job_id += 1
        self.jobs[job.job_id] = job
        self.states[request_id].jobs.add(job.job_id)
        return job
