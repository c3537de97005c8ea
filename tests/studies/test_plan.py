"""Capacity planning: SLO parsing, the bracket-and-bisect searches, and `plan` on a deployment
whose boundary can be worked out by hand.

The hand-checkable deployment: one sequence at a time (max_num_seqs 1), every step 10 ms,
single-turn requests with 8 output tokens and near-deterministic arrivals (gamma, cv 0.01).
A request takes 8 steps = 80 ms (prefill emits the first token), so one replica serves at
most 12.5 requests/s. Below that TTFT is one 10 ms step; above it the queue grows all run
(20 s of arrivals).
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sim.cli import main
from sim.cli.plan_cmd import answer_line
from sim.config import load_scenario
from sim.errors import InputError
from sim.studies.plan import (
    PlanResult,
    PlanSettings,
    Probe,
    Slo,
    format_quantity,
    parse_slo,
    parse_slos,
    plan,
    plan_base,
    slo_slug,
)
from sim.studies.plan_search import (
    Bracket,
    largest_feasible,
    smallest_feasible,
    smallest_feasible_count,
)

SERIAL_YAML = """\
name: serial
seed: 1
duration_s: 20
engine: {max_num_seqs: 1, max_num_batched_tokens: 1024, max_model_len: 1024, num_gpu_blocks: 200}
cost_model: "constant:0.01"
workload:
  source:
    kind: chat
    common: {system_prompt_tokens: 0}
    turns_per_session: 1
    user_message_tokens: 32
    answer_tokens: 8
  arrivals: {process: gamma, rate_per_s: 4.0, cv: 0.01}
