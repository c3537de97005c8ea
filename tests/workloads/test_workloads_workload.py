"""Workload: determinism, bounds, pairing across token modes, and config validation."""

from __future__ import annotations

import dataclasses

import pytest

from workloads.api import (
    AgentConfig,
    ChatConfig,
    CommonSlots,
    Exponential,
    Fixed,
    LogNormal,
    PiecewiseRateArrivals,
    PoissonArrivals,
    RagConfig,
    RatePiece,
    TenantSpec,
    TokenConfig,
    Uniform,
    Workload,
    WorkloadError,
)


def _summary(workload: Workload) -> list[tuple]:
    return [
        (
            spec.request_id,
            spec.arrival_at,
            spec.think_time_s,
            spec.prompt_tokens(),
            spec.output_tokens,
        )
        for spec in workload
    ]


def test_iterating_twice_gives_identical_requests_and_a_new_seed_differs() -> None:
    workload = Workload(AgentConfig(), PoissonArrivals(1.0), num_arrivals=5, seed=9)
    assert _summary(workload) == _summary(workload)
    other = dataclasses.replace(workload, seed=10)
    assert _summary(other) != _summary(workload)


def test_token_modes_are_paired() -> None:
    synthetic = list(Workload(ChatConfig(), PoissonArrivals(1.0), num_arrivals=6, seed=4))
    text = list(
        Workload(
            ChatConfig(),
            PoissonArrivals(1.0),
            num_arrivals=6,
            seed=4,
            tokens=TokenConfig(mode="text"),
        )
    )
    assert [
        (s.request_id, s.arrival_at, s.think_time_s, s.num_output_tokens) for s in synthetic
    ] == [(s.request_id, s.arrival_at, s.think_time_s, s.num_output_tokens) for s in text]
    assert all(max(spec.output_tokens) < 100_277 for spec in text)  # cl100k ids


def test_until_s_and_num_arrivals_bound_the_stream() -> None:
    by_time = list(Workload(ChatConfig(), PoissonArrivals(2.0), until_s=30.0, seed=1))
    first = [spec.arrival_at for spec in by_time if spec.turn_index == 0]
    assert max(first) < 30.0 and 40 < len(first) < 80
    by_count = Workload(ChatConfig(), PoissonArrivals(2.0), num_arrivals=7, seed=1)
    assert sum(spec.turn_index == 0 for spec in by_count) == 7


def test_finite_arrivals_need_no_bound() -> None:
    arrivals = PiecewiseRateArrivals((RatePiece(10.0, 2.0),), repeat=False)
    specs = list(Workload(ChatConfig(), arrivals, seed=1))
    assert all(spec.arrival_at < 10.0 for spec in specs if spec.turn_index == 0)


def test_endless_arrivals_without_a_bound_are_rejected() -> None:
    with pytest.raises(WorkloadError, match="never ends; set num_arrivals or until_s"):
        Workload(ChatConfig(), PoissonArrivals(1.0))


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (
            lambda: TokenConfig(mode="bytes"),
            r"TokenConfig.mode: 'bytes' is not allowed; allowed: synthetic, text",
        ),
        (
            lambda: ChatConfig(answer_tokens=100),
            r"ChatConfig.answer_tokens: 100 is not a distribution; use one of Fixed",
        ),
        (
            lambda: ChatConfig(prompt_logprobs_fraction=1.5),
            r"ChatConfig.prompt_logprobs_fraction: 1.5 is not allowed; use a number in \[0, 1\]",
        ),
        (
            lambda: ChatConfig(tenants=(TenantSpec("a"), TenantSpec("a"))),
            r"ChatConfig.tenants: names \['a'\] repeat",
        ),
        (
            lambda: ChatConfig(max_context_tokens=0),
            r"ChatConfig.max_context_tokens: 0 is not allowed; use an int >= 1",
        ),
        (lambda: ChatConfig(name="a/b"), r"ChatConfig.name: 'a/b' is not allowed"),
        (
            lambda: CommonSlots(tools_tokens=-1),
            r"CommonSlots.tools_tokens: -1 is not allowed; use an int >= 0",
        ),
        (
            lambda: CommonSlots(system_prompt_text="x", num_prompt_variants=2),
            r"num_prompt_variants: 2 is not allowed with system_prompt_text",
        ),
        (
            lambda: Workload("chat", PoissonArrivals(1.0), num_arrivals=1),
            r"Workload.source: 'chat' is not allowed; use one of MixConfig, ChatConfig, "
            r"AgentConfig, RagConfig",
        ),
        (
            lambda: Workload(ChatConfig(), 2.0, num_arrivals=1),
            r"Workload.arrivals: 2.0 is not allowed; use PoissonArrivals",
        ),
        (
            lambda: Workload(ChatConfig(), PoissonArrivals(1.0), num_arrivals=0),
            r"Workload.num_arrivals: 0 is not allowed",
        ),
        (
            lambda: TokenConfig(mode="text", chat_template="mistral").build(),
            r"chat_template: 'mistral' is not known; allowed: chatml, llama3, qwen",
        ),
    ],
)
def test_invalid_configuration_names_the_field_and_what_is_allowed(make, message: str) -> None:
    with pytest.raises(WorkloadError, match=message):
        make()


@pytest.mark.parametrize(
    ("make", "field", "distribution"),
    [
        (lambda: ChatConfig(turns_per_session=Fixed(0)), "ChatConfig.turns_per_session", "Fixed"),
        (lambda: ChatConfig(answer_tokens=Uniform(0, 0)), "ChatConfig.answer_tokens", "Uniform"),
        (
            lambda: AgentConfig(observation_tokens=LogNormal(median=3, sigma=1, high=0.4)),
            "AgentConfig.observation_tokens",
            "LogNormal",
        ),
        (lambda: RagConfig(question_tokens=Fixed(0.4)), "RagConfig.question_tokens", "Fixed"),
        # Unbounded, but above 0.5 (rounding to 1) with chance exp(-5000) = 0 in floats.
        (
            lambda: ChatConfig(answer_tokens=Exponential(mean=0.0001)),
            "ChatConfig.answer_tokens",
            "Exponential",
        ),
    ],
)
def test_a_count_that_never_reaches_one_is_refused(make, field: str, distribution: str) -> None:
    """Generators raise a count drawn below 1 to 1 (a turn, a token): a distribution that never
    draws 1 or more would silently be all ones, so it is refused, naming the field."""
    with pytest.raises(WorkloadError, match=rf"^{field}: {distribution}\(.*\) never draws a count"):
        make()


def test_a_count_that_almost_never_reaches_one_is_refused_with_its_chance() -> None:
    """A lognormal of median 0.2 tokens, sigma 0.1: above 0.5 with chance
    Phi(-ln(2.5) / 0.1) = 2.5e-20, under the 1e-6 floor."""
    with pytest.raises(
        WorkloadError,
        match=r"^ChatConfig.user_message_tokens: LogNormal\(.*\) draws with chance 3e-20 only a "
        r"count of 1 or more",
    ):
        ChatConfig(user_message_tokens=LogNormal(median=0.2, sigma=0.1))


def test_counts_reaching_one_sometimes_and_zero_durations_are_accepted() -> None:
    """Uniform(0, 4) turns (a 0 drawn becomes 1), a lognormal of median 0.3 tokens and sigma 1
    (above 0.5 with chance 0.30) and zero think or tool seconds are valid."""
    ChatConfig(
        turns_per_session=Uniform(0, 4),
        answer_tokens=LogNormal(median=0.3, sigma=1.0),
        think_time_s=Fixed(0),
    )
    AgentConfig(tool_latency_s=Fixed(0))
