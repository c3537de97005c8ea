"""A sync-engine driver over KVCacheManager for scenario tests: one call per scheduler decision.

It follows spec §6.2 and §7.1 for a single request at a time: admission = lookup, allocate with the
full-sequence check, count the lookup, mark running; decode = allocate one more slot.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from sim.kvcache import (
    BLOCK_EVICTED,
    BLOCK_STORED,
    NO_HASH_KEYS,
    BlockHasher,
    CacheRequest,
    HashKeys,
    KVCacheManager,
    RequestStatus,
)


def tokens(first: int, count: int) -> list[int]:
    """`count` consecutive token ids starting at `first`."""
    return list(range(first, first + count))


@dataclass(slots=True)
class Step:
    """What one scheduling call decided, with the cache events it caused (as block labels)."""

    ok: bool
    admission: bool
    hit_tokens: int
    num_new_tokens: int
    new_block_ids: list[int]
    stored_labels: list[str] = field(default_factory=list)
    evicted_labels: list[str] = field(default_factory=list)


@dataclass(slots=True)
class Run:
    """A whole `run` (prefill, decodes, finish): its admission step and everything it cached."""

    prefill: Step
    block_ids_at_finish: list[int]
    num_computed_tokens: int
    stored_labels: list[str]
    evicted_labels: list[str]


class _EventLog:
    """Records stored and evicted hashes in order."""

    def __init__(self) -> None:
        self.events: list[tuple[str, bytes]] = []

    def on_block_event(
        self, kind: str, block_hash: bytes, block_id: int, num_tokens: int, now: float
    ) -> None:
        if kind in (BLOCK_STORED, BLOCK_EVICTED):
            self.events.append((kind, block_hash))


class CacheDriver:
    """Owns one KVCacheManager and the requests it serves; labels hashes as "<request>#<block>"."""

    def __init__(
        self,
        num_gpu_blocks: int,
        block_size: int = 16,
        *,
        hash_algo: str = "sha256",
        hash_seed: str | None = None,
        watermark: float = 0.0,
        full_sequence_must_fit: bool = True,
    ) -> None:
        self.hasher = BlockHasher(hash_algo, block_size, hash_seed)
        self.log = _EventLog()
        self.manager = KVCacheManager(
            num_gpu_blocks, block_size, watermark=watermark, observer=self.log
        )
        self.full_sequence_must_fit = full_sequence_must_fit
        self.requests: dict[str, CacheRequest] = {}
        self.labels: dict[bytes, str] = {}

    def arrive(
        self,
        request_id: str,
        prompt: Sequence[int],
        *,
        hash_keys: HashKeys = NO_HASH_KEYS,
        skip_reading_prefix_cache: bool = False,
    ) -> CacheRequest:
        """A new waiting request; its prompt's full blocks are hashed at once."""
        request = CacheRequest(
            request_id,
            prompt,
            self.hasher,
            hash_keys=hash_keys,
            skip_reading_prefix_cache=skip_reading_prefix_cache,
        )
        self.requests[request_id] = request
        self._label(request, 0)
        return request

    def schedule(self, request_id: str, num_new_tokens: int | None = None) -> Step:
        """Admit a waiting/preempted request or extend a running one; a refusal changes nothing."""
        start = len(self.log.events)
        request = self.requests[request_id]
        manager = self.manager
        admission = request.status is not RequestStatus.RUNNING
        hit_blocks, num_hit_tokens = manager.get_computed_blocks(request) if admission else ([], 0)
        if num_new_tokens is None:
            num_new_tokens = request.num_tokens - request.num_computed_tokens - num_hit_tokens
        others_running = any(
            other.status is RequestStatus.RUNNING for other in self.requests.values()
        )
        new_blocks = manager.allocate_slots(
            request,
            num_new_tokens,
            num_hit_tokens,
            hit_blocks,
            full_sequence_must_fit=admission and self.full_sequence_must_fit,
            has_running_requests=others_running,
        )
        step = Step(
            ok=new_blocks is not None,
            admission=admission,
            hit_tokens=num_hit_tokens,
            num_new_tokens=num_new_tokens,
            new_block_ids=[block.block_id for block in new_blocks or ()],
        )
        if new_blocks is not None:
            if admission:
                manager.record_prefix_cache_stats(request, num_hit_tokens)
                request.status = RequestStatus.RUNNING
                request.num_computed_tokens = num_hit_tokens
            request.num_computed_tokens += num_new_tokens
        step.stored_labels, step.evicted_labels = self._labels_since(start)
        return step

    def output(self, request_id: str, output_tokens: Sequence[int]) -> None:
        """Append sampled tokens; newly full blocks are hashed (not cached)."""
        request = self.requests[request_id]
        num_before = len(request.block_hashes)
        request.append_output_token_ids(output_tokens)
        self._label(request, num_before)

    def run(self, request_id: str, outputs: Sequence[int]) -> Run:
        """One request alone: prefill, one decode per output but the last, then finish."""
        start = len(self.log.events)
        prefill = self.schedule(request_id)
        assert prefill.ok, f"{request_id} was not admitted"
        for position, token in enumerate(outputs):
            self.output(request_id, [token])
            if position < len(outputs) - 1:
                assert self.schedule(request_id).ok, f"{request_id} decode refused"
        block_ids = self.manager.get_block_ids(request_id)
        num_computed_tokens = self.requests[request_id].num_computed_tokens
        self.finish(request_id)
        stored, evicted = self._labels_since(start)
        return Run(prefill, block_ids, num_computed_tokens, stored, evicted)

    def preempt(self, request_id: str) -> None:
        """Free the request's blocks and send it back to waiting, as vLLM's scheduler does."""
        request = self.requests[request_id]
        self.manager.free(request)
        request.num_computed_tokens = 0
        request.status = RequestStatus.PREEMPTED
        request.num_preemptions += 1

    def finish(self, request_id: str) -> None:
        """The request stopped; its blocks go back to the pool."""
        request = self.requests[request_id]
        self.manager.free(request)
        request.status = RequestStatus.FINISHED_STOPPED

    def block_ids(self, request_id: str) -> list[int]:
        """The request's block table."""
        return self.manager.get_block_ids(request_id)

    @property
    def num_free_blocks(self) -> int:
        """Free-queue length."""
        return self.manager.num_free_blocks

    @property
    def stats(self) -> dict[str, int]:
        """Cumulative prefix-cache counters."""
        return self.manager.cumulative_stats.as_dict()

    def free_queue_ids(self) -> list[int]:
        """Block ids in the free queue, next victim first."""
        return [block.block_id for block in self.manager.block_pool.free_block_queue]

    def free_queue_labels(self) -> list[str | None]:
        """Labels of the free queue's blocks (None for a block without a hash), front first."""
        return [
            self.labels[block.block_hash] if block.block_hash is not None else None
            for block in self.manager.block_pool.free_block_queue
        ]

    def _label(self, request: CacheRequest, start: int) -> None:
        for index in range(start, len(request.block_hashes)):
            self.labels.setdefault(request.block_hashes[index], f"{request.request_id}#{index}")

    def _labels_since(self, start: int) -> tuple[list[str], list[str]]:
        events = self.log.events[start:]
        stored = [self.labels[h] for kind, h in events if kind == BLOCK_STORED]
        evicted = [self.labels[h] for kind, h in events if kind == BLOCK_EVICTED]
        return stored, evicted
