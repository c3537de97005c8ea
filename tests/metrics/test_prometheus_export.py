"""`prefixsim export-metrics`: the page parses with prometheus_client, and every family it shares
with real vLLM 0.33.0's /metrics (tests/fixtures/metrics/vllm_0_33_metrics.txt) has the same
type, label names and bucket edges.

Scenario: two replicas (round robin) of llama-3.1-8b with max_model_len 1024 (the fixture's, so
the token-count histograms have the same edges), 19 single-turn requests at 2/s (8 output tokens
each) in 10 s.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from sim.cli import main

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "metrics" / "vllm_0_33_metrics.txt"
SCENARIO = """\
name: export
seed: 3
duration_s: 10
engine: {max_model_len: 1024, max_num_batched_tokens: 1024, num_gpu_blocks: 400}
deployment: {model: llama-3.1-8b, replicas: 2, router: {policy: round_robin}}
cost_model: "constant:0.01"
workload:
  source:
    kind: chat
    common: {system_prompt_tokens: 64}
    turns_per_session: 1
    user_message_tokens: 32
    answer_tokens: 8
  arrivals: {process: gamma, rate_per_s: 2.0, cv: 0.01}
outputs: {events: false, scrape_interval_s: 2.0}
"""
# The families vLLM 0.33 serves that the simulator models (all of its engine-level ones but
# speculative decoding, KV connectors, multi-modal caches, sleep state, LoRA and the
# per-request sampling parameters, which a simulated request does not have).
SHARED_FAMILIES = {
    "vllm:prefix_cache_queries",
    "vllm:prefix_cache_hits",
    "vllm:num_preemptions",
    "vllm:prompt_tokens",
    "vllm:prompt_tokens_cached",
    "vllm:generation_tokens",
    "vllm:request_success",
    "vllm:num_requests_running",
    "vllm:num_requests_waiting",
    "vllm:kv_cache_usage_perc",
    "vllm:time_to_first_token_seconds",
    "vllm:inter_token_latency_seconds",
    "vllm:request_time_per_output_token_seconds",
    "vllm:e2e_request_latency_seconds",
    "vllm:request_queue_time_seconds",
    "vllm:request_inference_time_seconds",
    "vllm:request_prefill_time_seconds",
    "vllm:request_decode_time_seconds",
    "vllm:request_prompt_tokens",
    "vllm:request_generation_tokens",
    "vllm:request_prefill_kv_computed_tokens",
    "vllm:request_num_preemptions",
    "vllm:iteration_tokens_total",
}


def cli(args: list[str]) -> None:
    """Run a prefixsim command that must succeed."""
    with pytest.raises(SystemExit) as raised:
        main(args)
    assert raised.value.code == 0


def shape(text: str) -> dict[str, tuple[str, frozenset[str], tuple[float, ...]]]:
    """Per family: its type, the label names of its samples and its bucket edges."""
    families = {}
    for family in text_string_to_metric_families(text):
        label_names = frozenset(name for s in family.samples for name in s.labels if name != "le")
        edges = sorted(
            {float(s.labels["le"]) for s in family.samples if s.name.endswith("_bucket")}
        )
        families[family.name] = (family.type, label_names, tuple(edges))
    return families


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, Path]:
    tmp_path = tmp_path_factory.mktemp("export")
    scenario = tmp_path / "export.yaml"
    scenario.write_text(SCENARIO)
    run_dir = tmp_path / "run"
    cli(["run", str(scenario), "--out", str(run_dir), "--no-progress"])
    page = tmp_path / "metrics.txt"
    cli(["export-metrics", str(run_dir), "--format", "prometheus", "--out", str(page)])
    return page.read_text(), run_dir


def test_export_has_vllms_families_types_labels_and_bucket_edges(exported) -> None:
    ours, vllm = shape(exported[0]), shape(FIXTURE.read_text())
    assert set(vllm) >= SHARED_FAMILIES
    assert {name for name in ours if name.startswith("vllm:")} == SHARED_FAMILIES
    for name in sorted(SHARED_FAMILIES):
        assert ours[name] == vllm[name], name
    assert ours["prefixsim:kv_cache_cached_free_perc"] == (
        "gauge",
        frozenset({"engine", "model_name"}),
        (),
    )


def test_export_holds_each_replicas_series_and_the_run_totals(exported) -> None:
    # 19 requests over two round-robin replicas: 10 and 9, all finished by "length".
    samples = {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(exported[0])
        for sample in family.samples
    }
    for engine, num_requests in (("0", 10), ("1", 9)):
        labels = {"engine": engine, "model_name": "llama-3.1-8b"}
        key = tuple(sorted((labels | {"finished_reason": "length"}).items()))
        assert samples[("vllm:request_success_total", key)] == num_requests
        key = tuple(sorted((labels | {"finished_reason": "stop"}).items()))
        assert samples[("vllm:request_success_total", key)] == 0.0
        key = tuple(sorted(labels.items()))
        assert samples[("vllm:generation_tokens_total", key)] == 8 * num_requests
        assert samples[("vllm:request_prompt_tokens_count", key)] == num_requests


def test_export_at_a_time_before_the_first_scrape_is_refused(exported, capsys) -> None:
    with pytest.raises(SystemExit) as raised:
        main(["export-metrics", str(exported[1]), "--at", "1"])
    assert raised.value.code == 2
    assert capsys.readouterr().err == (
        f"error: {exported[1] / 'metrics.parquet'}: no scrape at or before 1 s; "
        "the first is at 2 s\n"
    )


@pytest.mark.parametrize(
    ("make_path", "problem"),
    [
        (lambda tmp_path: tmp_path / "no-such-run", "does not exist; give a run directory"),
        (lambda tmp_path: tmp_path, "is not a run directory: no metrics.parquet"),
    ],
)
def test_export_of_what_is_not_a_run_says_which(make_path, problem, tmp_path, capsys) -> None:
    """A mistyped path is named as missing, not as a folder lacking metrics.parquet."""
    path = make_path(tmp_path)
    with pytest.raises(SystemExit) as raised:
        main(["export-metrics", str(path)])
    assert raised.value.code == 2
    assert capsys.readouterr().err == f"error: {path}: {problem}\n"
