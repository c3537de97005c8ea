"""GPU and model specifications (cost_model.md §2) with case-insensitive lookup by name or alias."""

from __future__ import annotations

from dataclasses import dataclass

from sim.errors import InputError

MIB = 1024**2


@dataclass(frozen=True, slots=True)
class GpuSpec:
    """One accelerator: capacity, dense bf16 peak, HBM and link bandwidth, roofline efficiencies."""

    name: str
    key: str  # short canonical name used in profile names ("h100")
    memory_bytes: int  # total device memory as the driver reports it
    bf16_dense_flops_per_s: float
    memory_bandwidth_bytes_per_s: float
    link_bandwidth_bytes_per_s: float  # per GPU, one direction (NVLink or PCIe)
    gemm_efficiency: float  # fraction of the flop peak reached by large bf16 GEMMs
    attention_efficiency: float  # fraction of the flop peak reached by prefill attention
    bandwidth_efficiency: float  # fraction of HBM peak reached when streaming weights / KV
    link_efficiency: float = 0.7

    @property
    def ridge_point_flops_per_byte(self) -> float:
        """Arithmetic intensity where the roofline turns from memory- to compute-bound."""
        return self.bf16_dense_flops_per_s / self.memory_bandwidth_bytes_per_s


@dataclass(frozen=True, slots=True)
class ModelSpec:
    """A dense decoder-only transformer as its HF config describes it (`dtype_bytes` per value)."""

    name: str
    key: str  # short canonical name used in profile names ("llama-3.1-8b")
    num_layers: int
    hidden_size: int
    num_attention_heads: int
    num_kv_heads: int
    head_dim: int
    intermediate_size: int
    vocab_size: int
    num_params: int
    dtype_bytes: int = 2
    tied_embeddings: bool = False
    gated_mlp: bool = True  # SwiGLU (gate + up) vs a single up projection (BLOOM)

    @property
    def linear_params_per_layer(self) -> int:
        """Weights of one layer's projections (QKV, O, MLP), the ones every token multiplies."""
        q_width = self.num_attention_heads * self.head_dim
        kv_width = self.num_kv_heads * self.head_dim
        attention = self.hidden_size * (q_width + 2 * kv_width) + q_width * self.hidden_size
        mlp_matrices = 3 if self.gated_mlp else 2
        return attention + mlp_matrices * self.hidden_size * self.intermediate_size

    @property
    def num_linear_params(self) -> int:
        """Projection weights of all layers (non-embedding parameters minus norms and biases)."""
        return self.num_layers * self.linear_params_per_layer

    @property
    def lm_head_params(self) -> int:
        return self.vocab_size * self.hidden_size

    @property
    def dtype(self) -> str:
        return {1: "fp8", 2: "bf16", 4: "fp32"}.get(self.dtype_bytes, f"{self.dtype_bytes}-byte")

    @property
    def weight_bytes(self) -> int:
        return self.num_params * self.dtype_bytes


