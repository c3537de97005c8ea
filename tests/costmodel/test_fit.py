"""The relative-error least-squares fit of the step-time form (cost_model.md §5.2)."""

import pytest

from sim.costmodel import BatchShape, StepCoefficients, StepTimeModel
from sim.costmodel.fit import Measurement, StepFeatures, fit_step_form

TRUTH = StepCoefficients(
    step_overhead_s=0.004,
    per_token_s=2e-5,
    t_star_tokens=192,
    per_attention_pair_s=8e-10,
    per_kv_token_s=4e-8,
    per_decode_seq_s=5e-6,
)
SHAPES = [
    BatchShape([16], [0], []),
    BatchShape([512], [0], []),
    BatchShape([4096], [0], []),
    BatchShape([16384], [0], []),
    BatchShape([1024], [3072], []),
    BatchShape([256], [15000], []),
    BatchShape([], [], [1024]),
    BatchShape([], [], [8192] * 16),
    BatchShape([], [], [2048] * 300),
    BatchShape([512], [4096], [2048] * 64),
]


def measured(shapes: list[BatchShape], model: StepTimeModel) -> list[Measurement]:
    return [
        Measurement((StepFeatures.of(shape),), model.step_time_s(shape), f"shape {index}")
        for index, shape in enumerate(shapes)
    ]


def test_exact_data_gives_back_the_generating_coefficients() -> None:
    data = measured(SHAPES, StepTimeModel(TRUTH))
    fit = fit_step_form(data, [64, 128, 192, 256, 512])
    assert fit.coefficients.t_star_tokens == 192
    for name in (
        "step_overhead_s",
        "per_token_s",
        "per_attention_pair_s",
        "per_kv_token_s",
        "per_decode_seq_s",
    ):
        assert getattr(fit.coefficients, name) == pytest.approx(getattr(TRUTH, name), rel=1e-6)
    assert fit.rms_rel_err < 1e-9
    assert fit.zeroed_columns == ()
    assert fit.covered.num_decodes == (0, 300)
    assert fit.covered.longest_context == (16, 16384)


def test_columns_the_data_cannot_identify_take_the_prior() -> None:
    # Prefill without cache only: K and B_dec are always 0, so b3 and b4 come from the prior.
    prefill_only = [shape for shape in SHAPES[:4]]
    prior = StepCoefficients(0.001, 1e-5, 100, 1e-9, 3e-8, 7e-6)
    fit = fit_step_form(measured(prefill_only, StepTimeModel(TRUTH)), [192], prior)
    assert fit.prior_columns == ("per_kv_token_s", "per_decode_seq_s")
    assert fit.coefficients.per_kv_token_s == 3e-8
    assert fit.coefficients.per_decode_seq_s == 7e-6
    assert fit.coefficients.per_token_s == pytest.approx(2e-5, rel=1e-6)


def test_without_a_prior_unidentifiable_columns_are_zero() -> None:
    fit = fit_step_form(measured(SHAPES[:4], StepTimeModel(TRUTH)), [192])
    assert fit.prior_columns == ()
    assert fit.zeroed_columns == ("per_kv_token_s", "per_decode_seq_s")
    assert fit.coefficients.per_kv_token_s == 0.0


def test_a_coefficient_that_comes_out_negative_is_dropped() -> None:
    # Step times that fall with the KV read would need b3 < 0: b3 is set to 0 and the rest refit.
    data = [
        Measurement((StepFeatures(1000, 0, kv_tokens, 0, 1000 + kv_tokens),), time_s, "row")
        for kv_tokens, time_s in ((0, 0.030), (10_000, 0.029), (20_000, 0.028), (40_000, 0.027))
    ] + [Measurement((StepFeatures(4000, 0, 0, 0, 4000),), 0.090, "row")]
    fit = fit_step_form(data, [0])
    assert "per_kv_token_s" in fit.zeroed_columns
    assert fit.coefficients.per_kv_token_s == 0.0
    assert all(getattr(fit.coefficients, name) >= 0 for name in ("step_overhead_s", "per_token_s"))


def test_request_rows_sum_their_chunk_steps() -> None:
    # A 16k prompt in two 8k chunks: the second chunk attends to the first (p = 8192).
    chunks = (BatchShape([8192], [0], []), BatchShape([8192], [8192], []))
    truth_model = StepTimeModel(TRUTH)
    total_s = sum(truth_model.step_time_s(chunk) for chunk in chunks)
    data = measured(SHAPES, truth_model) + [
        Measurement(tuple(StepFeatures.of(chunk) for chunk in chunks), total_s, "request")
    ]
    fit = fit_step_form(data, [192])
    assert fit.predicted_s[-1] == pytest.approx(total_s, rel=1e-9)
