"""The CPU offload tier in `prefixsim engine replay` (spec §13): its config keys, a fake worker
that reports each transfer done a fixed number of steps after the step that planned it, and
the offload fields of each step line (the format of the offload scheduler oracle,
tests/differential/offload/vllm_offload_sched_oracle.py)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sim.kvcache import OFFLOAD_POLICIES, CpuOffloadTier, RequestStatus
from sim.replay.ops import Op
from sim.sched import OffloadConnector, OffloadStats, Scheduler, SchedulerOutput, StepTransfers

OFFLOAD_CONFIG_KEYS = frozenset(
    {
        "offload_chunks",
        "offload_policy",
        "store_delay",
        "load_delay",
        "offload_prompt_only",
        "sync_load_budget_tokens",
    }
)
# Far beyond any replay; keeps a typo from allocating a huge tier.
MAX_REPLAY_CHUNKS = 10_000_000


@dataclass(frozen=True, slots=True)
class OffloadReplayConfig:
    """The CPU tier of a replay, its fixed transfer delays (in steps) and its sync-load budget
    in tokens (spec §13.7.6; 0: every CPU hit is an async load)."""

    num_chunks: int
    policy: str
    store_delay: int
    load_delay: int
    prompt_only: bool
    sync_load_budget_tokens: int = 0

    @classmethod
    def from_op(cls, op: Op | None) -> OffloadReplayConfig | None:
        """The offload settings of a config op; None when `offload_chunks` is absent or 0."""
        if op is None or not op.fields.get("offload_chunks"):
            return None
        num_chunks = op.get_int("offload_chunks", minimum=1)
        if num_chunks > MAX_REPLAY_CHUNKS:
            raise op.error(f"'offload_chunks' must be at most {MAX_REPLAY_CHUNKS:,}")
        return cls(
            num_chunks=num_chunks,
            policy=op.get_str("offload_policy", "lru", choices=OFFLOAD_POLICIES),
            store_delay=op.get_int("store_delay", 1),
            load_delay=op.get_int("load_delay", 1),
            prompt_only=op.get_bool("offload_prompt_only", True),
            sync_load_budget_tokens=op.get_int("sync_load_budget_tokens", 0),
        )

    def as_dict(self) -> dict[str, Any]:
        """The settings as the header prints them."""
        return {
            "offload_chunks": self.num_chunks,
            "offload_policy": self.policy,
            "store_delay": self.store_delay,
            "load_delay": self.load_delay,
            "offload_prompt_only": self.prompt_only,
            "sync_load_budget_tokens": self.sync_load_budget_tokens,
        }


class FixedDelayWorker:
    """Reports a job done in the output of step S + delay, S being the step that planned it,
    or of the first step processed after that (async: a step number may be an iteration that
    only processed); a sync load and a job the step flushes in that step's output."""

    __slots__ = ("config", "due")

    def __init__(self, config: OffloadReplayConfig) -> None:
        self.config = config
        self.due: dict[int, list[int]] = {}

    def done_after(self, step: int, output: SchedulerOutput) -> list[int]:
        """Queue the step's new jobs; the job ids reported done in its output, in order."""
        transfers = output.transfers
        assert transfers is not None
        for job in transfers.stores:
            self.due.setdefault(step + self.config.store_delay, []).append(job.job_id)
        for job in transfers.loads:
            delay = 0 if job.is_sync_load else self.config.load_delay
            self.due.setdefault(step + delay, []).append(job.job_id)
        done: list[int] = []
        for due_step in sorted(due_step for due_step in self.due if due_step <= step):
            done.extend(self.due.pop(due_step))
        flush = transfers.flush
        if flush:
            for due_step in sorted(self.due):
                jobs = self.due[due_step]
                done.extend(job_id for job_id in jobs if job_id in flush)
                self.due[due_step] = [job_id for job_id in jobs if job_id not in flush]
        return done


def make_connector(
    config: OffloadReplayConfig, block_size: int, gpu_prefix_caching: bool
) -> OffloadConnector:
    """The connector over a fresh tier of `config.num_chunks` chunks (its sync-load budget
    counted in tokens: one byte per token)."""
    return OffloadConnector(
        CpuOffloadTier(config.num_chunks, config.policy),
        block_size,
        offload_prompt_only=config.prompt_only,
        gpu_prefix_caching=gpu_prefix_caching,
        sync_load_budget_bytes=config.sync_load_budget_tokens,
        kv_bytes_per_token=1,
    )


def offload_step_fields(
    scheduler: Scheduler,
    scheduled: SchedulerOutput | None,
    done: list[int],
    labels: dict[bytes, str],
    reported: OffloadStats,
) -> dict[str, Any]:
    """The offload fields of one iteration's line: the transfers of the step it scheduled (if
    any), the jobs reported done by the step it processed, and the counters as the latest
    processed step reported them."""
    offload = scheduler.offload
    assert offload is not None
    transfers = scheduled.transfers if scheduled is not None else None
    if transfers is None:
        transfers = StepTransfers()
    tier = offload.tier

    def label(key: bytes) -> str:
        return labels.get(key, key.hex()[:16])

    policy_state = {
        name: [label(key) for key in value] if isinstance(value, list) else value
        for name, value in tier.policy.snapshot().items()
    }
    stats = reported
    return {
        "waiting_kv": sorted(
            request_id
            for request_id, request in scheduler.requests.items()
            if request.status is RequestStatus.WAITING_FOR_REMOTE_KVS
        ),
        "loads": [[job.job_id, job.request_id, len(job.keys)] for job in transfers.loads],
        "stores": [[job.job_id, job.request_id, len(job.keys)] for job in transfers.stores],
        "flush": sorted(transfers.flush),
        "done": done,
        "ext": {
            "queries": stats.queries,
            "hits": stats.hits,
            "preempted_queries": stats.preempted_queries,
            "preempted_hits": stats.preempted_hits,
            "host": stats.host_hit_tokens,
        },
        "cpu": policy_state,
        "cpu_pinned": {label(key): n for key, n in tier.ref_counts.items() if n != 0},
    }
