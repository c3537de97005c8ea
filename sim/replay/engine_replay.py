"""`prefixsim engine replay`: drive the scheduler step by step (replay_formats.md §2).

Time is the step number; a fake model emits the tokens each `add` lists.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections import deque
from collections.abc import Iterator
from collections.abc import Set as AbstractSet
from pathlib import Path
from typing import Any

from sim.kvcache import BLOCK_EVICTED, BLOCK_STORED, HashKeys, PrefixCacheStats
from sim.native import DEFAULT_CORE
from sim.replay.cache_replay import parse_lora, parse_salt
from sim.replay.offload_engine import (
    OFFLOAD_CONFIG_KEYS,
    FixedDelayWorker,
    OffloadReplayConfig,
    make_connector,
    offload_step_fields,
)
from sim.replay.ops import Op, ReplayLine, check_hash_algo, read_ops
from sim.sched import (
    POLICIES,
    NativeScheduler,
    OffloadStats,
    Request,
    Scheduler,
    SchedulerConfig,
    SchedulerOutput,
    StepOutput,
    apply_step_output,
    defaults,
    native_scheduler_covers,
)

# The most engine steps one op may ask for: a step script is a fidelity harness, and a million
# steps is minutes of replay already.
MAX_STEPS_PER_OP = 1_000_000
ENGINE_OPS = frozenset({"config", "add", "step", "run_until_idle", "abort", "reset_prefix_cache"})
_CONFIG_KEYS = (
    frozenset(
        {
            "num_blocks",
            "block_size",
            "max_num_batched_tokens",
            "max_num_seqs",
            "max_model_len",
            "enable_chunked_prefill",
            "long_prefill_token_threshold",
            "policy",
            "watermark",
            "scheduler_reserve_full_isl",
            "hash_algo",
            "hash_seed",
            "enable_caching",
            "async_scheduling",
            "long_prefill_token_threshold_adaptive",
            "max_num_active_seqs",
            "prefill_schedule_interval",
        }
    )
    | OFFLOAD_CONFIG_KEYS
)
_OP_KEYS = {
    "add": frozenset(
        {"id", "prompt", "outputs", "priority", "cache_salt", "lora", "prompt_logprobs"}
    ),
    "step": frozenset({"n"}),
    "run_until_idle": frozenset({"max_steps"}),
    "abort": frozenset({"id"}),
    "reset_prefix_cache": frozenset({"reset_external"}),
}


def scheduler_config_from_op(op: Op | None) -> SchedulerConfig:
    """Validate a config op into a SchedulerConfig (defaults when there is none)."""
    if op is None:
        return SchedulerConfig()
    op.check_keys(_CONFIG_KEYS)
    hash_seed = op.fields.get("hash_seed")
    if hash_seed is not None and not isinstance(hash_seed, str):
        raise op.error(f"'hash_seed' must be a string or null, got {hash_seed!r}")
    try:
        return SchedulerConfig(
            num_gpu_blocks=op.get_num_blocks(),
            block_size=op.get_int("block_size", defaults.BLOCK_SIZE, minimum=1),
            max_num_batched_tokens=op.get_int(
                "max_num_batched_tokens", defaults.SCHEDULER_MAX_NUM_BATCHED_TOKENS, minimum=1
            ),
            max_num_seqs=op.get_int("max_num_seqs", defaults.SCHEDULER_MAX_NUM_SEQS, minimum=1),
            max_model_len=op.get_int("max_model_len", defaults.SCHEDULER_MAX_MODEL_LEN, minimum=2),
            enable_chunked_prefill=op.get_bool(
                "enable_chunked_prefill", defaults.ENABLE_CHUNKED_PREFILL
            ),
            long_prefill_token_threshold=op.get_int(
                "long_prefill_token_threshold", defaults.LONG_PREFILL_TOKEN_THRESHOLD
            ),
            policy=op.get_str("policy", defaults.POLICY, choices=POLICIES),
            watermark=op.get_float("watermark", defaults.WATERMARK, minimum=0.0, maximum=1.0),
            scheduler_reserve_full_isl=op.get_bool(
                "scheduler_reserve_full_isl", defaults.SCHEDULER_RESERVE_FULL_ISL
            ),
            enable_caching=op.get_bool("enable_caching", defaults.ENABLE_PREFIX_CACHING),
            hash_algo=check_hash_algo(op),
            hash_seed=hash_seed,
            async_scheduling=op.get_bool("async_scheduling", defaults.SCHEDULER_ASYNC_SCHEDULING),
            long_prefill_token_threshold_adaptive=op.get_bool(
                "long_prefill_token_threshold_adaptive",
                defaults.LONG_PREFILL_TOKEN_THRESHOLD_ADAPTIVE,
            ),
            max_num_active_seqs=op.get_optional_int("max_num_active_seqs", minimum=1),
            prefill_schedule_interval=op.get_int(
                "prefill_schedule_interval", defaults.PREFILL_SCHEDULE_INTERVAL, minimum=1
            ),
        )
    except ValueError as error:
        raise op.error(str(error)) from None


class _StepEventLog:
    """Counts blocks stored and collects hashes evicted during one engine step."""

    __slots__ = ("num_stored", "evicted")

    def __init__(self) -> None:
        self.num_stored = 0
        self.evicted: list[bytes] = []

    def on_block_event(
        self, kind: str, block_hash: bytes, block_id: int, num_tokens: int, now: float
    ) -> None:
        if kind == BLOCK_STORED:
            self.num_stored += 1
        elif kind == BLOCK_EVICTED:
            self.evicted.append(block_hash)


class EngineReplay:
    """Applies engine ops to one Scheduler and reports every step."""

    def __init__(self, config: SchedulerConfig, offload: OffloadReplayConfig | None = None) -> None:
        self.config = config
        self.offload = offload
        self.events = _StepEventLog()
        connector = (
            make_connector(offload, config.block_size, config.enable_caching) if offload else None
        )
        # Every step is reported, so request state must be exact after each: the compiled
        # scheduler always is; the reference is on its straightforward path.
        self.scheduler: Scheduler | NativeScheduler = (
            NativeScheduler(config, self.events)
            if native_scheduler_covers(config, connector)
            else Scheduler(config, observer=self.events, offload=connector)
        )
        self.worker = FixedDelayWorker(offload) if offload else None
        # The external counters as of the latest processed step (vLLM reports them with it).
        self.reported_offload_stats = OffloadStats()
        self.labels: dict[bytes, str] = {}
        self.evicted_sequence: list[bytes] = []
        self.cumulative = PrefixCacheStats()
        self.num_steps = 0
        # Steps scheduled but not yet processed, newest first, with their step numbers.
        self.in_flight: deque[tuple[int, SchedulerOutput | StepOutput]] = deque()
        self.max_in_flight = 2 if config.async_scheduling else 1

    def header(self) -> dict[str, Any]:
        """The first output line."""
        config = self.config
        return {
            "op": "header",
            "config": {
                "num_blocks": config.num_gpu_blocks,
                "block_size": config.block_size,
                "max_num_batched_tokens": config.max_num_batched_tokens,
                "max_num_seqs": config.max_num_seqs,
                "max_model_len": config.max_model_len,
                "enable_chunked_prefill": config.enable_chunked_prefill,
                "long_prefill_token_threshold": config.long_prefill_token_threshold,
                "policy": config.policy,
                "watermark": config.watermark,
                "scheduler_reserve_full_isl": config.scheduler_reserve_full_isl,
                "hash_algo": config.hash_algo,
                "async_scheduling": config.async_scheduling,
                "long_prefill_token_threshold_adaptive": (
                    config.long_prefill_token_threshold_adaptive
                ),
                "max_num_active_seqs": config.max_num_active_seqs,
                "prefill_schedule_interval": config.prefill_schedule_interval,
                **(self.offload.as_dict() if self.offload else {}),
            },
        }

    def apply(self, op: Op) -> Iterator[dict[str, Any]]:
        """Run one op; yields its output lines (one per engine step for step ops)."""
        op.check_keys(_OP_KEYS[op.name])
        if op.name == "add":
            yield self._add(op)
        elif op.name == "abort":
            yield self._abort(op)
        elif op.name == "reset_prefix_cache":
            reset = self.scheduler.reset_prefix_cache(
                float(self.num_steps), reset_external=op.get_bool("reset_external", False)
            )
            yield {"op": "reset_prefix_cache", "reset": reset}
        elif op.name == "step":
            for _ in range(op.get_int("n", 1, minimum=1, maximum=MAX_STEPS_PER_OP)):
                line = self.step()
                assert line is not None  # a forced iteration always reports
                yield line
        else:
            yield from self._run_until_idle(op)

    def _add(self, op: Op) -> dict[str, Any]:
        request_id = op.get_id()
        if request_id in self.scheduler.requests:
            raise op.error(f"request {request_id!r} is already queued or running")
        prompt = op.get_tokens("prompt")
        outputs = op.get_tokens("outputs")
        lora_name, lora_path = parse_lora(op)
        priority = op.fields.get("priority", 0)
        if isinstance(priority, bool) or not isinstance(priority, int):
            raise op.error(f"'priority' must be an integer, got {priority!r}")
        request = Request(
            request_id,
            prompt,
            outputs,
            self.scheduler.hasher,
            arrival_at=float(self.num_steps),
            priority=priority,
            hash_keys=HashKeys(lora_name=lora_name, lora_path=lora_path, cache_salt=parse_salt(op)),
            skip_reading_prefix_cache=op.fields.get("prompt_logprobs") is not None,
        )
        try:
            self.scheduler.add_request(request)
        except ValueError as error:
            raise op.error(str(error)) from None
        self._label(request, 0)
        return {"op": "add", "id": request_id, "num_tokens": request.num_tokens}

    def _abort(self, op: Op) -> dict[str, Any]:
        request_id = op.get_id()
        request = self.scheduler.abort_request(request_id, float(self.num_steps))
        if request is None:
            return {"op": "abort", "id": request_id, "ignored": True}  # spec §12.2
        return {"op": "abort", "id": request_id, "status": request.status.value}

    def _run_until_idle(self, op: Op) -> Iterator[dict[str, Any]]:
        """Step while the engine loop would (spec §12.3): an idle engine prints nothing."""
        max_steps = op.get_int("max_steps", 10000, minimum=1, maximum=MAX_STEPS_PER_OP)
        for _ in range(max_steps):
            if not self.has_work:
                return
            line = self.step(force=False)
            if line is not None:
                yield line
        if self.has_work:
            raise op.error(f"still busy after max_steps={max_steps} steps")

    @property
    def has_work(self) -> bool:
        """The engine loop steps while the scheduler has requests or a step is in flight."""
        return self.scheduler.has_requests or bool(self.in_flight)

    def step(self, force: bool = True) -> dict[str, Any] | None:
        """One engine iteration; None when there was nothing to do (never when forced).

        Sync: schedule, fake execute, update from output. Async (vLLM's engine core with a
        queue of two batches): schedule if there is work, and stop there while fewer than two
        steps are in flight and there is more to schedule; otherwise process the oldest step
        in flight. A forced iteration (the `step` op) schedules even on an idle engine.
        """
        self.events.num_stored = 0
        self.events.evicted.clear()
        scheduler = self.scheduler
        in_flight = self.in_flight
        output: SchedulerOutput | StepOutput | None = None
        if scheduler.has_requests or (force and not in_flight):
            self.num_steps += 1
            output = scheduler.schedule(float(self.num_steps))
            in_flight.appendleft((self.num_steps, output))
            if len(in_flight) < self.max_in_flight and (
                output.total_num_scheduled_tokens or scheduler.has_requests
            ):
                line = self._step_line(output, None, [])
                if self.offload:
                    line.update(self._offload_fields(output, []))
                return line
        elif not in_flight:
            return None
        else:
            self.num_steps += 1
        processed_step, oldest = in_flight.pop()
        done: list[int] = []
        if self.worker is not None:
            # Runs with a CPU tier use the reference scheduler (native_scheduler_covers).
            assert isinstance(scheduler, Scheduler) and isinstance(oldest, SchedulerOutput)
            done = self.worker.done_after(processed_step, oldest)
        aborted_while_loading = set(scheduler.aborted_while_loading)
        result = apply_step_output(scheduler, oldest, float(self.num_steps), done)
        # Like vLLM, a request aborted during its load leaves when the load lands.
        released = aborted_while_loading - scheduler.aborted_while_loading.keys()
        self.cumulative.add(result.prefix_cache_stats)
        for request in result.sampled:
            self._label(request, 0)
        line = self._step_line(output, processed_step, result.finished, released)
        if self.offload:
            offload = scheduler.offload
            assert offload is not None
            self.reported_offload_stats = dataclasses.replace(offload.stats)
            line.update(self._offload_fields(output, done))
        return line

    def _offload_fields(
        self, scheduled: SchedulerOutput | StepOutput | None, done: list[int]
    ) -> dict[str, Any]:
        scheduler = self.scheduler
        # Runs with a CPU tier use the reference scheduler (native_scheduler_covers).
        assert isinstance(scheduler, Scheduler) and not isinstance(scheduled, StepOutput)
        return offload_step_fields(
            scheduler, scheduled, done, self.labels, self.reported_offload_stats
        )

    def _step_line(
        self,
        output: SchedulerOutput | StepOutput | None,
        processed_step: int | None,
        finished: list[Request],
        released: AbstractSet[str] = frozenset(),
    ) -> dict[str, Any]:
        """The result line of one iteration: what it scheduled, then the state after it."""
        scheduler = self.scheduler
        manager = scheduler.kv_cache_manager
        evicted = self.events.evicted
        self.evicted_sequence.extend(evicted)
        if output is None:
            output = SchedulerOutput()
        line: dict[str, Any] = {
            "op": "step",
            "step": self.num_steps,
            "scheduled": dict(output.num_scheduled_tokens),
            "num_scheduled_tokens": output.total_num_scheduled_tokens,
            "admitted": [
                {"id": a.request.request_id, "hit_tokens": a.num_hit_tokens, "resumed": a.resumed}
                for a in output.admitted
                if not a.after_load
            ],
            "preempted": sorted(request.request_id for request in output.preempted),
        }
        if self.config.async_scheduling:
            line["processed_step"] = processed_step
        line.update(
            {
                "finished": sorted({*released, *(r.request_id for r in finished)}),
                "running": [request.request_id for request in scheduler.running],
                "waiting": [request.request_id for request in scheduler.waiting],
                "stored": self.events.num_stored,
                "evicted_labels": [self.labels.get(block_hash) for block_hash in evicted],
                "num_free_blocks": manager.num_free_blocks,
                "usage": round(manager.usage, 6),
                "cum": self.cumulative.as_dict(),
            }
        )
        return line

    def summary(self) -> dict[str, Any]:
        """The last output line."""
        return {
            "op": "summary",
            "steps": self.num_steps,
            "cum": self.cumulative.as_dict(),
            "total_preemptions": self.scheduler.num_preemptions,
            "num_evictions": self.scheduler.kv_cache_manager.block_pool.num_evictions,
            "evicted_sequence_labels": [self.labels.get(h) for h in self.evicted_sequence],
        }

    def _label(self, request: Request, start: int) -> None:
        for index in range(start, len(request.block_hashes)):
            self.labels.setdefault(request.block_hashes[index], f"{request.request_id}#{index}")


def replay_engine(path: Path, core: str = DEFAULT_CORE) -> Iterator[ReplayLine]:
    """Replay an engine op script: a header line, add and step lines, then the summary.

    An op's `expect` is checked against its last line (with the cumulative counters and, for
    run_until_idle, the summary fields as of that point).
    """
    ops = read_ops(path, ENGINE_OPS)
    first = next(ops, None)
    config_op = first if first is not None and first.name == "config" else None
    config = dataclasses.replace(scheduler_config_from_op(config_op), core=core)
    offload = OffloadReplayConfig.from_op(config_op)
    replay = EngineReplay(config, offload)
    header = replay.header()
    yield ReplayLine(None, header, header)
    pending = [] if first is None or config_op is not None else [first]
    for op in itertools.chain(pending, ops):
        if op.name == "config":
            raise op.error("a config op may only be the first line")
        last: dict[str, Any] | None = None
        for line in replay.apply(op):
            if last is not None:
                yield ReplayLine(None, last, last)
            last = line
        observed = {**(last or {}), **replay.cumulative.as_dict()}
        if op.name == "run_until_idle":
            observed.update(replay.summary())
        yield ReplayLine(op, last, observed)
    summary = replay.summary()
    yield ReplayLine(None, summary, summary)
