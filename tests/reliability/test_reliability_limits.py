"""Sizes beyond the limits (sim/config/limits.py) are refused up front with the estimate and the
way round, on every command that would otherwise hang or fill memory; sizes within them pass.

Every case runs in this process under a 20 s alarm: a refusal that takes longer is a hang.
"""

from __future__ import annotations

import signal
from collections.abc import Iterator
from pathlib import Path

import pytest
from reliability_cases import GOOD_MOONCAKE
from reliability_cli import assert_input_error, prefixsim, written_entries

from sim.config.limits import MAX_ARRIVALS, MAX_SCRAPES
from workloads.api import MAX_LINE_BYTES

HANG_LIMIT_S = 20
TINY = """\
name: tiny-limits
duration_s: 10.0
engine: {num_gpu_blocks: 2000, max_model_len: 8192}
cost_model: 'constant:0.01'
workload:
  source: {kind: chat, tenants: [{name: acme}]}
  arrivals: {process: poisson, rate_per_s: 2.0}
"""
MIX = """\
name: mix-limits
duration_s: 10.0
engine: {num_gpu_blocks: 2000, max_model_len: 8192}
cost_model: 'constant:0.01'
workload:
  source:
    kind: mix
    components:
      - {weight: 1.0, source: {kind: chat}}
      - {weight: 1.0, source: {kind: rag, common: {system_prompt_tokens: 9000}}}
  arrivals: {process: poisson, rate_per_s: 2.0}
"""
GRID_10E9 = TINY + (
    "sweep:\n  grid:\n"
    + "".join(
        f"    {path}: [{', '.join(str(value) for value in range(1, 11))}]\n"
        for path in (
            "engine.block_size",
            "engine.max_num_seqs",
            "engine.hash_seed",
            "engine.num_gpu_blocks",
            "engine.max_num_batched_tokens",
            "engine.long_prefill_token_threshold",
            "workload.num_arrivals",
            "engine.watermark",
        )
    )
    + "  seeds: [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]\n"
)
FOUR_RUNS = TINY + "sweep:\n  grid:\n    engine.block_size: [16, 32]\n  seeds: [1, 2]\n"
ONE_RUN_TOO_LONG = TINY + "sweep:\n  grid:\n    duration_s: [10.0, 1.0e+12]\n"


@pytest.fixture(autouse=True)
def no_hang() -> Iterator[None]:
    """Fail a case that takes more than HANG_LIMIT_S seconds."""

    def hung(signal_number, frame):
        raise AssertionError(f"no answer within {HANG_LIMIT_S} s")

    previous = signal.signal(signal.SIGALRM, hung)
    signal.alarm(HANG_LIMIT_S)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, previous)


@pytest.fixture
def inputs(tmp_path) -> dict[str, Path]:
    """The scenario, sweep and trace files the cases name, and an empty results directory."""
    files = {
        "tiny": ("tiny.yaml", TINY),
        "mix": ("mix.yaml", MIX),
        "grid": ("grid.yaml", GRID_10E9),
        "four": ("four.yaml", FOUR_RUNS),
        "one_too_long": ("one_too_long.yaml", ONE_RUN_TOO_LONG),
        "far_trace": (
            "far.jsonl",
            '{"timestamp": 0, "input_length": 100, "output_length": 10, "hash_ids": [1]}\n'
            '{"timestamp": 1000000000000, "input_length": 100, "output_length": 10, '
            '"hash_ids": [1]}\n',
        ),
    }
    paths = {"tmp": tmp_path, "results": tmp_path / "results", "good_trace": GOOD_MOONCAKE}
    for key, (name, text) in files.items():
        paths[key] = tmp_path / name
        paths[key].write_text(text)
    paths["results"].mkdir()
    for key, trace in (("far_scenario", paths["far_trace"]), ("slow_scenario", GOOD_MOONCAKE)):
        speedup = "1.0e-300" if key == "slow_scenario" else "1.0"
        paths[key] = tmp_path / f"{key}.yaml"
        paths[key].write_text(
            f"name: {key.replace('_', '-')}\n"
            "engine: {num_gpu_blocks: 2000, max_model_len: 8192}\n"
            "cost_model: 'constant:0.01'\n"
            f"workload:\n  source: {{kind: trace, path: '{trace}', format: mooncake, "
            f"speedup: {speedup}}}\n"
        )
    # Sparse files: one line of MAX_LINE_BYTES + 1 NUL bytes, and a 17 MiB "scenario".
    paths["endless_line"] = tmp_path / "endless.jsonl"
    with paths["endless_line"].open("wb") as handle:
        handle.truncate(MAX_LINE_BYTES + 1)
    paths["endless_scenario"] = tmp_path / "endless_line.yaml"
    paths["endless_scenario"].write_text(
        "name: endless\nengine: {num_gpu_blocks: 2000, max_model_len: 8192}\n"
        "cost_model: 'constant:0.01'\n"
        f"workload:\n  source: {{kind: trace, path: '{paths['endless_line']}', format: mooncake}}\n"
    )
    paths["huge_yaml"] = tmp_path / "huge.yaml"
    with paths["huge_yaml"].open("wb") as handle:
        handle.truncate(17 * 2**20)
    return paths


