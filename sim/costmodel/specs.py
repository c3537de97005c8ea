"""The GPU and model registries (cost_model.md §2): one data file each, case-insensitive lookup by
name or alias, and models given as a Hugging Face config.json (a path or inline fields).

Adding a GPU is one row of `data/gpus.csv`; adding a model is one `data/models/<key>.json`
(its HF config plus name, aliases, source and license). Everything else (config validation,
the JSON Schema, `known_*` lists) reads these registries.
"""

from __future__ import annotations

import csv
import dataclasses
import functools
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from sim.costmodel.hf_config import load_hf_config, model_from_hf_config
from sim.costmodel.spec_types import GpuSpec, ModelSpec
from sim.errors import InputError

__all__ = [
    "GPU_TABLE",
    "KV_CACHE_DTYPES",
    "MODEL_DIR",
    "QUANTIZATIONS",
    "GpuSpec",
    "ModelSpec",
    "deployment_model",
    "get_gpu",
    "get_model",
    "gpu_names",
    "is_config_path",
    "is_registry_model",
    "known_gpus",
    "known_models",
    "model_names",
    "normalize_name",
    "resolve_model",
]

DATA_DIR = Path(__file__).parent / "data"
GPU_TABLE = DATA_DIR / "gpus.csv"
MODEL_DIR = DATA_DIR / "models"
MIB = 1024**2
# vLLM's --quantization methods prefixsim can size and time (None: as the checkpoint ships).
QUANTIZATIONS = ("fp8", "mxfp4")
# vLLM's --kv-cache-dtype names -> the dtype stored ("auto": the model's compute dtype).
KV_CACHE_DTYPES = {
    "auto": "bf16",
    "bfloat16": "bf16",
    "fp8": "fp8",
    "fp8_e4m3": "fp8",
    "fp8_e5m2": "fp8",
}


def normalize_name(name: str) -> str:
    """Lower-case, drop an HF organisation prefix, and use '-' for spaces and underscores."""
    base = name.strip().lower().rsplit("/", 1)[-1]
    return "-".join(base.replace("_", " ").replace("-", " ").split())


@dataclasses.dataclass(frozen=True, slots=True)
class _Registry:
    """Specs by canonical key and every accepted (normalized) name -> key."""

    by_key: dict[str, Any]
    index: dict[str, str]

    @classmethod
    def of(cls, entries: list[tuple[GpuSpec | ModelSpec, list[str]]]) -> _Registry:
        by_key = {spec.key: spec for spec, _ in entries}
        index: dict[str, str] = {}
        for spec, aliases in entries:
            for alias in (spec.key, spec.name, *aliases):
                index[normalize_name(alias)] = spec.key
        return cls(by_key, index)


@functools.cache
def _gpu_registry() -> _Registry:
    entries: list[tuple[GpuSpec | ModelSpec, list[str]]] = []
    with GPU_TABLE.open(newline="") as handle:
        for line, row in enumerate(csv.DictReader(handle), start=2):
            try:
                entries.append((_gpu_from_row(row), _split_aliases(row["aliases"])))
            except (KeyError, TypeError, ValueError) as error:
                raise InputError(
                    f"bad GPU row: {error!r}", source=str(GPU_TABLE), line=line
                ) from None
    return _Registry.of(entries)


def _gpu_from_row(row: dict[str, str]) -> GpuSpec:
    return GpuSpec(
        name=row["name"],
        key=row["key"],
        memory_bytes=int(row["memory_mib"]) * MIB,
        bf16_dense_flops_per_s=_scaled(row["bf16_dense_tflops"], 12),
        fp8_dense_flops_per_s=_scaled(row["fp8_dense_tflops"], 12)
        if row["fp8_dense_tflops"]
        else None,
        memory_bandwidth_bytes_per_s=_scaled(row["memory_tb_per_s"], 12),
        link_bandwidth_bytes_per_s=_scaled(row["link_gb_per_s"], 9),
        interconnect=row["interconnect"],
        gemm_efficiency=float(row["gemm_efficiency"]),
        attention_efficiency=float(row["attention_efficiency"]),
        bandwidth_efficiency=float(row["bandwidth_efficiency"]),
        kernel_tables=row["kernel_tables"] or None,
        source=row["source"],
    )


def _scaled(text: str, exponent: int) -> float:
    """`text` x 10^exponent, parsed as one literal ("2.039", 12 -> exactly 2.039e12)."""
    return float(f"{text}e{exponent}")


def _split_aliases(text: str) -> list[str]:
    return [alias for alias in text.split(";") if alias]


@functools.cache
def _model_registry() -> _Registry:
    entries: list[tuple[GpuSpec | ModelSpec, list[str]]] = []
    for path in sorted(MODEL_DIR.glob("*.json")):
        document = load_hf_config(path)
        try:
            model = model_from_hf_config(
                document["config"],
                key=path.stem,
                name=document["name"],
                recorded_num_params=document.get("num_params"),
                field_prefix="config.",
            )
            entries.append((model, document["aliases"]))
        except KeyError as error:
            raise InputError(f"missing field {error}", source=str(path)) from None
        except InputError as error:
            raise error.at(path) from None
    return _Registry.of(entries)


