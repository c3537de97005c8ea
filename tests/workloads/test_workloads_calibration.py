"""Calibration: the documented fitted numbers are what fitting the real traces gives."""

from __future__ import annotations

import math

import pytest

from workloads import calibration
from workloads.api import LogNormal, WorkloadError


def test_fit_lognormal_on_known_values() -> None:
    # ln values 0 and 2: mean 1, population std 1.
    fitted = calibration.fit_lognormal([1.0, math.exp(2.0)])
    assert fitted == LogNormal(median=2.718, sigma=1.0, low=1, high=7.389)
    with pytest.raises(WorkloadError, match="needs at least 2 positive values"):
        calibration.fit_lognormal([0.0, 3.0])


def test_interarrival_cv_of_a_regular_and_a_bursty_stream() -> None:
    assert calibration.interarrival_cv([0.0, 1.0, 2.0, 3.0]) == 0.0
    # Gaps 1, 1, 4: mean 2, std sqrt(2).
    assert calibration.interarrival_cv([0.0, 1.0, 2.0, 6.0]) == round(math.sqrt(2) / 2, 3)


def test_mooncake_conversation_constants_match_the_trace(mooncake_conversation_trace) -> None:
    fitted = calibration.mooncake_lengths(mooncake_conversation_trace)
    assert fitted == (
        calibration.MOONCAKE_CONVERSATION_INPUT,
        calibration.MOONCAKE_CONVERSATION_OUTPUT,
    )


@pytest.mark.parametrize("kind", ["conv", "code"])
def test_azure_constants_match_the_trace(traces_dir, kind: str) -> None:
    path = traces_dir / f"azure-llm-2023/AzureLLMInferenceTrace_{kind}.csv"
    prefix = f"AZURE_{kind.upper()}"
    assert calibration.azure_statistics(path) == (
        getattr(calibration, f"{prefix}_INPUT"),
        getattr(calibration, f"{prefix}_OUTPUT"),
        getattr(calibration, f"{prefix}_ARRIVAL_CV"),
    )


def test_dynamo_agent_constants_match_the_trace(traces_dir) -> None:
    fitted = calibration.dynamo_agent_statistics(
        traces_dir / "dynamo-pi-agent/pi_request_trace.jsonl"
    )
    assert fitted == (
        calibration.DYNAMO_AGENT_ACTION,
        calibration.DYNAMO_AGENT_OBSERVATION,
        calibration.DYNAMO_AGENT_STEP_GAP_S,
    )
