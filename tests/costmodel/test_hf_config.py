"""Hugging Face config.json -> ModelSpec: dense and MoE decoders, dtypes, and clear refusals."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sim.costmodel.capacity import kv_bytes_per_token
from sim.costmodel.hf_config import load_hf_config, model_from_hf_config
from sim.costmodel.specs import MODEL_DIR, deployment_model, get_model, resolve_model
from sim.errors import InputError


def shipped_config(key: str) -> dict:
    return json.loads((MODEL_DIR / f"{key}.json").read_text())["config"]


@pytest.mark.parametrize(
    ("key", "total", "active", "embedding_tables"),
    [
        # Published counts: Mixtral's model card (46.7B, 12.9B per token counting both embedding
        # tables); OpenAI's gpt-oss model card (116.83B / 5.13B and 20.91B / 3.61B active,
        # counting the unembedding only); Qwen's card (30.5B); CodeLlama-34B (33.7B); Yi-34B-200K's
        # model page (34.4B).
        ("mixtral-8x7b", 46.7e9, 12.9e9, 2),
        ("gpt-oss-120b", 116.83e9, 5.13e9, 1),
        ("gpt-oss-20b", 20.91e9, 3.61e9, 1),
        ("qwen3-30b-a3b", 30.5e9, None, 0),
        ("codellama-34b", 33.7e9, None, 0),
        ("yi-34b", 34.4e9, None, 0),
    ],
)
def test_parameter_counts_match_the_published_ones(
    key: str, total: float, active: float | None, embedding_tables: int
) -> None:
    model = get_model(key)
    assert model.num_params == pytest.approx(total, rel=0.002)
    if active is not None:
        per_token = model.num_active_linear_params + embedding_tables * model.lm_head_params
        assert per_token == pytest.approx(active, rel=0.002)


def test_mixtral_routes_each_token_to_two_of_eight_experts() -> None:
    model = get_model("mixtral-8x7b")
    assert (model.num_experts, model.num_active_experts) == (8, 2)
    assert model.num_params == 46_702_792_704  # 32 x (attention + 8 experts + router) + emb.
    expert = 3 * 4096 * 14336
    attention = 4096 * (4096 + 2 * 1024) + 4096 * 4096
    assert model.num_active_linear_params == 32 * (attention + 4096 * 8 + 2 * expert)
    # Per token 2 FLOPs per active weight: 25.2 GFLOP, not the 92.9 of all 46.4B projections.
    assert model.linear_flops_per_token == 2 * 12_617_515_008
    assert model.weight_bytes == 2 * 46_702_792_704


def test_qwen3_moe_experts_use_moe_intermediate_size() -> None:
    model = get_model("qwen3-30b-a3b")
    assert (model.num_experts, model.num_active_experts) == (128, 8)
    assert model.intermediate_size == 768  # not the config's unused dense 6144
    assert (model.num_kv_heads, model.head_dim) == (4, 128)


def test_gpt_oss_has_mxfp4_experts_and_alternating_sliding_layers() -> None:
    model = get_model("gpt-oss-120b")
    assert (model.num_experts, model.num_active_experts) == (128, 4)
    assert (model.sliding_window, model.num_sliding_layers) == (128, 18)
    assert model.attention_bias and model.head_dim == 64
    assert model.dtype == "bf16+mxfp4-experts"
    # Experts at 4.25 bits (114.66B params), the other 2.13B params in bf16: 60.7 GiB, which is
    # why the model fits one 80 GB GPU.
    assert model.num_expert_params == 36 * 128 * 3 * 2880 * 2880
    assert model.weight_bytes == 65_169_175_680
    # Only the 18 full-attention layers' context work grows with the context.
    assert model.attention_flops_per_pair == 4 * 18 * 64 * 64
    assert model.sliding_attention_flops_per_token == 4 * 18 * 64 * 64 * 128


def test_experts_touched_grow_towards_all_of_them() -> None:
    model = get_model("gpt-oss-20b")  # 32 experts, 4 per token
    assert model.expected_experts_touched(1) == pytest.approx(4)
    assert model.expected_experts_touched(8) == pytest.approx(32 * (1 - (28 / 32) ** 8))
    assert model.expected_experts_touched(10_000) == pytest.approx(32)
    one_token = model.weight_bytes_read(1)
    all_experts = model.weight_bytes_read(10_000)
    assert one_token < all_experts <= model.weight_bytes
    assert get_model("llama-3.1-8b").expected_experts_touched(64) == 0.0


def test_deployed_dtypes_follow_vllm_flags() -> None:
    fp8 = deployment_model("llama-3.1-8b", quantization="fp8", kv_cache_dtype="fp8_e4m3")
    assert fp8.dtype == "fp8"
    # Projections at 1 byte, embeddings and norms at 2; KV halves.
    assert fp8.weight_bytes == 6_979_321_856 + 2 * (8_030_261_248 - 6_979_321_856)
    assert kv_bytes_per_token(fp8, 1) == 65_536
    assert deployment_model("llama-3.1-8b", kv_cache_dtype="fp8").dtype == "bf16, kv fp8"
    assert deployment_model("gpt-oss-20b") == get_model("gpt-oss-20b")
    with pytest.raises(InputError, match="'mxfp4' applies to mixture-of-experts models"):
        deployment_model("llama-2-7b", quantization="mxfp4")


def test_a_config_path_and_inline_fields_give_the_same_model(tmp_path: Path) -> None:
    path = tmp_path / "mixtral" / "config.json"
    path.parent.mkdir()
    path.write_text(json.dumps(shipped_config("mixtral-8x7b")))
    from_file = resolve_model("mixtral/config.json", base_dir=tmp_path)
    inline = resolve_model(shipped_config("mixtral-8x7b"))
    assert from_file.key == "mixtral"
    assert from_file.num_params == inline.num_params == 46_702_792_704
    assert load_hf_config(path) == shipped_config("mixtral-8x7b")


def test_head_dim_defaults_to_hidden_over_heads() -> None:
    model = model_from_hf_config(shipped_config("llama-2-7b"), key="x")
    assert (model.head_dim, model.num_kv_heads) == (128, 32)


DEEPSEEK_V3 = {
    "architectures": ["DeepseekV3ForCausalLM"],
    "hidden_size": 7168,
    "num_hidden_layers": 61,
    "num_attention_heads": 128,
    "kv_lora_rank": 512,
    "q_lora_rank": 1536,
    "vocab_size": 129280,
}
LLAMA = {
    "architectures": ["LlamaForCausalLM"],
    "hidden_size": 4096,
    "num_hidden_layers": 32,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "intermediate_size": 14336,
    "vocab_size": 128256,
}


@pytest.mark.parametrize(
    ("config", "message"),
    [
        (
            DEEPSEEK_V3,
            "model config field kv_lora_rank = 512: multi-head latent attention (MLA, as in "
            "DeepSeek-V2/V3) is not supported",
        ),
        (
            {**LLAMA, "architectures": ["BertModel"]},
            "model config field architectures = ['BertModel']: not a decoder-only language "
            "model (expected a *ForCausalLM architecture)",
        ),
        (
            {key: value for key, value in LLAMA.items() if key != "hidden_size"},
            "model config field hidden_size: is required (a positive integer)",
        ),
        (
            {**LLAMA, "num_key_value_heads": 5},
            "model config field num_key_value_heads = 5: must divide num_attention_heads (32)",
        ),
        (
            {**LLAMA, "intermediate_size": "14336"},
            "model config field intermediate_size = '14336': expected a positive integer",
        ),
        (
            {**LLAMA, "num_local_experts": 8},
            "model config field num_experts_per_tok: is required (a positive integer)",
        ),
        (
            {**LLAMA, "num_experts": 64, "num_experts_per_tok": 4, "n_shared_experts": 2},
            "model config field n_shared_experts = 2: shared experts",
        ),
        (
            {**LLAMA, "layer_types": ["linear_attention"] * 32},
            "model config field layer_types = 'linear_attention': layer type not supported; "
            "allowed: full_attention, sliding_attention",
        ),
        (
            {**LLAMA, "quantization_config": {"quant_method": "awq"}},
            "model config field quantization_config.quant_method = 'awq': not supported; "
            "allowed: fp8, mxfp4",
        ),
        (
            {**LLAMA, "text_config": {"hidden_size": 4096}},
            "model config field text_config: multimodal wrapper configs are not supported",
        ),
    ],
)
def test_unsupported_or_broken_configs_name_the_field(config: dict, message: str) -> None:
    with pytest.raises(InputError) as error:
        model_from_hf_config(config, key="x")
    assert str(error.value).startswith(message)
    assert "\n" not in str(error.value)


# Hybrid and state-space configs as their Hugging Face checkpoints ship them (abridged).
NEMOTRON_H = {
    "architectures": ["NemotronHForCausalLM"],
    "model_type": "nemotron_h",
    "hidden_size": 4096,
    "hybrid_override_pattern": "M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M-",
    "intermediate_size": 21504,
    "mamba_head_dim": 64,
    "mamba_num_heads": 128,
    "max_position_embeddings": 8192,
    "num_attention_heads": 32,
    "num_hidden_layers": 52,
    "num_key_value_heads": 8,
    "ssm_state_size": 128,
    "conv_kernel": 4,
    "vocab_size": 131072,
}
JAMBA = {
    "architectures": ["JambaForCausalLM"],
    "model_type": "jamba",
    "attn_layer_offset": 4,
    "attn_layer_period": 8,
    "expert_layer_offset": 1,
    "expert_layer_period": 2,
    "hidden_size": 4096,
    "intermediate_size": 14336,
    "mamba_d_conv": 4,
    "mamba_d_state": 16,
    "mamba_expand": 2,
    "max_position_embeddings": 262144,
    "num_attention_heads": 32,
    "num_experts": 16,
    "num_experts_per_tok": 2,
    "num_hidden_layers": 32,
    "num_key_value_heads": 8,
    "use_mamba_kernels": True,
    "vocab_size": 65536,
}
FALCON_MAMBA = {
    "architectures": ["FalconMambaForCausalLM"],
    "model_type": "falcon_mamba",
    "conv_kernel": 4,
    "expand": 16,
    "hidden_size": 4096,
    "intermediate_size": 8192,
    "num_hidden_layers": 64,
    "state_size": 16,
    "time_step_rank": 256,
    "vocab_size": 65024,
}
STATE_SPACE = (
    "state-space or hybrid (Mamba, RWKV, ...) layers are not supported; only attention "
    "decoders (dense or MoE, GQA) are supported"
)


@pytest.mark.parametrize(
    ("config", "field"),
    [
        (
            NEMOTRON_H,
            "hybrid_override_pattern = 'M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M-'",
        ),
        (JAMBA, "attn_layer_period = 8"),
        (FALCON_MAMBA, "state_size = 16"),
        # mamba_ssm's own config (state-spaces/mamba-2.8b): no architectures, an empty ssm_cfg.
        ({"d_model": 2560, "n_layer": 64, "vocab_size": 50277, "ssm_cfg": {}}, "ssm_cfg"),
        ({**LLAMA, "mamba_d_state": 64}, "mamba_d_state = 64"),
        ({**LLAMA, "layers_block_type": ["mamba", "hybrid"] * 16}, "layers_block_type = "),
        ({**LLAMA, "block_types": ["recurrent", "recurrent", "attention"]}, "block_types = "),
        ({**LLAMA, "model_type": "rwkv"}, "model_type = 'rwkv'"),
        (
            {**LLAMA, "architectures": ["Zamba2ForCausalLM"]},
            "architectures = ['Zamba2ForCausalLM']",
        ),
    ],
)
def test_state_space_and_hybrid_configs_are_refused(config: dict, field: str) -> None:
    with pytest.raises(InputError) as error:
        model_from_hf_config(config, key="x")
    assert str(error.value).startswith(f"model config field {field}")
    assert str(error.value).endswith(STATE_SPACE)
    assert "\n" not in str(error.value)


def test_a_long_field_value_is_cut_short() -> None:
    pattern = "M-" * 40
    with pytest.raises(InputError) as error:
        model_from_hf_config({**NEMOTRON_H, "hybrid_override_pattern": pattern}, key="x")
    assert f"hybrid_override_pattern = {repr(pattern)[:57]}...: state-space" in str(error.value)


@pytest.mark.parametrize(
    ("model_type", "architecture"),
    [
        ("llama", "LlamaForCausalLM"),
        ("mixtral", "MixtralForCausalLM"),
        ("qwen3", "Qwen3ForCausalLM"),
        ("gpt_oss", "GptOssForCausalLM"),
        ("nemotron", "NemotronForCausalLM"),  # Nemotron-4/Minitron: attention only
        ("falcon", "FalconForCausalLM"),
        ("minimax_m2", "MiniMaxM2ForCausalLM"),  # full attention, unlike MiniMax-Text-01
    ],
)
def test_attention_families_are_not_taken_for_state_space_ones(
    model_type: str, architecture: str
) -> None:
    model = model_from_hf_config(
        {**LLAMA, "model_type": model_type, "architectures": [architecture]}, key="x"
    )
    assert model.num_layers == 32


@pytest.mark.parametrize(
    ("key", "context", "source"),
    [
        ("llama-3.1-8b", 131072, "max_position_embeddings"),  # llama3 rope: already counted
        ("llama-2-7b", 4096, "max_position_embeddings"),
        ("qwen3-8b", 40960, "max_position_embeddings"),
        (
            "gpt-oss-20b",
            131072,
            "rope_scaling.original_max_position_embeddings x rope_scaling.factor 32",
        ),
        ("bloom-176b", None, ""),  # names no limit: left open
    ],
)
def test_context_length_is_the_one_vllm_derives(key: str, context: int | None, source: str) -> None:
    model = get_model(key)
    assert (model.context_length, model.context_length_source) == (context, source)


def test_context_length_follows_rope_scaling_and_the_smallest_field() -> None:
    yarn = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768}
    qwen_yarn = {**shipped_config("qwen3-8b"), "rope_scaling": yarn}
    assert model_from_hf_config(qwen_yarn, key="x").context_length == 131072
    dynamic = {
        **LLAMA,
        "max_position_embeddings": 4096,
        "rope_scaling": {"type": "dynamic", "factor": 2.0},
    }
    assert model_from_hf_config(dynamic, key="x").context_length == 8192
    both = {**LLAMA, "max_position_embeddings": 8192, "seq_length": 2048}
    assert model_from_hf_config(both, key="x").context_length_source == "seq_length"
    with pytest.raises(InputError, match="model config field rope_scaling.factor = 'x'"):
        model_from_hf_config({**qwen_yarn, "rope_scaling": {**yarn, "factor": "x"}}, key="x")


@pytest.mark.parametrize(
    ("key", "allowed"),
    [
        ("llama-3.1-8b", [1, 2, 4, 8, 16, 32]),  # 32 heads, 8 KV heads replicated past tp 8
        # 56 heads, 8 KV heads: 7, 14 and 28 split the KV heads unevenly, 56 the MLP (20480)
        ("yi-34b", [1, 2, 4, 8]),
        # 40 heads, no GQA; 5, 10, 20 and 40 split the MLP width (13824) unevenly
        ("llama-2-13b", [1, 2, 4, 8]),
    ],
)
def test_tp_degrees_are_the_ones_vllm_accepts(key: str, allowed: list[int]) -> None:
    assert get_model(key).tp_degrees(64) == allowed


def test_an_experts_mlp_width_must_split_evenly_too() -> None:
    """vLLM's fused MoE asserts that tp divides each expert's MLP width: 32 heads and 8 KV
    heads would allow tp 16 and 32, but a width of 1400 splits over 8 at most."""
    moe = {**LLAMA, "num_local_experts": 8, "num_experts_per_tok": 2, "intermediate_size": 1400}
    model = model_from_hf_config(moe, key="x")
    assert model.is_moe and model.tp_degrees(64) == [1, 2, 4, 8]


def test_unreadable_config_files_name_the_file(tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    path.write_text('{"hidden_size": 4096,')
    with pytest.raises(InputError, match=r"config\.json:1: not valid JSON"):
        resolve_model(str(path))
    path.write_text("[1, 2]")
    with pytest.raises(InputError, match="config.json: a model config must be a JSON object"):
        resolve_model(str(path))
    with pytest.raises(InputError, match="missing.json: model config file not found"):
        resolve_model(str(tmp_path / "missing.json"))
