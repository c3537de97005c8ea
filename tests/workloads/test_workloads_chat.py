"""Multi-turn chat: closed-loop sessions whose history carries earlier questions and answers."""

from __future__ import annotations

import dataclasses
from collections import Counter

from wl_helpers import num_shared_blocks

from workloads.api import (
    ChatConfig,
    CommonSlots,
    Fixed,
    LoraSpec,
    PoissonArrivals,
    TenantSpec,
    TokenConfig,
    Uniform,
    Workload,
    builtin_layout,
)

FOUR_TURNS = ChatConfig(
    turns_per_session=Fixed(4),
    user_message_tokens=Fixed(40),
    answer_tokens=Fixed(30),
    common=CommonSlots(system_prompt_tokens=100),
)


def _sessions(specs):
    sessions: dict[str, list] = {}
    for spec in specs:
        sessions.setdefault(spec.session_id, []).append(spec)
    return sessions


def test_turns_are_closed_loop_and_yielded_together_after_the_first() -> None:
    specs = list(Workload(FOUR_TURNS, PoissonArrivals(0.5), num_arrivals=5, seed=1))
    assert len(specs) == 20
    assert [spec.turn_index for spec in specs] == [0, 1, 2, 3] * 5
    assert [spec.request_id for spec in specs[:4]] == [
        "chat-0-0",
        "chat-0-1",
        "chat-0-2",
        "chat-0-3",
    ]
    first_turns = [spec for spec in specs if spec.turn_index == 0]
    assert all(spec.arrival_at is not None and spec.think_time_s == 0.0 for spec in first_turns)
    assert [spec.arrival_at for spec in first_turns] == sorted(
        spec.arrival_at for spec in first_turns
    )
    later = [spec for spec in specs if spec.turn_index > 0]
    assert all(spec.arrival_at is None and spec.think_time_s > 0 for spec in later)
    assert all(spec.session_id == spec.request_id.rsplit("-", 1)[0] for spec in specs)


def test_each_turn_extends_the_previous_prompt_and_its_answer() -> None:
    specs = list(Workload(FOUR_TURNS, PoissonArrivals(0.5), num_arrivals=3, seed=2))
    for turns in _sessions(specs).values():
        for previous, turn in zip(turns, turns[1:], strict=False):
            carried = previous.prompt_tokens() + previous.output_tokens
            assert turn.prompt_tokens()[: len(carried)] == carried
            assert turn.num_prompt_tokens == len(carried) + 40
        # system 100, then per turn question 40 (+ answer 30 carried): 140, 210, 280, 350.
        assert [turn.num_prompt_tokens for turn in turns] == [140, 210, 280, 350]


def test_history_carries_answers_in_text_mode_too() -> None:
    workload = Workload(
        FOUR_TURNS, PoissonArrivals(0.5), num_arrivals=3, seed=2, tokens=TokenConfig(mode="text")
    )
    for turns in _sessions(list(workload)).values():
        for previous, turn in zip(turns, turns[1:], strict=False):
            carried = previous.prompt_tokens() + previous.output_tokens
            assert turn.prompt_tokens()[: len(carried)] == carried
            assert len(previous.output_tokens) == 30


def test_a_per_request_timestamp_first_breaks_reuse_between_turns() -> None:
    common = CommonSlots(system_prompt_tokens=100, timestamp_tokens=12)
    default = dataclasses.replace(FOUR_TURNS, common=common)
    fields_first = dataclasses.replace(default, layout=builtin_layout("chat_user_fields_first"))
    for config, expected_blocks in ((default, [12, 21, 30]), (fields_first, [0, 0, 0])):
        specs = list(Workload(config, PoissonArrivals(0.5), num_arrivals=1, seed=4))
        shared = [
            num_shared_blocks(a.prompt_tokens() + a.output_tokens, b.prompt_tokens(), 8)
            for a, b in zip(specs, specs[1:], strict=False)
        ]
        # Default: turn k+1 repeats system 100 + history 70k, then question k where turn k had
        # its timestamp: (100 + 70k) // 8 blocks of 8. Timestamp first: nothing is shared.
        assert shared == expected_blocks


def test_max_context_tokens_ends_sessions_before_an_oversized_turn() -> None:
    config = dataclasses.replace(FOUR_TURNS, turns_per_session=Fixed(50), max_context_tokens=940)
    specs = list(Workload(config, PoissonArrivals(0.5), num_arrivals=2, seed=1))
    # Turn k needs 100 + 70k + 40 + 30 tokens <= 940, so k <= 11: 12 turns per session.
    assert Counter(spec.session_id for spec in specs) == {"chat-0": 12, "chat-1": 12}
    assert max(spec.num_prompt_tokens + spec.num_output_tokens for spec in specs) == 940


def test_tenants_tag_whole_sessions_without_changing_contents() -> None:
    tenants = (
        TenantSpec(
            "acme", weight=3.0, cache_salt="salt-acme", lora=LoraSpec("sql", 1, "/lora/sql")
        ),
        TenantSpec("zeta", weight=1.0, priority=2),
    )
    plain = list(Workload(FOUR_TURNS, PoissonArrivals(0.5), num_arrivals=200, seed=5))
    tagged_config = dataclasses.replace(FOUR_TURNS, tenants=tenants)
    tagged = list(Workload(tagged_config, PoissonArrivals(0.5), num_arrivals=200, seed=5))
    assert [spec.prompt_tokens() for spec in plain] == [spec.prompt_tokens() for spec in tagged]
    for turns in _sessions(tagged).values():
        assert (
            len({(spec.tenant, spec.cache_salt, spec.lora, spec.priority) for spec in turns}) == 1
        )
    acme = [spec for spec in tagged if spec.tenant == "acme"]
    assert all(spec.cache_salt == "salt-acme" and spec.lora.name == "sql" for spec in acme)
    assert all(
        spec.priority == 2 and spec.cache_salt is None for spec in tagged if spec.tenant == "zeta"
    )
    assert 0.65 < len(acme) / len(tagged) < 0.85


def test_prompt_logprobs_fraction_sets_the_flag() -> None:
    for fraction, expected in ((0.0, {False}), (1.0, {True})):
        config = dataclasses.replace(FOUR_TURNS, prompt_logprobs_fraction=fraction)
        specs = Workload(config, PoissonArrivals(0.5), num_arrivals=3, seed=1)
        assert {spec.prompt_logprobs for spec in specs} == expected


def test_prompt_variants_split_sessions_between_system_prompts() -> None:
    config = dataclasses.replace(
        FOUR_TURNS,
        turns_per_session=Uniform(1, 3),
        common=CommonSlots(system_prompt_tokens=64, num_prompt_variants=3),
    )
    specs = list(Workload(config, PoissonArrivals(0.5), num_arrivals=60, seed=6))
    systems = Counter(spec.segments[0].content_id for spec in specs if spec.turn_index == 0)
    assert set(systems) == {"chat/system/0", "chat/system/1", "chat/system/2"}
    assert min(systems.values()) >= 10
