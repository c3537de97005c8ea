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


def roofline_coefficients(gpu: GpuSpec, model: ModelSpec, tp: int) -> StepCoefficients:
    """§5.1 coefficients from peak flops and bandwidths times the GPU's typical efficiencies."""
    flops_per_s = gpu.bf16_dense_flops_per_s
    weight_stream_bytes_per_s = gpu.bandwidth_efficiency * gpu.memory_bandwidth_bytes_per_s
    per_token_s = 2 * model.num_linear_params / (tp * gpu.gemm_efficiency * flops_per_s)
    step_overhead_s = STEP_OVERHEAD_S + LAYER_OVERHEAD_S * model.num_layers
    if tp > 1:
        # Two ring all-reduces of the hidden state per layer.
        allreduce_bytes_per_token = 2 * (2 * (tp - 1) / tp) * model.hidden_size * model.dtype_bytes
        per_token_s += (
            model.num_layers
            * allreduce_bytes_per_token
            / (gpu.link_efficiency * gpu.link_bandwidth_bytes_per_s)
        )
        step_overhead_s += model.num_layers * 2 * ALLREDUCE_LATENCY_S
    weight_read_s = (
        model.dtype_bytes * (model.num_linear_params + model.lm_head_params) / tp
    ) / weight_stream_bytes_per_s
    q_heads_per_gpu = max(1, model.num_attention_heads // tp)
    return StepCoefficients(
        step_overhead_s=step_overhead_s,
        per_token_s=per_token_s,
        t_star_tokens=round(weight_read_s / per_token_s),
        per_attention_pair_s=4
        * model.num_layers
        * q_heads_per_gpu
        * model.head_dim
        / (gpu.attention_efficiency * flops_per_s),
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
            "cost_model.md §5.4: peak bf16 flops and HBM/link bandwidth from the GPU spec times "
            f"efficiencies gemm {gpu.gemm_efficiency}, attention {gpu.attention_efficiency}, "
            f"HBM {gpu.bandwidth_efficiency}, link {gpu.link_efficiency}"
        ),
        coefficients=roofline_coefficients(gpu, model, tp),
    )
