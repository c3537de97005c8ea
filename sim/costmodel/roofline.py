"""Roofline-only coefficients from GPU and model specs, for pairs with no data (§5.4)."""

from __future__ import annotations

from sim.costmodel.capacity import kv_bytes_per_token
from sim.costmodel.host_overhead import LAYER_OVERHEAD_S, STEP_OVERHEAD_S
from sim.costmodel.model import StepCoefficients
from sim.costmodel.profiles import Profile, profile_name
from sim.costmodel.specs import GpuSpec, ModelSpec

# Latency of one all-reduce, and the sampling/bookkeeping cost per decode sequence.
ALLREDUCE_LATENCY_S = 15e-6
PER_DECODE_SEQ_S = 0.005e-3
# A token count at which every expert of a mixture is read (E * (1 - (1 - k/E)^T) ~ E).
STREAM_ALL_EXPERTS = 1 << 20


def roofline_coefficients(gpu: GpuSpec, model: ModelSpec, tp: int) -> StepCoefficients:
    """§5.1 coefficients from peak flops and bandwidths times the GPU's typical efficiencies.

    b1 prices the projections a token multiplies (routed experts only, at the fp8 peak for fp8
    weights where the GPU has one) plus a full window of sliding-window attention; T* is the
    step that streams every weight (all experts: a busy server's batches reach them all); b2 and
    b3 cover the full-attention layers, whose work grows with the context.
    """
    weight_stream_bytes_per_s = gpu.bandwidth_efficiency * gpu.memory_bandwidth_bytes_per_s
    gemm_flops_per_s = gpu.gemm_efficiency * gpu.gemm_flops_per_s(model.weight_dtype)
    attention_flops_per_s = gpu.attention_efficiency * gpu.bf16_dense_flops_per_s
    heads_share = max(1, model.num_attention_heads // tp) / model.num_attention_heads
    per_token_s = (
        model.linear_flops_per_token / (tp * gemm_flops_per_s)
        + model.sliding_attention_flops_per_token * heads_share / attention_flops_per_s
    )
    step_overhead_s = STEP_OVERHEAD_S + LAYER_OVERHEAD_S * model.num_layers
    if tp > 1:
        # Two ring all-reduces of the hidden state per layer.
        allreduce_bytes_per_token = (
            2 * (2 * (tp - 1) / tp) * model.hidden_size * model.activation_bytes
        )
        per_token_s += (
            model.num_layers
            * allreduce_bytes_per_token
            / (gpu.link_efficiency * gpu.link_bandwidth_bytes_per_s)
        )
        step_overhead_s += model.num_layers * 2 * ALLREDUCE_LATENCY_S
    all_weights_read_s = (
        model.weight_bytes_read(STREAM_ALL_EXPERTS) / tp / weight_stream_bytes_per_s
    )
    return StepCoefficients(
        step_overhead_s=step_overhead_s,
        per_token_s=per_token_s,
        t_star_tokens=round(all_weights_read_s / per_token_s),
        per_attention_pair_s=model.attention_flops_per_pair * heads_share / attention_flops_per_s,
        per_kv_token_s=kv_bytes_per_token(model, tp) / weight_stream_bytes_per_s,
        per_decode_seq_s=PER_DECODE_SEQ_S,
    )


def roofline_profile(gpu: GpuSpec, model: ModelSpec, tp: int) -> Profile:
    """A profile with no covered ranges (specs only, nothing to extrapolate from)."""
    return Profile(
        name=profile_name(gpu.key, model.key, tp),
        gpu=gpu.key,
        model=model.key,
        tp=tp,
        dtype=model.dtype,
        engine="any (no measurements)",
        source="roofline",
        provenance=(
            "roofline prior (no shipped profile for this GPU, model, tp and dtype), "
            "cost_model.md §5.4: FLOPs and weight/KV bytes from the model's config "
            f"({model.dtype}), peak flops and HBM/link bandwidth from the {gpu.name} spec times "
            f"efficiencies gemm {gpu.gemm_efficiency}, attention {gpu.attention_efficiency}, "
            f"HBM {gpu.bandwidth_efficiency}, link {gpu.link_efficiency}"
        ),
        coefficients=roofline_coefficients(gpu, model, tp),
    )
