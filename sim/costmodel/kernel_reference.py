"""Layer-sum step time from measured kernel latencies: what the shipped profiles are fitted to.

Per layer: the four TP-sharded projection GEMMs, element-wise kernels as HBM traffic, prefill and
decode attention, two all-reduces when tp > 1; plus the LM head for every sampled sequence and a
CPU/launch overhead per step and per layer (cost_model.md §5.3 and profiles/derived/README.md).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from sim.costmodel.batch import BatchShape
from sim.costmodel.capacity import kv_bytes_per_token
from sim.costmodel.host_overhead import LAYER_OVERHEAD_S, STEP_OVERHEAD_S
from sim.costmodel.kernel_tables import KernelTables
from sim.costmodel.specs import GpuSpec, ModelSpec

# Norms, RoPE, activation and KV writes stream at this fraction of HBM peak.
ELEMENTWISE_BANDWIDTH_EFFICIENCY = 0.8


@dataclass(frozen=True, slots=True)
class KernelReference:
    """Step time of one (GPU, model, tp) summed from its kernel tables."""

    tables: KernelTables
    gpu: GpuSpec
    model: ModelSpec
    tp: int

    def step_time_s(self, batch: BatchShape) -> float:
        num_prefills = len(batch.prefill_new_tokens)
        num_decodes = len(batch.decode_context_lens)
        num_tokens = sum(batch.prefill_new_tokens) + num_decodes
        layer_s = self._linear_layers_s(num_tokens)
        if num_prefills:
            layer_s += self._prefill_attention_s(batch)
        if num_decodes:
            mean_context = sum(batch.decode_context_lens) / num_decodes
            layer_s += self.tables.decode_attention_s(
                self._heads_per_gpu, num_decodes, mean_context + 1
            )
        model = self.model
        lm_head_s = self.tables.gemm(
            num_prefills + num_decodes, math.ceil(model.vocab_size / self.tp), model.hidden_size
        )
        return STEP_OVERHEAD_S + model.num_layers * (LAYER_OVERHEAD_S + layer_s) + lm_head_s

    @property
    def _heads_per_gpu(self) -> tuple[int, int]:
        return (
            max(1, self.model.num_attention_heads // self.tp),
            max(1, self.model.num_kv_heads // self.tp),
        )

    def _linear_layers_s(self, num_tokens: int) -> float:
        model, tp, gemm = self.model, self.tp, self.tables.gemm
        q_heads, kv_heads = self._heads_per_gpu
        q_width = q_heads * model.head_dim
        kv_width = kv_heads * model.head_dim
        mlp_width = math.ceil(model.intermediate_size / tp)
        up_width = 2 * mlp_width if model.gated_mlp else mlp_width
        hidden = model.hidden_size
        projections_s = (
            gemm(num_tokens, q_width + 2 * kv_width, hidden)
            + gemm(num_tokens, hidden, q_width)
            + gemm(num_tokens, up_width, hidden)
            + gemm(num_tokens, hidden, mlp_width)
        )
        # Two fused add+norms (read x and residual, write both), RoPE on q and k,
        # the MLP activation (read the up output, write its half/whole), the K/V cache write.
        elements_per_token = (
            8 * hidden + 2 * (q_width + kv_width) + up_width + mlp_width + 4 * kv_width
        )
        elementwise_s = (num_tokens * elements_per_token * model.activation_bytes) / (
            ELEMENTWISE_BANDWIDTH_EFFICIENCY * self.gpu.memory_bandwidth_bytes_per_s
        )
        allreduce_s = 2 * self.tables.allreduce_s(tp, num_tokens * hidden) if tp > 1 else 0.0
        return projections_s + elementwise_s + allreduce_s

    def _prefill_attention_s(self, batch: BatchShape) -> float:
        """Full-prompt kernel time scaled to the causal work of the new tokens only.

        A batch of chunks runs as one varlen launch; it is looked up at the RMS sequence length,
        which keeps the total quadratic work. The prefix KV must be read at least once.
        """
        lengths = [
            num_new + num_context
            for num_new, num_context in zip(
                batch.prefill_new_tokens, batch.prefill_context_tokens, strict=True
            )
        ]
        new_work = sum(
            num_new * (num_context + (num_new + 1) / 2)
            for num_new, num_context in zip(
                batch.prefill_new_tokens, batch.prefill_context_tokens, strict=True
            )
        )
        full_work = sum(length * (length + 1) / 2 for length in lengths)
        rms_length = math.sqrt(sum(length * length for length in lengths) / len(lengths))
        full_prompt_s = self.tables.prefill_attention_s(
            self._heads_per_gpu, len(lengths), rms_length
        )
        prefix_read_s = (
            sum(batch.prefill_context_tokens)
            * kv_bytes_per_token(self.model, self.tp)
            / self.model.num_layers
            / (ELEMENTWISE_BANDWIDTH_EFFICIENCY * self.gpu.memory_bandwidth_bytes_per_s)
        )
        return max(full_prompt_s * new_work / full_work, prefix_read_s)
