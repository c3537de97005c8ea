"""Layout advisor (sim/studies/layout*.py, `prefixsim layout`).

Scenario of the ranking tests: three segments through ChatML on the default H100 / Llama-3.1-8B
deployment with 16-token blocks: `timestamp` (per_request, "Request {request} received at
{time}."), `system_prompt` (static, one sentence + 300 filler tokens; its message is 306
tokens, so 304 = 19 whole blocks are cacheable when it comes first) and `question`
(per_request, user, 20 filler tokens). 30 requests, 1 tenant, 1 user, 2 requests/s, 8 output
tokens. Requests never overlap, so every request after the first reuses exactly the cacheable
prefix when the per-request segments follow the system prompt, and nothing when the request id
comes first (it lies inside block 0).
"""

from __future__ import annotations

import functools
import itertools
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from sim.cli import main
from sim.errors import InputError
from sim.studies.layout import (
    LayoutReport,
    PromptRenderer,
    TrafficRequest,
    advise_layout,
    cacheable_prefix,
    draw_traffic,
)
from sim.studies.layout_config import LayoutStudySettings, PromptSegmentSettings
from sim.studies.layout_report import layout_json, layout_markdown, verdict_lines
from sim.studies.study_runs import load_study

SYSTEM_TEXT = "You are a helpful assistant."
NUM_REQUESTS = 30


def study_document(**changes: object) -> dict:
    document = {
        "name": "tiny-layout",
        "segments": [
            {
                "name": "timestamp",
                "scope": "per_request",
                "text": "Request {request} received at {time}.",
            },
            {"name": "system_prompt", "scope": "static", "text": SYSTEM_TEXT, "filler_tokens": 300},
            {"name": "question", "scope": "per_request", "role": "user", "filler_tokens": 20},
        ],
        "traffic": {
            "num_requests": NUM_REQUESTS,
            "request_rate_per_s": 2.0,
            "output_tokens": 8,
            "seed": 3,
        },
    }
    document.update(changes)
    return document


@functools.cache
def tiny_report() -> LayoutReport:
    return advise_layout(LayoutStudySettings.model_validate(study_document()), Path("."))


def row_of(report: LayoutReport, order: tuple[str, ...]):
    return report.rows[report.rank_of(order) - 1]


def test_segment_tokens_are_real_cl100k_inside_chatml_markers() -> None:
    renderer = PromptRenderer("chatml")
    segment = PromptSegmentSettings(name="greeting", scope="static", text="Hello, world!")
    rendered = renderer.segment(segment, TrafficRequest("r", 0.0, "t", "u"))
    # <|im_start|>=151644 system=9125 \n=198 | "Hello, world!" = 9906 11 1917 0 | <|im_end|> \n
    assert rendered.tokens == [151644, 9125, 198, 9906, 11, 1917, 0, 151645, 198]
    assert renderer.generation_prompt.tokens == [151644, 78191, 198]
    assert renderer.opening == []


def test_llama3_prompts_open_with_begin_of_text() -> None:
    renderer = PromptRenderer("llama3")
    assert [segment.tokens for segment in renderer.opening] == [[128000]]
    segment = PromptSegmentSettings(name="greeting", scope="static", text="hello world")
    tokens = renderer.segment(segment, TrafficRequest("r", 0.0, "t", "u")).tokens
    # <|start_header_id|> system <|end_header_id|> \n\n hello world <|eot_id|>
    assert tokens == [128006, 9125, 128007, 271, 15339, 1917, 128009]


def test_placeholders_fill_in_per_scope_and_content_is_shared_per_key() -> None:
    renderer = PromptRenderer("chatml")
    profile = PromptSegmentSettings(
        name="profile", scope="per_user", text="User {user} of {tenant}"
    )
    alice = TrafficRequest("r1", 0.0, "acme", "alice")
    alice_again = TrafficRequest("r2", 5.0, "acme", "alice")
    bob = TrafficRequest("r3", 5.0, "acme", "bob")
    first = renderer.segment(profile, alice)
    assert renderer.segment(profile, alice_again) is first
    assert first.content_id == "profile:alice"
    assert renderer.segment(profile, bob).tokens != first.tokens
    assert renderer.tokenizer.encoding.decode(first.tokens) == (
        "<|im_start|>system\nUser alice of acme<|im_end|>\n"
    )


def test_time_placeholder_is_the_arrival_time_of_the_request() -> None:
    renderer = PromptRenderer("chatml")
    stamp = PromptSegmentSettings(name="stamp", scope="per_request", text="{time} {request}")
    request = TrafficRequest("req-7", 3725.5, "t", "u")
    assert renderer.segment_text(stamp, request, "stamp:req-7") == "2025-01-01 10:02:05 req-7"


