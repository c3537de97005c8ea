"""`prefixsim run` says whether the run reached a steady state, fails (exit 2, one line, nothing
left behind) when nothing was measured, and `prefixsim report` takes a scenario's results folder.

Scenario: single-turn chat on one replica with constant 10 ms steps; 64-token system prompt,
32-token messages, 8 output tokens, near-regular arrivals (gamma, cv 0.01) for 20 s. One
sequence at a time serves 12.5 requests/s: 4/s is steady, 20/s builds a queue all run.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sim.cli import main

SCENARIO = """\
name: outcome
seed: 1
duration_s: 20
engine: {max_num_seqs: 1, max_num_batched_tokens: 1024, max_model_len: 1024, num_gpu_blocks: 200}
cost_model: "constant:0.01"
workload:
  source:
    kind: chat
    common: {system_prompt_tokens: 64}
    turns_per_session: 1
    user_message_tokens: 32
    answer_tokens: 8
  arrivals: {process: gamma, rate_per_s: 4.0, cv: 0.01}
outputs: {events: false}
"""


def run(tmp_path: Path, capsys, *overrides: str) -> tuple[int, str, str]:
    path = tmp_path / "outcome.yaml"
    path.write_text(SCENARIO)
    args = ["run", str(path), "--results", str(tmp_path / "results"), "--no-progress"]
    for override in overrides:
        args += ["--set", override]
    with pytest.raises(SystemExit) as raised:
        main(args)
    captured = capsys.readouterr()
    return raised.value.code, captured.out, captured.err


def test_a_steady_run_says_so(tmp_path: Path, capsys) -> None:
    """The verdict names what the stability test checks (not the drain, which it does not)."""
    code, _, err = run(tmp_path, capsys)
    assert code == 0
    assert (
        "steady state reached: request rate, queue and TTFT without significant growth over "
        "the window"
    ) in " ".join(err.split())
    assert "UNSTABLE" not in err
    assert "rejected" not in err


def test_goodput_limits_give_the_run_its_own_folder(tmp_path: Path, capsys) -> None:
    """The same scenario with --goodput (which adds goodput_per_s to summary.json) and without:
    two run folders, each summary as its run wrote it; neither replaces the other."""
    path = tmp_path / "outcome.yaml"
    path.write_text(SCENARIO)
    base = ["run", str(path), "--results", str(tmp_path / "results"), "--no-progress"]
    for args in (base + ["--goodput", "ttft:100"], base):
        with pytest.raises(SystemExit) as raised:
            main(args)
        assert raised.value.code == 0
    capsys.readouterr()
    summaries = [
        json.loads(summary.read_text())
        for summary in sorted((tmp_path / "results" / "outcome").glob("*/summary.json"))
    ]
    assert len(summaries) == 2
    assert sorted("goodput_per_s" in summary for summary in summaries) == [False, True]
    assert len({summary["run_id"] for summary in summaries}) == 2


def test_an_overloaded_run_warns_loudly_with_its_reason(tmp_path: Path, capsys) -> None:
    code, out, err = run(tmp_path, capsys, "workload.arrivals.rate_per_s=20")
    assert code == 0
    assert "WARNING: UNSTABLE - no steady state" in err
    assert "the waiting queue grew by" in err
    assert '"stable": false' in out


def test_a_run_whose_requests_are_all_rejected_is_refused_before_it_runs(
    tmp_path: Path, capsys
) -> None:
    # 2,000-token system prompts against max_model_len 1,024: no request could ever be served.
    code, out, err = run(tmp_path, capsys, "workload.source.common.system_prompt_tokens=2000")
    assert code == 2
    assert out == ""
    assert err.count("\n") == 1
    assert err.startswith("error: ")
    assert "so every request would be rejected" in err
    assert not (tmp_path / "results").exists()


def test_a_run_whose_requests_are_mostly_rejected_fails_and_leaves_nothing(
    tmp_path: Path, capsys
) -> None:
    # Messages of 16..4,000 tokens after a 64-token system prompt against max_model_len 1,024:
    # about three in four prompts are too long (57 of 80 with seed 1), so the run is
    # simulated and then fails.
    code, out, err = run(
        tmp_path, capsys, "workload.source.user_message_tokens={dist: uniform, low: 16, high: 4000}"
    )
    assert code == 2
    assert out == ""
    assert err.count("\n") == 1
    assert err.startswith("error: ")
    assert err.endswith(
        "run failed: 57 of 80 requests were rejected: 57 with prompts of at least "
        "engine.max_model_len tokens; raise engine.max_model_len (1,024) or shorten the prompts\n"
    )
    assert not (tmp_path / "results").exists()


def test_a_run_rejecting_prompts_past_the_models_whole_context_says_to_shorten_them(
    tmp_path: Path, capsys
) -> None:
    # Llama-2-7B's context is 4,096 tokens and max_model_len is set to all of it: messages of
    # 16..16,000 tokens mostly reach it (56 of 80 with seed 1), and raising max_model_len is no
    # remedy, so the failure names only shortening the prompts.
    code, out, err = run(
        tmp_path,
        capsys,
        "deployment.model=llama-2-7b",
        "engine.max_model_len=4096",
        "engine.num_gpu_blocks=300",
        "workload.source.user_message_tokens={dist: uniform, low: 16, high: 16000}",
    )
    assert (code, out) == (2, "")
    assert err.endswith(
        "run failed: 56 of 80 requests were rejected: 56 with prompts of at least "
        "engine.max_model_len tokens; shorten the prompts (engine.max_model_len 4,096 is the "
        "model's whole context already)\n"
    )
    assert not (tmp_path / "results").exists()


def test_a_run_mostly_turned_away_by_the_queue_limit_names_that_cause(
    tmp_path: Path, capsys
) -> None:
    # 40 requests/s against one sequence at a time and a queue of one: 600 of 800 requests
    # find the queue full, none is too long; the failure names the queue limits.
    code, out, err = run(
        tmp_path, capsys, "workload.arrivals.rate_per_s=40", "engine.max_num_queued_reqs=1"
    )
    assert (code, out) == (2, "")
    assert err.endswith(
        "run failed: 600 of 800 requests were rejected: 600 turned away by the queue limits "
        "engine.max_num_queued_reqs / engine.max_num_queued_tokens; raise the queue limits or "
        "lower the load\n"
    )
    assert not (tmp_path / "results").exists()


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        # Messages of 16..1,300 tokens: 16 of 80 prompts reach max_model_len 1,024.
        (
            ("workload.source.user_message_tokens={dist: uniform, low: 16, high: 1300}",),
            "16 of 80 requests were rejected: 16 with prompts of at least engine.max_model_len "
            "tokens",
        ),
        # 20 requests/s against a queue of two: 149 of 400 find it full.
        (
            ("workload.arrivals.rate_per_s=20", "engine.max_num_queued_reqs=2"),
            "149 of 400 requests were rejected: 149 turned away by the queue limits "
            "engine.max_num_queued_reqs / engine.max_num_queued_tokens",
        ),
    ],
    ids=["too-long", "queue-full"],
)
def test_a_run_that_rejected_some_requests_warns_loudly(
    tmp_path: Path, capsys, overrides: tuple[str, ...], expected: str
) -> None:
    """Under half rejected: the run keeps its results, and says how many were rejected and
    why, since its latencies cover only the admitted requests."""
    code, _, err = run(tmp_path, capsys, *overrides)
    assert code == 0
    assert f"WARNING: {expected}. The latencies and rates measure only the admitted ones.\n" in err


def test_report_takes_a_scenario_results_folder_with_one_run(tmp_path: Path, capsys) -> None:
    assert run(tmp_path, capsys)[0] == 0
    with pytest.raises(SystemExit) as raised:
        main(["report", str(tmp_path / "results" / "outcome")])
    assert raised.value.code == 0
    (run_dir,) = (tmp_path / "results" / "outcome").iterdir()
    assert (run_dir / "report.md").is_file()
    assert "steady state" in (run_dir / "report.md").read_text()


def test_a_warning_is_one_line(tmp_path: Path, capsys) -> None:
    """50,000-token prompts on Llama-3.1-8B / H100: the shipped profile was fitted up to 49,152
    tokens of context, so the run warns once that it extrapolates: one `warning:` line, not
    Python's report with the file and source line it came from."""
    path = tmp_path / "long.yaml"
    path.write_text(
        "name: long\nduration_s: 30\nengine: {max_model_len: 65536}\nworkload:\n"
        "  source: {kind: chat, turns_per_session: 1, common: {system_prompt_tokens: 50000},\n"
        "           user_message_tokens: 32, answer_tokens: 4}\n"
        "  arrivals: {process: poisson, rate_per_s: 1.0}\n"
    )
    with pytest.raises(SystemExit) as raised:
        main(["run", str(path), "--out", str(tmp_path / "out"), "--no-progress"])
    assert raised.value.code == 0
    err_lines = capsys.readouterr().err.splitlines()
    warning_lines = [line for line in err_lines if "warning:" in line or "Warning" in line]
    assert warning_lines == [
        "warning: cost model h100/llama-3.1-8b/tp1 (kernel-derived): step outside the range it "
        "was fitted on (longest_context=50032 not in [1, 49152]); the prediction is an "
        "extrapolation (warned once per model)"
    ]
