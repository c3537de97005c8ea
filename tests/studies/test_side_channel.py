"""Timing side channel (sim/studies/side_channel*.py, intervals.py, `prefixsim side-channel`).

Scenario of the accuracy test: default H100 / Llama-3.1-8B deployment, ChatML, seed 7;
4 trials x 26 candidates (104 probes per setting), the victim sends 13 of them (a 64-token
system prompt + a 768-token secret each) in 4 s; 2 s later the attacker calibrates with 4
pairs and probes every candidate 0.25 s apart; 2 background tenants send 1024-token prompts
at 3 requests/s throughout (their prefills sometimes delay a probe that hit past the threshold).
The engine schedules sync: the exact figures were derived with it. Async scheduling (the
default) adds up to a step of admission wait to each probe, which blurs the signal.
"""

from __future__ import annotations

import functools
import math
from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from sim.cli import main
from sim.errors import InputError
from sim.metrics import RequestRecord
from sim.studies.intervals import mean_confidence_interval, student_t_critical_value
from sim.studies.side_channel import (
    SHARED_SALT,
    Probe,
    SideChannelReport,
    TrialPlan,
    classify_trial,
    fell_behind,
    poisson_arrivals,
    run_side_channel,
    tenant_salt,
)
from sim.studies.side_channel_config import SideChannelSettings
from sim.studies.side_channel_report import side_channel_json, side_channel_markdown
from sim.studies.study_runs import load_study


def study_document(**changes: object) -> dict:
    document = {
        "name": "tiny-side-channel",
        "seed": 7,
        "num_trials": 4,
        "secrets": {
            "num_candidates": 26,
            "system_prompt_tokens": 64,
            "secret_tokens": 768,
            "output_tokens": 16,
            "window_s": 4.0,
        },
        "attack": {"delay_s": 2.0, "probe_interval_s": 0.25, "num_calibration_pairs": 4},
        "engine": {"async_scheduling": False},
        "background": {
            "num_tenants": 2,
            "request_rate_per_s": 3.0,
            "prompt_tokens": 1024,
            "output_tokens": 32,
        },
    }
    document.update(changes)
    return document


@functools.cache
def tiny_report() -> SideChannelReport:
    settings = SideChannelSettings.model_validate(study_document())
    return run_side_channel(settings, Path("."))


@pytest.mark.slow
def test_accuracy_is_chance_with_per_tenant_salts_and_high_without() -> None:
    report = tiny_report()
    assert report.num_trials * report.num_probes_per_trial == 104
    assert 0.4 <= report.result("per_tenant_salt").accuracy <= 0.6
    assert report.result("no_salt").accuracy >= 0.9
    assert report.result("shared_salt").accuracy >= 0.9


def test_async_scheduling_blurs_the_timing_signal() -> None:
    settings = SideChannelSettings.model_validate(study_document(engine={}))
    report = run_side_channel(settings, Path("."))
    assert report.result("no_salt").accuracy == pytest.approx(92 / 104, abs=1e-12)


def test_exact_accuracies_of_the_seeded_scenario() -> None:
    report = tiny_report()
    # Per-tenant salts: every probe misses, so the attacker says "not sent" to all 26 and is
    # right on exactly the 13 unsent ones in every trial.
    salted = report.result("per_tenant_salt")
    assert [trial.accuracy for trial in salted.trials] == [0.5, 0.5, 0.5, 0.5]
    assert (salted.true_positive_rate, salted.false_positive_rate) == (0.0, 0.0)
    no_salt = report.result("no_salt")
    assert [trial.accuracy for trial in no_salt.trials] == EXPECTED_NO_SALT_TRIAL_ACCURACIES
    assert no_salt.false_positive_rate == 0.0
    # A salt shared by every tenant hashes like one namespace: the same timings as no salt.
    shared = report.result("shared_salt")
    assert [trial.probe_ttfts_s for trial in shared.trials] == [
        trial.probe_ttfts_s for trial in no_salt.trials
    ]