def test_filler_follows_the_text_and_has_about_the_asked_length() -> None:
    renderer = PromptRenderer("chatml")
    segment = PromptSegmentSettings(name="tools", scope="static", text="Tools:", filler_tokens=200)
    text = renderer.segment_text(segment, TrafficRequest("r", 0.0, "t", "u"), "tools:static")
    assert text.startswith("Tools:\n")
    # Filler words are one token each; re-tokenising the decoded text gives the same 200.
    assert len(renderer.encode(text.removeprefix("Tools:\n"))) == 200


def test_traffic_is_seeded_and_users_belong_to_their_tenant() -> None:
    settings = LayoutStudySettings.model_validate(
        study_document(
            traffic={
                "num_tenants": 3,
                "users_per_tenant": 12,
                "num_requests": 200,
                "request_rate_per_s": 5.0,
            }
        )
    )
    traffic = draw_traffic(settings.traffic)
    assert traffic == draw_traffic(settings.traffic)
    assert [request.request_id for request in traffic[:2]] == ["req-000", "req-001"]
    assert {request.tenant for request in traffic} == {"tenant-0", "tenant-1", "tenant-2"}
    assert all(request.user.startswith(f"{request.tenant}-user-") for request in traffic)
    arrivals = [request.arrival_at for request in traffic]
    assert arrivals == sorted(arrivals)


def test_static_first_ranks_above_a_per_request_timestamp_first() -> None:
    report = tiny_report()
    assert len(report.rows) == 6
    static_first = ("system_prompt", "timestamp", "question")
    timestamp_first = ("timestamp", "system_prompt", "question")
    assert report.rank_of(static_first) < report.rank_of(timestamp_first)
    assert report.best.order[0] == "system_prompt"
    assert row_of(report, static_first).ttft_p50_s < row_of(report, timestamp_first).ttft_p50_s


def test_hit_rate_is_the_cacheable_prefix_reused_by_every_later_request() -> None:
    report = tiny_report()
    static_first = row_of(report, ("system_prompt", "timestamp", "question"))
    assert static_first.cacheable_prefix_tokens == 304
    num_prompt_tokens = static_first.mean_prompt_tokens * NUM_REQUESTS
    expected = (NUM_REQUESTS - 1) * 304 / num_prompt_tokens
    assert static_first.hit_rate == pytest.approx(expected, rel=1e-12)
    assert row_of(report, ("timestamp", "system_prompt", "question")).hit_rate == 0.0


def test_the_segment_that_breaks_the_prefix_is_named() -> None:
    report = tiny_report()
    expected = {
        ("timestamp", "system_prompt", "question"): ("timestamp", "per_request", 0),
        ("question", "system_prompt", "timestamp"): ("question", "per_request", 0),
        ("system_prompt", "question", "timestamp"): ("question", "per_request", 304),
        ("system_prompt", "timestamp", "question"): ("timestamp", "per_request", 304),
    }
    for order, (segment, scope, prefix_tokens) in expected.items():
        row = row_of(report, order)
        assert (row.breaking_segment, row.breaking_scope, row.cacheable_prefix_tokens) == (
            segment,
            scope,
            prefix_tokens,
        )
    written = report.as_written
    assert written is not None and written.order == ("timestamp", "system_prompt", "question")
    assert verdict_lines(report)[1].startswith(
        "As written (rank 3 of 6): timestamp (per_request) breaks the shared prefix after 0 tokens"
    )


def test_an_all_static_prompt_has_no_breaker_and_caches_through_the_generation_prompt() -> None:
    renderer = PromptRenderer("chatml")
    first = PromptSegmentSettings(name="a", scope="static", text="hello world")  # 6 tokens
    second = PromptSegmentSettings(name="b", scope="static", text="Hello, world!")  # 9 tokens
    # 6 + 9 + 3 (generation prompt) = 18 tokens: one whole 16-token block.
    assert cacheable_prefix([first, second], renderer, 16) == (16, None)
    assert cacheable_prefix([first, second], renderer, 4) == (16, None)
    assert cacheable_prefix([first, second], renderer, 6) == (18, None)


_SCOPES = st.sampled_from(["static", "per_tenant", "per_user", "per_request"])


@settings(max_examples=40, deadline=None)
@given(scopes=st.lists(_SCOPES, min_size=1, max_size=6), block_size=st.integers(1, 64))
def test_cacheable_prefix_stops_at_the_first_non_static_segment(
    scopes: list[str], block_size: int
) -> None:
    renderer = PromptRenderer("chatml")
    order = [
        PromptSegmentSettings(name=f"s{index}", scope=scope, text=f"segment {index} text")
        for index, scope in enumerate(scopes)
    ]
    num_tokens, breaker = cacheable_prefix(order, renderer, block_size)
    first_dynamic = next((segment for segment in order if segment.scope != "static"), None)
    assert breaker == first_dynamic
    assert num_tokens % block_size == 0
    leading = list(itertools.takewhile(lambda segment: segment.scope == "static", order))
    probe = TrafficRequest("r", 0.0, "t", "u")
    static_tokens = sum(len(renderer.segment(segment, probe).tokens) for segment in leading)
    if breaker is None:
        static_tokens += len(renderer.generation_prompt.tokens)
    assert static_tokens - block_size < num_tokens <= static_tokens


