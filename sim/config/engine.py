"""Scenario sections for the engine, the deployment it runs on, and what a run writes."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator, model_validator

from sim.config.base import StrictModel, field_problem
from sim.costmodel.specs import get_gpu, get_model
from sim.errors import InputError
from sim.kvcache.block_pool import MAX_NUM_GPU_BLOCKS

HashAlgo = Literal["sha256", "sha256_cbor", "xxhash", "xxhash_cbor"]  # = kvcache.HASH_ALGOS
RouterPolicy = Literal[
    "round_robin", "least_loaded", "prefix_aware", "session_affinity"
]  # = routing.ROUTER_POLICIES


class EngineSettings(StrictModel):
    """vLLM engine arguments that shape scheduling and the prefix cache (defaults: vLLM 0.33)."""

    block_size: int = Field(16, ge=1, le=1024)
    num_gpu_blocks: int | None = Field(
        None, ge=2, le=MAX_NUM_GPU_BLOCKS, description="Override; includes the null block"
    )
    kv_cache_memory_gib: float | None = Field(None, gt=0)
    gpu_memory_utilization: float = Field(0.92, gt=0, le=1)
    activation_reserve_gib: float | None = Field(None, ge=0)
    max_num_batched_tokens: int = Field(8192, ge=1)
    max_num_seqs: int = Field(256, ge=1)
    max_model_len: int = Field(32768, ge=2)
    enable_chunked_prefill: bool = True
    long_prefill_token_threshold: int = Field(0, ge=0)
    policy: Literal["fcfs", "priority"] = "fcfs"
    watermark: float = Field(0.0, ge=0, lt=1)
    enable_prefix_caching: bool = True
    scheduler_reserve_full_isl: bool = True
    hash_algo: HashAlgo = "sha256"
    hash_seed: str | None = Field(
        None, description="Plays PYTHONHASHSEED's role for NONE_HASH (documented in README)"
    )
    core: Literal["native", "python"] = Field(
        "native",
        description="Cache core: compiled (native) or the pure-Python reference; same results",
    )  # = native.CORES

    @model_validator(mode="after")
    def _vllm_constraints(self) -> EngineSettings:
        if self.max_num_batched_tokens < self.max_num_seqs:
            raise field_problem(
                "max_num_batched_tokens",
                f"max_num_batched_tokens ({self.max_num_batched_tokens}) must be >= "
                f"max_num_seqs ({self.max_num_seqs}), as vLLM requires",
            )
        if not self.enable_chunked_prefill and self.max_num_batched_tokens < self.max_model_len:
            raise field_problem(
                "max_num_batched_tokens",
                f"without chunked prefill max_num_batched_tokens ({self.max_num_batched_tokens})"
                f" must be >= max_model_len ({self.max_model_len})",
            )
        return self


def _known(lookup, name: str) -> str:
    try:
        lookup(name)
    except InputError as error:
        raise ValueError(str(error)) from None
    return name


class RouterSettings(StrictModel):
    """How requests are spread over replicas; the thresholds apply to `prefix_aware` only.

    prefix_aware follows SGLang's cache-aware router: when replica loads (unfinished requests)
    differ by more than `balance_abs_threshold` and the largest exceeds
    `balance_rel_threshold` x the smallest, route to the least loaded; otherwise to the replica
    caching the largest fraction of the prompt if that fraction exceeds `cache_threshold`,
    else to the least loaded. Defaults are SGLang's documented ones.
    """

    policy: RouterPolicy = "round_robin"
    cache_threshold: float = Field(0.5, ge=0, le=1)
    balance_abs_threshold: int = Field(32, ge=0)
    balance_rel_threshold: float = Field(1.0001, ge=1)


class DeploymentSettings(StrictModel):
    """The model, the GPU it runs on, its tensor-parallel degree, and the replicas serving it.

    Each replica is a full copy of the model on `tp` GPUs with its own KV cache, sized as
    for a single replica; a router spreads the requests over the replicas.
    """

    model: str = "llama-3.1-8b"
    gpu: str = "h100"
    tp: int = Field(1, ge=1, le=64)
    replicas: int = Field(1, ge=1, le=1024)
    router: RouterSettings = Field(default_factory=RouterSettings)

    @field_validator("model")
    @classmethod
    def _model_known(cls, name: str) -> str:
        return _known(get_model, name)

    @field_validator("gpu")
    @classmethod
    def _gpu_known(cls, name: str) -> str:
        return _known(get_gpu, name)


class OutputSettings(StrictModel):
    """Which trace files a run writes, and how often metrics are scraped."""

    events: bool = True
    scrape_interval_s: float = Field(1.0, gt=0)
