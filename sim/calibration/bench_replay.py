"""A vLLM benchmark re-run in simulation: the same requests, sent the same way, through one
engine with a given step-time model and front end."""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field

import numpy as np

from sim.config import DeploymentSettings, EngineSettings, deployed_engine
from sim.costmodel import CostModel, FrontEnd, get_gpu, resolve_model
from sim.costmodel.bench_results import ServeBenchmark, per_token_itl_s
from sim.engine import simulate
from sim.errors import InputError
from sim.metrics import NullRecorder, RequestRecord
from sim.runner import deployment_num_gpu_blocks, max_model_len_for_pool, scheduler_config
from workloads.api import RequestSpec, Segment

# Token ids of request i start at i * this: no two requests share a prompt block, as with the
# benchmarks' random or distinct dataset prompts.
_TOKEN_STRIDE = 1_000_003


@dataclass(slots=True)
class _Collector(NullRecorder):
    records: list[RequestRecord] = field(default_factory=list)

    def on_request_finished(self, request: RequestRecord) -> None:
        self.records.append(request)


@dataclass(frozen=True, slots=True)
class ReplayedRun:
    """Per-request client-side figures of the simulated benchmark, in request order."""

    ttfts_s: list[float]
    decode_times_s: list[float]  # first token to last token
    output_lens: list[int]
    e2e_s: list[float]

    @property
    def mean_ttft_s(self) -> float:
        return sum(self.ttfts_s) / len(self.ttfts_s)

    @property
    def mean_itl_s(self) -> float:
        return per_token_itl_s(self.decode_times_s, self.output_lens)


@dataclass(frozen=True, slots=True)
class Deployment:
    """What a benchmark ran on, with the engine settings it ran with."""

    gpu: str
    model: str
    tp: int
    engine: EngineSettings

    @classmethod
    def served(cls, gpu: str, model: str, tp: int) -> Deployment:
        """The deployment with the engine settings vLLM's server starts it with (batch limits
        for the GPU; max_model_len the model's context, or where the KV cache cannot hold
        that, the longest it holds, as a benchmark that ran must have been given)."""
        get_gpu(gpu), resolve_model(model)  # an unknown name is a one-line InputError
        engine = deployed_engine(gpu, model, tp)
        blocks = deployment_num_gpu_blocks(engine, DeploymentSettings(model=model, gpu=gpu, tp=tp))
        fitted = max_model_len_for_pool(engine.max_model_len, blocks, engine.block_size)
        if fitted != engine.max_model_len:
            engine = engine.model_copy(update={"max_model_len": fitted})
        return cls(gpu, model, tp, engine)


def replay_requests(
    requests: list[tuple[int, int]],
    send_times_s: list[float] | None,
    max_concurrency: int | None,
    deployment: Deployment,
    cost_model: CostModel,
    frontend: FrontEnd,
) -> ReplayedRun:
    """Simulate (input_len, output_len) requests sent at `send_times_s` (None: all at once), at
    most `max_concurrency` in flight (a new one is sent when one finishes)."""
    too_long = first_too_long_prompt((input_len for input_len, _ in requests), deployment)
    if too_long is not None:  # checked before any token list is built: lengths may be huge
        index, input_len = too_long
        raise InputError(
            f"request {index}: prompt of {input_len} tokens must be shorter than max_model_len "
            f"{deployment.engine.max_model_len}"
        )
    specs = _specs(requests, send_times_s, max_concurrency, deployment.engine.max_model_len)
    settings = _Settings(
        deployment.engine,
        DeploymentSettings(model=deployment.model, gpu=deployment.gpu, tp=deployment.tp),
    )
    collector = _Collector()
    simulate(specs, scheduler_config(settings), cost_model, recorder=collector, frontend=frontend)
    by_id = {record.request_id: record for record in collector.records}
    missing = [index for index in range(len(requests)) if f"bench-{index}" not in by_id]
    if missing:
        raise InputError(
            f"request {missing[0]} ({requests[missing[0]][0]} prompt tokens): the simulated "
            f"engine did not finish it ({len(missing)} of {len(requests)} unfinished)"
        )
    records = [by_id[f"bench-{index}"] for index in range(len(requests))]
    return ReplayedRun(
        ttfts_s=[r.ttft_s for r in records],
        decode_times_s=[r.finished_at - r.first_token_at for r in records],
        output_lens=[r.num_output_tokens for r in records],
        e2e_s=[r.e2e_s for r in records],
    )


def num_emitted_outputs(input_len: int, output_len: int, max_model_len: int) -> int:
    """Output tokens the engine emits for a prompt that fits: the `output_len` asked for, up to
    max_model_len, where it stops the request (a replay builds no more)."""
    return min(output_len, max_model_len - input_len)


def first_too_long_prompt(
    input_lens: Iterable[int], deployment: Deployment
) -> tuple[int, int] | None:
    """(index, length) of the first prompt the engine rejects (vLLM refuses a prompt of
    max_model_len tokens or more), or None when all fit."""
    limit = deployment.engine.max_model_len
    return next(
        ((index, length) for index, length in enumerate(input_lens) if length >= limit), None
    )


def serve_send_times(benchmark: ServeBenchmark, seed: int = 0) -> list[float] | None:
    """When each request was sent: as recorded, else all at once for an infinite rate, else
    gamma-distributed gaps at the benchmark's rate and burstiness (vLLM's own arrival process,
    drawn with `seed`: the measured gaps themselves were not saved)."""
    starts = [request.start_s for request in benchmark.requests]
    if all(start is not None for start in starts):
        return [float(start or 0.0) for start in starts]
    if math.isinf(benchmark.request_rate):
        return None
    rng = np.random.default_rng(seed)
    shape = benchmark.burstiness
    gaps = rng.gamma(shape, 1.0 / (benchmark.request_rate * shape), len(benchmark.requests))
    return [float(t) for t in np.cumsum(gaps) - gaps[0]]


@dataclass(frozen=True, slots=True)
class _Settings:
    engine: EngineSettings
    deployment: DeploymentSettings
    cost_model: str = "auto"


def _specs(
    requests: list[tuple[int, int]],
    send_times_s: list[float] | None,
    max_concurrency: int | None,
    max_model_len: int,
) -> list[RequestSpec]:
    specs = []
    for index, (input_len, output_len) in enumerate(requests):
        first = index * _TOKEN_STRIDE
        segments = [Segment("prompt", f"bench-{index}", list(range(first, first + input_len)))]
        num_outputs = num_emitted_outputs(input_len, output_len, max_model_len)
        outputs = list(range(first + input_len, first + input_len + num_outputs))
        request_id = f"bench-{index}"
        if max_concurrency is not None and index >= max_concurrency:
            # A later turn of slot (index mod c): sent when that slot's previous request ends.
            slot = index % max_concurrency
            turn = index // max_concurrency
            specs.append(
                RequestSpec(request_id, None, f"slot-{slot}", turn, 0.0, segments, outputs)
            )
            continue
        arrival = send_times_s[index] if send_times_s is not None else 0.0
        session = f"slot-{index}" if max_concurrency is not None else None
        specs.append(RequestSpec(request_id, arrival, session, 0, 0.0, segments, outputs))
    # Every slot's first turn comes before all later turns, as the driver requires.
    return specs
