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
from workloads.generators.rendering import SessionPlan
from workloads.generators.session import SessionBuilder, validate_session_config
from workloads.layout import AGENT_LAYOUT, PromptLayout
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
    tool_latency_s: Distribution = setting(
        "seconds a tool call takes", DYNAMO_AGENT_STEP_GAP_S, duration=True
    )
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

    def _plan(self, session_id: str) -> tuple[SessionPlan, list[float]]:
        """The run's steps: one shared task, then an action and a tool observation each."""
        config, rng = self._config, self._rng
        num_steps = config.steps_per_agent.sample_count(rng, minimum=1)
        task_length = config.task_tokens.sample_count(rng, minimum=1)
        action_lengths = config.action_tokens.sample_counts(rng, num_steps, 1)
        observation_lengths = config.observation_tokens.sample_counts(rng, num_steps, 1)
        latencies_s = [0.0, *config.tool_latency_s.samples(rng, num_steps - 1)]
        # Contents: the task at 0, then action k at 2k + 1 and its observation at 2k + 2.
        content_ids = [f"{config.name}/task/{session_id}"]
        lengths = [task_length]
        for step in range(num_steps):
            content_ids += (
                f"{config.name}/action/{session_id}/{step}",
                f"{config.name}/observation/{session_id}/{step}",
            )
            lengths += (action_lengths[step], observation_lengths[step])
        plan = SessionPlan(
            content_ids,
            ["user", *["assistant", "tool"] * num_steps],
            lengths,
            questions=[(0,)] * num_steps,
            answers=[2 * step + 1 for step in range(num_steps)],
            carried_before=[()] * num_steps,
            carried_after=[(2 * step + 2,) for step in range(num_steps)],
        )
        return plan, latencies_s


GENERATOR_KIND = GeneratorKind(
    "agent",
    "ReAct agents: a shared tool prefix, each step appending an action and a tool observation",
    AgentConfig,
    AgentBuilder,
)
