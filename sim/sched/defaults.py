"""One source of engine defaults and of the limits vLLM checks at start-up.

Two sets of defaults, both vLLM 0.33's: a bare `SchedulerConfig` and the replay formats use the
scheduler's own class defaults (what the oracle drives); scenario files use what an engine
serving a model on a datacenter GPU runs with. Everything else is shared.
"""

from __future__ import annotations

from typing import Final, Protocol

POLICIES: Final = ("fcfs", "priority")

BLOCK_SIZE: Final = 16
ENABLE_CHUNKED_PREFILL: Final = True
LONG_PREFILL_TOKEN_THRESHOLD: Final = 0
POLICY: Final = "fcfs"
WATERMARK: Final = 0.0
SCHEDULER_RESERVE_FULL_ISL: Final = True
ENABLE_PREFIX_CACHING: Final = True
HASH_ALGO: Final = "sha256"

# Off by default in vLLM 0.33 (spec §12.8). None means max_num_seqs / no limit.
LONG_PREFILL_TOKEN_THRESHOLD_ADAPTIVE: Final = False
MAX_NUM_ACTIVE_SEQS: Final = None
PREFILL_SCHEDULE_INTERVAL: Final = 1
MAX_NUM_QUEUED_REQS: Final = None
MAX_NUM_QUEUED_TOKENS: Final = None

# vLLM's SchedulerConfig class defaults (spec §7.1), and the replay formats' pool size.
REPLAY_NUM_GPU_BLOCKS: Final = 64
SCHEDULER_MAX_NUM_BATCHED_TOKENS: Final = 2048
SCHEDULER_MAX_NUM_SEQS: Final = 128
SCHEDULER_MAX_MODEL_LEN: Final = 8192
# The replay formats and their golden files follow vLLM's sync Scheduler.
SCHEDULER_ASYNC_SCHEDULING: Final = False

# Scenario engines: the serving limits vLLM picks for a large GPU, and async scheduling, which
# vLLM 0.33 turns on for generative models (spec §7.4).
SERVING_MAX_NUM_BATCHED_TOKENS: Final = 8192
SERVING_MAX_NUM_SEQS: Final = 256
SERVING_MAX_MODEL_LEN: Final = 32768
SERVING_ASYNC_SCHEDULING: Final = True


class EngineLimits(Protocol):
    """The settings vLLM checks against each other at start-up."""

    @property
    def max_num_batched_tokens(self) -> int: ...

    @property
    def max_num_seqs(self) -> int: ...

    @property
    def max_model_len(self) -> int: ...

    @property
    def enable_chunked_prefill(self) -> bool: ...

    @property
    def max_num_active_seqs(self) -> int | None: ...


def engine_limit_problem(limits: EngineLimits) -> tuple[str, str] | None:
    """(field, message) for the first limit vLLM refuses at start-up, None when all hold."""
    max_num_batched_tokens = limits.max_num_batched_tokens
    if max_num_batched_tokens < limits.max_num_seqs:
        return (
            "max_num_batched_tokens",
            f"max_num_batched_tokens ({max_num_batched_tokens}) must be >= max_num_seqs "
            f"({limits.max_num_seqs}), as vLLM requires",
        )
    if not limits.enable_chunked_prefill and max_num_batched_tokens < limits.max_model_len:
        return (
            "max_num_batched_tokens",
            f"without chunked prefill max_num_batched_tokens ({max_num_batched_tokens}) must "
            f"be >= max_model_len ({limits.max_model_len}), as vLLM requires",
        )
    max_num_active_seqs = limits.max_num_active_seqs
    if max_num_active_seqs is not None and max_num_active_seqs > limits.max_num_seqs:
        return (
            "max_num_active_seqs",
            f"max_num_active_seqs ({max_num_active_seqs}) must be <= max_num_seqs "
            f"({limits.max_num_seqs}), as vLLM requires",
        )
    return None
