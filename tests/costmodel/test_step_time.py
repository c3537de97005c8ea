"""The shipped step-time profiles: cost_model.md §5.5 sanity values and invariants of the form."""

import functools
import warnings

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sim.costmodel import BatchShape, OutOfRangeWarning, StepTimeModel, load_cost_model
from sim.costmodel.model import FeatureRanges, StepCoefficients

H100_8B = "h100/llama-3.1-8b/tp1"


@functools.cache
def cost_model(spec: str) -> StepTimeModel:
    """One model per spec (hypothesis runs each test many times); roofline for Qwen3-32B TP2."""
    if spec == "roofline":
        return load_cost_model(spec, gpu="h100", model="qwen3-32b", tp=2)
    return load_cost_model(spec)


def prefill_ms(profile: str, num_new: int, num_cached: int = 0) -> float:
    return cost_model(profile).step_time_s(BatchShape([num_new], [num_cached], [])) * 1e3


def decode_ms(profile: str, contexts: list[int]) -> float:
    return cost_model(profile).step_time_s(BatchShape([], [], contexts)) * 1e3


@pytest.mark.parametrize(
    ("prompt", "low_ms", "high_ms"),
    # §5.5 accept ranges for Llama-3.1-8B on one H100, no prefix cache.
    [(1024, 15, 40), (8192, 130, 320), (32768, 750, 1800)],
)
def test_h100_llama_8b_prefill_is_in_the_sanity_range(
    prompt: int, low_ms: float, high_ms: float
) -> None:
    assert low_ms <= prefill_ms(H100_8B, prompt) <= high_ms


def test_h100_llama_8b_decode_anchors() -> None:
    # §5.5: one sequence at 1k context ~7 ms (5-10); 64 sequences at 2k ~14 ms.
    assert 5 <= decode_ms(H100_8B, [1024]) <= 10
    assert 10 <= decode_ms(H100_8B, [2048] * 64) <= 20


def test_cached_prefix_makes_prefill_cheaper_but_not_free() -> None:
    # §5.5: 1k new tokens on a 7k cached prefix ~47 ms, ~6.6x cheaper than an uncached 8k
    # prompt, and dearer than a fresh 1k prompt (the new tokens attend to the prefix).
    with_prefix = prefill_ms(H100_8B, 1024, 7168)
    assert 35 <= with_prefix <= 60
    assert 5 <= prefill_ms(H100_8B, 8192) / with_prefix <= 9
    assert with_prefix > prefill_ms(H100_8B, 1024)


def test_other_gpus_scale_like_the_kernel_data() -> None:
    # §5.5: A100 ~2.4-2.8x slower prefill, B200 ~2.1x faster; H200 prefill ~5-7 % faster than H100
    # (the pooled real-engine factor 1.42 against H100's own 1.505), decode faster.
    for prompt in (1024, 8192, 32768):
        h100 = prefill_ms(H100_8B, prompt)
        assert 2.3 <= prefill_ms("a100/llama-3.1-8b/tp1", prompt) / h100 <= 3.0
        assert 1.8 <= h100 / prefill_ms("b200/llama-3.1-8b/tp1", prompt) <= 2.4
        assert 0.85 <= prefill_ms("h200/llama-3.1-8b/tp1", prompt) / h100 <= 1.0
    assert 1.15 <= decode_ms(H100_8B, [1024]) / decode_ms("h200/llama-3.1-8b/tp1", [1024]) <= 1.35


PROFILES = [H100_8B, "l40s/qwen3-0.6b/tp1", "b200/llama-3.1-70b/tp8"]
counts = st.integers(min_value=1, max_value=40_000)
contexts = st.integers(min_value=0, max_value=40_000)
shapes = st.builds(
    lambda chunks, decodes: BatchShape(
        [new for new, _ in chunks], [cached for _, cached in chunks], decodes
    ),
    st.lists(st.tuples(counts, contexts), max_size=4),
    st.lists(contexts, max_size=64),
)


@pytest.mark.parametrize("profile", [*PROFILES, "roofline"])
@settings(max_examples=60, deadline=None)
@given(shape=shapes, grow=st.integers(min_value=1, max_value=5000), which=st.integers(0, 4))
def test_step_time_is_monotone_in_every_feature(
    profile: str, shape: BatchShape, grow: int, which: int
) -> None:
    model = cost_model(profile)
    new, cached, decodes = (
        list(shape.prefill_new_tokens),
        list(shape.prefill_context_tokens),
        list(shape.decode_context_lens),
    )
    if which == 0 and new:
        new[0] += grow  # more new tokens in a chunk
    elif which == 1 and new:
        cached[0] += grow  # longer prefix already in KV
    elif which == 2 and decodes:
        decodes[-1] += grow  # a longer decode context
    elif which == 3:
        decodes.append(grow)  # one more decode sequence
    else:
        new.append(grow)  # one more prefill chunk
        cached.append(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", OutOfRangeWarning)
        assert model.step_time_s(BatchShape(new, cached, decodes)) >= model.step_time_s(shape)


@settings(max_examples=60, deadline=None)
@given(num_new=st.integers(185, 30_000), num_cached=st.integers(1, 30_000))
def test_prefix_hit_costs_less_than_recomputing_it(num_new: int, num_cached: int) -> None:
    # At or above T* (185 tokens for this profile) every computed token costs b1 >> b3.
    model = cost_model(H100_8B)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", OutOfRangeWarning)
        hit = model.step_time_s(BatchShape([num_new], [num_cached], []))
        miss = model.step_time_s(BatchShape([num_new + num_cached], [0], []))
        fresh = model.step_time_s(BatchShape([num_new], [0], []))
    assert fresh < hit < miss


def test_decode_linear_part_is_flat_until_t_star() -> None:
    # Below T* only KV reads (b3 * K) and per-sequence costs (b4) grow with the batch. The
    # kernel tables put T* at 185 tokens; the real-engine factor 1.505 moves it to 123.
    model = cost_model(H100_8B)
    assert isinstance(model, StepTimeModel)
    c = model.coefficients
    assert c.t_star_tokens == round(185 / 1.505) == 123
    growth = decode_ms(H100_8B, [1000] * 110) - decode_ms(H100_8B, [1000] * 10)
    expected = (c.per_kv_token_s * 100_000 + c.per_decode_seq_s * 100) * 1e3
    assert growth == pytest.approx(expected, rel=1e-9)


def narrow_model() -> StepTimeModel:
    coefficients = StepCoefficients(0.003, 2e-5, 128, 8e-10, 4e-8, 5e-6)
    covered = FeatureRanges(
        num_tokens=(1, 8192),
        attention_pairs=(0, 1e8),
        kv_tokens=(0, 100_000),
        num_decodes=(0, 64),
        longest_context=(1, 16_384),
    )
    return StepTimeModel(coefficients, covered=covered, label="narrow")


def test_out_of_range_step_warns_once_per_model() -> None:
    model = narrow_model()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model.step_time_s(BatchShape([512], [1024], [2000] * 8))  # inside
        assert caught == []
        model.step_time_s(BatchShape([], [], [100] * 65))  # 65 decodes > 64
        model.step_time_s(BatchShape([20_000], [0], []))  # also outside: no second warning
    assert len(caught) == 1
    assert issubclass(caught[0].category, OutOfRangeWarning)
    assert "narrow" in str(caught[0].message)
    assert "num_decodes=65 not in [0, 64]" in str(caught[0].message)