def known_gpus() -> list[str]:
    """Canonical keys of the GPUs with specs."""
    return sorted(_gpu_registry().by_key)


def known_models() -> list[str]:
    """Canonical keys of the models with specs."""
    return sorted(_model_registry().by_key)


def gpu_names() -> list[str]:
    """Every accepted GPU name in normalized form (keys and aliases)."""
    return sorted(_gpu_registry().index)


def model_names() -> list[str]:
    """Every accepted model name in normalized form (keys and aliases)."""
    return sorted(_model_registry().index)


def get_gpu(name: str | GpuSpec) -> GpuSpec:
    """The GPU called `name` (case-insensitive; aliases like "H100-80GB" accepted)."""
    if isinstance(name, GpuSpec):
        return name
    registry = _gpu_registry()
    key = registry.index.get(normalize_name(name))
    if key is None:
        raise InputError(f"unknown GPU {name!r}; known GPUs: {', '.join(known_gpus())}")
    gpu: GpuSpec = registry.by_key[key]
    return gpu


def get_model(name: str | ModelSpec) -> ModelSpec:
    """The model called `name` (case-insensitive; aliases like "meta-llama/Llama-3.1-8B" work)."""
    if isinstance(name, ModelSpec):
        return name
    registry = _model_registry()
    key = registry.index.get(normalize_name(name))
    if key is None:
        raise InputError(
            f"unknown model {name!r}; known models: {', '.join(known_models())} "
            "(or give a path to a Hugging Face config.json, or its fields inline)"
        )
    model: ModelSpec = registry.by_key[key]
    return model


def is_registry_model(model: ModelSpec) -> bool:
    """Whether `model` is a registry model exactly as shipped (shape and dtypes), the only case
    a shipped profile of its key describes."""
    shipped = _model_registry().by_key.get(model.key)
    return shipped == model


def is_config_path(reference: str) -> bool:
    """Whether a model reference names a config file rather than a registry model."""
    return reference.endswith(".json")


def resolve_model(reference: str | Mapping[str, Any], base_dir: Path | None = None) -> ModelSpec:
    """A registry name, a path to a config.json (relative to `base_dir`), or inline HF fields."""
    if isinstance(reference, Mapping):
        return model_from_hf_config(reference, key="inline")
    if not is_config_path(reference):
        return get_model(reference)
    path = Path(reference)
    if not path.is_absolute() and base_dir is not None:
        path = base_dir / path
    try:
        return model_from_hf_config(load_hf_config(path), key=path.parent.name or path.stem)
    except InputError as error:
        raise error.at(path) from None


def deployment_model(
    reference: str | Mapping[str, Any] | ModelSpec,
    *,
    quantization: str | None = None,
    kv_cache_dtype: str = "auto",
    base_dir: Path | None = None,
) -> ModelSpec:
    """The model a deployment serves, in the dtypes vLLM's --quantization (None: as the
    checkpoint ships) and --kv-cache-dtype would give it."""
    model = reference if isinstance(reference, ModelSpec) else resolve_model(reference, base_dir)
    if kv_cache_dtype not in KV_CACHE_DTYPES:
        raise InputError(
            f"kv_cache_dtype {kv_cache_dtype!r} is not supported; "
            f"allowed: {', '.join(KV_CACHE_DTYPES)}"
        )
    if quantization is not None and quantization not in QUANTIZATIONS:
        raise InputError(
            f"quantization {quantization!r} is not supported; allowed: {', '.join(QUANTIZATIONS)}"
        )
    weight_dtype, expert_weight_dtype = model.weight_dtype, model.expert_weight_dtype
    shipped_quantization = next(
        (d for d in (expert_weight_dtype, weight_dtype) if d != "bf16"), None
    )
    if quantization not in (None, shipped_quantization) and shipped_quantization is not None:
        # vLLM refuses a --quantization that contradicts the checkpoint's quantization_config.
        raise InputError(
            f"quantization {quantization!r} does not match {model.name}'s checkpoint, which is "
            f"quantized with {shipped_quantization!r}; leave quantization null"
        )
    if quantization == "fp8":
        weight_dtype = expert_weight_dtype = "fp8"
    elif quantization == "mxfp4":
        if not model.is_moe:
            raise InputError(
                f"quantization 'mxfp4' applies to mixture-of-experts models; {model.name} is dense"
            )
        expert_weight_dtype = "mxfp4"
    return dataclasses.replace(
        model,
        weight_dtype=weight_dtype,
        expert_weight_dtype=expert_weight_dtype,
        kv_cache_dtype=KV_CACHE_DTYPES[kv_cache_dtype],
    )
