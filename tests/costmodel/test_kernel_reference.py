"""Kernel-table interpolation and the layer-sum reference the shipped profiles are fitted to."""

import math

import pytest

from sim.costmodel import BatchShape
from sim.costmodel.derive import KERNEL_DATA_DIR, kernel_reference, kernel_tables
from sim.costmodel.kernel_tables import Curve
from sim.costmodel.specs import get_gpu, get_model


def test_curve_interpolates_log_log_and_extrapolates_with_its_power() -> None:
    curve = Curve.from_points({1.0: 1.0, 100.0: 10.0}, power=2.0)
    assert curve(1.0) == pytest.approx(1.0)
    assert curve(10.0) == pytest.approx(math.sqrt(10.0))  # halfway in log-log
    assert curve(0.5) == pytest.approx(1.0)  # clamped below the grid
    assert curve(200.0) == pytest.approx(40.0)  # 10 * (200 / 100) ** 2


def test_gemm_lookup_on_a_grid_point_is_the_measured_row() -> None:
    # h100_sxm/gemm_bf16.csv: m=1024, n=4096, k=4096 -> the O projection of Llama-3.1-8B.
    tables = kernel_tables("h100")
    row = next(
        line.split(",")
        for line in (KERNEL_DATA_DIR / "h100_sxm" / "gemm_bf16.csv").read_text().splitlines()
        if line.startswith("1024,4096,4096,")
    )
    assert tables.gemm(1024, 4096, 4096) == pytest.approx(float(row[3]) * 1e-3, rel=1e-12)


@pytest.mark.parametrize(
    ("gpu", "model", "tp", "reference_ms"),
    [
        # Kernel layer-sum reference values from prefixsim's calibration extract (1k / 8k / 32k
        # prefill, decode 1 x 1k, decode 64 x 2k): an independent implementation of the same sum.
        ("h100", "llama-3.1-8b", 1, (23.74, 211.87, 1094.41, 7.04, 13.56)),
        ("a100", "qwen3-32b", 2, (153.67, 1256.56, 7359.61, 27.36, 42.43)),
        ("b200", "llama-3.1-70b", 8, (29.65, 195.78, 837.25, 8.62, 10.57)),
        ("l40s", "qwen3-0.6b", 1, (9.56, 91.77, 866.69, 3.17, 26.51)),
    ],
)
def test_layer_sum_agrees_with_the_documented_reference(
    gpu: str, model: str, tp: int, reference_ms: tuple[float, ...]
) -> None:
    reference = kernel_reference(get_gpu(gpu), get_model(model), tp)
    shapes = [
        BatchShape([1024], [0], []),
        BatchShape([8192], [0], []),
        BatchShape([32768], [0], []),
        BatchShape([], [], [1024]),
        BatchShape([], [], [2048] * 64),
    ]
    for shape, expected_ms in zip(shapes, reference_ms, strict=True):
        # GEMM shapes off the grid are interpolated here, taken from the nearest point there.
        assert reference.step_time_s(shape) * 1e3 == pytest.approx(expected_ms, rel=0.08)


def test_cached_prefix_costs_attention_on_the_prefix_only() -> None:
    reference = kernel_reference(get_gpu("h100"), get_model("llama-3.1-8b"), 1)
    fresh = reference.step_time_s(BatchShape([1024], [0], []))
    with_prefix = reference.step_time_s(BatchShape([1024], [7168], []))
    full = reference.step_time_s(BatchShape([8192], [0], []))
    # cost_model.md §5.1 table: 1k new + 7k cached = 29.4 ms (1k fresh 23.7, 8k fresh 211.9).
    assert fresh < with_prefix < full
    assert with_prefix * 1e3 == pytest.approx(29.4, rel=0.08)
