"""GPU and model specs: lookup by name or alias, and shape-derived sizes (cost_model.md §2)."""

import pytest

from sim.costmodel.capacity import kv_bytes_per_token
from sim.costmodel.specs import get_gpu, get_model, known_gpus, known_models
from sim.errors import InputError


@pytest.mark.parametrize(
    ("alias", "key"),
    [
        ("h100", "h100"),
        ("H100-80GB", "h100"),
        ("NVIDIA H100 80GB HBM3", "h100"),
        ("a100_sxm", "a100"),
        ("A100-SXM4-80GB", "a100"),
        ("H200", "h200"),
        ("b200-sxm", "b200"),
        ("L40S", "l40s"),
    ],
)
def test_gpu_lookup_is_case_insensitive_with_aliases(alias: str, key: str) -> None:
    assert get_gpu(alias).key == key


@pytest.mark.parametrize(
    ("alias", "key"),
    [
        ("llama-3.1-8b", "llama-3.1-8b"),
        ("meta-llama/Llama-3.1-8B-Instruct", "llama-3.1-8b"),
        ("Llama-3.1-70B", "llama-3.1-70b"),
        ("Qwen/Qwen3-0.6B", "qwen3-0.6b"),
        ("qwen3_32b", "qwen3-32b"),
        ("Mistral-7B-v0.1", "mistral-7b"),
        ("llama2-70b", "llama-2-70b"),
    ],
)
def test_model_lookup_is_case_insensitive_with_aliases(alias: str, key: str) -> None:
    assert get_model(alias).key == key


def test_unknown_names_raise_input_error_listing_the_known_ones() -> None:
    with pytest.raises(InputError, match="unknown GPU 'tpu-v5'.*a100, b200, h100, h200, l40s"):
        get_gpu("tpu-v5")
    with pytest.raises(InputError, match="unknown model 'gpt-5'.*llama-3.1-8b"):
        get_model("gpt-5")


def test_required_gpus_and_models_are_present() -> None:
    assert {"a100", "h100", "h200", "b200", "l40s"} <= set(known_gpus())
    required = {
        "llama-3.1-8b",
        "llama-3.1-70b",
        "qwen3-0.6b",
        "qwen3-8b",
        "qwen3-32b",
        "mistral-7b",
    }
    assert required <= set(known_models())


@pytest.mark.parametrize("key", ["h100", "a100", "h200", "b200", "l40s"])
def test_gpu_ridge_points_match_cost_model_table(key: str) -> None:
    # cost_model.md §2.1: ridge point F/BW = 153, 295, 206, 292, 419 FLOP/byte.
    expected = {"a100": 153, "h100": 295, "h200": 206, "b200": 292, "l40s": 419}[key]
    assert round(get_gpu(key).ridge_point_flops_per_byte) == expected


@pytest.mark.parametrize(
    ("key", "kv_bytes"),
    [
        # cost_model.md §2.2, KV bytes per token at tp=1.
        ("llama-3.1-8b", 131_072),
        ("llama-3.1-70b", 327_680),
        ("qwen3-0.6b", 114_688),
        ("qwen3-8b", 147_456),
        ("qwen3-32b", 262_144),
        ("mistral-7b", 131_072),
    ],
)
def test_kv_bytes_per_token_match_cost_model_table(key: str, kv_bytes: int) -> None:
    assert kv_bytes_per_token(get_model(key), 1) == kv_bytes


def test_kv_heads_are_not_split_below_one_per_gpu() -> None:
    # Llama-3.1-70B has 8 KV heads: tp=8 gives 1 per GPU, tp=16 still 1 (replicated).
    model = get_model("llama-3.1-70b")
    assert kv_bytes_per_token(model, 8) == 2 * 80 * 1 * 128 * 2 == 40_960
    assert kv_bytes_per_token(model, 16) == 40_960


@pytest.mark.parametrize("key", known_models())
def test_param_counts_agree_with_the_shapes(key: str) -> None:
    # Projections + embeddings (one table when tied) leave only norms and biases: < 0.1 %.
    model = get_model(key)
    embeddings = model.vocab_size * model.hidden_size * (1 if model.tied_embeddings else 2)
    from_shapes = model.num_linear_params + embeddings
    assert from_shapes <= model.num_params < from_shapes * 1.001
