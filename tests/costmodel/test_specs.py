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
    with pytest.raises(InputError) as error:
        get_gpu("tpu-v5")
    assert str(error.value) == f"unknown GPU 'tpu-v5'; known GPUs: {', '.join(known_gpus())}"
    with pytest.raises(InputError, match="unknown model 'gpt-5'.*llama-3.1-8b"):
        get_model("gpt-5")


def test_required_gpus_and_models_are_present() -> None:
    assert {"a100", "h100", "h200", "b200", "l40s", "a10g", "l4", "mi300x"} <= set(known_gpus())
    required = {
        "llama-3.1-8b",
        "llama-3.1-70b",
        "qwen3-0.6b",
        "qwen3-8b",
        "qwen3-32b",
        "mistral-7b",
        "llama-2-7b",
        "llama-2-70b",
        "mixtral-8x7b",
        "codellama-34b",
        "gpt-oss-20b",
        "gpt-oss-120b",
        "qwen3-30b-a3b",
    }
    assert required <= set(known_models())


@pytest.mark.parametrize(
    "key", ["h100", "a100", "a100-pcie", "h200", "b200", "l40s", "a10g", "l4", "mi300x"]
)
def test_gpu_ridge_points_match_cost_model_table(key: str) -> None:
    # cost_model.md §2.1: ridge point F/BW = 153, 295, 206, 292, 419 FLOP/byte; the new rows:
    # A10G 70 TFLOP/s / 0.6 TB/s = 117, L4 121 / 0.3 = 403, MI300X 1307.4 / 5.3 = 247,
    # A100 PCIe 312 / 1.935 = 161.
    expected = {
        "a100": 153,
        "a100-pcie": 161,
        "h100": 295,
        "h200": 206,
        "b200": 292,
        "l40s": 419,
        "a10g": 117,
        "l4": 403,
        "mi300x": 247,
    }[key]
    assert round(get_gpu(key).ridge_point_flops_per_byte) == expected


@pytest.mark.parametrize(
    ("key", "memory_mib", "fp8_tflops", "link_gb_per_s"),
    [
        # nvidia-smi / rocm-smi totals; fp8 dense peaks; one direction of the interconnect.
        ("a10g", 23028, None, 32),
        ("l4", 23034, 242, 32),
        ("mi300x", 196288, 2614.9, 448),
        # A100 PCIe: NVLink bridges join GPU pairs (600 GB/s both ways), as in Sarathi-Serve's VMs.
        ("a100-pcie", 81920, None, 300),
    ],
)
def test_new_gpu_rows(
    key: str, memory_mib: int, fp8_tflops: float | None, link_gb_per_s: int
) -> None:
    gpu = get_gpu(key)
    assert gpu.memory_bytes == memory_mib * 1024**2
    assert gpu.fp8_dense_flops_per_s == (None if fp8_tflops is None else fp8_tflops * 1e12)
    assert gpu.link_bandwidth_bytes_per_s == link_gb_per_s * 1e9
    assert gpu.kernel_tables is None  # no kernel measurements: roofline prior only
    assert gpu.source.startswith("https://")


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
        # 2 (K, V) x layers x KV heads x head_dim x 2 bytes.
        ("llama-2-7b", 2 * 32 * 32 * 128 * 2),  # 524_288: no GQA
        ("codellama-34b", 2 * 48 * 8 * 128 * 2),
        ("yi-34b", 2 * 60 * 8 * 128 * 2),
        ("mixtral-8x7b", 2 * 32 * 8 * 128 * 2),
        ("qwen3-30b-a3b", 2 * 48 * 4 * 128 * 2),
        # gpt-oss: half the layers slide over 128 tokens; the pool's blocks hold one group.
        ("gpt-oss-20b", 2 * 12 * 8 * 64 * 2),
        ("gpt-oss-120b", 2 * 18 * 8 * 64 * 2),
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