ARRIVALS = f"more than the limit of {MAX_ARRIVALS:,}; shorten duration_s, lower the rate or set"
SCRAPES = f"metric scrapes, more than the limit of {MAX_SCRAPES:,}; simulate less time or raise"
SHARED = (
    "so every request would be rejected; raise engine.max_model_len (8,192) or shorten the prompts"
)
HOLDS = "workload.source: every prompt holds at least"
# (id, arguments after `prefixsim`, file the line names (None: checked by fragments), fragments)
REFUSED = (
    (
        "run_duration_1e12",
        "run {tiny} --set duration_s=1.0e+12",
        "{tiny}",
        ("workload.arrivals: about 2e+12 arrivals in duration_s 1e+12", ARRIVALS),
    ),
    (
        "validate_duration_1e12",
        "validate {tiny} --set duration_s=1.0e+12",
        "{tiny}",
        ("about 2e+12 arrivals", ARRIVALS),
    ),
    (
        "run_rate_1e300",
        "run {tiny} --set workload.arrivals.rate_per_s=1.0e+300",
        "{tiny}",
        ("workload.arrivals: about 1e+301 arrivals in duration_s 10", ARRIVALS),
    ),
    (
        "validate_rate_1e300",
        "validate {tiny} --set workload.arrivals.rate_per_s=1.0e+300",
        "{tiny}",
        ("about 1e+301 arrivals", ARRIVALS),
    ),
    (
        "run_gamma_rate",
        "run {tiny} --set workload.arrivals={{process: gamma, rate_per_s: 1.0e+9, cv: 2.0}}",
        "{tiny}",
        ("about 1e+10 arrivals", ARRIVALS),
    ),
    (
        "run_piecewise_rate",
        "run {tiny} --set workload.arrivals={{process: piecewise, "
        "pieces: [{{duration_s: 1.0, rate_per_s: 1.0e+9}}, {{duration_s: 1.0, rate_per_s: 0}}]}}",
        "{tiny}",
        ("about 5e+09 arrivals", ARRIVALS),
    ),
    (
        "run_num_arrivals_over_limit",
        "run {tiny} --set duration_s=null --set workload.num_arrivals=1000000000",
        "{tiny}",
        ("about 1e+09 arrivals from workload.num_arrivals", ARRIVALS),
    ),
    (
        "run_sparse_arrivals_for_1e9_s",
        "run {tiny} --set duration_s=1.0e+9 --set workload.arrivals.rate_per_s=1.0e-6",
        "{tiny}",
        ("duration_s: 1e+09 simulated seconds at outputs.scrape_interval_s 1 is 1e+09", SCRAPES),
    ),
    (
        "run_num_arrivals_at_a_slow_rate",
        "run {tiny} --set duration_s=null --set workload.num_arrivals=100 "
        "--set workload.arrivals.rate_per_s=1.0e-6",
        "{tiny}",
        ("duration_s: 1e+08 simulated seconds", SCRAPES),
    ),
    (
        "run_system_prompt_10m",
        "run {tiny} --set workload.source.common={{system_prompt_tokens: 10000000}}",
        "{tiny}",
        (f"{HOLDS} 10,000,004 tokens (shared parts and the shortest sampled ones)", SHARED),
    ),
    (
        "validate_system_prompt_10m",
        "validate {tiny} --set workload.source.common={{system_prompt_tokens: 10000000}}",
        "{tiny}",
        ("not fewer than engine.max_model_len, so", SHARED),
    ),
    (
        "run_tools_and_few_shot",
        "run {tiny} --set workload.source.common={{tools_tokens: 4000, few_shot_tokens: 4000}}",
        "{tiny}",
        (f"{HOLDS} 8,516 tokens", SHARED),
    ),
    (
        "run_mix_component",
        "run {mix}",
        "{mix}",
        ("workload.source.components.1.source: every prompt holds at least 9,260 tokens",),
    ),
    (
        "eviction_system_prompt_10m",
        "eviction {tiny} --set workload.source.common={{system_prompt_tokens: 10000000}}",
        "{tiny}",
        (f"{HOLDS} 10,000,004 tokens",),
    ),
    (
        "run_user_message_10m",
        "run {tiny} --set workload.source.user_message_tokens=10000000",
        "{tiny}",
        (f"{HOLDS} 10,000,512 tokens", SHARED),
    ),
    (
        "run_rag_documents",
        "run {tiny} --set workload.source={{kind: rag, top_k: 8, document_tokens: "
        "{{dist: uniform, low: 1000.0, high: 2000.0}}}}",
        "{tiny}",
        (f"{HOLDS} 8,260 tokens", SHARED),
    ),
    (
        "run_agent_task",
        "run {tiny} --set workload.source={{kind: agent, task_tokens: 9000}}",
        "{tiny}",
        ("every prompt holds at least", SHARED),
    ),
    (
        "plan_rate_1e300",
        "plan {tiny} --slo ttft_p99=2s --set workload.arrivals.rate_per_s=1.0e+300",
        "{tiny}",
        ("about 1e+301 arrivals", ARRIVALS),
    ),
    (
        "run_max_model_len_over_2_24",
        "run {tiny} --set engine.max_model_len=20000000",
        "{tiny}",
        ("engine.max_model_len: 20,000,000 is more than the limit of 16,777,216 tokens",),
    ),
    (
        "run_1024_replicas_of_30m_blocks",
        "run {tiny} --set engine.num_gpu_blocks=30000000 --set deployment.replicas=1024",
        "{tiny}",
        (
            "deployment.replicas: 1024 replicas x 30,000,000 KV blocks is 30,720,000,000 blocks",
            "lower deployment.replicas or engine.num_gpu_blocks",
        ),
    ),
    (
        "run_trace_speedup_1e-300",
        "run {slow_scenario}",
        "{slow_scenario}",
        ("trace request 2 arrives at 2.5e+299 simulated seconds (speedup 1e-300)", "max_requests"),
    ),
    (
        "run_trace_spanning_1e12_ms",
        "run {far_scenario}",
        "{far_scenario}",
        ("trace request 2 arrives at 1e+09 simulated seconds", "past the limit of 1e+07 s"),
    ),
    (
        "replay_trace_spanning_1e12_ms",
        "replay {far_trace} --format mooncake --no-progress --out {results}/far",
        "{far_trace}",
        ("trace request 2 arrives at 1e+09 simulated seconds", "outputs.scrape_interval_s"),
    ),
    (
        "replay_kv_tokens_5",
        "replay {good_trace} --format mooncake --cache-only --kv-tokens 5",
        None,
        ("--kv-tokens 5 (1 blocks): num_gpu_blocks must be in 2..30,000,000",),
    ),
    (
        "replay_blocks_1e15_cache_only",
        "replay {good_trace} --format mooncake --cache-only --num-gpu-blocks 1000000000000000",
        None,
        ("--num-gpu-blocks 1000000000000000: num_gpu_blocks must be in 2..30,000,000", "GiB"),
    ),
    (
        "replay_blocks_1e15_engine",
        "replay {good_trace} --format mooncake --num-gpu-blocks 1000000000000000",
        None,
        ("--num-gpu-blocks 1000000000000000: num_gpu_blocks must be in 2..30,000,000",),
    ),
    (
        "replay_kv_tokens_1e18",
        "replay {good_trace} --format mooncake --kv-tokens 1000000000000000000",
        None,
        ("--kv-tokens 1000000000000000000 (62500000000000001 blocks)",),
    ),
    (
        "eviction_kv_tokens_5",
        "eviction {tiny} --kv-tokens 5",
        None,
        ("--kv-tokens 5 (1 blocks): num_gpu_blocks must be in 2..30,000,000",),
    ),
    (
        "eviction_kv_tokens_1e18",
        "eviction {tiny} --kv-tokens 1000000000000000000",
        None,
        ("num_gpu_blocks must be in 2..30,000,000",),
    ),
    ("cache_replay_dev_zero", "cache replay /dev/zero", "/dev/zero:1", ("longer than 64 MiB",)),
    ("engine_replay_dev_zero", "engine replay /dev/zero", "/dev/zero:1", ("longer than 64 MiB",)),
    (
        "cache_replay_endless_line",
        "cache replay {endless_line}",
        "{endless_line}:1",
        ("line longer than 64 MiB; is this the right file?",),
    ),
    (
        "replay_endless_line",
        "replay {endless_line} --format mooncake --cache-only --kv-tokens 1000",
        "{endless_line}:1",
        ("line longer than 64 MiB",),
    ),
    (
        "run_trace_with_endless_line",
        "run {endless_scenario}",
        "{endless_line}:1",
        ("line longer than 64 MiB",),
    ),
    (
        "calibrate_dev_zero",
        "calibrate /dev/zero --out {tmp}/p.yaml",
        "/dev/zero",
        ("is not a regular file; expected a measurement CSV file",),
    ),
    (
        "run_17_mib_yaml",
        "run {huge_yaml}",
        "{huge_yaml}",
        ("17,825,792 bytes is more than the 16 MiB a scenario file may have",),
    ),
    (
        "validate_sweep_of_1e9_runs",
        "validate {grid}",
        "{grid}:8",
        ("sweep: 10 x 10 x 10 x 10 x 10 x 10 x 10 x 10 x 10 (seeds last) is 1,000,000,000 runs",),
    ),
    (
        "dry_run_sweep_of_1e9_runs",
        "sweep {grid} --dry-run",
        "{grid}:8",
        ("is 1,000,000,000 runs, more than the limit of 10,000", "pass --max-runs"),
    ),
    (
        "sweep_of_1e9_runs",
        "sweep {grid} --no-progress",
        "{grid}:8",
        ("is 1,000,000,000 runs, more than the limit of 10,000",),
    ),
    (
        "sweep_over_max_runs_3",
        "sweep {four} --max-runs 3 --no-progress",
        "{four}:8",
        ("sweep: 2 x 2 (seeds last) is 4 runs, more than the limit of 3",),
    ),
    (
        "validate_over_max_runs_3",
        "validate {four} --max-runs 3",
        "{four}:8",
        ("is 4 runs, more than the limit of 3",),
    ),
    (
        "sweep_with_one_run_too_long",
        "sweep {one_too_long} --no-progress",
        None,
        ("[duration_s=1000000000000.0, seed 0]: workload.arrivals: about 2e+12", ARRIVALS),
    ),
    (
        "validate_sweep_with_one_run_too_long",
        "validate {one_too_long}",
        None,
        ("about 2e+12 arrivals",),
    ),
)


