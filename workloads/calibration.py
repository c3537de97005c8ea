"""Length, latency and arrival statistics fitted to real public traces (in the repository under
tests/fixtures/traces and scenarios/data/traces).

Lengths are fitted as a log-normal by maximum likelihood (median = exp(mean ln x), sigma =
std ln x) and clipped to the trace's observed [min, max]. Which generator uses which:

- chat `answer_tokens` and RAG `answer_tokens`: AZURE_CONV_OUTPUT (answers of a chat service).
- agent `action_tokens`: DYNAMO_AGENT_ACTION (output tokens per agent step).
- agent `observation_tokens`: DYNAMO_AGENT_OBSERVATION (prompt growth per step beyond the
  previous step's output: the tool result and its wrapping).
- agent `tool_latency_s`: DYNAMO_AGENT_STEP_GAP_S (time from one step's end to the next step's
  arrival in the same session: the tool call plus harness time).
- AZURE_*_ARRIVAL_CV: for GammaArrivals(cv=...) to mimic the Azure traces' burstiness.

Not calibrated (the traces do not show them), documented as assumptions where they are set:
chat user-message lengths, turns per session and think time; agent steps per agent and task
length; RAG document and question lengths; system-prompt and tool-definition lengths. The
Mooncake and Azure input lengths (MOONCAKE_CONVERSATION_INPUT, AZURE_CONV_INPUT,
AZURE_CODE_INPUT) are whole prompts including history, so no generator samples them; they are
here to compare a generated workload's prompt lengths with, and for mixes that want them.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence

import numpy as np

from workloads.distributions import LogNormal
from workloads.errors import WorkloadError
from workloads.traces.azure import iter_azure_records
from workloads.traces.dynamo import iter_dynamo_records
from workloads.traces.mooncake import iter_mooncake_records

# Fitted by the functions below on the files named (test_workloads_calibration checks them).
# mooncake/conversation_trace.jsonl, 12,031 requests:
MOONCAKE_CONVERSATION_INPUT = LogNormal(median=6227.0, sigma=1.199, low=891, high=126195)
MOONCAKE_CONVERSATION_OUTPUT = LogNormal(median=207.8, sigma=1.358, low=1, high=2000)
# azure-llm-2023/AzureLLMInferenceTrace_conv.csv, 19,366 requests:
AZURE_CONV_INPUT = LogNormal(median=760.0, sigma=0.985, low=2, high=14050)
AZURE_CONV_OUTPUT = LogNormal(median=151.3, sigma=0.859, low=7, high=1000)
AZURE_CONV_ARRIVAL_CV = 1.094
# azure-llm-2023/AzureLLMInferenceTrace_code.csv, 8,819 requests (idle gaps up to 217 s):
AZURE_CODE_INPUT = LogNormal(median=1095.0, sigma=1.36, low=3, high=7437)
AZURE_CODE_OUTPUT = LogNormal(median=16.25, sigma=0.847, low=6, high=1899)
AZURE_CODE_ARRIVAL_CV = 13.151
# dynamo-pi-agent/pi_request_trace.jsonl, 4 agent sessions, 16 steps (a small sample):
DYNAMO_AGENT_ACTION = LogNormal(median=440.6, sigma=0.529, low=196, high=1101)
DYNAMO_AGENT_OBSERVATION = LogNormal(median=142.0, sigma=1.511, low=14, high=947)
DYNAMO_AGENT_STEP_GAP_S = LogNormal(median=0.02369, sigma=2.515, low=0.00572, high=71.84)


def _significant(value: float, digits: int = 4) -> float:
    return float(f"{value:.{digits}g}")


def fit_lognormal(values: Sequence[float]) -> LogNormal:
    """Maximum-likelihood log-normal (median to 4 significant digits, sigma to 3 decimals)."""
    array = np.asarray(values, dtype=float)
    if array.size < 2 or not np.all(array > 0):
        raise WorkloadError(f"fit_lognormal: needs at least 2 positive values, got {array.size}")
    logs = np.log(array)
    low, high = float(array.min()), float(array.max())
    return LogNormal(
        median=_significant(math.exp(float(logs.mean()))),
        sigma=round(float(logs.std()), 3),
        low=int(low) if low.is_integer() else _significant(low),
        high=int(high) if high.is_integer() else _significant(high),
    )


def interarrival_cv(arrivals_s: Sequence[float]) -> float:
    """Coefficient of variation of the gaps between sorted arrival times (3 decimals)."""
    gaps = np.diff(np.asarray(arrivals_s, dtype=float))
    if gaps.size < 2 or gaps.mean() <= 0:
        raise WorkloadError("interarrival_cv: needs at least 3 arrivals spread over time")
    return round(float(gaps.std() / gaps.mean()), 3)


def mooncake_lengths(path: str | os.PathLike[str]) -> tuple[LogNormal, LogNormal]:
    """(input, output) length fits of a Mooncake trace."""
    records = list(iter_mooncake_records(path))
    return (
        fit_lognormal([record.input_length for record in records]),
        fit_lognormal([record.output_length for record in records]),
    )


def azure_statistics(path: str | os.PathLike[str]) -> tuple[LogNormal, LogNormal, float]:
    """(context length fit, generated length fit, inter-arrival CV) of an Azure trace CSV."""
    records = list(iter_azure_records(path))
    return (
        fit_lognormal([record.context_tokens for record in records]),
        fit_lognormal([record.generated_tokens for record in records]),
        interarrival_cv([record.arrival_s for record in records]),
    )


def dynamo_agent_statistics(
    path: str | os.PathLike[str],
) -> tuple[LogNormal, LogNormal, LogNormal]:
    """(action tokens, observation tokens, step gap seconds) over sessions of two or more steps."""
    sessions: dict[str, list] = {}
    for record in iter_dynamo_records(path):
        if record.session_id is not None:
            sessions.setdefault(record.session_id, []).append(record)
    actions: list[int] = []
    observations: list[int] = []
    gaps_s: list[float] = []
    for steps in sessions.values():
        if len(steps) < 2:
            continue
        steps.sort(key=lambda record: record.received_ms)
        actions.extend(step.output_tokens for step in steps)
        for previous, step in zip(steps, steps[1:], strict=False):
            observations.append(step.input_tokens - previous.input_tokens - previous.output_tokens)
            end_ms = previous.received_ms + previous.timings_ms["total_time_ms"]
            gaps_s.append((step.received_ms - end_ms) / 1000.0)
    return fit_lognormal(actions), fit_lognormal(observations), fit_lognormal(gaps_s)
