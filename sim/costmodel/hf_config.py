"""A Hugging Face `config.json` (dense or mixture-of-experts decoder with GQA) as a `ModelSpec`.

Shapes this simulator cannot time or size are refused with one line naming the field: latent
attention (MLA), shared experts, dense layers mixed into a mixture of experts, linear-attention or
state-space layers, encoder-decoders and multimodal wrappers.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from sim.costmodel.spec_types import ModelSpec
from sim.errors import InputError

# Fields some families name differently (BLOOM); HF maps them the same way (attribute_map).
_FIELD_ALIASES = {"n_layer": "num_hidden_layers", "n_head": "num_attention_heads"}
# Families whose MLP is one up projection to 4 x hidden, not a gated one of intermediate_size.
_UNGATED_4X_MLP_FAMILIES = ("bloom",)
_EXPERT_COUNT_FIELDS = ("num_local_experts", "num_experts", "n_routed_experts")
_ATTENTION_LAYER_TYPES = ("full_attention", "sliding_attention")
# Field present (and not null/0/false/empty) -> why the shape is not supported.
_UNSUPPORTED_FIELDS = {
    "kv_lora_rank": "multi-head latent attention (MLA, as in DeepSeek-V2/V3) is not supported",
    "q_lora_rank": "multi-head latent attention (MLA, as in DeepSeek-V2/V3) is not supported",
    "is_encoder_decoder": "encoder-decoder models are not supported; give a decoder-only model",
    "text_config": "multimodal wrapper configs are not supported; give the text model's fields",
    "n_shared_experts": "shared experts (always-active MLPs beside the routed ones) are not "
    "supported",
    "shared_expert_intermediate_size": "shared experts (always-active MLPs beside the routed "
    "ones) are not supported",
    "first_k_dense_replace": "dense layers mixed into a mixture of experts are not supported",
    "mlp_only_layers": "dense layers mixed into a mixture of experts are not supported",
    "linear_attention_layers": "linear-attention layers are not supported",
    "attn_layer_indices": "state-space (Mamba) layers are not supported",
    "layers_block_type": "state-space (Mamba) layers are not supported",
}
QUANTIZATION_METHODS = ("fp8", "mxfp4")


def load_hf_config(path: Path) -> dict[str, Any]:
    """Read a config.json; an unreadable or non-mapping file is an InputError naming it."""
    try:
        document = json.loads(path.read_text())
    except FileNotFoundError:
        raise InputError("model config file not found", source=str(path)) from None
    except (OSError, UnicodeDecodeError) as error:
        raise InputError(f"cannot read the model config: {error}", source=str(path)) from None
    except json.JSONDecodeError as error:
        raise InputError(
            f"not valid JSON: {error.msg} (column {error.colno})",
            source=str(path),
            line=error.lineno,
        ) from None
    if not isinstance(document, dict):
        raise InputError("a model config must be a JSON object", source=str(path))
    return document


def model_from_hf_config(
    config: Mapping[str, Any],
    *,
    key: str,
    name: str | None = None,
    recorded_num_params: int | None = None,
    field_prefix: str = "",
) -> ModelSpec:
    """The ModelSpec `config` describes, in the dtypes its checkpoint ships with.

    Problems raise InputError naming `field_prefix` + the config field, the value and why.
    """
    fields = _Fields(config, field_prefix)
    fields.reject_unsupported()
    num_layers = fields.positive_int("num_hidden_layers")
    hidden_size = fields.positive_int("hidden_size")
    num_heads = fields.positive_int("num_attention_heads")
    num_kv_heads = fields.positive_int("num_key_value_heads", default=num_heads)
    if num_heads % num_kv_heads:
        raise fields.problem(
            "num_key_value_heads",
            num_kv_heads,
            f"must divide num_attention_heads ({num_heads}) for grouped-query attention",
        )
    head_dim = fields.positive_int("head_dim", default=0) or _head_dim(
        fields, hidden_size, num_heads
    )
    family = str(config.get("model_type", ""))
    num_experts = fields.expert_count()
    if num_experts:
        num_active = fields.positive_int("num_experts_per_tok")
        if num_active > num_experts:
            raise fields.problem(
                "num_experts_per_tok", num_active, f"exceeds the {num_experts} experts"
            )
        if fields.positive_int("decoder_sparse_step", default=1) != 1:
            raise fields.problem(
                "decoder_sparse_step",
                config["decoder_sparse_step"],
                "dense layers mixed into a mixture of experts are not supported",
            )
        width_field = "moe_intermediate_size" if "moe_intermediate_size" in config else None
        intermediate = fields.positive_int(width_field or "intermediate_size")
    else:
        num_active = 0
        intermediate = (
            4 * hidden_size
            if family in _UNGATED_4X_MLP_FAMILIES
            else fields.positive_int("intermediate_size")
        )
    sliding_window, num_sliding = fields.sliding_attention(num_layers)
    # mxfp4 checkpoints (gpt-oss) quantize the experts only; fp8 ones every projection.
    quantization = fields.quantization()
    return ModelSpec(
        name=name or str(config.get("_name_or_path") or key),
        key=key,
        num_layers=num_layers,
        hidden_size=hidden_size,
        num_attention_heads=num_heads,
        num_kv_heads=num_kv_heads,
        head_dim=head_dim,
        intermediate_size=intermediate,
        vocab_size=fields.positive_int("vocab_size"),
        tied_embeddings=fields.boolean("tie_word_embeddings", default=family == "bloom"),
        gated_mlp=family not in _UNGATED_4X_MLP_FAMILIES,
        num_experts=num_experts,
        num_active_experts=num_active,
        attention_bias=fields.boolean("attention_bias", default=False),
        sliding_window=sliding_window,
        num_sliding_layers=num_sliding,
        recorded_num_params=recorded_num_params,
        weight_dtype="fp8" if quantization == "fp8" else "bf16",
        expert_weight_dtype=quantization or "bf16",
    )


def _head_dim(fields: _Fields, hidden_size: int, num_heads: int) -> int:
    if hidden_size % num_heads:
        raise fields.problem(
            "head_dim",
            None,
            f"is required when hidden_size ({hidden_size}) is not a multiple of "
            f"num_attention_heads ({num_heads})",
        )
    return hidden_size // num_heads


class _Fields:
    """Typed reads of config fields; every problem names the field."""

    def __init__(self, config: Mapping[str, Any], prefix: str) -> None:
        self._config = {_FIELD_ALIASES.get(key, key): value for key, value in config.items()}
        self._prefix = prefix

    def problem(self, field: str, value: Any, why: str) -> InputError:
        shown = "" if value is None else f" = {value!r}"
        return InputError(f"model config field {self._prefix}{field}{shown}: {why}")

    def reject_unsupported(self) -> None:
        for field, why in _UNSUPPORTED_FIELDS.items():
            value = self._config.get(field)
            if value not in (None, 0, False, [], {}):
                raise self.problem(field, value if not isinstance(value, dict) else None, why)
        architectures = self._config.get("architectures")
        if (
            isinstance(architectures, list)
            and architectures
            and not any(str(arch).endswith("ForCausalLM") for arch in architectures)
        ):
            raise self.problem(
                "architectures",
                architectures,
                "not a decoder-only language model (expected a *ForCausalLM architecture)",
            )

    def positive_int(self, field: str, *, default: int | None = None) -> int:
        if field not in self._config or self._config[field] is None:
            if default is not None:
                return default
            raise self.problem(field, None, "is required (a positive integer)")
        value = self._config[field]
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise self.problem(field, value, "expected a positive integer")
        return value

    def boolean(self, field: str, *, default: bool) -> bool:
        value = self._config.get(field, default)
        if not isinstance(value, bool):
            raise self.problem(field, value, "expected true or false")
        return value

    def expert_count(self) -> int:
        for field in _EXPERT_COUNT_FIELDS:
            if self._config.get(field):
                return self.positive_int(field)
        return 0

    def sliding_attention(self, num_layers: int) -> tuple[int | None, int]:
        """(window, layers using it); only layer_types names which layers slide."""
        window = None
        if self._config.get("sliding_window") is not None and self._config.get(
            "use_sliding_window", True
        ):
            window = self.positive_int("sliding_window")
        layer_types = self._config.get("layer_types")
        if layer_types is None:
            return window, 0
        if not isinstance(layer_types, list) or len(layer_types) != num_layers:
            raise self.problem(
                "layer_types", None, f"expected a list of {num_layers} layer types, one per layer"
            )
        unknown = sorted({str(kind) for kind in layer_types} - set(_ATTENTION_LAYER_TYPES))
        if unknown:
            raise self.problem(
                "layer_types",
                unknown[0],
                f"layer type not supported; allowed: {', '.join(_ATTENTION_LAYER_TYPES)}",
            )
        num_sliding = layer_types.count("sliding_attention")
        if num_sliding and window is None:
            raise self.problem(
                "sliding_window", None, "is required when layer_types has sliding_attention layers"
            )
        return window, num_sliding

    def quantization(self) -> str | None:
        """The checkpoint's quantization method (quantization_config.quant_method), if any."""
        quantization = self._config.get("quantization_config")
        if quantization is None:
            return None
        method = quantization.get("quant_method") if isinstance(quantization, dict) else None
        if method not in QUANTIZATION_METHODS:
            raise self.problem(
                "quantization_config.quant_method",
                method,
                f"not supported; allowed: {', '.join(QUANTIZATION_METHODS)}",
            )
        return str(method)