_GPUS = (
    GpuSpec(
        name="A100-80GB-SXM",
        key="a100",
        memory_bytes=81920 * MIB,
        bf16_dense_flops_per_s=312e12,
        memory_bandwidth_bytes_per_s=2.039e12,
        link_bandwidth_bytes_per_s=300e9,
        gemm_efficiency=0.80,
        attention_efficiency=0.50,
        bandwidth_efficiency=0.75,
    ),
    GpuSpec(
        name="H100-80GB-SXM",
        key="h100",
        memory_bytes=81559 * MIB,
        bf16_dense_flops_per_s=989e12,
        memory_bandwidth_bytes_per_s=3.35e12,
        link_bandwidth_bytes_per_s=450e9,
        gemm_efficiency=0.80,
        attention_efficiency=0.55,
        bandwidth_efficiency=0.80,
    ),
    GpuSpec(
        name="H200-141GB-SXM",
        key="h200",
        memory_bytes=143771 * MIB,
        bf16_dense_flops_per_s=989e12,
        memory_bandwidth_bytes_per_s=4.8e12,
        link_bandwidth_bytes_per_s=450e9,
        gemm_efficiency=0.80,
        attention_efficiency=0.55,
        bandwidth_efficiency=0.75,
    ),
    GpuSpec(
        name="B200-180GB",
        key="b200",
        memory_bytes=183359 * MIB,
        bf16_dense_flops_per_s=2250e12,
        memory_bandwidth_bytes_per_s=7.7e12,
        link_bandwidth_bytes_per_s=900e9,
        gemm_efficiency=0.70,
        attention_efficiency=0.45,
        bandwidth_efficiency=0.75,
    ),
    GpuSpec(
        name="L40S-48GB",
        key="l40s",
        memory_bytes=46068 * MIB,
        bf16_dense_flops_per_s=362e12,
        memory_bandwidth_bytes_per_s=0.864e12,
        link_bandwidth_bytes_per_s=32e9,
        gemm_efficiency=0.65,
        attention_efficiency=0.45,
        bandwidth_efficiency=0.80,
    ),
)

_GPU_ALIASES = {
    "a100": (
        "a100-80gb",
        "a100-sxm",
        "a100-sxm4",
        "a100-sxm4-80gb",
        "nvidia-a100-sxm4-80gb",
        "a100-80gb-sxm",
    ),
    "h100": (
        "h100-80gb",
        "h100-sxm",
        "h100-sxm5",
        "h100-sxm5-80gb",
        "h100-80gb-hbm3",
        "nvidia-h100-80gb-hbm3",
        "h100-80gb-sxm",
    ),
    "h200": ("h200-sxm", "h200-141gb", "nvidia-h200", "h200-141gb-sxm"),
    "b200": ("b200-sxm", "b200-180gb", "nvidia-b200"),
    "l40s": ("l40s-48gb", "nvidia-l40s"),
}

_MODELS = (
    ModelSpec(
        name="Llama-3.1-8B",
        key="llama-3.1-8b",
        num_layers=32,
        hidden_size=4096,
        num_attention_heads=32,
        num_kv_heads=8,
        head_dim=128,
        intermediate_size=14336,
        vocab_size=128256,
        num_params=8_030_261_248,
    ),
    ModelSpec(
        name="Llama-3.1-70B",
        key="llama-3.1-70b",
        num_layers=80,
        hidden_size=8192,
        num_attention_heads=64,
        num_kv_heads=8,
        head_dim=128,
        intermediate_size=28672,
        vocab_size=128256,
        num_params=70_553_706_496,
    ),
    ModelSpec(
        name="Qwen3-0.6B",
        key="qwen3-0.6b",
        num_layers=28,
        hidden_size=1024,
        num_attention_heads=16,
        num_kv_heads=8,
        head_dim=128,
        intermediate_size=3072,
        vocab_size=151936,
        num_params=596_049_920,
        tied_embeddings=True,
    ),
    ModelSpec(
        name="Qwen3-8B",
        key="qwen3-8b",
        num_layers=36,
        hidden_size=4096,
        num_attention_heads=32,
        num_kv_heads=8,
        head_dim=128,
        intermediate_size=12288,
        vocab_size=151936,
        num_params=8_190_735_360,
    ),
    ModelSpec(
        name="Qwen3-32B",
        key="qwen3-32b",
        num_layers=64,
        hidden_size=5120,
        num_attention_heads=64,
        num_kv_heads=8,
        head_dim=128,
        intermediate_size=25600,
        vocab_size=151936,
        num_params=32_762_123_264,
    ),
    ModelSpec(
        name="Mistral-7B-v0.1",
        key="mistral-7b",
        num_layers=32,
        hidden_size=4096,
        num_attention_heads=32,
        num_kv_heads=8,
        head_dim=128,
        intermediate_size=14336,
        vocab_size=32000,
        num_params=7_241_732_096,
    ),
    # The two models of the Splitwise measurements (validation only; no kernel-derived profile).
    ModelSpec(
        name="Llama-2-70B",
        key="llama-2-70b",
        num_layers=80,
        hidden_size=8192,
        num_attention_heads=64,
        num_kv_heads=8,
        head_dim=128,
        intermediate_size=28672,
        vocab_size=32000,
        num_params=68_976_648_192,
    ),
    ModelSpec(
        name="BLOOM-176B",
        key="bloom-176b",
        num_layers=70,
        hidden_size=14336,
        num_attention_heads=112,
        num_kv_heads=112,
        head_dim=128,
        intermediate_size=57344,
        vocab_size=250880,
        num_params=176_247_271_424,
        tied_embeddings=True,
        gated_mlp=False,
    ),
)

