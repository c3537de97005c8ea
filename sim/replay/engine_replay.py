"""`prefixsim engine replay`: drive the scheduler step by step (replay_formats.md §2).

Time is the step number; a fake model emits the tokens each `add` lists.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from sim.kvcache import BLOCK_EVICTED, BLOCK_STORED, HashKeys, PrefixCacheStats
from sim.native import DEFAULT_CORE
from sim.replay.cache_replay import parse_lora, parse_salt
from sim.replay.ops import Op, ReplayLine, check_hash_algo, read_ops
from sim.sched import POLICIES, Request, Scheduler, SchedulerConfig

ENGINE_OPS = frozenset({"config", "add", "step", "run_until_idle", "abort"})
_CONFIG_KEYS = frozenset(
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
    }
)
_OP_KEYS = {
    "add": frozenset(
        {"id", "prompt", "outputs", "priority", "cache_salt", "lora", "prompt_logprobs"}
    ),
    "step": frozenset({"n"}),
    "run_until_idle": frozenset({"max_steps"}),
    "abort": frozenset({"id"}),
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
            block_size=op.get_int("block_size", 16, minimum=1),
            max_num_batched_tokens=op.get_int("max_num_batched_tokens", 2048, minimum=1),
            max_num_seqs=op.get_int("max_num_seqs", 128, minimum=1),
            max_model_len=op.get_int("max_model_len", 8192, minimum=2),
            enable_chunked_prefill=op.get_bool("enable_chunked_prefill", True),
            long_prefill_token_threshold=op.get_int("long_prefill_token_threshold", 0),
            policy=op.get_str("policy", "fcfs", choices=POLICIES),
            watermark=op.get_float("watermark", 0.0, minimum=0.0, maximum=1.0),
            scheduler_reserve_full_isl=op.get_bool("scheduler_reserve_full_isl", True),
            enable_caching=op.get_bool("enable_caching", True),
            hash_algo=check_hash_algo(op),
            hash_seed=hash_seed,
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

    def __init__(self, config: SchedulerConfig) -> None:
        self.config = config
        self.events = _StepEventLog()
        self.scheduler = Scheduler(config, observer=self.events)
        self.labels: dict[bytes, str] = {}
        self.evicted_sequence: list[bytes] = []
        self.cumulative = PrefixCacheStats()
        self.num_steps = 0

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
            },
        }

    def apply(self, op: Op) -> Iterator[dict[str, Any]]:
        """Run one op; yields its output lines (one per engine step for step ops)."""
        op.check_keys(_OP_KEYS[op.name])
        if op.name == "add":
            yield self._add(op)
        elif op.name == "abort":
            yield self._abort(op)
        elif op.name == "step":
            for _ in range(op.get_int("n", 1, minimum=1)):
                yield self.step()
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
        if request_id not in self.scheduler.requests:
            raise op.error(f"unknown or finished request id {request_id!r}")
        request = self.scheduler.abort_request(request_id, float(self.num_steps))
        return {"op": "abort", "id": request_id, "status": request.status.value}

    def _run_until_idle(self, op: Op) -> Iterator[dict[str, Any]]:
        max_steps = op.get_int("max_steps", 10000, minimum=1)
        for _ in range(max_steps):
            line = self.step()
            yield line
            if not line["scheduled"] and not self.scheduler.has_unfinished_requests:
                return
        raise op.error(f"still busy after max_steps={max_steps} steps")

    def step(self) -> dict[str, Any]:
        """One engine iteration: schedule, fake execute, update from output."""
        self.num_steps += 1
        self.events.num_stored = 0
        self.events.evicted.clear()
        scheduler = self.scheduler
        now = float(self.num_steps)
        output = scheduler.schedule(now)
        result = scheduler.update_from_output(output, now)
        self.cumulative.add(result.prefix_cache_stats)
        for request in result.sampled:
            self._label(request, 0)
        evicted = self.events.evicted
        self.evicted_sequence.extend(evicted)
        manager = scheduler.kv_cache_manager
        return {
            "op": "step",
            "step": self.num_steps,
            "scheduled": dict(output.num_scheduled_tokens),
            "num_scheduled_tokens": output.total_num_scheduled_tokens,
            "admitted": [
                {"id": a.request.request_id, "hit_tokens": a.num_hit_tokens, "resumed": a.resumed}
                for a in output.admitted
            ],
            "preempted": [request.request_id for request in output.preempted],
            "finished": [request.request_id for request in result.finished],
            "running": [request.request_id for request in scheduler.running],
            "waiting": [request.request_id for request in scheduler.waiting],
            "stored": self.events.num_stored,
            "evicted_labels": [self.labels.get(block_hash) for block_hash in evicted],
            "num_free_blocks": manager.num_free_blocks,
            "usage": round(manager.usage, 6),
            "cum": self.cumulative.as_dict(),
        }

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
    replay = EngineReplay(config)
    header = replay.header()
    yield ReplayLine(None, header, header)
    pending = [] if first is None or config_op is not None else [first]
    for op in itertools.chain(pending, ops):
        if op.name == "config":
            raise op.error("a config op may only be the first line")
        last: dict[str, Any] = {}
        for line in replay.apply(op):  # every op yields at least one line
            if last:
                yield ReplayLine(None, last, last)
            last = line
        observed = {**last, **last.get("cum", {})}
        if op.name == "run_until_idle":
            observed.update(replay.summary())
        yield ReplayLine(op, last, observed)
    summary = replay.summary()
    yield ReplayLine(None, summary, summary)
