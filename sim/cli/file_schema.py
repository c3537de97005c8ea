"""The JSON Schema of every prefixsim input file: scenarios, sweeps, base files and study files.

Built from the pydantic models that validate the files (so types, bounds, enums and defaults are
theirs), plus what only the loader knows: `extends:` and the `sweep:` mapping. A file may be a
base that others extend, so no top-level key is required; the loader still reports a missing
`name` or `workload` when the file is run. Field descriptions that the models do not carry
(a workload kind's come from its config's fields) come from FIELD_DESCRIPTIONS, keyed
`<Model>.<field>`; a test checks that every property of the schema has one and that every entry
names a real field.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel
from pydantic.json_schema import models_json_schema

from sim.config import Scenario
from sim.studies.layout_config import LayoutStudySettings
from sim.studies.side_channel_config import SideChannelSettings
from workloads.api import GENERATOR_KINDS, trace_format_summaries

FIELD_DESCRIPTIONS = {
    "Scenario.description": "one line saying what the scenario shows",
    "Scenario.engine": "vLLM engine arguments of every replica",
    "Scenario.deployment": "model, GPU, tensor parallelism, replicas and router",
    "Scenario.outputs": "which result files are written and how often metrics are scraped",
    "EngineSettings.block_size": "tokens per KV block (vLLM --block-size)",
    "EngineSettings.kv_cache_memory_gib": "KV cache per GPU in GiB (vLLM --kv-cache-memory); "
    "default: what gpu_memory_utilization leaves after weights and activations",
    "EngineSettings.gpu_memory_utilization": "share of GPU memory vLLM may use",
    "EngineSettings.activation_reserve_gib": "GPU memory kept for activations; default: "
    "estimated from the model",
    "EngineSettings.max_num_batched_tokens": "token budget of one engine step; unset: vLLM's "
    "API-server default for the GPU (16384 from 160 GiB, 8192 from 70 GiB but A100, else 2048)",
    "EngineSettings.max_num_seqs": "most requests running at once; unset: vLLM's API-server "
    "default for the GPU (1024 from 70 GiB but A100, else 256)",
    "EngineSettings.max_model_len": "longest sequence; longer prompts are rejected",
    "EngineSettings.enable_chunked_prefill": "split long prefills over several steps",
    "EngineSettings.long_prefill_token_threshold": "cap on one request's prefill tokens per "
    "step (0: none)",
    "EngineSettings.policy": "order of the waiting queue",
    "EngineSettings.watermark": "share of blocks admission keeps free",
    "EngineSettings.enable_prefix_caching": "reuse cached KV blocks of identical prefixes",
    "EngineSettings.scheduler_reserve_full_isl": "admit a request only if its whole prompt fits",
    "EngineSettings.hash_algo": "block hash function (vLLM --prefix-caching-hash-algo)",
    "DeploymentSettings.model": "model name (case-insensitive; Hugging Face names and aliases "
    "accepted)",
    "DeploymentSettings.gpu": "GPU name (case-insensitive; aliases like H100-80GB accepted)",
    "DeploymentSettings.tp": "tensor-parallel degree: GPUs per replica",
    "DeploymentSettings.replicas": "engine replicas, each with its own KV cache",
    "DeploymentSettings.router": "how requests are spread over the replicas",
    "RouterSettings.policy": "round_robin, least_loaded (queued tokens), prefix_aware "
    "(SGLang's cache-aware rule) or session_affinity",
    "RouterSettings.cache_threshold": "prefix_aware: least cached share of the prompt that "
    "routes by cache",
    "RouterSettings.balance_abs_threshold": "prefix_aware: load difference (requests) above "
    "which it balances instead",
    "RouterSettings.balance_rel_threshold": "prefix_aware: load ratio above which it balances",
    "OutputSettings.events": "write events.parquet (block stored / hit / evicted)",
    "OutputSettings.scrape_interval_s": "simulated seconds between metrics.parquet scrapes",
    "WorkloadSettings.source": "what requests look like: "
    + ", ".join([*(kind.name for kind in GENERATOR_KINDS), "mix", "trace"]),
    "WorkloadSettings.num_arrivals": "stop after this many arrivals (else at duration_s)",
    "WorkloadSettings.tokens": "synthetic token ids or real text through a tokenizer",
    "TokenSettings.mode": "synthetic ids, or real text tokenized with cl100k",
    "TokenSettings.chat_template": "chat template wrapping each message",
    "CommonSlotsSettings.system_prompt_tokens": "system prompt length",
    "CommonSlotsSettings.system_prompt_text": "the system prompt as text (real-text mode)",
    "CommonSlotsSettings.num_prompt_variants": "distinct system prompts drawn from",
    "CommonSlotsSettings.tools_tokens": "tool definitions length",
    "CommonSlotsSettings.few_shot_tokens": "few-shot examples length",
    "CommonSlotsSettings.user_id_tokens": "per-user field length",
    "CommonSlotsSettings.timestamp_tokens": "per-request timestamp length",
    "LayoutSettings.name": "name of the prompt layout",
    "LayoutSettings.order": "the prompt's segments in order",
    "TenantSettings.name": "tenant name",
    "TenantSettings.weight": "share of arrivals",
    "TenantSettings.cache_salt": "vLLM cache_salt of the tenant's requests",
    "TenantSettings.lora": "the LoRA adapter its requests use",
    "TenantSettings.priority": "scheduling priority (policy: priority)",
    "LoraSettings.name": "adapter name (part of the block hash, with the path)",
    "LoraSettings.id": "adapter id (vLLM's lora_int_id; not in the block hash)",
    "LoraSettings.path": "adapter path (part of the block hash, with the name)",
    "MixSource.kind": "a weighted mix of sources",
    "MixSource.components": "the mixed sources with their weights",
    "MixPart.weight": "share of arrivals",
    "MixPart.source": "the source",
    "TraceSource.kind": "replay a recorded trace",
    "TraceSource.path": "trace file, relative to the file that names it",
    "TraceSource.format": f"the trace's format, one of: {trace_format_summaries()}",
    "TraceSource.speedup": "divide the trace's timestamps by this",
    "TraceSource.max_requests": "read at most this many requests",
    "PoissonSettings.process": "exponential gaps",
    "PoissonSettings.rate_per_s": "arrivals (sessions, agents or requests) per second",
    "GammaSettings.process": "gamma gaps: burstier (cv > 1) or more regular (cv < 1)",
    "GammaSettings.rate_per_s": "arrivals per second",
    "GammaSettings.cv": "coefficient of variation of the gaps",
    "PiecewiseSettings.process": "Poisson with a rate that changes piece by piece (diurnal)",
    "PiecewiseSettings.pieces": "consecutive pieces of constant rate",
    "PiecewiseSettings.repeat": "start over after the last piece",
    "RatePieceSettings.duration_s": "length of the piece",
    "RatePieceSettings.rate_per_s": "arrivals per second during the piece",
    "FixedDist.dist": "always the same value",
    "FixedDist.value": "the value",
    "UniformDist.dist": "uniform between low and high",
    "UniformDist.low": "smallest value",
    "UniformDist.high": "largest value",
    "ExponentialDist.dist": "exponential",
    "ExponentialDist.mean": "mean",
    "LogNormalDist.dist": "log-normal, clipped to [low, high]",
    "LogNormalDist.median": "median",
    "LogNormalDist.sigma": "standard deviation of the log",
    "LogNormalDist.low": "smallest value",
    "LogNormalDist.high": "largest value",
    "LayoutStudySettings.description": "one line saying what the study shows",
    "LayoutStudySettings.engine": "vLLM engine arguments",
    "LayoutStudySettings.deployment": "model, GPU and tensor parallelism",
    "LayoutStudySettings.chat_template": "chat template the prompt is rendered with",
    "LayoutStudySettings.segments": "the prompt's segments, in the order written",
    "LayoutStudySettings.traffic": "the paired traffic every ordering is simulated on",
    "LayoutStudySettings.max_orderings": "most orderings simulated",
    "PromptSegmentSettings.name": "segment name",
    "PromptSegmentSettings.role": "the chat role of the segment",
    "PromptSegmentSettings.text": "the segment's text ({user}, {tenant}... are filled in)",
    "PromptSegmentSettings.filler_tokens": "extra tokens of filler text",
    "TrafficSettings.num_tenants": "tenants",
    "TrafficSettings.users_per_tenant": "users per tenant",
    "TrafficSettings.num_requests": "requests simulated per ordering",
    "TrafficSettings.request_rate_per_s": "arrival rate",
    "TrafficSettings.output_tokens": "output tokens per request",
    "TrafficSettings.seed": "random seed of the traffic",
    "SideChannelSettings.description": "one line saying what the study shows",
    "SideChannelSettings.engine": "vLLM engine arguments",
    "SideChannelSettings.deployment": "model, GPU and tensor parallelism",
    "SideChannelSettings.chat_template": "chat template the prompts are rendered with",
    "SideChannelSettings.seed": "random seed",
    "SideChannelSettings.salt_settings": "cache_salt settings compared",
    "SideChannelSettings.secrets": "the victim's candidate prompts",
    "SideChannelSettings.attack": "how the attacker probes",
    "SideChannelSettings.background": "other tenants' traffic",
    "SecretSettings.sent_fraction": "share of the candidates the victim sends",
    "SecretSettings.system_prompt_tokens": "shared system prompt length",
    "SecretSettings.secret_tokens": "length of each candidate prompt",
    "SecretSettings.output_tokens": "output tokens per victim request",
    "AttackSettings.num_calibration_pairs": "cached/uncached probe pairs for the threshold",
    "BackgroundSettings.num_tenants": "background tenants",
    "BackgroundSettings.request_rate_per_s": "their total arrival rate",
    "BackgroundSettings.prompt_tokens": "prompt length of their requests",
    "BackgroundSettings.output_tokens": "output tokens of their requests",
}

FIELD_DESCRIPTIONS["PromptSegmentSettings.scope"] = (
    "how widely the segment is shared: static, per_tenant, per_user or per_request"
)

SWEEP_SCHEMA: dict[str, Any] = {
    "type": "object",
    "description": "run the file once per combination of the axes and seeds",
    "additionalProperties": False,
    "properties": {
        "grid": {
            "type": "object",
            "description": "dotted.path: [values]; the axes are crossed (last fastest)",
            "additionalProperties": {"type": "array", "minItems": 1},
        },
        "zip": {
            "type": "object",
            "description": "dotted.path: [values] lists of one length whose paths move together",
            "additionalProperties": {"type": "array", "minItems": 1},
        },
        "seeds": {
            "type": "array",
            "description": "seeds every variant runs with (innermost axis)",
            "items": {"type": "integer"},
            "minItems": 1,
        },
    },
}
EXTENDS_SCHEMA = {
    "type": "string",
    "description": "a YAML file (relative to this one) whose keys this file merges over",
}


def _describe(title: str, node: dict[str, Any]) -> None:
    for field, prop in node.get("properties", {}).items():
        described = FIELD_DESCRIPTIONS.get(f"{title}.{field}")
        if described is not None and "description" not in prop:
            prop["description"] = described


def file_json_schema() -> dict[str, Any]:
    """The JSON Schema (2020-12) of scenario, sweep, base and study files."""
    models: list[tuple[type[BaseModel], Literal["validation"]]] = [
        (Scenario, "validation"),
        (LayoutStudySettings, "validation"),
        (SideChannelSettings, "validation"),
    ]
    _, combined = models_json_schema(models, ref_template="#/$defs/{model}")
    definitions: dict[str, Any] = combined["$defs"]
    for title, node in definitions.items():
        _describe(title, node)
    alternatives = []
    for model, _ in models:
        node = definitions.pop(model.__name__)
        node["properties"]["extends"] = EXTENDS_SCHEMA
        if model is Scenario:
            node["properties"]["sweep"] = SWEEP_SCHEMA
        node.pop("required", None)
        alternatives.append(node)
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "prefixsim input file",
        "description": "A scenario (optionally with sweep:), a base file it extends, or a "
        "layout-advisor or side-channel study file.",
        "anyOf": alternatives,
        "$defs": definitions,
    }
