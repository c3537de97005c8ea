"""The real-engine factor on kernel-only step models: what it moves, and how it is fitted."""

from __future__ import annotations

import pytest

from sim.config import load_scenario
from sim.costmodel import (
    BatchShape,
    StepCoefficients,
    StepTimeModel,
    engine_coefficients,
    real_engine_coefficients,
)
from sim.costmodel.engine_terms import (
    EagerEngineModel,
    EagerFitRow,
    FitRow,
    FloorFitRow,
    eager_engine_model,
    fit_eager_host_per_layer_s,
    fit_engine_terms,
    fit_prefill_floor_per_layer_s,
    load_engine_terms,
)
from sim.costmodel.loader import load_cost_model
from sim.costmodel.sequence_host import SequenceHostTerm
from sim.runner import scenario_cost_model_choice

KERNELS = StepCoefficients(0.004, 2e-5, 200, 1e-9, 4e-8, 3e-6)
DECODE_10_AT_1000 = BatchShape([], [], [1000] * 10)
PREFILL_1000 = BatchShape([1000], [0], [])


def test_the_factor_slows_prefill_compute_and_leaves_decode_steps_alone():
    """b0 4 ms, b1 20 us/token, T* 200, b2 1 ns/pair, b3 40 ns/KV token, b4 3 us/seq. Factor 2:
    b1 40 us, T* 100, b2 2 ns. A 10 x 1000-context decode step stays 4 + 4 + 0.4 + 0.03 =
    8.43 ms (the weight-streaming floor b1 * T* is kept); a 1000-token prefill goes from
    4 + 20 + 0.5005 = 24.5005 ms to 4 + 40 + 1.001 = 45.001 ms."""
    scaled = real_engine_coefficients(KERNELS, 2.0)
    assert scaled == StepCoefficients(0.004, 4e-5, 100, 2e-9, 4e-8, 3e-6)
    kernels, real = StepTimeModel(KERNELS), StepTimeModel(scaled)
    assert kernels.step_time_s(DECODE_10_AT_1000) == pytest.approx(0.00843)
    assert real.step_time_s(DECODE_10_AT_1000) == pytest.approx(0.00843)
    assert kernels.step_time_s(PREFILL_1000) == pytest.approx(0.0245005)
    assert real.step_time_s(PREFILL_1000) == pytest.approx(0.045001)


def test_only_kernel_only_profiles_get_their_gpus_shipped_factor():
    terms = load_engine_terms()
    assert terms.factors == {"a100": 1.41, "h100": 1.505} and terms.pooled == 1.42
    h100 = engine_coefficients(KERNELS, "kernel-derived", "h100")
    assert h100.per_token_s == pytest.approx(2e-5 * 1.505)
    roofline_l40s = engine_coefficients(KERNELS, "roofline", "l40s")
    assert roofline_l40s.per_token_s == pytest.approx(2e-5 * 1.42)
    assert engine_coefficients(KERNELS, "calibrated", "h100") == KERNELS


def _rows(gpu: str, ratio: float, sizes: list[float]) -> list[FitRow]:
    """Step rows whose measured time is `ratio` x the kernel time of each size."""
    return [FitRow(gpu, lambda f, s=size: f * s, ratio * size, False) for size in sizes]


def test_each_gpu_with_ten_rows_gets_its_own_factor_and_the_rest_the_pooled_one():
    """Ten A100 rows measured 1.5x their kernel time, ten H100 rows 2x, two L4 rows 3x: A100
    1.5, H100 2.0; the pooled factor over all 22 rows lies between; L4 (2 rows) takes it."""
    sizes = [0.01 * (k + 1) for k in range(10)]
    rows = _rows("a100", 1.5, sizes) + _rows("h100", 2.0, sizes) + _rows("l4", 3.0, [0.01, 0.02])
    fit = fit_engine_terms(rows)
    assert fit.factors == {"a100": 1.5, "h100": 2.0}
    assert 1.5 < fit.pooled < 2.0 and fit.factor("l4") == fit.pooled
    assert fit.request_s is None


def test_request_s_is_fitted_with_the_factor_on_rows_measured_through_a_front_end():
    """Served rows: engine 20 ms x f and 40 ms x f, measured 40 ms and 70 ms: factor 1.5 and
    request_s 10 ms fit both exactly."""
    served = [
        FitRow("h100", lambda f: 0.02 * f, 0.04, True),
        FitRow("h100", lambda f: 0.04 * f, 0.07, True),
    ]
    fit = fit_engine_terms(served)
    assert fit.pooled == 1.5
    assert fit.request_s == pytest.approx(0.01)


