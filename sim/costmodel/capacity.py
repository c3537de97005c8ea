"""KV-cache capacity of one model replica, sized the way vLLM v1 sizes it (prefix-cache spec §9)."""

from __future__ import annotations

import math

from sim.costmodel.specs import GpuSpec, ModelSpec
from sim.errors import InputError

GIB = 1024**3

# Memory vLLM's profiling forward pass finds outside weights and KV: peak activations of a
# max_num_batched_tokens batch (typically 1-1.5 GiB for 7-8B models at 8192 tokens), non-torch
# allocations (NCCL, cuBLAS workspaces: 0.1-0.5 GiB) and the CUDA-graph pool (~0.5 GiB).
# 2 GiB is the reserve cost_model.md §2.4 assumes; pass `activation_reserve_bytes` to override.
DEFAULT_ACTIVATION_RESERVE_BYTES = 2 * GIB


def kv_bytes_per_token(model: ModelSpec, tp: int) -> int:
    """K and V bytes one token occupies on each of the `tp` GPUs (in the layers whose KV grows
    with the context; see `ModelSpec.num_kv_cache_layers`)."""
    _check_tp(tp)
    kv_heads_per_rank = max(1, model.num_kv_heads // tp)
    return (
        2
        * model.num_kv_cache_layers
        * kv_heads_per_rank
        * model.head_dim
        * model.kv_bytes_per_value
    )


def num_gpu_blocks(
    gpu: GpuSpec,
    model: ModelSpec,
    *,
    tp: int = 1,
    block_size: int = 16,
    gpu_memory_utilization: float = 0.92,
    activation_reserve_bytes: int | None = None,
    kv_cache_memory_bytes: int | None = None,
    num_gpu_blocks_override: int | None = None,
) -> int:
    """KV blocks per replica, the null block included (vLLM's `num_gpu_blocks`)."""
    _check_tp(tp)
    if block_size < 1:
        raise InputError(f"block_size must be a positive integer, got {block_size}")
    if num_gpu_blocks_override is not None:
        if num_gpu_blocks_override < 2:
            raise InputError(
                f"num_gpu_blocks_override must be at least 2 (one is the null block), "
                f"got {num_gpu_blocks_override}"
            )
        return num_gpu_blocks_override
    block_bytes = block_size * kv_bytes_per_token(model, tp)
    if kv_cache_memory_bytes is not None:
        if kv_cache_memory_bytes < 0:
            raise InputError(f"kv_cache_memory_bytes must be >= 0, got {kv_cache_memory_bytes}")
        available_bytes = kv_cache_memory_bytes
    else:
        available_bytes = _available_kv_bytes(
            gpu, model, tp, gpu_memory_utilization, activation_reserve_bytes
        )
    num_blocks = available_bytes // block_bytes
    if num_blocks < 2:
        raise InputError(
            f"{model.name} with tp={tp} leaves room for {num_blocks} KV blocks of "
            f"{block_bytes} bytes on {gpu.name} ({available_bytes} bytes available); "
            "at least 2 are needed"
        )
    return num_blocks


def _available_kv_bytes(
    gpu: GpuSpec,
    model: ModelSpec,
    tp: int,
    gpu_memory_utilization: float,
    activation_reserve_bytes: int | None,
) -> int:
    if not 0.0 < gpu_memory_utilization <= 1.0:
        raise InputError(f"gpu_memory_utilization must be in (0, 1], got {gpu_memory_utilization}")
    reserve_bytes = (
        DEFAULT_ACTIVATION_RESERVE_BYTES
        if activation_reserve_bytes is None
        else activation_reserve_bytes
    )
    if reserve_bytes < 0:
        raise InputError(f"activation_reserve_bytes must be >= 0, got {reserve_bytes}")
    requested_bytes = math.ceil(gpu.memory_bytes * gpu_memory_utilization)
    weight_bytes_per_gpu = math.ceil(model.weight_bytes / tp)
    available_bytes = requested_bytes - weight_bytes_per_gpu - reserve_bytes
    if available_bytes <= 0:
        raise InputError(
            f"{model.name} does not fit on {gpu.name} with tp={tp}: "
            f"{gpu_memory_utilization} x {gpu.memory_bytes} bytes = {requested_bytes} requested, "
            f"weights {weight_bytes_per_gpu} bytes per GPU ({model.dtype}) + activation reserve "
            f"{reserve_bytes} bytes leave {available_bytes} bytes for the KV cache; "
            "raise tp, pick a GPU with more memory or quantize the weights"
        )
    return available_bytes


def _check_tp(tp: int) -> None:
    if tp < 1:
        raise InputError(f"tensor parallel degree tp must be >= 1, got {tp}")
