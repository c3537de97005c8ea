"""Scenario sections for the engine, the deployment it runs on, and what a run writes."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import (
    Field,
    GetJsonSchemaHandler,
    PrivateAttr,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import CoreSchema

from sim.config.base import StrictModel, field_problem
from sim.costmodel import (
    GpuSpec,
    ModelSpec,
    deployment_model,
    get_gpu,
    gpu_names,
    is_config_path,
    model_names,
    resolve_model,
)
from sim.errors import InputError
from sim.kvcache import HASH_ALGOS, MAX_NUM_GPU_BLOCKS
from sim.native import DEFAULT_CORE
from sim.routing import ROUTER_POLICIES
from sim.sched import POLICIES, defaults, engine_limit_problem

if TYPE_CHECKING:
    HashAlgo = str
    RouterPolicy = str
    SchedulingPolicy = str
else:
    # The names each registry holds, so validation and the JSON Schema follow the code.
    HashAlgo = Literal[HASH_ALGOS]
    RouterPolicy = Literal[ROUTER_POLICIES]
    SchedulingPolicy = Literal[POLICIES]


# More host memory than any machine has (1 PiB): a size past it is a typo, and its byte count
# would not fit the sizing's integers.
MAX_OFFLOADING_GIB = 2**20


class RegistrySchema:
    """A field's JSON Schema, built from the GPU/model registries each time a schema is made (so
    a new registry entry shows up without touching this module)."""

    def __init__(self, build: Callable[[], dict[str, Any]]) -> None:
        self._build = build

    def __get_pydantic_json_schema__(
        self, core_schema: CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        return self._build()


def gpu_schema() -> dict[str, Any]:
    return {"type": "string", "enum": gpu_names(), "description": "a GPU of data/gpus.csv"}


def model_schema() -> dict[str, Any]:
    return {
        "anyOf": [
            {"type": "string", "enum": model_names()},
            {"type": "string", "pattern": r"\.json$"},
            {"type": "object"},
        ],
        "description": "a model of data/models/, a path to a Hugging Face config.json, or its "
        "fields inline (num_hidden_layers, hidden_size, num_attention_heads, "
        "num_key_value_heads, intermediate_size, vocab_size, ...)",
    }


GpuName = Annotated[str, RegistrySchema(gpu_schema)]
ModelReference = Annotated[str | dict[str, Any], RegistrySchema(model_schema)]
# = specs.QUANTIZATIONS and specs.KV_CACHE_DTYPES (tests/costmodel/test_registries.py).
Quantization = Literal["fp8", "mxfp4"]
KvCacheDtype = Literal["auto", "bfloat16", "fp8", "fp8_e4m3", "fp8_e5m2"]
MAX_TP = 64  # deployment.tp's upper bound


# vLLM 0.33's GPU attention backends (FlashAttention, Triton, the ROCm ones) take KV blocks of a
# multiple of 16 tokens; the cache core itself (replay formats) takes any size.
KERNEL_BLOCK_MULTIPLE = 16
MAX_BLOCK_SIZE = 1024


def block_size_problem(block_size: int) -> str | None:
    """Why an engine cannot page its KV cache in blocks of `block_size` tokens, if it cannot."""
    if block_size % KERNEL_BLOCK_MULTIPLE == 0 and 0 < block_size <= MAX_BLOCK_SIZE:
        return None
    return (
        f"vLLM's GPU attention kernels page the KV cache in multiples of {KERNEL_BLOCK_MULTIPLE} "
        "tokens; allowed: 16, 32, 48, ... up to 1024"
    )


class EngineSettings(StrictModel):
    """vLLM engine arguments that shape scheduling and the prefix cache (defaults: vLLM 0.33,
    from sim.sched.defaults)."""

    block_size: int = Field(
        defaults.BLOCK_SIZE,
        ge=1,
        le=MAX_BLOCK_SIZE,
        description="Tokens per KV block: a multiple of 16, as vLLM's GPU attention kernels page",
        json_schema_extra={"multipleOf": KERNEL_BLOCK_MULTIPLE},
    )
    num_gpu_blocks: int | None = Field(
        None, ge=2, le=MAX_NUM_GPU_BLOCKS, description="Override; includes the null block"
    )
    kv_cache_memory_gib: float | None = Field(None, gt=0)
    gpu_memory_utilization: float = Field(0.92, gt=0, le=1)
    activation_reserve_gib: float | None = Field(None, ge=0)
    # None: vLLM's OpenAI-server default for the deployment's GPU (sched.defaults); a scenario
    # resolves it when loaded, so only engines built outside one hold None.
    max_num_batched_tokens: int | None = Field(None, ge=1)
    max_num_seqs: int | None = Field(None, ge=1)
    max_model_len: int = Field(
        defaults.SERVING_MAX_MODEL_LEN,
        ge=2,
        description="Unset in a file: the model's context length, as vLLM starts it (the default "
        "shown stands only for engines built without a model)",
    )
    enable_chunked_prefill: bool = defaults.ENABLE_CHUNKED_PREFILL
    long_prefill_token_threshold: int = Field(defaults.LONG_PREFILL_TOKEN_THRESHOLD, ge=0)
    policy: SchedulingPolicy = defaults.POLICY
    watermark: float = Field(defaults.WATERMARK, ge=0, lt=1)
    enable_prefix_caching: bool = defaults.ENABLE_PREFIX_CACHING
    scheduler_reserve_full_isl: bool = defaults.SCHEDULER_RESERVE_FULL_ISL
    hash_algo: HashAlgo = defaults.HASH_ALGO
    hash_seed: str | None = Field(
        None, description="Plays PYTHONHASHSEED's role for NONE_HASH (documented in README)"
    )
    async_scheduling: bool = Field(
        defaults.SERVING_ASYNC_SCHEDULING,
        description="Schedule each step before the previous step's output is processed",
    )
    long_prefill_token_threshold_adaptive: bool = Field(
        defaults.LONG_PREFILL_TOKEN_THRESHOLD_ADAPTIVE,
        description="Raise the long-prefill cap to max_num_batched_tokens / eligible requests",
    )
    max_num_active_seqs: int | None = Field(
        defaults.MAX_NUM_ACTIVE_SEQS, ge=1, description="Admission cap; None: max_num_seqs"
    )
    prefill_schedule_interval: int = Field(
        defaults.PREFILL_SCHEDULE_INTERVAL,
        ge=1,
        description="Hold new prefill until this many executed steps since the last one",
    )
    max_num_queued_reqs: int | None = Field(
        defaults.MAX_NUM_QUEUED_REQS,
        ge=0,
        description="Front end: reject (HTTP 503) when unfinished requests would exceed this",
    )
    max_num_queued_tokens: int | None = Field(
        defaults.MAX_NUM_QUEUED_TOKENS,
        ge=0,
        description="Front end: reject (HTTP 503) while prompts in prefill sum to this or more",
    )
    core: Literal["native", "python"] = Field(
        DEFAULT_CORE,
        description="Cache core: compiled (native) or the pure-Python reference; same results",
    )  # = native.CORES
    kv_offloading_size: float | None = Field(
        None,
        ge=0,
        le=MAX_OFFLOADING_GIB,
        description="GiB of host memory for vLLM's CPU KV offload tier, all GPUs of a replica "
        "together (--kv-offloading-size); null or 0: off",
    )
    kv_offloading_policy: Literal["lru", "arc"] = Field(
        "lru", description="Eviction policy of the CPU offload tier (vLLM's eviction_policy)"
    )
    kv_offload_prompt_only: bool = Field(
        True, description="Store only prompt blocks on the CPU tier, as vLLM does by default"
    )
    kv_offload_sync_load_budget_bytes: int = Field(
        0,
        ge=0,
        description="Bytes per step (one GPU's share) of CPU hits loaded inside the step instead "
        "of asynchronously (vLLM's sync_load_budget_bytes); 0: every CPU hit loads async",
    )

    @field_validator("block_size")
    @classmethod
    def _kernel_block_multiple(cls, block_size: int) -> int:
        problem = block_size_problem(block_size)
        if problem is not None:
            raise ValueError(problem)
        return block_size

    @field_validator("kv_offloading_size")
    @classmethod
    def _zero_is_off(cls, size: float | None) -> float | None:
        # 0 GiB is the feature off, resolved exactly as if the field were absent.
        return None if size == 0 else size

    @model_validator(mode="after")
    def _vllm_constraints(self) -> EngineSettings:
        tokens, seqs = self.max_num_batched_tokens, self.max_num_seqs
        if tokens is None or seqs is None:
            return self  # the deployment's GPU sets them; scheduler_config checks them then
        problem = self.limit_problem(tokens, seqs)
        if problem is not None:
            raise field_problem(*problem)
        return self

    def limit_problem(
        self, max_num_batched_tokens: int, max_num_seqs: int
    ) -> tuple[str, str] | None:
        """(field, message) for the first limit vLLM refuses at start-up with these batch
        limits and this engine's other settings; None when all hold."""
        return engine_limit_problem(
            max_num_batched_tokens=max_num_batched_tokens,
            max_num_seqs=max_num_seqs,
            max_model_len=self.max_model_len,
            enable_chunked_prefill=self.enable_chunked_prefill,
            max_num_active_seqs=self.max_num_active_seqs,
        )

    def batch_limits(self, gpu: GpuSpec) -> tuple[int, int]:
        """(max_num_batched_tokens, max_num_seqs) as set, else as vLLM's OpenAI server sets them
        on `gpu`: its defaults for the GPU, the token budget at least max_model_len without
        chunked prefill."""
        tokens, seqs = defaults.serving_batch_limits(gpu.memory_bytes, gpu.name)
        if not self.enable_chunked_prefill:
            tokens = max(tokens, self.max_model_len)
        return (
            tokens if self.max_num_batched_tokens is None else self.max_num_batched_tokens,
            seqs if self.max_num_seqs is None else self.max_num_seqs,
        )


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

    model: ModelReference = "llama-3.1-8b"
    gpu: GpuName = "h100"
    tp: int = Field(1, ge=1, le=MAX_TP)
    quantization: Quantization | None = Field(
        None, description="vLLM's --quantization; null: the weights as the checkpoint ships them"
    )
    kv_cache_dtype: KvCacheDtype = Field("auto", description="vLLM's --kv-cache-dtype")
    replicas: int = Field(1, ge=1, le=1024)
    host_link: Literal["pcie-gen4", "pcie-gen5", "nvlink-c2c"] | None = Field(
        None,
        description="Each GPU's link to host memory for KV offload transfers; default: the "
        "GPU's (docs/offload.md)",
    )
    cuda_graphs: bool = Field(
        True,
        description="The engine replays decode steps as CUDA graphs (vLLM's default since 0.2.5); "
        "false: --enforce-eager or an older stack, whose decode steps also pay the host time of "
        "launching every layer (docs/cost_model.md §5.8)",
    )
    router: RouterSettings = Field(default_factory=RouterSettings)
    _model_spec: ModelSpec | None = PrivateAttr(None)

    @field_validator("gpu")
    @classmethod
    def _gpu_known(cls, name: str) -> str:
        try:
            get_gpu(name)
        except InputError as error:
            raise ValueError(str(error)) from None
        return name

    @model_validator(mode="after")
    def _model_resolves(self, info: ValidationInfo) -> DeploymentSettings:
        base_dir = (info.context or {}).get("base_dir")
        try:
            model = resolve_model(self.model, base_dir)
        except InputError as error:
            named = isinstance(self.model, str) and not is_config_path(self.model)
            message = f"{self.model!r} is not allowed: {error}" if named else str(error)
            raise field_problem("model", message) from None
        try:
            self._model_spec = deployment_model(
                model, quantization=self.quantization, kv_cache_dtype=self.kv_cache_dtype
            )
        except InputError as error:
            raise field_problem("quantization", str(error)) from None
        if not model.supports_tp(self.tp):
            raise field_problem("tp", tp_problem(model, self.tp))
        return self

    @property
    def model_spec(self) -> ModelSpec:
        """The served model in its deployed dtypes (a config path is read at validation)."""
        assert self._model_spec is not None  # set by the validator
        return self._model_spec


def tp_problem(model: ModelSpec, tp: int) -> str:
    """Why vLLM refuses to split `model` over `tp` GPUs, and the degrees it accepts."""
    heads, kv_heads = model.num_attention_heads, model.num_kv_heads
    allowed = ", ".join(map(str, model.tp_degrees(MAX_TP)))
    mlp = "each expert's MLP width" if model.is_moe else "the MLP width"
    return (
        f"{tp} is not allowed for {model.name} ({heads} attention heads, {kv_heads} KV heads): "
        f"vLLM needs tp to divide the {heads} attention heads and {mlp} "
        f"{model.intermediate_size}, and to divide the "
        f"{kv_heads} KV heads or be a multiple of {kv_heads}; allowed: {allowed}"
    )


class OutputSettings(StrictModel):
    """Which trace files a run writes, and how often metrics are scraped."""

    events: bool = True
    scrape_interval_s: float = Field(1.0, gt=0)