def test_an_engine_without_cuda_graphs_adds_its_host_time_to_decode_steps_only():
    """80 layers x 0.2 ms = 16 ms and 10 sequences x 0.3 ms = 3 ms on the 8.43 ms decode step of
    the first test (27.43 ms); the 24.5005 ms prefill and a step mixing that prefill with the
    decodes keep the kernel time (prefill runs eagerly in every engine the prefill factor was
    fitted on) while it outlasts the host's floor (80 layers x 0.25 ms = 20 ms)."""
    kernels = StepTimeModel(KERNELS)
    eager = EagerEngineModel(kernels, 80, 0.0002, 0.00025, 0.0003)
    assert eager.step_time_s(DECODE_10_AT_1000) == pytest.approx(0.02743)
    assert eager.step_time_s(PREFILL_1000) == pytest.approx(0.0245005)
    mixed = BatchShape([1000], [0], [1000] * 10)
    assert eager.step_time_s(mixed) == kernels.step_time_s(mixed)


def test_an_engine_without_cuda_graphs_waits_for_its_host_under_a_short_prefill():
    """A 100-token prefill streams the weights: 4 + 20 x 200 tokens (T*) us + 5.05 us of
    attention = 8.00505 ms on the GPU. The host issues 80 layers at 0.25 ms each (20 ms) before
    the step can end, so the eager engine takes 20 ms; a floor of 0.05 ms per layer (4 ms) is
    under the GPU time and changes nothing; a decode step never gets the floor."""
    kernels = StepTimeModel(KERNELS)
    short = BatchShape([100], [0], [])
    assert kernels.step_time_s(short) == pytest.approx(0.00800505)
    assert EagerEngineModel(kernels, 80, 0.0002, 0.00025, 0.0003).step_time_s(short) == 0.02
    low_floor = EagerEngineModel(kernels, 80, 0.0002, 0.00005, 0.0)
    assert low_floor.step_time_s(short) == kernels.step_time_s(short)
    assert low_floor.step_time_s(DECODE_10_AT_1000) == pytest.approx(0.02443)


def test_the_floor_per_layer_is_the_least_relative_squares_fit_of_the_steps_it_binds():
    """Rows (steps, layers, measured): one 30 ms step of 60 layers measured 48 ms needs a floor
    of 0.8 ms per layer; a 200 ms step measured 210 ms outlasts any floor up to 3.33 ms and does
    not move it; a chunked prefill of two 10 ms steps of 60 layers measured 60 ms (30 ms each)
    needs 0.5 ms. Both bind from 0.5 ms on, where the loss (1250 h - 1)^2 + (2000 h - 1)^2 is
    least at h = 3250 / 5562500 = 0.584 ms (1 us grid); no row binding any floor gives 0."""
    one_short = FloorFitRow((0.030,), 60, 0.048)
    long = FloorFitRow((0.200,), 60, 0.210)
    chunked = FloorFitRow((0.010, 0.010), 60, 0.060)
    assert fit_prefill_floor_per_layer_s([one_short]) == pytest.approx(0.0008)
    assert fit_prefill_floor_per_layer_s([one_short, long]) == pytest.approx(0.0008)
    assert fit_prefill_floor_per_layer_s([chunked]) == pytest.approx(0.0005)
    assert fit_prefill_floor_per_layer_s([one_short, chunked]) == pytest.approx(0.000584)
    assert fit_prefill_floor_per_layer_s([FloorFitRow((0.100,), 60, 0.090)]) == 0.0


def test_only_kernel_only_models_get_the_shipped_eager_terms():
    """Shipped: 181.1 us per layer and 140.2 + 64.8 x log2(TP) us per decoding sequence on decode
    steps, a floor of 701 us per layer under prefill steps. A kernel-derived or roofline model of
    32 layers at TP 2 adds 5.80 ms + 10 x 205.0 us = 7.85 ms to the 10-sequence decode step and
    takes at least 22.43 ms per prefill step (the 100-token prefill's 8.01 ms GPU time is under
    it); a calibrated model is fitted to its own engine and stays as is."""
    terms = load_engine_terms()
    assert terms.eager_host_per_layer_s == 0.0001811
    assert terms.eager_prefill_floor_per_layer_s == 0.000701
    assert terms.eager_sequence_host == SequenceHostTerm(0.0001402, 0.0000648)
    kernels = StepTimeModel(KERNELS)
    for source in ("kernel-derived", "roofline"):
        eager = eager_engine_model(kernels, 32, 2, source)
        assert eager.step_time_s(DECODE_10_AT_1000) == pytest.approx(
            0.00843 + 32 * 0.0001811 + 10 * 0.0002050
        )
        assert eager.step_time_s(BatchShape([100], [0], [])) == pytest.approx(0.022432)
    assert eager_engine_model(kernels, 32, 2, "calibrated") is kernels


