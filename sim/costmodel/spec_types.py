"""GPU and model specifications and what follows from them: weight and KV-cache bytes, FLOPs per
token, and the weights a step streams (cost_model.md §2)."""

from __future__ import annotations

from dataclasses import dataclass

# Bytes per stored value. mxfp4: 4-bit values plus one 8-bit scale per block of 32.
DTYPE_BYTES = {"fp32": 4.0, "bf16": 2.0, "fp16": 2.0, "fp8": 1.0, "mxfp4": 4.25 / 8}
# Activations, norms and embeddings stay in the compute dtype whatever the weights are stored as.
ACTIVATION_BYTES = 2


@dataclass(frozen=True, slots=True)
class GpuSpec:
    """One accelerator: capacity, dense peaks, HBM and link bandwidth, roofline efficiencies."""

    name: str
    key: str  # short canonical name used in profile names ("h100")
    memory_bytes: int  # total device memory as the driver reports it
    bf16_dense_flops_per_s: float
    fp8_dense_flops_per_s: float | None  # None: no fp8 tensor cores (fp8 weights run as bf16)
    memory_bandwidth_bytes_per_s: float
    link_bandwidth_bytes_per_s: float  # per GPU, one direction (NVLink, Infinity Fabric or PCIe)
    interconnect: str
    gemm_efficiency: float  # fraction of the flop peak reached by large GEMMs
    attention_efficiency: float  # fraction of the flop peak reached by prefill attention
    bandwidth_efficiency: float  # fraction of HBM peak reached when streaming weights / KV
    kernel_tables: str | None = None  # folder of measured kernel tables (data/aiconfigurator)
    source: str = ""
    link_efficiency: float = 0.7

    @property
    def ridge_point_flops_per_byte(self) -> float:
        """Arithmetic intensity where the bf16 roofline turns from memory- to compute-bound."""
        return self.bf16_dense_flops_per_s / self.memory_bandwidth_bytes_per_s

    def gemm_flops_per_s(self, weight_dtype: str) -> float:
        """Dense peak for GEMMs with weights in `weight_dtype` (fp8 runs at the fp8 peak where
        the GPU has one; every other format is dequantized to bf16)."""
        if weight_dtype == "fp8" and self.fp8_dense_flops_per_s is not None:
            return self.fp8_dense_flops_per_s
        return self.bf16_dense_flops_per_s


