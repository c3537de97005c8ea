"""Turns of a closed-loop session into request specs, carrying the history forward."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from workloads.generators.common import (
    require_distribution,
    require_layout,
    require_max_context,
    require_name,
)
from workloads.generators.kind import distribution_fields
from workloads.generators.rendering import render_turns
from workloads.layout import PromptLayout
from workloads.prompt import Piece, TokenMode
from workloads.spec import RequestSpec
from workloads.tags import TagSampler, TenantSpec, tenant_fields, validate_tagging

if TYPE_CHECKING:
    from workloads.generators.agent import AgentConfig
    from workloads.generators.chat import ChatConfig


@dataclass(slots=True, frozen=True)
class Turn:
    """One planned turn: its question pieces, its answer, and what the history gains.

    After the turn the history grows by `history_before_answer`, the answer (as an assistant
    piece with the answer's identity, so its tokens equal the output tokens), and
    `history_after_answer`.
    """

    question: tuple[Piece, ...]
    answer_id: str
    num_answer_tokens: int
    think_time_s: float
    history_before_answer: tuple[Piece, ...] = ()
    history_after_answer: tuple[Piece, ...] = ()


class SessionBuilder(ABC):
    """Turns one arrival into a closed-loop session; subclasses plan the turns."""

    def __init__(
        self,
        config: ChatConfig | AgentConfig,
        content_rng: np.random.Generator,
        tags_rng: np.random.Generator,
        tokens: TokenMode,
    ) -> None:
        self._config = config
        self._rng = content_rng
        self._tags = TagSampler(config.tenants, config.prompt_logprobs_fraction, tags_rng)
        self._tokens = tokens

    def build(self, arrival_index: int, arrival_at: float) -> list[RequestSpec]:
        """The session's requests in order; the first arrives at `arrival_at`."""
        session_id = f"{self._config.name}-{arrival_index}"
        variant = int(self._rng.integers(self._config.common.num_prompt_variants))
        return self._session_specs(session_id, variant, arrival_at, self._turns(session_id))

    @abstractmethod
    def _turns(self, session_id: str) -> list[Turn]:
        """The session's planned turns, drawn from the content stream."""

    def _session_specs(
        self, session_id: str, variant: int, arrival_at: float, turns: Sequence[Turn]
    ) -> list[RequestSpec]:
        """`session_specs` with this builder's common slots, tags, layout, tokens and limit."""
        config = self._config
        # Every turn's tags are drawn, even those past the context limit, so that the next
        # session's draws do not depend on where this one ends.
        tenant = self._tags.tenant()
        prompt_logprobs = [self._tags.prompt_logprobs() for _ in turns]
        turn_slots = [
            {
                **config.common.pieces(
                    config.name, variant, session_id, turn_request_id(session_id, index)
                ),
                "question": list(turn.question),
            }
            for index, turn in enumerate(turns)
        ]
        return session_specs(
            session_id,
            arrival_at,
            turns,
            turn_slots,
            prompt_logprobs,
            layout=config.layout,
            tokens=self._tokens,
            max_context_tokens=config.max_context_tokens,
            tenant=tenant,
        )


def turn_request_id(session_id: str, turn_index: int) -> str:
    """The request id of a session's turn."""
    return f"{session_id}-{turn_index}"


def session_specs(
    session_id: str,
    arrival_at: float,
    turns: Sequence[Turn],
    turn_slots: Sequence[dict[str, list[Piece]]],
    prompt_logprobs: Sequence[bool],
    *,
    layout: PromptLayout,
    tokens: TokenMode,
    max_context_tokens: int | None,
    tenant: TenantSpec | None,
) -> list[RequestSpec]:
    """The session's specs; it ends before a turn whose prompt plus output exceeds the limit."""
    prompts: list[list[Piece]] = []
    history: list[Piece] = []
    for turn, slots in zip(turns, turn_slots, strict=True):
        prompts.append(layout.arrange({**slots, "history": history}))
        answer = Piece("history", turn.answer_id, "assistant", turn.num_answer_tokens)
        history = [*history, *turn.history_before_answer, answer, *turn.history_after_answer]
    answers = [(turn.answer_id, turn.num_answer_tokens) for turn in turns]
    specs: list[RequestSpec] = []
    for index, (turn, logprobs, (segments, prompt_array, output_tokens)) in enumerate(
        zip(turns, prompt_logprobs, render_turns(tokens, prompts, answers), strict=False)
    ):
        num_tokens = sum(len(segment.tokens) for segment in segments) + len(output_tokens)
        if max_context_tokens is not None and num_tokens > max_context_tokens:
            break
        specs.append(
            RequestSpec(
                request_id=turn_request_id(session_id, index),
                arrival_at=arrival_at if index == 0 else None,
                session_id=session_id,
                turn_index=index,
                think_time_s=0.0 if index == 0 else turn.think_time_s,
                segments=segments,
                output_tokens=output_tokens,
                prompt_logprobs=logprobs,
                prompt_array=prompt_array,
                **tenant_fields(tenant),
            )
        )
    return specs


def validate_session_config(config: ChatConfig | AgentConfig) -> None:
    """The checks chat and agent configs share: name, distributions, a layout with the slots
    they fill (common slots, history, question), the context cap and tenant tagging."""
    owner = type(config).__name__
    require_name(owner, config.name)
    for name in distribution_fields(config):
        require_distribution(owner, name, getattr(config, name))
    require_layout(owner, config.layout, [*config.common.produced_slots(), "history", "question"])
    require_max_context(owner, config.max_context_tokens)
    validate_tagging(owner, config.tenants, config.prompt_logprobs_fraction)