def test_a_deployment_without_cuda_graphs_loads_the_profile_with_the_eager_term():
    """h100/llama-3.1-8b/tp1 (32 layers): a 10 x 1000 decode step is 32 x 181.1 us + 10 x 140.2
    us = 7.20 ms slower without CUDA graphs; a 1000-token prefill (33 ms) outlasts the 32 x 701 us
    = 22.43 ms floor and is not; a 100-token prefill is the floor."""
    graphs = load_cost_model("h100/llama-3.1-8b/tp1")
    eager = load_cost_model("h100/llama-3.1-8b/tp1", cuda_graphs=False)
    decode_extra_s = eager.step_time_s(DECODE_10_AT_1000) - graphs.step_time_s(DECODE_10_AT_1000)
    assert decode_extra_s == pytest.approx(0.0071972)
    assert eager.step_time_s(PREFILL_1000) == graphs.step_time_s(PREFILL_1000)
    short = BatchShape([100], [0], [])
    assert graphs.step_time_s(short) < 0.022432 == pytest.approx(eager.step_time_s(short))


def test_the_host_time_per_layer_is_the_least_relative_squares_fit():
    """Rows (base, layers, measured): (10 ms, 10, 12 ms) and (20 ms, 20, 24 ms) are both exactly
    base + layers x 0.2 ms; a row measured below its base alone would ask for a negative time,
    which is clipped to 0."""
    rows = [EagerFitRow(0.010, 10, 0.012), EagerFitRow(0.020, 20, 0.024)]
    assert fit_eager_host_per_layer_s(rows) == pytest.approx(0.0002)
    assert fit_eager_host_per_layer_s([EagerFitRow(0.010, 10, 0.008)]) == 0.0


def test_a_scenario_without_cuda_graphs_runs_its_decode_steps_eagerly(tmp_path):
    """deployment.cuda_graphs false on Llama-3.1-8B (32 layers) on one H100: the run's step model
    adds 32 x 181.1 us and 140.2 us per decoding sequence to every decode-only step (7.20 ms for
    10 sequences) and holds every prefill step to at least 32 x 701 us, and its summary says so;
    the default keeps CUDA graphs."""
    path = tmp_path / "eager.yaml"
    path.write_text(
        "name: eager\nseed: 1\nduration_s: 10\n"
        "deployment: {model: llama-3.1-8b, gpu: h100}\n"
        "workload:\n  source: {kind: chat, tenants: [{name: a}]}\n"
        "  arrivals: {process: poisson, rate_per_s: 1}\n"
    )
    graphs_choice = scenario_cost_model_choice(load_scenario(path).scenario, tmp_path)
    eager_scenario = load_scenario(path, ["deployment.cuda_graphs=false"]).scenario
    eager_choice = scenario_cost_model_choice(eager_scenario, tmp_path)
    graphs, eager = graphs_choice.model, eager_choice.model
    assert isinstance(eager, EagerEngineModel) and not isinstance(graphs, EagerEngineModel)
    # summary.json says which: the deployment's setting and the host time added.
    assert graphs_choice.summary()["cuda_graphs"] is True
    assert graphs_choice.summary()["eager_host_per_layer_s"] is None
    assert graphs_choice.summary()["eager_host_per_sequence_s"] is None
    assert eager_choice.summary()["cuda_graphs"] is False
    assert graphs_choice.summary()["eager_prefill_floor_per_layer_s"] is None
    assert eager_choice.summary()["eager_host_per_layer_s"] == 0.0001811
    assert eager_choice.summary()["eager_host_per_sequence_s"] == 0.0001402
    assert eager_choice.summary()["eager_prefill_floor_per_layer_s"] == 0.000701
    decode_extra_s = eager.step_time_s(DECODE_10_AT_1000) - graphs.step_time_s(DECODE_10_AT_1000)
    assert decode_extra_s == pytest.approx(32 * 0.0001811 + 10 * 0.0001402)
