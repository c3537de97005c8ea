"""Turns of a closed-loop session into request specs, carrying the history forward."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import TYPE_CHECKING

import numpy as np

from workloads.generators.common import (
    require_distribution,
    require_layout,
    require_max_context,
    require_name,
)
from workloads.generators.kind import distribution_fields
from workloads.generators.rendering import SessionPlan, render_session
from workloads.prompt import TokenMode
from workloads.spec import RequestSpec, SessionTurnSpec
from workloads.tags import TagSampler, tenant_fields, validate_tagging

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

    def build(self, arrival_index: int, arrival_at: float) -> list[RequestSpec]:
        """The session's requests in order; the first arrives at `arrival_at`."""
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
        prompt_logprobs = [self._tags.prompt_logprobs() for _ in range(num_turns)]
        request_ids = [turn_request_id(session_id, turn) for turn in range(num_turns)]
        common = config.common
        if common.timestamp_tokens:  # the only common slot that changes from turn to turn
            turn_slots = [
                common.pieces(config.name, variant, session_id, request_id)
                for request_id in request_ids
            ]
        else:
            turn_slots = [common.pieces(config.name, variant, session_id, "")] * num_turns
        content = render_session(self._tokens, plan, turn_slots, config.layout)
        specs: list[RequestSpec] = []
        for turn in range(num_turns):
            num_tokens = content.num_prompt_tokens(turn) + content.num_output_tokens(turn)
            if config.max_context_tokens is not None and num_tokens > config.max_context_tokens:
                break
            specs.append(
                SessionTurnSpec(
                    content,
                    turn,
                    request_ids[turn],
                    arrival_at if turn == 0 else None,
                    session_id,
                    think_times_s[turn],
                    prompt_logprobs=prompt_logprobs[turn],
                    **tags,
                )
            )
        return specs

    @abstractmethod
    def _plan(self, session_id: str) -> tuple[SessionPlan, list[float]]:
        """The session's contents and turns, and each turn's think time (0 for the first),
        drawn from the content stream."""


def turn_request_id(session_id: str, turn_index: int) -> str:
    """The request id of a session's turn."""
    return f"{session_id}-{turn_index}"


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
