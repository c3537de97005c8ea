"""Building workload request specs for the engine tests."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from hypothesis import strategies as st

from sim.sched import SchedulerConfig
from workloads.spec import RequestSpec, Segment


def tokens(first: int, count: int) -> list[int]:
    """`count` consecutive token ids starting at `first`."""
    return list(range(first, first + count))


def open_spec(
    request_id: str, arrival_at: float, prompt: Sequence[int], num_outputs: int
) -> RequestSpec:
    """An open-loop request arriving at `arrival_at`; its outputs are tokens 1..num_outputs."""
    return RequestSpec(
        request_id=request_id,
        arrival_at=arrival_at,
        session_id=None,
        turn_index=0,
        think_time_s=0.0,
        segments=[Segment("prompt", request_id, list(prompt))],
        output_tokens=tokens(1, num_outputs),
    )


def session_turn(
    request_id: str,
    session_id: str,
    turn_index: int,
    segments: list[Segment],
    output_tokens: list[int],
    *,
    arrival_at: float | None = None,
    think_time_s: float = 0.0,
) -> RequestSpec:
    """A closed-loop turn: the first has `arrival_at`, later ones wait `think_time_s`."""
    return RequestSpec(
        request_id=request_id,
        arrival_at=arrival_at,
        session_id=session_id,
        turn_index=turn_index,
        think_time_s=think_time_s,
        segments=segments,
        output_tokens=output_tokens,
    )


def engine_config(**overrides: Any) -> SchedulerConfig:
    """64 usable blocks of 16 tokens and max_model_len 1024, so one longest request fits."""
    fields = {"num_gpu_blocks": 65, "block_size": 16, "max_model_len": 1024} | overrides
    return SchedulerConfig(**fields)


def busy_workload() -> list[RequestSpec]:
    """Three 3-turn chat sessions sharing a system prompt, then three open-loop requests with
    the same system prompt; first arrivals in time order, each session's turns together."""
    system = tokens(100, 48)
    specs: list[RequestSpec] = []
    for session in range(3):
        history = system + tokens(1000 * (session + 1), 20)
        for index in range(3):
            outputs = tokens(50_000 + 100 * session + 10 * index, 16 + 8 * session)
            spec = session_turn(
                f"s{session}-t{index}",
                f"s{session}",
                index,
                [Segment("history", f"s{session}-h{index}", list(history))],
                outputs,
                arrival_at=0.125 * session if index == 0 else None,
                think_time_s=0.5,
            )
            specs.append(spec)
            history = history + outputs + tokens(2000 * (session + 1) + 10 * index, 10)
    for index in range(3):
        specs.append(open_spec(f"open-{index}", 0.25 + index, system + tokens(9000, 30), 4))
    return specs


def busy_config(**overrides: Any) -> SchedulerConfig:
    """A pool tight enough for busy_workload to preempt and evict: 16 usable blocks of 16
    (= max_model_len 256), a 64-token budget and 8 sequences."""
    fields = {
        "num_gpu_blocks": 17,
        "max_model_len": 256,
        "max_num_batched_tokens": 64,
        "max_num_seqs": 8,
    } | overrides
    return engine_config(**fields)


@dataclass(frozen=True, slots=True)
class RandomSpecs:
    """What random_specs draws from: the number of first turns, the gaps between their
    arrivals, prompt lengths, output counts of first and second turns, think times."""

    num_first_turns: st.SearchStrategy[int]
    gaps_s: st.SearchStrategy[float]
    prompt_lengths: st.SearchStrategy[int]
    num_outputs: st.SearchStrategy[int]
    num_second_turn_outputs: st.SearchStrategy[int]
    think_times_s: st.SearchStrategy[float]


def random_specs(draw: st.DrawFn, drawn: RandomSpecs) -> list[RequestSpec]:
    """Open-loop requests and two-turn sessions (in turn), prompts sharing prefixes (two in
    three start at token 0)."""
    specs: list[RequestSpec] = []
    at = 0.0
    for index in range(draw(drawn.num_first_turns)):
        at += draw(drawn.gaps_s)
        prompt = tokens(draw(st.sampled_from([0, 0, 500])), draw(drawn.prompt_lengths))
        num_outputs = draw(drawn.num_outputs)
        if draw(st.booleans()):
            specs.append(open_spec(f"r{index}", at, prompt, num_outputs))
            continue
        session = f"s{index}"
        first = [Segment("prompt", f"{session}-0", prompt)]
        second = [*first, Segment("follow", f"{session}-1", tokens(900 + index, 8))]
        second_outputs = tokens(1, draw(drawn.num_second_turn_outputs))
        think_time_s = draw(drawn.think_times_s)
        specs.append(
            session_turn(f"{session}-0", session, 0, first, tokens(1, num_outputs), arrival_at=at)
        )
        specs.append(
            session_turn(
                f"{session}-1", session, 1, second, second_outputs, think_time_s=think_time_s
            )
        )
    return specs