_MODEL_ALIASES = {
    "llama-3.1-8b": (
        "meta-llama-3.1-8b",
        "llama-3.1-8b-instruct",
        "meta-llama-3.1-8b-instruct",
        "llama3.1-8b",
        "llama-3-8b",
        "meta-llama-3-8b",
    ),
    "llama-3.1-70b": (
        "meta-llama-3.1-70b",
        "llama-3.1-70b-instruct",
        "meta-llama-3.1-70b-instruct",
        "llama3.1-70b",
        "llama-3.3-70b",
        "llama-3.3-70b-instruct",
    ),
    "qwen3-0.6b": (),
    "qwen3-8b": (),
    "qwen3-32b": (),
    "mistral-7b": ("mistral-7b-v0.1", "mistral-7b-instruct-v0.1"),
    "llama-2-70b": ("llama2-70b", "llama-2-70b-hf"),
    "bloom-176b": ("bloom", "bloom176b"),
}


def normalize_name(name: str) -> str:
    """Lower-case, drop an HF organisation prefix, and use '-' for spaces and underscores."""
    base = name.strip().lower().rsplit("/", 1)[-1]
    return "-".join(base.replace("_", " ").replace("-", " ").split())


def _alias_index(
    specs: tuple[GpuSpec, ...] | tuple[ModelSpec, ...], aliases: dict[str, tuple[str, ...]]
) -> dict[str, str]:
    """Normalized key, display name and every alias -> canonical key."""
    index = {normalize_name(spec.name): spec.key for spec in specs}
    index.update({spec.key: spec.key for spec in specs})
    for key, names in aliases.items():
        index.update({normalize_name(alias): key for alias in names})
    return index


_GPU_BY_KEY = {gpu.key: gpu for gpu in _GPUS}
_MODEL_BY_KEY = {model.key: model for model in _MODELS}
_GPU_INDEX = _alias_index(_GPUS, _GPU_ALIASES)
_MODEL_INDEX = _alias_index(_MODELS, _MODEL_ALIASES)


def known_gpus() -> list[str]:
    """Canonical keys of the GPUs with specs."""
    return sorted(_GPU_BY_KEY)


def known_models() -> list[str]:
    """Canonical keys of the models with specs."""
    return sorted(_MODEL_BY_KEY)


def get_gpu(name: str) -> GpuSpec:
    """The GPU called `name` (case-insensitive; aliases like "H100-80GB" accepted)."""
    key = _GPU_INDEX.get(normalize_name(name))
    if key is None:
        raise InputError(f"unknown GPU {name!r}; known GPUs: {', '.join(known_gpus())}")
    return _GPU_BY_KEY[key]


def get_model(name: str) -> ModelSpec:
    """The model called `name` (case-insensitive; aliases like "meta-llama/Llama-3.1-8B" work)."""
    key = _MODEL_INDEX.get(normalize_name(name))
    if key is None:
        raise InputError(f"unknown model {name!r}; known models: {', '.join(known_models())}")
    return _MODEL_BY_KEY[key]
