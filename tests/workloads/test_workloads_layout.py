"""Layouts: validation, ordering, and paired workloads under two layouts."""

from __future__ import annotations

import dataclasses
from collections import Counter

import pytest

from workloads.api import (
    AgentConfig,
    ChatConfig,
    CommonSlots,
    PoissonArrivals,
    PromptLayout,
    RagConfig,
    Workload,
    WorkloadError,
    builtin_layout,
)
from workloads.prompt import Piece


def test_unknown_and_duplicate_segments_are_rejected_with_the_allowed_names() -> None:
    with pytest.raises(
        WorkloadError, match=r"segment 'sysprompt' is not known; allowed: system_prompt, tools"
    ):
        PromptLayout("bad", ("sysprompt", "question"))
    with pytest.raises(WorkloadError, match=r"segments \['question'\] appear more than once"):
        PromptLayout("bad", ("question", "history", "question"))


def test_a_layout_must_place_every_segment_the_workload_produces() -> None:
    with pytest.raises(WorkloadError, match=r"layout 'short' lacks segments \['history'\]"):
        ChatConfig(layout=PromptLayout("short", ("system_prompt", "question")))
    with pytest.raises(WorkloadError, match=r"layout 'agent' lacks segments \['few_shot'\]"):
        AgentConfig(common=CommonSlots(few_shot_tokens=8))


def test_unknown_builtin_layout_lists_the_builtins() -> None:
    with pytest.raises(WorkloadError, match=r"'nope' is not a built-in layout; allowed: chat, "):
        builtin_layout("nope")


def test_arrange_follows_the_layout_and_skips_absent_slots() -> None:
    layout = PromptLayout("x", ("user_fields", "system_prompt", "documents", "question"))
    pieces = {
        "question": [Piece("question", "q", "user", 1)],
        "system_prompt": [Piece("system_prompt", "s", "system", 1)],
        "user_fields": [
            Piece("user_fields", "u1", "system", 1),
            Piece("user_fields", "u2", "system", 1),
        ],
    }
    assert [piece.content_id for piece in layout.arrange(pieces)] == ["u1", "u2", "s", "q"]


CHAT_COMMON = CommonSlots(
    system_prompt_tokens=300,
    tools_tokens=100,
    few_shot_tokens=50,
    user_id_tokens=6,
    timestamp_tokens=9,
)
PAIRS = [
    (
        ChatConfig(common=CHAT_COMMON),
        PromptLayout(
            "reordered",
            ("question", "user_fields", "history", "few_shot", "tools", "system_prompt"),
        ),
    ),
    (
        AgentConfig(
            common=CommonSlots(system_prompt_tokens=200, tools_tokens=400, timestamp_tokens=9)
        ),
        PromptLayout(
            "history_first", ("history", "question", "user_fields", "tools", "system_prompt")
        ),
    ),
    (
        RagConfig(corpus_size=50, common=CommonSlots(system_prompt_tokens=100, user_id_tokens=5)),
        builtin_layout("rag_question_first"),
    ),
]


@pytest.mark.parametrize(("config", "other_layout"), PAIRS, ids=["chat", "agent", "rag"])
def test_paired_layouts_have_identical_token_multisets_and_arrivals(
    config: ChatConfig | AgentConfig | RagConfig, other_layout: PromptLayout
) -> None:
    arrivals = PoissonArrivals(2.0)
    first = list(Workload(config, arrivals, num_arrivals=15, seed=11))
    second = list(
        Workload(
            dataclasses.replace(config, layout=other_layout),
            arrivals,
            num_arrivals=15,
            seed=11,
        )
    )
    assert len(first) == len(second) >= 15
    for a, b in zip(first, second, strict=True):
        assert (a.request_id, a.arrival_at, a.session_id, a.turn_index, a.think_time_s) == (
            b.request_id,
            b.arrival_at,
            b.session_id,
            b.turn_index,
            b.think_time_s,
        )
        assert a.output_tokens == b.output_tokens
        assert Counter(a.prompt_tokens()) == Counter(b.prompt_tokens())
        assert sorted(s.content_id for s in a.segments) == sorted(s.content_id for s in b.segments)
        assert a.prompt_tokens() != b.prompt_tokens()
