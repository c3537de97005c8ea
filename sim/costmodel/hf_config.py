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
_ONLY_ATTENTION = "only attention decoders (dense or MoE, GQA) are supported"
_STATE_SPACE = (
    f"state-space or hybrid (Mamba, RWKV, ...) layers are not supported; {_ONLY_ATTENTION}"
)
_LINEAR_ATTENTION = f"linear-attention layers are not supported; {_ONLY_ATTENTION}"
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
    # Hybrids of attention and state-space / recurrent / convolution layers: which layers are
    # which (Nemotron-H, Jamba, Zamba, Bamba, RecurrentGemma, LFM2) and the state's size (Mamba,
    # Mamba-2, Falcon-Mamba). Keys holding "mamba" or starting with "ssm_" count too
    # (_STATE_SPACE_KEY_PARTS), as do the families' model_type and architectures.
    "hybrid_override_pattern": _STATE_SPACE,
    "attn_layer_period": _STATE_SPACE,
    "attn_layer_offset": _STATE_SPACE,
    "attn_layer_indices": _STATE_SPACE,
    "layers_block_type": _STATE_SPACE,
    "hybrid_layer_ids": _STATE_SPACE,
    "block_types": _STATE_SPACE,
    "full_attn_idxs": _STATE_SPACE,
    "state_size": _STATE_SPACE,
    "conv_kernel": _STATE_SPACE,
    "time_step_rank": _STATE_SPACE,
    "conv_L_cache": _STATE_SPACE,
    "expert_layer_period": "dense layers mixed into a mixture of experts are not supported",
    # Linear attention beside full attention (MiniMax-Text-01, Qwen3-Next).
    "linear_attention_layers": _LINEAR_ATTENTION,
    "attn_type_list": _LINEAR_ATTENTION,
    "full_attention_interval": _LINEAR_ATTENTION,
    "linear_num_value_heads": _LINEAR_ATTENTION,
}
# A key holding one of these (set to anything but null) shows state-space layers.
_STATE_SPACE_KEY_PARTS = ("mamba", "ssm_")
# model_type values and architecture name parts (lower case) of state-space, recurrent, hybrid
# and linear-attention families. Exact types: Nemotron, Falcon and MiniMax-M2 are attention-only.
_STATE_SPACE_MODEL_TYPES = frozenset(
    {
        "mamba",
        "mamba2",
        "falcon_mamba",
        "jamba",
        "zamba",
        "zamba2",
        "bamba",
        "nemotron_h",
        "falcon_h1",
        "granitemoehybrid",
        "plamo2",
        "hymba",
        "rwkv",
        "rwkv5",
        "rwkv6",
        "rwkv7",
        "recurrent_gemma",
        "xlstm",
        "lfm2",
        "lfm2_moe",
        "minimax",
        "minimax_text_01",
        "minimax_m1",
        "qwen3_next",
        "kimi_linear",
    }
)
_STATE_SPACE_ARCHITECTURE_PARTS = (
    "mamba",
    "jamba",
    "zamba",
    "bamba",
    "nemotronh",
    "falconh1",
    "granitemoehybrid",
    "plamo2",
    "hymba",
    "rwkv",
    "recurrentgemma",
    "xlstm",
    "lfm2",
    "minimaxtext01",
    "minimaxm1",
    "qwen3next",
    "kimilinear",
)
# Where vLLM reads a model's longest context, the smallest one given winning
# (_get_and_verify_max_len); model_max_length, where set, overrides them.
_CONTEXT_LENGTH_FIELDS = (
    "max_position_embeddings",
    "n_positions",
    "max_seq_len",
    "seq_length",
    "model_max_length",
    "max_target_positions",
    "max_sequence_length",
    "max_seq_length",
    "seq_len",
)
# rope_scaling types whose max_position_embeddings already counts the scaling.
_UNSCALED_ROPE_TYPES = ("su", "longrope", "llama3")
_MAX_SHOWN_CHARS = 60
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
    context_length, context_length_source = fields.context_length(family)
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
        context_length=context_length,
        context_length_source=context_length_source,
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
        shown = "" if value is None else f" = {_shown(value)}"
        return InputError(f"model config field {self._prefix}{field}{shown}: {why}")

    def reject_unsupported(self) -> None:
        for field, why in _UNSUPPORTED_FIELDS.items():
            value = self._config.get(field)
            if value not in (None, 0, False, [], {}):
                raise self.problem(field, value if not isinstance(value, dict) else None, why)
        self._reject_state_space()
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

    def _reject_state_space(self) -> None:
        """State-space, recurrent and hybrid models, by a key of theirs, model_type or name."""
        for field, value in self._config.items():
            lowered = str(field).lower()
            if value is not None and any(part in lowered for part in _STATE_SPACE_KEY_PARTS):
                shown = None if isinstance(value, dict) else value
                raise self.problem(str(field), shown, _STATE_SPACE)
        model_type = self._config.get("model_type")
        if isinstance(model_type, str) and model_type.lower() in _STATE_SPACE_MODEL_TYPES:
            raise self.problem("model_type", model_type, _STATE_SPACE)
        architectures = self._config.get("architectures")
        if isinstance(architectures, list):
            for architecture in architectures:
                name = str(architecture).lower()
                if any(part in name for part in _STATE_SPACE_ARCHITECTURE_PARTS):
                    raise self.problem("architectures", architectures, _STATE_SPACE)

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

    def context_length(self, family: str) -> tuple[int | None, str]:
        """The longest context vLLM allows (its derived max_model_len) and the fields it comes
        from; (None, "") when the config names none (vLLM would assume 2048; left open here)."""
        length: int | None = None
        source = ""
        for field in _CONTEXT_LENGTH_FIELDS:
            if self._config.get(field) is not None:
                value = self.positive_int(field)
                if length is None or value < length:
                    length, source = value, field
        if self._config.get("model_max_length"):
            length, source = self.positive_int("model_max_length"), "model_max_length"
        if length is None:
            return None, ""
        rope_scaling = self._config.get("rope_scaling")
        if not isinstance(rope_scaling, dict) or "gemma3" in family:
            return length, source
        rope_type = rope_scaling.get("rope_type", rope_scaling.get("type"))
        if rope_type in _UNSCALED_ROPE_TYPES:
            return length, source
        factor = rope_scaling.get("factor")
        if factor is None:
            factor = 1.0
        if isinstance(factor, bool) or not isinstance(factor, int | float) or factor <= 0:
            raise self.problem("rope_scaling.factor", factor, "expected a positive number")
        if rope_type == "yarn":
            original = rope_scaling.get("original_max_position_embeddings")
            if isinstance(original, bool) or not isinstance(original, int) or original < 1:
                raise self.problem(
                    "rope_scaling.original_max_position_embeddings",
                    original,
                    "expected a positive integer (yarn scales it by rope_scaling.factor)",
                )
            length, source = original, "rope_scaling.original_max_position_embeddings"
        if factor == 1:
            return length, source
        return int(length * factor), f"{source} x rope_scaling.factor {factor:g}"

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


def _shown(value: Any) -> str:
    """`value` as a config field shows it, cut short (hybrid layer patterns run long)."""
    text = repr(value)
    if len(text) > _MAX_SHOWN_CHARS:
        text = f"{text[: _MAX_SHOWN_CHARS - 3]}..."
    return text