@dataclass(frozen=True, slots=True)
class ModelSpec:
    """A decoder-only transformer (dense or mixture-of-experts, GQA) as its HF config describes
    it, with the dtypes its weights and KV cache are stored in."""

    name: str
    key: str  # short canonical name used in profile names ("llama-3.1-8b")
    num_layers: int
    hidden_size: int
    num_attention_heads: int
    num_kv_heads: int
    head_dim: int
    intermediate_size: int  # MLP width; of one expert for a mixture of experts
    vocab_size: int
    tied_embeddings: bool = False
    gated_mlp: bool = True  # SwiGLU (gate + up) vs a single up projection (BLOOM)
    num_experts: int = 0  # 0: a dense MLP
    num_active_experts: int = 0  # experts each token is routed to
    attention_bias: bool = False
    sliding_window: int | None = None
    # Layers named `sliding_attention` in the config's layer_types (gpt-oss alternates them with
    # full attention); they attend to at most `sliding_window` tokens.
    num_sliding_layers: int = 0
    recorded_num_params: int | None = None  # the checkpoint's exact count, where known
    weight_dtype: str = "bf16"  # linear layers
    expert_weight_dtype: str = "bf16"  # expert MLPs (mxfp4 in gpt-oss checkpoints)
    kv_cache_dtype: str = "bf16"
    # The longest context vLLM derives from the config (max_position_embeddings and the like,
    # scaled by rope_scaling) and the fields it came from; None: the config names no limit.
    context_length: int | None = None
    context_length_source: str = ""

    @property
    def is_moe(self) -> bool:
        return self.num_experts > 0

    def supports_tp(self, tp: int) -> bool:
        """Whether vLLM shards the model over `tp` GPUs: every GPU gets the same number of query
        heads and the same MLP width (of each expert, for a mixture of experts), and the KV heads
        are split evenly or, when fewer than `tp`, each replicated on the same number of GPUs."""
        if tp < 1 or self.num_attention_heads % tp or self.intermediate_size % tp:
            return False
        if self.num_kv_heads >= tp:
            return self.num_kv_heads % tp == 0
        return tp % self.num_kv_heads == 0

    def tp_degrees(self, up_to: int) -> list[int]:
        """The tensor-parallel degrees from 1 to `up_to` vLLM accepts for this model."""
        return [tp for tp in range(1, up_to + 1) if self.supports_tp(tp)]

    @property
    def num_full_attention_layers(self) -> int:
        """Layers whose attention reads the whole context."""
        return self.num_layers - self.num_sliding_layers

    @property
    def num_kv_cache_layers(self) -> int:
        """Layers whose KV grows with the context. vLLM's hybrid allocator gives sliding and full
        layers equal-sized groups that share one block pool; each block then holds the KV of one
        group, and the sliding group keeps only its window per request (about window/block_size
        + 1 blocks, which the simulated pool does not set aside)."""
        if 0 < self.num_sliding_layers < self.num_layers:
            return max(self.num_sliding_layers, self.num_full_attention_layers)
        return self.num_layers

    @property
    def attention_params_per_layer(self) -> int:
        """Q, K, V and O projections (with their biases where the model has them)."""
        q_width = self.num_attention_heads * self.head_dim
        kv_width = self.num_kv_heads * self.head_dim
        params = self.hidden_size * (q_width + 2 * kv_width) + q_width * self.hidden_size
        if self.attention_bias:
            params += q_width + 2 * kv_width + self.hidden_size
        return params

    @property
    def mlp_params_per_expert(self) -> int:
        """One MLP (the dense MLP, or one expert)."""
        matrices = 3 if self.gated_mlp else 2
        return matrices * self.hidden_size * self.intermediate_size

    @property
    def router_params_per_layer(self) -> int:
        return self.hidden_size * self.num_experts

    @property
    def num_expert_params(self) -> int:
        """Weights of all experts of all layers (0 for a dense model)."""
        return self.num_layers * self.num_experts * self.mlp_params_per_expert

    @property
    def num_linear_params(self) -> int:
        """Projection weights of all layers, every expert included (no embeddings or norms)."""
        dense_mlp = 0 if self.is_moe else self.mlp_params_per_expert
        per_layer = self.attention_params_per_layer + dense_mlp + self.router_params_per_layer
        return self.num_layers * per_layer + self.num_expert_params

    @property
    def num_active_linear_params(self) -> int:
        """Projection weights one token multiplies: attention, router and its routed experts."""
        if not self.is_moe:
            return self.num_linear_params
        active_experts = self.num_active_experts * self.mlp_params_per_expert
        per_layer = self.attention_params_per_layer + self.router_params_per_layer + active_experts
        return self.num_layers * per_layer

    @property
    def lm_head_params(self) -> int:
        return self.vocab_size * self.hidden_size

    @property
    def num_params(self) -> int:
        """The checkpoint's parameter count: recorded, else projections, embeddings and norms."""
        if self.recorded_num_params is not None:
            return self.recorded_num_params
        embedding_tables = 1 if self.tied_embeddings else 2
        norms = (2 * self.num_layers + 1) * self.hidden_size
        return self.num_linear_params + embedding_tables * self.lm_head_params + norms

    @property
    def weight_bytes(self) -> int:
        """Bytes the weights take in GPU memory: experts and other projections in their storage
        dtypes, embeddings and norms in the compute dtype."""
        non_expert_linear = self.num_linear_params - self.num_expert_params
        other = self.num_params - self.num_linear_params
        return round(
            self.num_expert_params * DTYPE_BYTES[self.expert_weight_dtype]
            + non_expert_linear * DTYPE_BYTES[self.weight_dtype]
            + other * ACTIVATION_BYTES
        )

    @property
    def activation_bytes(self) -> int:
        """Bytes of one activation value (hidden states, all-reduces)."""
        return ACTIVATION_BYTES

    @property
    def kv_bytes_per_value(self) -> int:
        return int(DTYPE_BYTES[self.kv_cache_dtype])

    @property
    def dtype(self) -> str:
        """Storage dtypes as a label ("bf16", "fp8", "bf16+mxfp4-experts, kv fp8")."""
        label = self.weight_dtype
        if self.is_moe and self.expert_weight_dtype != self.weight_dtype:
            label += f"+{self.expert_weight_dtype}-experts"
        if self.kv_cache_dtype != self.weight_dtype:
            label += f", kv {self.kv_cache_dtype}"
        return label

    @property
    def linear_flops_per_token(self) -> int:
        """Projection FLOPs per token computed (2 per multiply-add; routed experts only)."""
        return 2 * self.num_active_linear_params

    @property
    def attention_flops_per_pair(self) -> int:
        """FLOPs of one (query, key) pair in the full-attention layers: QK^T and PV."""
        return 4 * self.num_full_attention_layers * self.num_attention_heads * self.head_dim

    @property
    def sliding_attention_flops_per_token(self) -> int:
        """Upper bound on one token's attention FLOPs in the sliding layers (a full window)."""
        window = self.sliding_window or 0
        return 4 * self.num_sliding_layers * self.num_attention_heads * self.head_dim * window

    @property
    def lm_head_flops_per_sequence(self) -> int:
        """Logits of one sampled position."""
        return 2 * self.lm_head_params

    def expected_experts_touched(self, num_tokens: int) -> float:
        """Experts per layer that `num_tokens` tokens route to, if routing is uniform and
        independent: E * (1 - (1 - k/E)^T). All of them for a dense model."""
        if not self.is_moe:
            return 0.0
        untouched = (1 - self.num_active_experts / self.num_experts) ** max(num_tokens, 0)
        return self.num_experts * (1 - untouched)

    def weight_bytes_read(self, num_tokens: int) -> float:
        """Weight bytes a step over `num_tokens` tokens streams from HBM: every non-expert
        projection and the LM head, and the experts those tokens reach."""
        non_expert = (self.num_linear_params - self.num_expert_params) * DTYPE_BYTES[
            self.weight_dtype
        ] + self.lm_head_params * ACTIVATION_BYTES
        per_expert = self.mlp_params_per_expert * DTYPE_BYTES[self.expert_weight_dtype]
        experts = self.num_layers * self.expected_experts_touched(num_tokens) * per_expert
        return non_expert + experts
