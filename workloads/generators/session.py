"""Turns of a closed-loop session into request specs, carrying the history forward."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from workloads.generators.common import (
    require_layout,
    require_max_context,
    require_name,
)
from workloads.generators.kind import require_distributions
from workloads.generators.rendering import SessionPlan, SlotPieces, render_sessions
from workloads.prompt import TokenMode
from workloads.spec import RequestSpec, SessionTurnSpec, TurnContent
from workloads.tags import TagSampler, TenantFields, tenant_fields, validate_tagging

if TYPE_CHECKING:
    from workloads.generators.agent import AgentConfig
    from workloads.generators.chat import ChatConfig


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
        self._variant_slots: dict[int, SlotPieces] = {}

    def build(self, arrival_index: int, arrival_at: float) -> list[RequestSpec]:
        """The session's requests in order; the first arrives at `arrival_at`."""
        return self.build_many([(arrival_index, arrival_at)])[0]

    def build_many(self, arrivals: Sequence[tuple[int, float]]) -> list[list[RequestSpec]]:
        """`build` for each (arrival index, time) in turn, the sessions rendered together."""
        drawn = [self._draw(arrival_index) for arrival_index, _ in arrivals]
        plans = [(session.plan, session.turn_slots) for session in drawn]
        contents = render_sessions(self._tokens, plans, self._config.layout)
        return [
            self._turn_specs(session, content, arrival_at)
            for (_, arrival_at), session, content in zip(arrivals, drawn, contents, strict=True)
        ]

    def _draw(self, arrival_index: int) -> _DrawnSession:
        """What the session's random streams decide: its variant, plan and tags."""
        config = self._config
        session_id = f"{config.name}-{arrival_index}"
        num_variants = config.common.num_prompt_variants
        # A draw among one value takes nothing from the stream: skipping it changes nothing.
        variant = int(self._rng.integers(num_variants)) if num_variants > 1 else 0
        plan, think_times_s = self._plan(session_id)
        num_turns = len(plan.answers)
        # Every turn's tags are drawn, even those past the context limit, so that the next
        # session's draws do not depend on where this one ends.
        tags = tenant_fields(self._tags.tenant())
        prompt_logprobs = self._tags.prompt_logprobs_many(num_turns)
        request_ids = turn_request_ids(session_id, num_turns)
        common = config.common
        turn_slots: list[SlotPieces]
        if common.timestamp_tokens:  # the only common slot that changes from turn to turn
            turn_slots = [
                common.pieces(config.name, variant, session_id, request_id)
                for request_id in request_ids
            ]
        else:
            turn_slots = [self._session_slots(variant, session_id)] * num_turns
        return _DrawnSession(
            session_id, plan, think_times_s, tags, prompt_logprobs, request_ids, turn_slots
        )

    def _session_slots(self, variant: int, session_id: str) -> SlotPieces:
        """The common slots' pieces of a session; the same mapping for every session of a
        variant when no piece is per user."""
        common = self._config.common
        if common.user_id_tokens:
            return common.pieces(self._config.name, variant, session_id, "")
        slots = self._variant_slots.get(variant)
        if slots is None:
            slots = self._variant_slots[variant] = common.pieces(self._config.name, variant, "", "")
        return slots

    def _turn_specs(
        self, session: _DrawnSession, content: TurnContent, arrival_at: float
    ) -> list[RequestSpec]:
        """The session's turns up to the context limit."""
        num_turns = len(session.request_ids)
        max_context_tokens = self._config.max_context_tokens
        if max_context_tokens is not None:
            num_turns = next(
                (
                    turn
                    for turn in range(num_turns)
                    if content.num_prompt_tokens(turn) + content.num_output_tokens(turn)
                    > max_context_tokens
                ),
                num_turns,
            )
        session_id, tags = session.session_id, session.tags
        return [
            SessionTurnSpec(
                content,
                turn,
                request_id,
                arrival_at if turn == 0 else None,
                session_id,
                think_time_s,
                prompt_logprobs,
                **tags,
            )
            for turn, request_id, think_time_s, prompt_logprobs in zip(
                range(num_turns),
                session.request_ids,
                session.think_times_s,
                session.prompt_logprobs,
                strict=False,  # range(num_turns) ends first where the context limit cut it
            )
        ]

    @abstractmethod
    def _plan(self, session_id: str) -> tuple[SessionPlan, list[float]]:
        """The session's contents and turns, and each turn's think time (0 for the first),
        drawn from the content stream."""


@dataclass(slots=True)
class _DrawnSession:
    """A session as its random draws made it, before its tokens are made."""

    session_id: str
    plan: SessionPlan
    think_times_s: list[float]
    tags: TenantFields
    prompt_logprobs: list[bool]
    request_ids: list[str]
    turn_slots: list[SlotPieces]


def turn_request_ids(session_id: str, num_turns: int) -> list[str]:
    """The request ids of a session's turns, in order."""
    return [f"{session_id}-{turn}" for turn in range(num_turns)]


def validate_session_config(config: ChatConfig | AgentConfig) -> None:
    """The checks chat and agent configs share: name, distributions, a layout with the slots
    they fill (common slots, history, question), the context cap and tenant tagging."""
    owner = type(config).__name__
    require_name(owner, config.name)
    require_distributions(config)
    require_layout(owner, config.layout, [*config.common.produced_slots(), "history", "question"])
    require_max_context(owner, config.max_context_tokens)
    validate_tagging(owner, config.tenants, config.prompt_logprobs_fraction)
