"""A request as the scheduler sees it: cache state plus limits, outputs to emit and timings."""

from __future__ import annotations

from array import array
from collections.abc import Sequence

from sim.kvcache import NO_HASH_KEYS, CacheRequest, Hasher, HashKeys, SymbolicPrompt


class Request(CacheRequest):
    """A generation request whose fake model emits `planned_output_token_ids`, one per step."""

    __slots__ = (
        "arrival_at",
        "priority",
        "max_tokens",
        "planned_output_token_ids",
        "session_id",
        "tenant",
        "num_cached_tokens",
        "num_computed_prefill_tokens",
        "first_scheduled_at",
        "first_token_at",
        "last_token_at",
        "finished_at",
        "inter_token_latencies_s",
        "lazy_sync_step",
        "lazy_offset",
        "num_output_placeholders",
        "num_in_flight_tokens",
        "num_stale_output_tokens",
        "is_prefill_chunk",
        "num_host_cached_tokens",
        "last_sched_seq",
    )

    def __init__(
        self,
        request_id: str,
        prompt_token_ids: Sequence[int] | SymbolicPrompt,
        planned_output_token_ids: Sequence[int],
        hasher: Hasher,
        *,
        arrival_at: float = 0.0,
        priority: int = 0,
        hash_keys: HashKeys = NO_HASH_KEYS,
        skip_reading_prefix_cache: bool = False,
        session_id: str | None = None,
        tenant: str | None = None,
        prefix_source: CacheRequest | None = None,
        owns_prompt: bool = False,
    ) -> None:
        if not planned_output_token_ids:
            raise ValueError(f"request {request_id!r} must generate at least one token")
        CacheRequest.__init__(
            self,
            request_id,
            prompt_token_ids,
            hasher,
            hash_keys,
            skip_reading_prefix_cache,
            prefix_source,
            owns_prompt,
        )
        self.arrival_at = arrival_at
        self.priority = priority
        self.planned_output_token_ids = planned_output_token_ids
        self.max_tokens = len(planned_output_token_ids)
        self.session_id = session_id
        self.tenant = tenant
        self.num_cached_tokens = -1  # hit tokens at first admission; -1 until admitted
        self.num_computed_prefill_tokens = 0
        self.first_scheduled_at: float | None = None
        self.first_token_at: float | None = None
        self.last_token_at: float | None = None
        self.finished_at: float | None = None
        # An array, not a list: lazy decoders extend it from the engine's array of step gaps.
        self.inter_token_latencies_s = array("d")
        # Event-driven decoding (sim.sched.lazy_decode): the step it is synced to, or -1.
        self.lazy_sync_step = -1
        self.lazy_offset = 0
        # Async scheduling (spec §7.4): tokens being sampled by steps still in flight, tokens
        # scheduled in those steps, and in-flight tokens of steps scheduled before a preemption
        # (their outputs still arrive; the request is not resumed until they have).
        self.num_output_placeholders = 0
        self.num_in_flight_tokens = 0
        self.num_stale_output_tokens = 0
        # Whether its last scheduled chunk stopped short of the sequence end.
        self.is_prefill_chunk = False
        # Tokens of the first admission's hit loaded from the CPU offload tier.
        self.num_host_cached_tokens = 0
        # Deferred block free (sim.sched.block_fence): the last step with tokens scheduling it.
        self.last_sched_seq = 0

    def sort_key(self) -> tuple[int, float, str]:
        """Priority-policy waiting order: lower priority value first, then earlier arrival,
        then request id compared as a string (spec §12.4; simulated arrivals often tie)."""
        return (self.priority, self.arrival_at, self.request_id)

    def victim_key(self) -> tuple[int, float]:
        """Priority-policy preemption order: the running request with the largest key goes
        first; the request id plays no part, so ties go to the earliest in running (§12.5)."""
        return (self.priority, self.arrival_at)
