"""KV capacity the vLLM v1 way (spec §9), with the numbers written out."""

import pytest

from sim.costmodel.capacity import (
    DEFAULT_ACTIVATION_RESERVE_BYTES,
    kv_bytes_per_token,
    num_gpu_blocks,
)
from sim.costmodel.specs import get_gpu, get_model
from sim.errors import InputError


def test_llama_8b_on_one_h100_at_092_matches_hand_calculation() -> None:
    # total memory as the driver reports it: 81559 MiB    = 85_520_809_984 bytes
    # requested = ceil(85_520_809_984 * 0.92)                = 78_679_145_186
    # weights   = 8_030_261_248 params * 2 bytes / tp 1      = 16_060_522_496
    # activation reserve (default 2 GiB)                      =  2_147_483_648
    # available = 78_679_145_186 - 16_060_522_496 - 2_147_483_648 = 60_471_139_042
    # per token = 2 (K,V) * 32 layers * 8 kv heads * 128 * 2 bytes = 131_072
    # per block = 16 * 131_072                               =  2_097_152
    # blocks    = 60_471_139_042 // 2_097_152                = 28_834
    assert DEFAULT_ACTIVATION_RESERVE_BYTES == 2_147_483_648
    assert kv_bytes_per_token(get_model("llama-3.1-8b"), 1) == 131_072
    blocks = num_gpu_blocks(
        get_gpu("H100-80GB"), get_model("llama-3.1-8b"), gpu_memory_utilization=0.92
    )
    assert blocks == 28_834


@pytest.mark.parametrize(
    ("gpu", "model", "tp", "blocks"),
    [
        # cost_model.md §2.4 (utilization 0.9, 2 GiB reserve): 28.0k, 30.2k, 16.2k blocks.
        ("h100", "llama-3.1-8b", 1, 28_019),
        ("h100", "llama-3.1-70b", 4, 30_169),
        ("h200", "qwen3-32b", 1, 16_214),
    ],
)
def test_capacity_matches_cost_model_table(gpu: str, model: str, tp: int, blocks: int) -> None:
    result = num_gpu_blocks(get_gpu(gpu), get_model(model), tp=tp, gpu_memory_utilization=0.9)
    assert result == blocks


def test_explicit_kv_memory_and_block_override_take_precedence() -> None:
    gpu, model = get_gpu("h100"), get_model("llama-3.1-8b")
    # 50 GiB of KV at 2 MiB per block: 25_600 blocks (spec §9 worked example).
    assert num_gpu_blocks(gpu, model, kv_cache_memory_bytes=50 * 1024**3) == 25_600
    assert num_gpu_blocks(gpu, model, num_gpu_blocks_override=1000) == 1000
    # Block size 32 halves the count of the default sizing.
    assert num_gpu_blocks(gpu, model, block_size=32, gpu_memory_utilization=0.92) == 14_417


def test_model_that_does_not_fit_raises_with_the_numbers() -> None:
    with pytest.raises(InputError) as error:
        num_gpu_blocks(get_gpu("l40s"), get_model("qwen3-32b"))
    message = str(error.value)
    assert "Qwen3-32B does not fit on L40S-48GB with tp=1" in message
    # 0.92 * 46068 MiB = 44_441_335_235 bytes < 65_524_246_528 bytes of weights.
    assert "0.92 x 48305799168 bytes = 44441335235 requested" in message
    assert "weights 65524246528 bytes per GPU" in message
    assert "leave -23230394941 bytes for the KV cache" in message


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"tp": 0}, "tp must be >= 1"),
        ({"block_size": 0}, "block_size must be a positive integer"),
        ({"gpu_memory_utilization": 1.5}, r"gpu_memory_utilization must be in \(0, 1\]"),
        ({"activation_reserve_bytes": -1}, "activation_reserve_bytes must be >= 0"),
        ({"num_gpu_blocks_override": 1}, "num_gpu_blocks_override must be at least 2"),
    ],
)
def test_invalid_settings_raise_input_error(kwargs: dict, match: str) -> None:
    with pytest.raises(InputError, match=match):
        num_gpu_blocks(get_gpu("h100"), get_model("llama-3.1-8b"), **kwargs)