def _argv(arguments: str, inputs: dict[str, Path]) -> list[str]:
    """Split like a shell would for these cases: `{...}` flow mappings stay one argument."""
    text = arguments.format(**{key: str(value) for key, value in inputs.items()})
    argv: list[str] = []
    depth = 0
    for word in text.split(" "):
        if depth:
            argv[-1] += " " + word
        else:
            argv.append(word)
        depth += word.count("{") + word.count("[") - word.count("}") - word.count("]")
    if argv[0] in ("run", "sweep"):
        argv += ["--results", str(inputs["results"])]
    if argv[0] in ("run",):
        argv.append("--no-progress")
    return argv


@pytest.mark.parametrize(
    ("arguments", "source", "fragments"),
    [case[1:] for case in REFUSED],
    ids=[case[0] for case in REFUSED],
)
def test_size_beyond_the_limits_is_refused(
    arguments, source, fragments, inputs, capsys, monkeypatch
):
    """One `error:` line with the estimate and the way round, exit 2, within 20 s, and the
    results directory (and the working directory) left empty."""
    work = inputs["tmp"] / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    shown = None if source is None else source.format(**inputs)
    outcome = prefixsim(capsys, *_argv(arguments, inputs))
    assert_input_error(outcome, shown, None, fragments)
    assert written_entries(inputs["results"]) == []
    assert written_entries(work) == []


