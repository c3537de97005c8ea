"""Synthetic sessions rendered from one buffer give the specs of prompt-by-prompt rendering.

The reference is the token-mode road every mode takes (`TokenMode.render` over each prompt's
pieces, arranged by the layout, every piece's tokens from its own stream); a token mode that
is not `SyntheticTokens` itself takes it. Both see the same draws, so every spec must be equal:
ids, times, segments (names, identities, tokens), output tokens, tags and the prompt array the
engine asks for.
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
from array import array
from collections.abc import Iterator, Sequence

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from workloads.api import (
    AgentConfig,
    ChatConfig,
    CommonSlots,
    Exponential,
    LogNormal,
    LoraSpec,
    MixComponent,
    MixConfig,
    Piece,
    PoissonArrivals,
    RagConfig,
    RequestSpec,
    Segment,
    SyntheticTokens,
    TenantSpec,
    Uniform,
    builtin_layout,
    generate,
)
from workloads.generators.builders import make_builder
from workloads.generators.kind import BatchBuilder
from workloads.generators.rendering import SessionPlan, render_session
from workloads.layout import CHAT_LAYOUT
from workloads.spec import SessionTurnSpec

# The engine bench's hour: 20 requests/s of chat in sessions of 1-8 turns (4.5 on average).
BENCH_SEED = 20_261_129
BENCH_SESSIONS_PER_S = 20.0 / 4.5


class PromptByPromptTokens:
    """Synthetic tokens through the general road: `render` per prompt, piece by piece."""

    def __init__(self) -> None:
        self._tokens = SyntheticTokens()

    def render(self, pieces: Sequence[Piece]) -> list[Segment]:
        return self._tokens.render(pieces)

    def output_tokens(self, content_id: str, num_tokens: int) -> list[int]:
        return self._tokens.output_tokens(content_id, num_tokens)


def _specs(source: object, rate_per_s: float, until_s: float, seed: int, tokens: object):
    return generate(
        source,  # type: ignore[arg-type]
        PoissonArrivals(rate_per_s),
        num_arrivals=None,
        until_s=until_s,
        rng=np.random.default_rng(seed),
        tokens=tokens,  # type: ignore[arg-type]
    )


def _pairs(
    source: object, rate_per_s: float, until_s: float, seed: int = 1
) -> Iterator[tuple[RequestSpec, RequestSpec]]:
    """(fast, reference) spec pairs, streamed in step (an hour of specs is not held)."""
    fast = _specs(source, rate_per_s, until_s, seed, SyntheticTokens())
    reference = _specs(source, rate_per_s, until_s, seed, PromptByPromptTokens())
    yield from zip(fast, reference, strict=True)


def _assert_same(fast: RequestSpec, reference: RequestSpec) -> None:
    assert fast == reference
    assert fast.prompt_token_array() == reference.prompt_token_array()
    assert fast.num_prompt_tokens == len(fast.prompt_token_array())
    outputs = array("q", reference.output_tokens)
    assert fast.output_token_array() == reference.output_token_array() == outputs


@pytest.mark.slow
def test_an_hour_of_bench_chat_equals_the_reference_and_is_sliced_from_one_buffer() -> None:
    """The engine bench's hour: 72,044 turns (16,000-odd sessions) with 93,816,119 prompt
    tokens."""
    digest = hashlib.sha256()
    num_specs = num_prompt_tokens = 0
    for fast, reference in _pairs(ChatConfig(), BENCH_SESSIONS_PER_S, 3600.0, BENCH_SEED):
        _assert_same(fast, reference)
        prompt = fast.prompt_token_array()
        digest.update(prompt.tobytes())
        digest.update(np.asarray(fast.output_tokens, dtype=np.int64).tobytes())
        num_specs += 1
        num_prompt_tokens += len(prompt)
    assert (num_specs, num_prompt_tokens) == (72_044, 93_816_119)
    # SHA-256 of every prompt and output (int64 bytes, in order) as the generator made them
    # before it rendered from session buffers (main at 32483eb).
    assert digest.hexdigest() == "8c19f099dd85f154ee4870ea8026704dfe3e73f80a16932529e7f6f4973919fc"


_TENANTS = (
    TenantSpec("a", 1.0, cache_salt="salt-a"),
    TenantSpec("b", 2.0, lora=LoraSpec("adapter", 1, "/adapters/b"), priority=3),
)
_FIELDS = CommonSlots(
    system_prompt_tokens=300,
    num_prompt_variants=3,
    tools_tokens=50,
    few_shot_tokens=20,
    user_id_tokens=8,
    timestamp_tokens=5,
)

# (source, sessions or requests per second, seconds): every layout, common slot, tag and limit.
CASES = {
    "chat": (ChatConfig(), 2.0, 100.0),
    "chat, every common slot, tenants, logprobs": (
        ChatConfig(common=_FIELDS, tenants=_TENANTS, prompt_logprobs_fraction=0.3),
        1.0,
        100.0,
    ),
    "chat, user fields first": (
        ChatConfig(
            common=CommonSlots(user_id_tokens=8),
            layout=builtin_layout("chat_user_fields_first"),
        ),
        1.0,
        100.0,
    ),
    "chat, user id only": (ChatConfig(common=CommonSlots(user_id_tokens=8)), 1.0, 100.0),
    "chat, context limit": (ChatConfig(max_context_tokens=1500), 1.0, 100.0),
    "chat, verbatim system prompt": (
        ChatConfig(common=CommonSlots(system_prompt_text="You are helpful.")),
        1.0,
        50.0,
    ),
    "agent": (AgentConfig(), 1.0, 60.0),
    "agent, every common slot of its layout": (
        AgentConfig(
            common=dataclasses.replace(_FIELDS, few_shot_tokens=0),
            max_context_tokens=6000,
            tenants=_TENANTS,
        ),
        1.0,
        60.0,
    ),
    "rag": (RagConfig(), 5.0, 40.0),
    "rag, question first, canonical order": (
        RagConfig(
            corpus_size=50,
            document_order="canonical",
            layout=builtin_layout("rag_question_first"),
            common=dataclasses.replace(_FIELDS, tools_tokens=0),
            tenants=_TENANTS,
        ),
        5.0,
        40.0,
    ),
    "mix": (
        MixConfig(
            (
                MixComponent(1.0, ChatConfig()),
                MixComponent(2.0, AgentConfig(max_context_tokens=8000)),
                MixComponent(1.0, RagConfig(corpus_size=300)),
            )
        ),
        2.0,
        60.0,
    ),
}


@pytest.mark.parametrize("case", list(CASES))
def test_every_kind_and_layout_equals_the_reference(case: str) -> None:
    source, rate_per_s, until_s = CASES[case]
    pairs = list(_pairs(source, rate_per_s, until_s))
    assert len(pairs) >= 40
    for fast, reference in pairs:
        _assert_same(fast, reference)


@pytest.mark.parametrize("case", list(CASES))
def test_arrivals_built_together_equal_arrivals_built_one_by_one(case: str) -> None:
    """70 arrivals half a second apart through one `build_many` (one token pass for all) and
    through `build` one by one, from builders of the same seeds: the same specs."""
    source = CASES[case][0]
    arrivals = [(index, 0.5 * index) for index in range(70)]

    def builder() -> BatchBuilder:
        content_rng, tags_rng = np.random.default_rng(5), np.random.default_rng(6)
        made = make_builder(source, content_rng, tags_rng, SyntheticTokens())  # type: ignore[arg-type]
        assert isinstance(made, BatchBuilder)
        return made

    together = builder().build_many(arrivals)
    one_by_one_builder = builder()
    one_by_one = [one_by_one_builder.build(index, at) for index, at in arrivals]
    assert [len(specs) for specs in together] == [len(specs) for specs in one_by_one]
    assert sum(map(len, together)) >= 70
    for built_together, built_alone in zip(together, one_by_one, strict=True):
        for fast, reference in zip(built_together, built_alone, strict=True):
            _assert_same(fast, reference)


def _chat_plan(num_turns: int) -> SessionPlan:
    """Question k (5 tokens) at content 2k, its answer (3 tokens) at 2k + 1."""
    return SessionPlan(
        [f"{kind}/{turn}" for turn in range(num_turns) for kind in ("user", "answer")],
        ["user", "assistant"] * num_turns,
        [5, 3] * num_turns,
        questions=[(2 * turn,) for turn in range(num_turns)],
        answers=[2 * turn + 1 for turn in range(num_turns)],
        carried_before=[(2 * turn,) for turn in range(num_turns)],
        carried_after=[()] * num_turns,
    )


def test_a_conversation_plan_is_the_plan_spelled_out() -> None:
    """SessionPlan.conversation holds the chat plan field by field (its per-turn fields shared
    tuples); only it is marked as one."""
    spelled_out = _chat_plan(3)
    conversation = SessionPlan.conversation(spelled_out.content_ids, spelled_out.lengths)
    assert conversation.is_conversation and not spelled_out.is_conversation
    fields = [list(value) for value in dataclasses.astuple(conversation)[:-1]]
    assert fields == list(dataclasses.astuple(spelled_out)[:-1])


def test_prompts_that_extend_the_previous_one_are_one_slice_and_the_others_are_joined() -> None:
    """Chat prompts lie back to back in the session buffer (system prompt, then the
    conversation): each is a view into it, 10 + 5, 10 + 5 + 3 + 5, ... tokens long, whether the
    plan is marked as a conversation (its spans taken at once) or spelled out (joined slot by
    slot). A per-request timestamp, laid out with the common slots before the conversation,
    sits between the system prompt and the conversation: those prompts are joined from their
    segments."""
    plain = CommonSlots(system_prompt_tokens=10).pieces("chat", 0, "user", "")
    spelled_out = _chat_plan(3)
    conversation = SessionPlan.conversation(spelled_out.content_ids, spelled_out.lengths)
    content = render_session(SyntheticTokens(), conversation, [plain] * 3, CHAT_LAYOUT)
    joined = render_session(SyntheticTokens(), spelled_out, [plain] * 3, CHAT_LAYOUT)
    assert [content.num_prompt_tokens(turn) for turn in range(3)] == [15, 23, 31]
    assert not any(content.prompt_array(turn).flags.owndata for turn in range(3))
    for turn in range(3):
        assert content.prompt_token_array(turn) == joined.prompt_token_array(turn)
        assert content.num_prompt_tokens(turn) == joined.num_prompt_tokens(turn)
    stamped = [
        CommonSlots(system_prompt_tokens=10, timestamp_tokens=2).pieces("chat", 0, "user", turn)
        for turn in ("r0", "r1", "r2")
    ]
    content = render_session(SyntheticTokens(), _chat_plan(3), stamped, CHAT_LAYOUT)
    assert [content.num_prompt_tokens(turn) for turn in range(3)] == [17, 25, 33]
    assert all(content.prompt_array(turn).flags.owndata for turn in range(3))
    for turn in range(3):
        joined = np.concatenate([segment.tokens for segment in content.segments(turn)])
        assert np.array_equal(content.prompt_array(turn), joined)


@settings(max_examples=30, deadline=None)
@given(
    seed=st.integers(0, 2**32),
    turns=st.integers(1, 6),
    question_sigma=st.floats(0.0, 2.0),
    system_tokens=st.integers(0, 64),
    user_id_tokens=st.integers(0, 4),
    timestamp_tokens=st.integers(0, 4),
    max_context=st.one_of(st.none(), st.integers(1, 3000)),
    layout=st.sampled_from(["chat", "chat_user_fields_first"]),
)
def test_random_chat_configs_equal_the_reference(
    seed: int,
    turns: int,
    question_sigma: float,
    system_tokens: int,
    user_id_tokens: int,
    timestamp_tokens: int,
    max_context: int | None,
    layout: str,
) -> None:
    """Short and absent slots, limits and layouts: the buffer never changes what a spec holds."""
    source = ChatConfig(
        turns_per_session=Uniform(1, turns),
        user_message_tokens=LogNormal(median=20, sigma=question_sigma, low=0, high=200),
        answer_tokens=LogNormal(median=30, sigma=1.0, low=1, high=300),
        think_time_s=Exponential(mean=1.0),
        common=CommonSlots(
            system_prompt_tokens=system_tokens,
            user_id_tokens=user_id_tokens,
            timestamp_tokens=timestamp_tokens,
        ),
        layout=builtin_layout(layout),
        max_context_tokens=max_context,
    )
    for fast, reference in _pairs(source, 1.0, 10.0, seed):
        _assert_same(fast, reference)


class CountingContent:
    """One turn: prompt [7, 8, 9] in two segments, output [1, 2]; counts what is made."""

    def __init__(self) -> None:
        self.made: list[str] = []

    def segments(self, turn: int) -> list[Segment]:
        self.made.append("segments")
        return [Segment("system_prompt", "s", np.array([7, 8])), Segment("question", "q", [9])]

    def prompt_token_array(self, turn: int) -> array[int]:
        self.made.append("prompt_token_array")
        return array("q", [7, 8, 9])

    def num_prompt_tokens(self, turn: int) -> int:
        return 3

    def output_tokens(self, turn: int) -> list[int]:
        self.made.append("output_tokens")
        return [1, 2]

    def output_token_array(self, turn: int) -> array[int]:
        self.made.append("output_token_array")
        return array("q", [1, 2])

    def num_output_tokens(self, turn: int) -> int:
        return 2


def test_a_session_turn_spec_makes_its_contents_once_and_only_when_read() -> None:
    """What the engine reads (prompt array, lengths, output tokens) never makes the segments;
    the spec equals the RequestSpec holding the same fields, before and after a deep copy."""
    content = CountingContent()
    spec = SessionTurnSpec(content, 0, "chat-0-0", 1.5, "chat-0", 0.0, prompt_logprobs=True)
    assert list(spec.prompt_token_array()) == [7, 8, 9]
    assert (spec.num_prompt_tokens, spec.num_output_tokens) == (3, 2)
    assert spec.output_tokens == [1, 2] and spec.output_tokens == [1, 2]
    assert content.made == ["prompt_token_array", "output_tokens"]
    plain = RequestSpec(
        "chat-0-0",
        1.5,
        "chat-0",
        0,
        0.0,
        [Segment("system_prompt", "s", [7, 8]), Segment("question", "q", [9])],
        [1, 2],
        prompt_logprobs=True,
    )
    assert spec == plain and plain == spec and copy.deepcopy(spec) == plain
    assert content.made == ["prompt_token_array", "output_tokens", "segments"]
    assert plain != SessionTurnSpec(CountingContent(), 0, "chat-0-0", 1.5, "chat-0", 0.0)


def test_a_plan_whose_contents_are_not_in_conversation_order_renders_as_the_reference() -> None:
    """Turn 0 asks contents 0 and 2 (not back to back), turn 1 asks 3, 4 and 5 and carries
    content 1 before its answer: every prompt is joined from segments, still equal."""
    plan = SessionPlan(
        [f"content/{index}" for index in range(8)],
        ["user", "user", "user", "user", "user", "user", "assistant", "assistant"],
        [4, 5, 6, 7, 8, 9, 3, 2],
        questions=[(0, 2), (3, 4, 5)],
        answers=[6, 7],
        carried_before=[(1,), ()],
        carried_after=[(), ()],
    )
    slots = [CommonSlots(system_prompt_tokens=10).pieces("agent", 0, "user", "")] * 2
    fast = render_session(SyntheticTokens(), plan, slots, CHAT_LAYOUT)
    reference = render_session(PromptByPromptTokens(), plan, slots, CHAT_LAYOUT)
    assert [fast.num_prompt_tokens(turn) for turn in range(2)] == [20, 10 + 5 + 3 + 24]
    for turn in range(2):
        assert fast.segments(turn) == reference.segments(turn)
        assert fast.prompt_token_array(turn) == reference.prompt_token_array(turn)
        assert fast.prompt_array(turn).flags.owndata
        assert fast.output_tokens(turn) == reference.output_tokens(turn)
        assert fast.num_prompt_tokens(turn) == reference.num_prompt_tokens(turn)


def test_every_prompt_and_output_array_is_a_new_array_the_engine_may_grow() -> None:
    """The engine keeps a prompt array as its request's tokens and appends the outputs to it:
    growing the arrays of a 3-turn chat (system prompt 10, questions 5, answers 3 tokens) and
    of an answer changes no later prompt or answer, nor the spec's own."""
    plain = CommonSlots(system_prompt_tokens=10).pieces("chat", 0, "user", "")
    plan = _chat_plan(3)
    content = render_session(
        SyntheticTokens(),
        SessionPlan.conversation(plan.content_ids, plan.lengths),
        [plain] * 3,
        CHAT_LAYOUT,
    )
    reference = render_session(PromptByPromptTokens(), plan, [plain] * 3, CHAT_LAYOUT)
    for turn in range(3):
        prompt, output = content.prompt_token_array(turn), content.output_token_array(turn)
        prompt.extend(output)
        output.extend(prompt)
        assert content.prompt_token_array(turn) == reference.prompt_token_array(turn)
        assert content.output_token_array(turn) == reference.output_token_array(turn)
        assert len(content.prompt_token_array(turn)) == [15, 23, 31][turn]
    assert [content.prompt_token_array(turn) for turn in range(3)] == [
        reference.prompt_token_array(turn) for turn in range(3)
    ]