EXPECTED_NO_SALT_TRIAL_ACCURACIES = [26 / 26, 25 / 26, 25 / 26, 26 / 26]


def test_interval_brackets_the_mean_accuracy() -> None:
    for result in tiny_report().results:
        assert result.accuracy_low <= result.accuracy <= result.accuracy_high


def test_same_study_gives_identical_reports() -> None:
    settings = SideChannelSettings.model_validate(small_document())
    first = run_side_channel(settings, Path("."))
    second = run_side_channel(settings, Path("."))
    assert side_channel_json(first) == side_channel_json(second)
    assert side_channel_markdown(first) == side_channel_markdown(second)


def test_markdown_names_every_setting() -> None:
    """The seeded study keeps up with its 3 background requests/s: no overload line."""
    markdown = side_channel_markdown(tiny_report())
    for label in ("no cache_salt", "a cache_salt per tenant", "one cache_salt shared by all"):
        assert f"| {label}" in markdown
    assert tiny_report().overload_warning() is None
    assert "OVERLOADED" not in markdown


@pytest.mark.parametrize(
    ("ttft_of_arrival", "behind"),
    [
        # A backlog building from empty: TTFT 0 to 3.9 s over the trial (growth 2 x its mean).
        (lambda arrival_s: 0.1 * arrival_s, True),
        # Cached and uncached probes alternating at 8 and 25 ms: no trend, and under the floor.
        (lambda arrival_s: 0.008 if int(arrival_s) % 2 else 0.025, False),
        # A constant 5 s: slow, but not falling further behind.
        (lambda arrival_s: 5.0, False),
    ],
)
def test_a_trial_whose_ttft_grows_over_its_arrivals_fell_behind(ttft_of_arrival, behind) -> None:
    """40 requests, one a second: sim.metrics.stability's TTFT trend test over 10 bins."""
    records = [record(f"r{second}", ttft_of_arrival(second), second) for second in range(40)]
    assert fell_behind(records) is behind


def test_tenant_salts_per_setting() -> None:
    assert tenant_salt("no_salt", "victim") is None
    assert tenant_salt("per_tenant_salt", "victim") == "salt-victim"
    assert tenant_salt("per_tenant_salt", "attacker") == "salt-attacker"
    assert tenant_salt("shared_salt", "victim") == tenant_salt("shared_salt", "attacker")
    assert tenant_salt("shared_salt", "victim") == SHARED_SALT


def record(request_id: str, ttft_s: float, arrival_at: float = 10.0) -> RequestRecord:
    return RequestRecord(
        request_id=request_id,
        session_id=None,
        tenant="attacker",
        arrival_at=arrival_at,
        first_scheduled_at=arrival_at,
        first_token_at=arrival_at + ttft_s,
        finished_at=arrival_at + ttft_s,
        num_prompt_tokens=100,
        num_cached_tokens=0,
        num_computed_prefill_tokens=100,
        num_output_tokens=1,
        num_preemptions=0,
        inter_token_latencies_s=[],
    )


def test_threshold_is_the_midpoint_of_the_calibration_medians() -> None:
    plan = TrialPlan(
        requests=[],
        probes=[Probe("p0", True), Probe("p1", True), Probe("p2", False), Probe("p3", False)],
        calibration_pairs=[("u0", "c0"), ("u1", "c1"), ("u2", "c2")],
    )
    ttfts_s = {
        "u0": 0.030,
        "u1": 0.020,
        "u2": 0.025,  # uncached median 0.025
        "c0": 0.010,
        "c1": 0.005,
        "c2": 0.007,  # cached median 0.007
        "p0": 0.008,  # sent, fast: right
        "p1": 0.017,  # sent, slow (queued behind background): wrong
        "p2": 0.015,  # unsent but fast: wrong
        "p3": 0.024,  # unsent, slow: right
    }
    outcome = classify_trial(plan, {key: record(key, value) for key, value in ttfts_s.items()})
    assert outcome.threshold_s == pytest.approx(0.016)
    assert outcome.accuracy == 0.5
    assert (outcome.true_positive_rate, outcome.false_positive_rate) == (0.5, 0.5)