# Sizes within the limits (or raised on purpose) pass: (id, arguments, what stdout says).
ACCEPTED = (
    ("validate_four_runs", "validate {four}", "ok: sweep tiny-limits with 4 runs"),
    ("validate_raised_max_runs", "validate {four} --max-runs 4", "with 4 runs"),
    (
        "validate_slow_arrivals_with_coarse_scrapes",
        "validate {tiny} --set duration_s=1.0e+9 --set workload.arrivals.rate_per_s=1.0e-6 "
        "--set outputs.scrape_interval_s=1000.0",
        "ok: tiny-limits",
    ),
    (
        "validate_system_prompt_just_fits",
        "validate {tiny} --set workload.source.common={{system_prompt_tokens: 7000}}",
        "ok: tiny-limits",
    ),
    (
        "replay_far_trace_cache_only",
        "replay {far_trace} --format mooncake --cache-only --kv-tokens 1000",
        '{"hit_rate": 0.48, "hits": 96, "mode": "cache-only", "num_evictions": 0, '
        '"num_gpu_blocks": 63, "num_requests": 2, "num_skipped": 0, "queries": 200}',
    ),
)


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [case[1:] for case in ACCEPTED],
    ids=[case[0] for case in ACCEPTED],
)
def test_size_within_the_limits_passes(arguments, expected, inputs, capsys):
    """Exit 0 and the expected answer on stdout."""
    outcome = prefixsim(capsys, *_argv(arguments, inputs))
    assert (outcome.status, outcome.err) == (0, ""), outcome.err
    assert expected in outcome.out
