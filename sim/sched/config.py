"""Scheduler and cache settings, with vLLM 0.33's defaults."""

from __future__ import annotations

from dataclasses import dataclass

POLICIES = ("fcfs", "priority")


@dataclass(slots=True)
class SchedulerConfig:
    """Everything one engine's scheduler and KV cache need (spec §7.1, §9)."""

    num_gpu_blocks: int = 64
    block_size: int = 16
    max_num_batched_tokens: int = 2048
    max_num_seqs: int = 128
    max_model_len: int = 8192
    enable_chunked_prefill: bool = True
    long_prefill_token_threshold: int = 0
    policy: str = "fcfs"
    watermark: float = 0.0
    scheduler_reserve_full_isl: bool = True
    enable_caching: bool = True
    hash_algo: str = "sha256"
    hash_seed: str | None = None
    core: str = "native"  # sim.native.CORES: the compiled cache core or the Python reference

    def __post_init__(self) -> None:
        if self.policy not in POLICIES:
            raise ValueError(f"policy must be one of {', '.join(POLICIES)}, got {self.policy!r}")
        if self.max_num_batched_tokens < self.max_num_seqs:
            raise ValueError(
                f"max_num_batched_tokens ({self.max_num_batched_tokens}) must be >= "
                f"max_num_seqs ({self.max_num_seqs}), as vLLM requires"
            )
        if not self.enable_chunked_prefill and self.max_num_batched_tokens < self.max_model_len:
            raise ValueError(
                f"without chunked prefill max_num_batched_tokens ({self.max_num_batched_tokens}) "
                f"must be >= max_model_len ({self.max_model_len}), as vLLM requires"
            )