@pytest.mark.parametrize(
    ("degrees_of_freedom", "expected"),
    [(1, 12.7062), (4, 2.7764), (9, 2.2622), (30, 2.0423), (1000, 1.9623)],
)
def test_student_t_critical_values_at_95_percent(degrees_of_freedom: int, expected: float) -> None:
    assert student_t_critical_value(0.95, degrees_of_freedom) == pytest.approx(expected, abs=1e-4)


def test_mean_interval_of_two_trials() -> None:
    # mean 0.95, s = 0.0707107, t(0.975, 1) = 12.7062: half-width 12.7062 * 0.05 = 0.63531.
    mean, low, high = mean_confidence_interval([0.9, 1.0])
    assert mean == pytest.approx(0.95)
    assert (low, high) == (pytest.approx(0.95 - 0.63531, abs=1e-4), pytest.approx(1.58531, 1e-4))
    with pytest.raises(ValueError, match="at least 2 trials"):
        mean_confidence_interval([0.9])


@settings(max_examples=30, deadline=None)
@given(st.lists(st.floats(0.0, 1.0), min_size=2, max_size=20))
def test_a_wider_confidence_gives_a_wider_interval(values: list[float]) -> None:
    mean, low_95, high_95 = mean_confidence_interval(values, 0.95)
    _, low_99, high_99 = mean_confidence_interval(values, 0.99)
    assert low_99 <= low_95 + 1e-12 <= mean + 2e-12
    assert mean <= high_95 + 1e-12 <= high_99 + 2e-12


def test_poisson_arrivals_stay_in_the_window_and_match_the_rate() -> None:
    import numpy as np

    arrivals = poisson_arrivals(np.random.default_rng(1), 50.0, 100.0)
    assert arrivals == sorted(arrivals)
    assert arrivals[0] > 0 and arrivals[-1] <= 100.0
    # 5000 expected; the standard deviation is sqrt(5000) = 71.
    assert abs(len(arrivals) - 5000) < 4 * math.sqrt(5000)


def write_study(directory: Path, document: dict) -> Path:
    path = directory / "side_channel.yaml"
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    return path


def test_bad_settings_name_file_line_and_field(tmp_path: Path) -> None:
    path = write_study(tmp_path, study_document(salt_settings=["no_salt", "no_salt"]))
    line = path.read_text().splitlines().index("salt_settings:") + 1
    with pytest.raises(InputError, match=rf":{line}: salt_settings: .*names a setting twice"):
        load_study(path, SideChannelSettings)
    path = write_study(tmp_path, study_document(num_trials=1))
    with pytest.raises(InputError, match=r":3: num_trials: 1 is not allowed"):
        load_study(path, SideChannelSettings)


def run_in_process(capsys: pytest.CaptureFixture[str], *args: str | Path) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as caught:
        main([str(arg) for arg in args])
    captured = capsys.readouterr()
    return caught.value.code, captured.out, captured.err


def small_document() -> dict:
    document = study_document(num_trials=2, salt_settings=["no_salt", "per_tenant_salt"])
    document["secrets"]["num_candidates"] = 6
    return document


def test_cli_writes_files_and_rejects_bad_input(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write_study(tmp_path, small_document())
    out = tmp_path / "out"
    status, stdout, _ = run_in_process(capsys, "side-channel", path, "--out", out, "--no-progress")
    assert status == 0
    assert "per_tenant_salt" in stdout
    names = sorted(item.name for item in out.iterdir())
    assert names == ["side_channel.json", "side_channel.md", "side_channel.png"]
    assert (out / "side_channel.png").read_bytes().startswith(b"\x89PNG")

    bad = write_study(tmp_path, study_document(salt_settings=["pepper"]))
    status, _, stderr = run_in_process(capsys, "side-channel", bad)
    assert status == 2
    assert stderr.count("\n") == 1
    assert stderr.startswith(f"error: {bad}:")
    assert "'pepper'" in stderr
