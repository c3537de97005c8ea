"""One source of engine defaults and of the limits vLLM checks at start-up.

Two sets of defaults, both vLLM 0.33's: a bare `SchedulerConfig` and the replay formats use the
scheduler's own class defaults (what the oracle drives); scenario files use what vLLM's OpenAI
server runs with on the deployment's GPU. Everything else is shared.
"""

from __future__ import annotations

from typing import Final

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

# Scenario engines: async scheduling, which vLLM 0.33 turns on for generative models (spec
# §7.4), and the batch limits its OpenAI server picks for the GPU (`serving_batch_limits`).
# A scenario's unset max_model_len is its model's context, as vLLM derives it (sim.config.
# deployed); this stands only for engines built without a model.
SERVING_MAX_MODEL_LEN: Final = 32768
# What vLLM assumes, with a warning, for a model whose config names no context length (BLOOM).
UNKNOWN_CONTEXT_MAX_MODEL_LEN: Final = 2048
SERVING_ASYNC_SCHEDULING: Final = True

# vLLM 0.33's API-server defaults for (max_num_batched_tokens, max_num_seqs) by GPU (spec §7.1):
# GPUs of 160 GiB or more; GPUs of 70 GiB or more but the A100 (larger budgets cost it
# throughput, so vLLM keeps it on the small tier); every other GPU.
GIB: Final = 1 << 30
LARGEST_GPU_BYTES: Final = 160 * GIB
LARGE_GPU_BYTES: Final = 70 * GIB
LARGEST_GPU_BATCH_LIMITS: Final = (16384, 1024)
LARGE_GPU_BATCH_LIMITS: Final = (8192, 1024)
SMALL_GPU_BATCH_LIMITS: Final = (2048, 256)


def serving_batch_limits(memory_bytes: int, gpu_name: str) -> tuple[int, int]:
    """(max_num_batched_tokens, max_num_seqs) vLLM's OpenAI server takes by default on a GPU
    with `memory_bytes` of device memory called `gpu_name`."""
    if memory_bytes >= LARGEST_GPU_BYTES:
        return LARGEST_GPU_BATCH_LIMITS
    if memory_bytes >= LARGE_GPU_BYTES and "a100" not in gpu_name.lower():
        return LARGE_GPU_BATCH_LIMITS
    return SMALL_GPU_BATCH_LIMITS


def engine_limit_problem(
    *,
    max_num_batched_tokens: int,
    max_num_seqs: int,
    max_model_len: int,
    enable_chunked_prefill: bool,
    max_num_active_seqs: int | None,
) -> tuple[str, str] | None:
    """(field, message) for the first limit vLLM refuses at start-up, None when all hold."""
    if max_num_batched_tokens < max_num_seqs:
        return (
            "max_num_batched_tokens",
            f"max_num_batched_tokens ({max_num_batched_tokens}) must be >= max_num_seqs "
            f"({max_num_seqs}), as vLLM requires",
        )
    if not enable_chunked_prefill and max_num_batched_tokens < max_model_len:
        return (
            "max_num_batched_tokens",
            f"without chunked prefill max_num_batched_tokens ({max_num_batched_tokens}) must "
            f"be >= max_model_len ({max_model_len}), as vLLM requires",
        )
    if max_num_active_seqs is not None and max_num_active_seqs > max_num_seqs:
        return (
            "max_num_active_seqs",
            f"max_num_active_seqs ({max_num_active_seqs}) must be <= max_num_seqs "
            f"({max_num_seqs}), as vLLM requires",
        )
    return None