def test_same_study_gives_identical_reports() -> None:
    settings = LayoutStudySettings.model_validate(
        study_document(orderings=[["system_prompt", "question", "timestamp"]])
    )
    first = advise_layout(settings, Path("."))
    second = advise_layout(settings, Path("."))
    assert layout_json(first) == layout_json(second)
    assert layout_markdown(first) == layout_markdown(second)


def write_study(directory: Path, document: dict) -> Path:
    path = directory / "prompt.yaml"
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    return path


@pytest.mark.parametrize(
    ("segment_change", "line", "fragment"),
    [
        (
            {"name": "policy", "scope": "per_tenant", "text": "Hi {user}"},
            5,
            "segments.0.text: 'Hi {user}' is not allowed: placeholder {user} is not allowed in a "
            "per_tenant segment (allowed: {tenant})",
        ),
        (
            {"name": "policy", "scope": "static"},
            3,
            "the segment has no content; give text, filler_tokens > 0, or both",
        ),
        ({"name": "policy", "scope": "per_team", "text": "x"}, 4, "'per_team' is not allowed"),
        ({"name": "policy", "scope": "static", "text": "x", "colour": "red"}, 6, "'colour'"),
    ],
)
def test_bad_segments_name_file_line_and_field(
    tmp_path: Path, segment_change: dict, line: int, fragment: str
) -> None:
    document = study_document()
    document["segments"][0] = segment_change
    path = write_study(tmp_path, document)
    with pytest.raises(InputError) as caught:
        load_study(path, LayoutStudySettings)
    message = str(caught.value)
    assert message.startswith(f"{path}:{line}: segments.0")
    assert fragment in message
    assert "more problem" not in message


def test_orderings_must_be_permutations_and_bounded(tmp_path: Path) -> None:
    path = write_study(tmp_path, study_document(orderings=[["timestamp", "question"]]))
    with pytest.raises(InputError, match=r"ordering 0 \['timestamp', 'question'\] must list every"):
        load_study(path, LayoutStudySettings)
    path = write_study(tmp_path, study_document(max_orderings=5))
    with pytest.raises(InputError) as caught:
        load_study(path, LayoutStudySettings)
    # Named at max_orderings (it said "None is not allowed", of the orderings not given).
    assert ": max_orderings: 3 segments have 6 orderings, more than max_orderings (5)" in str(
        caught.value
    )
    assert "None" not in str(caught.value)


def test_set_overrides_apply_before_validation(tmp_path: Path) -> None:
    path = write_study(tmp_path, study_document())
    settings, base_dir = load_study(path, LayoutStudySettings, ["traffic.num_requests=7"])
    assert settings.traffic.num_requests == 7
    assert base_dir == tmp_path.resolve()


def run_in_process(capsys: pytest.CaptureFixture[str], *args: str | Path) -> tuple[int, str]:
    with pytest.raises(SystemExit) as caught:
        main([str(arg) for arg in args])
    return caught.value.code, capsys.readouterr().out


def test_cli_writes_markdown_json_and_png(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    document = study_document(
        orderings=[
            ["timestamp", "system_prompt", "question"],
            ["system_prompt", "timestamp", "question"],
        ]
    )
    path = write_study(tmp_path, document)
    out = tmp_path / "out"
    status, stdout = run_in_process(capsys, "layout", path, "--out", out, "--no-progress")
    assert status == 0
    assert "As written (rank 2 of 2): timestamp (per_request) breaks" in stdout
    assert sorted(item.name for item in out.iterdir()) == ["layout.json", "layout.md", "layout.png"]
    assert (out / "layout.png").read_bytes().startswith(b"\x89PNG")
    assert "| 1 | system_prompt > timestamp > question |" in (out / "layout.md").read_text()


def test_cli_bad_input_is_one_line_and_exit_status_2(tmp_path: Path) -> None:
    path = write_study(
        tmp_path, study_document(traffic={"num_requests": 0, "request_rate_per_s": 1.0})
    )
    result = subprocess.run(
        [sys.executable, "-m", "sim", "layout", str(path), "--no-progress"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1
    assert result.stderr.startswith(f"error: {path}:")
    assert "traffic.num_requests: 0 is not allowed" in result.stderr
