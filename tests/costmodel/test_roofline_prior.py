"""The roofline prior of models without a shipped profile: MoE, sliding windows, fp8 weights."""

from __future__ import annotations

import pytest

from sim.costmodel.derive import kernel_reference
from sim.costmodel.roofline import roofline_coefficients, roofline_profile
from sim.costmodel.specs import deployment_model, get_gpu, get_model
from sim.errors import InputError


def test_mixtral_on_mi300x_prices_routed_experts_and_streams_all_of_them() -> None:
    # MI300X: 1307.4 TFLOP/s bf16 at 0.55 GEMM / 0.35 attention efficiency, 5.3 TB/s at 0.70.
    c = roofline_coefficients(get_gpu("mi300x"), get_model("mixtral-8x7b"), 1)
    assert c.per_token_s == pytest.approx(2 * 12_617_515_008 / (0.55 * 1307.4e12))
    # T*: all 46.4B projection weights (every expert) plus the LM head, 2 bytes each.
    weight_read_s = 2 * (46_440_382_464 + 32000 * 4096) / (0.70 * 5.3e12)
    assert c.t_star_tokens == round(weight_read_s / c.per_token_s) == 715
    assert c.per_attention_pair_s == pytest.approx(4 * 32 * 32 * 128 / (0.35 * 1307.4e12))
    assert c.per_kv_token_s == pytest.approx(131_072 / (0.70 * 5.3e12))


def test_gpt_oss_sliding_layers_cost_a_window_per_token_not_per_context() -> None:
    l4 = get_gpu("l4")  # 121 TFLOP/s bf16, 0.3 TB/s; gemm 0.65, attention 0.45, HBM 0.80
    c = roofline_coefficients(l4, get_model("gpt-oss-20b"), 1)
    linear_s = 2 * 3_028_200_960 / (0.65 * 121e12)
    sliding_s = 4 * 12 * 64 * 64 * 128 / (0.45 * 121e12)  # 12 layers x a 128-token window
    assert c.per_token_s == pytest.approx(linear_s + sliding_s)
    assert c.per_attention_pair_s == pytest.approx(4 * 12 * 64 * 64 / (0.45 * 121e12))
    assert c.per_kv_token_s == pytest.approx(2 * 12 * 8 * 64 * 2 / (0.80 * 0.3e12))


def test_fp8_weights_run_at_the_fp8_peak_where_the_gpu_has_one() -> None:
    fp8 = deployment_model("llama-3.1-8b", quantization="fp8")
    on_h100 = roofline_coefficients(get_gpu("h100"), fp8, 1)
    assert on_h100.per_token_s == pytest.approx(2 * 6_979_321_856 / (0.80 * 1979e12))
    # The A100 has no fp8 tensor cores: fp8 weights are dequantized and multiply at bf16 peak.
    on_a100 = roofline_coefficients(get_gpu("a100"), fp8, 1)
    assert on_a100.per_token_s == pytest.approx(2 * 6_979_321_856 / (0.80 * 312e12))
    # ... but stream half the bytes: 6.98 GB of projections + 1.05 GB bf16 LM head.
    weight_read_s = (6_979_321_856 + 2 * 128_256 * 4096) / (0.75 * 2.039e12)
    assert on_a100.t_star_tokens == round(weight_read_s / on_a100.per_token_s)


def test_the_roofline_profile_says_why_it_is_used() -> None:
    profile = roofline_profile(get_gpu("l4"), get_model("qwen3-30b-a3b"), 4)
    assert profile.name == "l4/qwen3-30b-a3b/tp4"
    assert profile.source == "roofline"
    assert profile.provenance.startswith(
        "roofline prior (no shipped profile for this GPU, model, tp and dtype)"
    )
    assert "L4-24GB" in profile.provenance


def test_the_kernel_layer_sum_refuses_shapes_it_does_not_model() -> None:
    with pytest.raises(InputError, match="Mixtral-8x7B-v0.1 .* has only the roofline prior"):
        kernel_reference(get_gpu("h100"), get_model("mixtral-8x7b"), 1)
    with pytest.raises(InputError, match="no kernel tables for MI300X-192GB"):
        kernel_reference(get_gpu("mi300x"), get_model("llama-3.1-8b"), 1)


def test_a_quantization_contradicting_the_checkpoint_is_refused() -> None:
    with pytest.raises(
        InputError,
        match="quantization 'fp8' does not match gpt-oss-20b's checkpoint, which is quantized "
        "with 'mxfp4'",
    ):
        deployment_model("gpt-oss-20b", quantization="fp8")
    assert deployment_model("gpt-oss-20b", quantization="mxfp4") == get_model("gpt-oss-20b")
