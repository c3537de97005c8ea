"""Multi-turn chat: closed-loop sessions whose history carries every earlier question and answer.

Turn k's prompt is the layout's order of: the common slots, the history (questions and answers
of turns 0..k-1), and question k. Turn k's output tokens are its answer, which turn k+1 repeats
in its history. Per-request user fields are rendered afresh each turn, wherever the layout
puts them, and are not carried in the history. Lengths of a whole session are drawn before its
first turn is built, so truncation (`max_context_tokens`) never shifts the random stream.

Assumed defaults (not in the traces): 1-8 turns, user messages of median 64 tokens, 20 s mean
think time, a 512-token system prompt. Answers follow calibration.AZURE_CONV_OUTPUT.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from workloads.calibration import AZURE_CONV_OUTPUT
from workloads.distributions import Distribution, Exponential, LogNormal, Uniform
from workloads.generators.common import CommonSlots
from workloads.generators.kind import MAX_CONTEXT, GeneratorKind, setting
from workloads.generators.rendering import SessionPlan
from workloads.generators.session import SessionBuilder, validate_session_config
from workloads.layout import CHAT_LAYOUT, PromptLayout
from workloads.tags import TenantSpec


@dataclass(slots=True, frozen=True)
class ChatConfig:
    """A chat application; each arrival starts one session."""

    name: str = "chat"
    turns_per_session: Distribution = setting("turns per session", Uniform(1, 8))
    user_message_tokens: Distribution = setting(
        "tokens per user message",
        LogNormal(median=64, sigma=0.8, low=4, high=2048),
        slot="question",
    )
    answer_tokens: Distribution = setting("output tokens per answer", AZURE_CONV_OUTPUT)
    think_time_s: Distribution = setting(
        "seconds between an answer and the next turn", Exponential(mean=20.0), duration=True
    )
    common: CommonSlots = field(default_factory=lambda: CommonSlots(system_prompt_tokens=512))
    layout: PromptLayout = CHAT_LAYOUT
    max_context_tokens: int | None = setting(MAX_CONTEXT, None, bounds={"ge": 1})
    tenants: tuple[TenantSpec, ...] = ()
    prompt_logprobs_fraction: float = 0.0

    def __post_init__(self) -> None:
        validate_session_config(self)


class ChatBuilder(SessionBuilder):
    """Builds every turn of one session per arrival."""

    _config: ChatConfig

    def _plan(self, session_id: str) -> tuple[SessionPlan, list[float]]:
        """The session's turns: a user message (then carried) and an answer each."""
        config, rng = self._config, self._rng
        num_turns = config.turns_per_session.sample_count(rng, minimum=1)
        question_lengths = config.user_message_tokens.sample_counts(rng, num_turns, 1)
        answer_lengths = config.answer_tokens.sample_counts(rng, num_turns, 1)
        think_times_s = [0.0, *config.think_time_s.samples(rng, num_turns - 1)]
        # Contents: question k at 2k, its answer at 2k + 1 (laid by slice, without a loop).
        user, answer = f"{config.name}/user/{session_id}/", f"{config.name}/answer/{session_id}/"
        turns = [str(turn) for turn in range(num_turns)]
        content_ids = [user, answer] * num_turns
        content_ids[::2] = [user + turn for turn in turns]
        content_ids[1::2] = [answer + turn for turn in turns]
        lengths = question_lengths + answer_lengths
        lengths[::2], lengths[1::2] = question_lengths, answer_lengths
        plan = SessionPlan.conversation(content_ids, lengths)
        return plan, think_times_s


GENERATOR_KIND = GeneratorKind(
    "chat",
    "multi-turn chat: closed-loop sessions whose history (with answers) is carried forward",
    ChatConfig,
    ChatBuilder,
)