"""
TTFT_SLO = [Slo("ttft_p99", 0.05)]
SEED_ANSWERS = {1: 12.5, 2: 12.5, 3: 12.5}
BLOCK_GIB = 16 * 128 * 1024 / 1024**3  # a 16-token block of llama-3.1-8b KV (128 KiB/token)


def write_scenario(tmp_path: Path, text: str = SERIAL_YAML) -> Path:
    path = tmp_path / "serial.yaml"
    path.write_text(text)
    return path


def run_plan(tmp_path: Path, settings: PlanSettings, overrides: tuple[str, ...] = ()):
    loaded = load_scenario(write_scenario(tmp_path), overrides)
    scratch = tmp_path / "scratch"
    scratch.mkdir(exist_ok=True)
    return plan(loaded.scenario, loaded.base_dir, TTFT_SLO, settings, scratch_dir=scratch)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("ttft_p99=2s", Slo("ttft_p99", 2.0)),
        ("itl_p99=50ms", Slo("itl_p99", 0.05)),
        (" e2e_p50 = 1.5 s ", Slo("e2e_p50", 1.5)),
        ("queue_p99=.25s", Slo("queue_p99", 0.25)),
        ("ttft_p90=2.5e2ms", Slo("ttft_p90", 0.25)),
    ],
)
def test_parse_slo(text: str, expected: Slo) -> None:
    assert parse_slo(text) == expected
    assert expected.summary_key == f"{expected.metric}_s"


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("ttft_p99=2", "expected metric=value with a unit (s or ms), e.g. ttft_p99=2s"),
        ("ttft_p99=2min", "expected metric=value with a unit (s or ms), e.g. ttft_p99=2s"),
        ("ttft_p99<2s", "expected metric=value with a unit (s or ms), e.g. ttft_p99=2s"),
        ("ttft_p99=-1s", "expected metric=value with a unit (s or ms), e.g. ttft_p99=2s"),
        ("ttft_p99=0ms", "the limit must be positive"),
        (
            "e2e_p90=1s",
            "unknown metric 'e2e_p90'; allowed: ttft_p50, ttft_p90, ttft_p99, e2e_p50, "
            "e2e_p99, itl_p50, itl_p99, queue_p50, queue_p99",
        ),
    ],
)
def test_bad_slo_is_an_input_error(text: str, problem: str) -> None:
    with pytest.raises(InputError) as raised:
        parse_slo(text)
    assert str(raised.value) == f"--slo {text!r}: {problem}"


def test_a_metric_limited_twice_is_refused() -> None:
    """ttft_p99 under 1 s and 2 s: only one limit could hold (plan.json kept the last)."""
    assert parse_slos(["ttft_p99=1s", "itl_p99=50ms"]) == [
        Slo("ttft_p99", 1.0),
        Slo("itl_p99", 0.05),
    ]
    with pytest.raises(InputError) as raised:
        parse_slos(["ttft_p99=1s", "itl_p99=50ms", "ttft_p99=2000ms"])
    assert str(raised.value) == (
        "--slo 'ttft_p99=2000ms': ttft_p99 is limited already by --slo 'ttft_p99=1s'; give each "
        "metric once"
    )


def recording(threshold: float, feasible_below: bool):
    probes: list[float] = []

    def is_feasible(value: float) -> bool:
        probes.append(value)
        return value <= threshold if feasible_below else value >= threshold

    return is_feasible, probes


@given(
    threshold=st.floats(0.01, 1000.0),
    start_exponent=st.floats(-9.0, 9.0),  # within the default 10 doublings or halvings
    rel_tol=st.sampled_from([0.01, 0.05, 0.2]),
)
def test_largest_feasible_brackets_the_threshold(threshold, start_exponent, rel_tol) -> None:
    start = threshold * 2**start_exponent
    is_feasible, probes = recording(threshold, feasible_below=True)
    bracket = largest_feasible(is_feasible, start, rel_tol=rel_tol)
    assert bracket.feasible <= threshold < bracket.infeasible
    assert bracket.infeasible - bracket.feasible <= rel_tol * bracket.infeasible
    assert {bracket.feasible, bracket.infeasible} <= set(probes)


def test_largest_feasible_stops_doubling_and_halving() -> None:
    always, probes = recording(math.inf, feasible_below=True)
    assert largest_feasible(always, 1.0, rel_tol=0.05, max_doublings=3) == Bracket(8.0, None)
    assert probes == [1.0, 2.0, 4.0, 8.0]
    never, probes = recording(-1.0, feasible_below=True)
    assert largest_feasible(never, 1.0, rel_tol=0.05, max_doublings=3) == Bracket(None, 0.125)


@given(threshold=st.floats(0.1, 100.0), rel_tol=st.sampled_from([0.01, 0.05, 0.2]))
def test_smallest_feasible_brackets_the_threshold(threshold, rel_tol) -> None:
    is_feasible, _ = recording(threshold, feasible_below=False)
    bracket = smallest_feasible(is_feasible, 0.1, 100.0, rel_tol=rel_tol)
    if threshold <= 0.1:
        assert bracket == Bracket(0.1, None)
    else:
        assert bracket.infeasible < threshold <= bracket.feasible
        assert bracket.feasible - bracket.infeasible <= rel_tol * bracket.feasible


def test_smallest_feasible_without_a_feasible_value() -> None:
    is_feasible, probes = recording(200.0, feasible_below=False)
    assert smallest_feasible(is_feasible, 0.1, 100.0, rel_tol=0.05) == Bracket(None, 100.0)
    assert probes == [100.0]


@given(threshold=st.integers(1, 100), max_count=st.integers(1, 100))
def test_smallest_feasible_count_is_exact(threshold: int, max_count: int) -> None:
    is_feasible, probes = recording(threshold, feasible_below=False)
    bracket = smallest_feasible_count(is_feasible, max_count=max_count)
    if threshold > max_count:
        assert bracket == Bracket(None, max_count)
    else:
        assert bracket.feasible == threshold
        assert bracket.infeasible == (threshold - 1 if threshold > 1 else None)
    assert len(probes) == len(set(probes))


def test_the_largest_rate_is_the_hand_computed_capacity(tmp_path: Path) -> None:
    # From 4/s: 4, 8 ok; 16 unstable; bisect 12 ok, 14 and 13 fail, 12.5 ok; 13-12.5 < 5% of 13.
    result = run_plan(tmp_path, PlanSettings(find="rate"))
    assert [probe.value for probe in result.probes] == [4.0, 8.0, 16.0, 12.0, 14.0, 13.0, 12.5]
    assert [probe.feasible for probe in result.probes] == [1, 1, 0, 1, 0, 0, 1]
    assert (result.answer, result.infeasible_bound) == (12.5, 13.0)
    # 16/s runs 28% over capacity: the backlog drains for far longer than 10% of the 20 s.
    over = result.probes[2]
    assert not over.stable and over.drain_s > 2.0
    assert result.probes[0].metrics_s == {"ttft_p99": pytest.approx(0.01)}
    assert not list((tmp_path / "scratch").iterdir())


@pytest.mark.slow
def test_two_replicas_sustain_twice_the_rate_of_one(tmp_path: Path) -> None:
    result = run_plan(tmp_path, PlanSettings(find="rate"), ("deployment.replicas=2",))
    assert (result.answer, result.infeasible_bound) == (25.0, 26.0)


@pytest.mark.slow
def test_the_fewest_replicas_for_a_rate(tmp_path: Path) -> None:
    # 30/s needs 30/12.5 = 2.4 replicas: doubling probes 1, 2, 4, then bisection tries 3.
    # Round robin alternates the near-regular arrivals, so each replica sees 10/s.
    result = run_plan(tmp_path, PlanSettings(find="replicas", rate_per_s=30.0))
    assert [probe.value for probe in result.probes] == [1, 2, 4, 3]
    assert (result.answer, result.infeasible_bound) == (3, 2)


@pytest.mark.slow
def test_the_least_kv_memory_for_a_rate(tmp_path: Path) -> None:
    # 880-token prompts; 15/s needs 2 requests in flight (1 serves 12.5/s). One holds 56 blocks
    # (887 computed tokens), so the pool needs 2 x 56 usable + the null block = 113 blocks.
    result = run_plan(
        tmp_path,
        PlanSettings(find="kv-memory", rate_per_s=15.0, rel_tol=0.05),
        (
            "engine.num_gpu_blocks=null",
            "engine.max_num_seqs=64",
            "workload.source.user_message_tokens=880",
        ),
    )
    assert result.infeasible_bound < 113 * BLOCK_GIB <= result.answer
    assert result.answer - result.infeasible_bound <= 0.05 * result.answer
    assert result.probes[0].value == pytest.approx(56.31640625)  # all the H100 leaves for KV
    assert result.probes[1].value == 65 * BLOCK_GIB  # one max_model_len sequence + null block


def test_a_probe_measuring_too_few_requests_stops_the_plan(tmp_path: Path) -> None:
    """0.5 arrivals/s for 20 s measures about 10 requests, under the 20 a steady-state verdict
    needs: the replicas search would call every probe infeasible and answer "none", so the
    plan stops with what to change instead."""
    with pytest.raises(InputError, match="too few to judge a steady state \\(at least 20\\)"):
        run_plan(tmp_path, PlanSettings(find="replicas", rate_per_s=0.5))


def test_a_kv_memory_answer_at_the_floor_says_what_the_floor_is(tmp_path: Path) -> None:
    """2/s needs one request in flight: both probes pass, the second at the least memory vLLM
    starts with (one max_model_len sequence + the null block), and the answer says so."""
    result = run_plan(
        tmp_path,
        PlanSettings(find="kv-memory", rate_per_s=2.0),
        ("engine.num_gpu_blocks=null",),
    )
    assert [probe.value for probe in result.probes] == [pytest.approx(56.31640625), 65 * BLOCK_GIB]
    assert (result.answer, result.infeasible_bound) == (65 * BLOCK_GIB, None)
    assert answer_line(result).endswith(
        "(the least vLLM starts with: room for one engine.max_model_len sequence; lower "
        "max_model_len to probe below)"
    )


@pytest.mark.parametrize(
    ("text", "settings", "message"),
    [
        (
            SERIAL_YAML.replace("duration_s: 20\n", "").replace(
                "answer_tokens: 8", "answer_tokens: 8\n  num_arrivals: 10"
            ),
            PlanSettings(),
            "plan needs duration_s in the scenario",
        ),
        (
            SERIAL_YAML.replace(
                "{process: gamma, rate_per_s: 4.0, cv: 0.01}",
                "{process: piecewise, pieces: [{duration_s: 10, rate_per_s: 2.0}]}",
            ),
            PlanSettings(),
            "changing the arrival rate needs a poisson or gamma process",
        ),
        (SERIAL_YAML, PlanSettings(find="kv-memory"), "engine.num_gpu_blocks fixes the KV cache"),
        (SERIAL_YAML, PlanSettings(find="latency"), "--find 'latency': allowed: rate, replicas"),
        (SERIAL_YAML, PlanSettings(rate_per_s=-1.0), "--rate -1.0: must be a positive"),
    ],
)
def test_plan_input_errors(tmp_path: Path, text: str, settings: PlanSettings, message: str) -> None:
    with pytest.raises(InputError, match=re.escape(message)):
        loaded = load_scenario(write_scenario(tmp_path, text))
        plan(loaded.scenario, loaded.base_dir, TTFT_SLO, settings, scratch_dir=tmp_path)


def plan_command(scenario: Path, out: Path, *args: str) -> int | str | None:
    """`prefixsim plan SCENARIO --slo ttft_p99=50ms ARGS --out OUT`: its exit code."""
    with pytest.raises(SystemExit) as raised:
        main(["plan", str(scenario), "--slo", "ttft_p99=50ms", *args, "--out", str(out)])
    return raised.value.code


@pytest.mark.slow
def test_plan_command_writes_plan_json_and_png(tmp_path: Path, capsys) -> None:
    scenario = write_scenario(tmp_path)
    out = tmp_path / "plan"
    assert plan_command(scenario, out, "--find", "replicas", "--rate", "30") == 0
    stdout = capsys.readouterr().out
    assert "smallest replicas meeting the SLOs: 3 replicas (infeasible at 2)" in stdout
    document = json.loads((out / "plan.json").read_text())
    assert (document["answer"], document["infeasible_bound"]) == (3, 2)
    assert document["searched"] == "deployment.replicas"
    assert document["slos"] == {"ttft_p99": 0.05}
    assert [probe["value"] for probe in document["probes"]] == [1, 2, 4, 3]
    assert (out / "plan.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert sorted(path.name for path in out.iterdir()) == ["plan.json", "plan.png"]


def test_plan_command_rejects_a_bad_slo_in_one_line(tmp_path: Path, capsys) -> None:
    scenario = write_scenario(tmp_path)
    with pytest.raises(SystemExit) as raised:
        main(["plan", str(scenario), "--slo", "ttft_p99=fast"])
    assert raised.value.code == 2
    assert capsys.readouterr().err == (
        "error: --slo 'ttft_p99=fast': expected metric=value with a unit (s or ms), "
        "e.g. ttft_p99=2s\n"
    )


def test_plan_command_refuses_an_engine_that_would_not_start_naming_the_file(
    tmp_path: Path, capsys
) -> None:
    """SERIAL_YAML on 32 blocks (496 tokens) cannot hold one 1,024-token sequence: the plan
    stops before its first probe, naming the file, and leaves no output folder."""
    scenario = write_scenario(tmp_path)
    out = tmp_path / "plan"
    assert plan_command(scenario, out, "--set", "engine.num_gpu_blocks=32") == 2
    assert capsys.readouterr().err.startswith(
        f"error: {scenario}: engine.max_model_len 1,024 is larger than the KV cache (31 usable "
        "blocks x 16 = 496 tokens)"
    )
    assert not out.exists()


def test_a_kv_memory_plan_with_a_cpu_tier_too_small_is_refused_naming_the_file(
    tmp_path: Path, capsys
) -> None:
    """A kv-memory search sizes the GPU cache itself, but a 1e-6 GiB CPU tier (no 2 MiB chunk)
    is still refused before the first probe, naming the file."""
    scenario = write_scenario(
        tmp_path, SERIAL_YAML.replace("num_gpu_blocks: 200", "num_gpu_blocks: null")
    )
    args = ("--find", "kv-memory", "--set", "engine.kv_offloading_size=0.000001")
    assert plan_command(scenario, tmp_path / "plan", *args) == 2
    assert capsys.readouterr().err == (
        f"error: {scenario}: engine.kv_offloading_size 1e-06 GiB holds no chunk of 2,097,152 "
        "bytes (one block of its GPU); give it at least 0.001953 GiB or 0 to turn offloading "
        "off\n"
    )
    assert not (tmp_path / "plan").exists()


def test_answers_print_with_sensible_precision() -> None:
    assert format_quantity(4.3125, "rate") == "4.31 arrivals/s"
    assert format_quantity(12.5, "rate") == "12.5 arrivals/s"
    assert format_quantity(8.0, "rate") == "8 arrivals/s"
    assert format_quantity(6.640625, "kv-memory") == "6.64 GiB"
    assert format_quantity(1, "replicas") == "1 replica"
    assert format_quantity(3, "replicas") == "3 replicas"
    assert slo_slug([Slo("ttft_p99", 1.0), Slo("itl_p99", 0.05)]) == "ttft_p99-1s_itl_p99-0.05s"


def test_several_seeds_give_the_answer_all_sustain_and_a_confidence_interval(
    tmp_path: Path,
) -> None:
    result = run_plan(tmp_path, PlanSettings(find="rate", seeds=(1, 2, 3)))
    answers = {seed: bracket.feasible for seed, bracket in result.brackets.items()}
    assert answers == SEED_ANSWERS
    assert result.answer == min(SEED_ANSWERS.values())
    mean, low, high = result.answer_interval
    assert mean == pytest.approx(sum(SEED_ANSWERS.values()) / 3)
    assert low <= result.answer <= mean <= high
    assert {probe.seed for probe in result.probes} == {1, 2, 3}


def test_the_seeds_interval_never_reaches_below_zero() -> None:
    """Two seeds answering 1 and 9 arrivals/s: mean 5, Student's t half-width 12.706 x 4 =
    50.8, so the t interval's low end would be -45.8; a rate is never negative, so it is 0.
    plan.json labels the three numbers."""
    result = PlanResult(
        "s", PlanSettings(seeds=(1, 2)), [Slo("ttft_p99", 1.0)], 1.0, 1.1,
        brackets={1: Bracket(1.0, 1.1), 2: Bracket(9.0, 9.9)},
    )  # fmt: skip
    mean, low, high = result.answer_interval
    assert (mean, low) == (5.0, 0.0)
    assert high == pytest.approx(5.0 + 12.7062 * 4.0, abs=1e-3)
    assert result.to_json()["answer_ci95"] == {"mean": 5.0, "low": 0.0, "high": high}


def _probe_at(value: float, *, stable: bool, meets_slos: bool) -> Probe:
    return Probe(
        value, 1, {"ttft_p99": 0.05}, 100, 1.0, stable,
        None if stable else "no steady load: the request rate grew by 87% over the window",
        meets_slos,
    )  # fmt: skip


def test_an_answer_placed_by_the_stability_test_alone_is_flagged() -> None:
    """Probes at 1 (stable), 2 and 4 arrivals/s (unstable, sessions still accumulating), all
    within the SLO: the steady-state test placed the answer, which is said loudly; once a probe
    fails an SLO (or none is unstable), the answer is the SLOs' and nothing is said."""
    result = PlanResult("s", PlanSettings(), [Slo("ttft_p99", 1.0)], 1.0, 2.0)
    result.probes = [
        _probe_at(4.0, stable=False, meets_slos=True),
        _probe_at(1.0, stable=True, meets_slos=True),
        _probe_at(2.0, stable=False, meets_slos=True),
    ]
    assert result.stability_note() == (
        "WARNING: every probe met the SLOs: the answer is where runs stopped reaching a steady "
        "state, not where an SLO fails (first at 2 arrivals/s, seed 1: no steady load: the "
        "request rate grew by 87% over the window)"
    )
    result.probes[0] = _probe_at(4.0, stable=False, meets_slos=False)
    assert result.stability_note() is None
    result.probes = [_probe_at(1.0, stable=True, meets_slos=True)]
    assert result.stability_note() is None


def test_a_plan_on_a_sweep_file_takes_a_set_on_a_swept_path(tmp_path: Path) -> None:
    """block_size.yaml sweeps engine.block_size; a plan reads its base scenario (and seeds), so
    --set engine.block_size=64 is the plan's block size, not refused as the sweep refuses it."""
    sweep_file = Path(__file__).resolve().parents[2] / "scenarios" / "block_size.yaml"
    scenario, _, seeds = plan_base(sweep_file, ["engine.block_size=64"])
    assert (scenario.engine.block_size, seeds) == (64, (1, 2, 3))
