"""Agents: shared tool-definition prefix, ReAct history growth, tool latency as think time."""

from __future__ import annotations

import dataclasses

from workloads.api import AgentConfig, CommonSlots, Fixed, PoissonArrivals, Workload

AGENT = AgentConfig(
    steps_per_agent=Fixed(5),
    task_tokens=Fixed(50),
    action_tokens=Fixed(20),
    observation_tokens=Fixed(70),
    tool_latency_s=Fixed(0.25),
    common=CommonSlots(system_prompt_tokens=100, tools_tokens=300),
)


def _by_session(specs):
    sessions: dict[str, list] = {}
    for spec in specs:
        sessions.setdefault(spec.session_id, []).append(spec)
    return list(sessions.values())


def test_every_step_appends_the_action_and_its_tool_result() -> None:
    runs = _by_session(Workload(AGENT, PoissonArrivals(5.0), num_arrivals=4, seed=1))
    assert len(runs) == 4
    for steps in runs:
        # system 100 + tools 300 + task 50, then 20 + 70 per completed step.
        assert [step.num_prompt_tokens for step in steps] == [450, 540, 630, 720, 810]
        assert [step.think_time_s for step in steps] == [0.0, 0.25, 0.25, 0.25, 0.25]
        for previous, step in zip(steps, steps[1:], strict=False):
            carried = previous.prompt_tokens() + previous.output_tokens
            assert step.prompt_tokens()[: len(carried)] == carried
        assert [segment.name for segment in steps[2].segments] == [
            "system_prompt",
            "tools",
            "question",
            "history",
            "history",
            "history",
            "history",
        ]


def test_many_agents_share_the_tool_definition_prefix_only() -> None:
    specs = list(Workload(AGENT, PoissonArrivals(50.0), num_arrivals=30, seed=2))
    first_steps = [spec for spec in specs if spec.turn_index == 0]
    assert len(first_steps) == 30
    prefixes = {tuple(spec.prompt_tokens()[:400]) for spec in first_steps}
    tasks = {tuple(spec.prompt_tokens()[400:]) for spec in first_steps}
    assert len(prefixes) == 1 and len(tasks) == 30
    # 30 agents arriving at 50/s overlap: the last starts before the first finishes its 5 steps.
    assert first_steps[-1].arrival_at < 1.0


def test_prompt_variants_give_distinct_tool_sets() -> None:
    config = dataclasses.replace(
        AGENT, common=CommonSlots(system_prompt_tokens=100, tools_tokens=300, num_prompt_variants=2)
    )
    specs = Workload(config, PoissonArrivals(5.0), num_arrivals=20, seed=3)
    tool_sets = {spec.segments[1].content_id for spec in specs}
    assert tool_sets == {"agent/tools/0", "agent/tools/1"}
