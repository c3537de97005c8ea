"""Scheduler and cache settings, with vLLM 0.33's defaults (sim.sched.defaults)."""

from __future__ import annotations

from dataclasses import dataclass

from sim.native import DEFAULT_CORE
from sim.sched import defaults
from sim.sched.defaults import POLICIES, engine_limit_problem

__all__ = ["POLICIES", "SchedulerConfig"]


@dataclass(slots=True)
class SchedulerConfig:
    """Everything one engine's scheduler and KV cache need (spec §7.1, §9)."""

    num_gpu_blocks: int = defaults.REPLAY_NUM_GPU_BLOCKS
    block_size: int = defaults.BLOCK_SIZE
    max_num_batched_tokens: int = defaults.SCHEDULER_MAX_NUM_BATCHED_TOKENS
    max_num_seqs: int = defaults.SCHEDULER_MAX_NUM_SEQS
    max_model_len: int = defaults.SCHEDULER_MAX_MODEL_LEN
    enable_chunked_prefill: bool = defaults.ENABLE_CHUNKED_PREFILL
    long_prefill_token_threshold: int = defaults.LONG_PREFILL_TOKEN_THRESHOLD
    policy: str = defaults.POLICY
    watermark: float = defaults.WATERMARK
    scheduler_reserve_full_isl: bool = defaults.SCHEDULER_RESERVE_FULL_ISL
    enable_caching: bool = defaults.ENABLE_PREFIX_CACHING
    hash_algo: str = defaults.HASH_ALGO
    hash_seed: str | None = None
    # Block identities instead of vLLM's digests (sim.kvcache.hashing): set by `simulate` where
    # no block hash leaves the run; the same decisions either way.
    block_identity: bool = False
    core: str = DEFAULT_CORE  # sim.native.CORES: the compiled cache core or the Python reference
    async_scheduling: bool = defaults.SCHEDULER_ASYNC_SCHEDULING
    long_prefill_token_threshold_adaptive: bool = defaults.LONG_PREFILL_TOKEN_THRESHOLD_ADAPTIVE
    max_num_active_seqs: int | None = defaults.MAX_NUM_ACTIVE_SEQS
    prefill_schedule_interval: int = defaults.PREFILL_SCHEDULE_INTERVAL
    # Front-end admission limits (enforced by the engine's submit, not by the scheduler).
    max_num_queued_reqs: int | None = defaults.MAX_NUM_QUEUED_REQS
    max_num_queued_tokens: int | None = defaults.MAX_NUM_QUEUED_TOKENS

    @property
    def max_num_admitted_seqs(self) -> int:
        """Where the waiting pass stops admitting: max_num_active_seqs, else max_num_seqs."""
        if self.max_num_active_seqs is None:
            return self.max_num_seqs
        return self.max_num_active_seqs

    def __post_init__(self) -> None:
        if self.policy not in POLICIES:
            raise ValueError(f"policy must be one of {', '.join(POLICIES)}, got {self.policy!r}")
        if self.prefill_schedule_interval < 1:
            raise ValueError(
                f"prefill_schedule_interval must be >= 1, got {self.prefill_schedule_interval}"
            )
        problem = engine_limit_problem(
            max_num_batched_tokens=self.max_num_batched_tokens,
            max_num_seqs=self.max_num_seqs,
            max_model_len=self.max_model_len,
            enable_chunked_prefill=self.enable_chunked_prefill,
            max_num_active_seqs=self.max_num_active_seqs,
        )
        if problem is not None:
            raise ValueError(problem[1])
