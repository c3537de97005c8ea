"""Agents: a shared tool-definition prefix and a ReAct loop that appends each tool result.

Step k's prompt is the layout's order of: the common slots (tools are the shared prefix), the
task (slot "question"), and the history of actions 0..k-1 each followed by its tool result.
Step k's output tokens are action k; step k+1 is released `tool_latency_s` after step k ends.
Many agents run at once when their arrivals overlap.

Assumed defaults (not in the traces): 4-16 steps, tasks of median 200 tokens, 512-token system
prompt, 2048 tokens of tool definitions. Action and tool-result lengths and the latency between
steps follow calibration.DYNAMO_AGENT_ACTION, DYNAMO_AGENT_OBSERVATION, DYNAMO_AGENT_STEP_GAP_S.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from workloads.calibration import (
    DYNAMO_AGENT_ACTION,
    DYNAMO_AGENT_OBSERVATION,
    DYNAMO_AGENT_STEP_GAP_S,
)
from workloads.distributions import Distribution, LogNormal, Uniform
from workloads.generators.common import CommonSlots
from workloads.generators.kind import MAX_CONTEXT, GeneratorKind, setting
from workloads.generators.session import SessionBuilder, Turn, validate_session_config
from workloads.layout import AGENT_LAYOUT, PromptLayout
from workloads.prompt import Piece
from workloads.tags import TenantSpec


@dataclass(slots=True, frozen=True)
class AgentConfig:
    """An agent application; each arrival starts one agent run (a closed-loop session)."""

    name: str = "agent"
    steps_per_agent: Distribution = setting("steps per agent", Uniform(4, 16))
    task_tokens: Distribution = setting(
        "task description tokens",
        LogNormal(median=200, sigma=0.8, low=16, high=4096),
        slot="question",
    )
    action_tokens: Distribution = setting("output tokens per action", DYNAMO_AGENT_ACTION)
    observation_tokens: Distribution = setting("tool observation tokens", DYNAMO_AGENT_OBSERVATION)
    tool_latency_s: Distribution = setting("seconds a tool call takes", DYNAMO_AGENT_STEP_GAP_S)
    common: CommonSlots = field(
        default_factory=lambda: CommonSlots(system_prompt_tokens=512, tools_tokens=2048)
    )
    layout: PromptLayout = AGENT_LAYOUT
    max_context_tokens: int | None = setting(MAX_CONTEXT, None, bounds={"ge": 1})
    tenants: tuple[TenantSpec, ...] = ()
    prompt_logprobs_fraction: float = 0.0

    def __post_init__(self) -> None:
        validate_session_config(self)


class AgentBuilder(SessionBuilder):
    """Builds every step of one agent run per arrival."""

    _config: AgentConfig

    def _turns(self, session_id: str) -> list[Turn]:
        """The run's steps: one shared task, then an action and a tool observation each."""
        config, rng = self._config, self._rng
        num_steps = config.steps_per_agent.sample_count(rng, minimum=1)
        task = Piece(
            "question",
            f"{config.name}/task/{session_id}",
            "user",
            config.task_tokens.sample_count(rng, minimum=1),
        )
        action_lengths = config.action_tokens.sample_counts(rng, num_steps, 1).tolist()
        observation_lengths = config.observation_tokens.sample_counts(rng, num_steps, 1).tolist()
        latencies_s = [0.0, *config.tool_latency_s.samples(rng, num_steps - 1).tolist()]
        return [
            Turn(
                question=(task,),
                answer_id=f"{config.name}/action/{session_id}/{index}",
                num_answer_tokens=action_lengths[index],
                think_time_s=latencies_s[index],
                history_after_answer=(
                    Piece(
                        "history",
                        f"{config.name}/observation/{session_id}/{index}",
                        "tool",
                        observation_lengths[index],
                    ),
                ),
            )
            for index in range(num_steps)
        ]


GENERATOR_KIND = GeneratorKind(
    "agent",
    "ReAct agents: a shared tool prefix, each step appending an action and a tool observation",
    AgentConfig,
    AgentBuilder,
)
