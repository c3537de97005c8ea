"""CPU offloading in simulated time: the tier's settings for one replica and the timing of its
transfers on the GPU's host link (spec §13.6, §13.7.3, §13.12; docs/offload.md)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sim.costmodel import HostLink, TransferQueue, transfer_seconds
from sim.kvcache import CPU_EVICTED, CPU_STORED, CpuOffloadTier
from sim.metrics import BlockEvent, Recorder
from sim.sched import OffloadConnector, StepTransfers

# The tier's event kinds as events.parquet names them.
_EVENT_KINDS = {CPU_STORED: "cpu_stored", CPU_EVICTED: "cpu_evicted"}


@dataclass(frozen=True, slots=True)
class OffloadSpec:
    """One replica's CPU tier: `num_chunks` chunks of one GPU block, its eviction policy,
    whether only prompt blocks are stored, and the link each GPU copies its shard over."""

    num_chunks: int
    policy: str
    prompt_only: bool
    link: HostLink
    chunk_bytes_per_gpu: int  # one GPU's share of a chunk's KV
    sync_load_budget_bytes: int = 0  # per step, one GPU's bytes (spec §13.7.6); 0: all async


class TierEventForwarder:
    """Passes the tier's store completions and evictions to the recorder, stamped `now()`."""

    __slots__ = ("recorder", "clock", "replica")

    def __init__(self, recorder: Recorder, clock: TransferClock, replica: int) -> None:
        self.recorder = recorder
        self.clock = clock
        self.replica = replica

    def on_offload_event(self, kind: str, keys: Sequence[bytes]) -> None:
        """Forward one event per chunk."""
        name = _EVENT_KINDS[kind]
        at = self.clock.now
        for key in keys:
            self.recorder.on_block_event(BlockEvent(name, at, key, -1, 0, self.replica))


def make_connector(
    spec: OffloadSpec,
    block_size: int,
    recorder: Recorder | None,
    clock: TransferClock,
    *,
    gpu_prefix_caching: bool = True,
    replica: int = 0,
) -> OffloadConnector:
    """A connector over a fresh tier; its events go to `recorder` (stamped with `replica`)."""
    observer = TierEventForwarder(recorder, clock, replica) if recorder is not None else None
    tier = CpuOffloadTier(spec.num_chunks, spec.policy, observer=observer)
    return OffloadConnector(
        tier,
        block_size,
        offload_prompt_only=spec.prompt_only,
        gpu_prefix_caching=gpu_prefix_caching,
        sync_load_budget_bytes=spec.sync_load_budget_bytes,
        kv_bytes_per_token=spec.chunk_bytes_per_gpu // block_size,
    )


class TransferClock:
    """When each transfer job finishes: stores and loads each queue on their own copy stream,
    starting once the forward pass of the step that planned them is over; a sync load runs
    on its own (expedited) stream before its step's forward, which waits for it."""

    __slots__ = ("chunk_bytes", "link", "stores", "loads", "finish_at", "now")

    def __init__(self, spec: OffloadSpec) -> None:
        self.chunk_bytes = spec.chunk_bytes_per_gpu
        self.link = spec.link
        self.stores = TransferQueue(spec.link)
        self.loads = TransferQueue(spec.link)
        self.finish_at: dict[int, float] = {}
        self.now = 0.0  # the engine's current time, for event stamps

    def submit(self, transfers: StepTransfers, forward_end_s: float) -> None:
        """Queue the step's new jobs behind the forward that ends at `forward_end_s`."""
        for job in transfers.stores:
            num_bytes = len(job.keys) * self.chunk_bytes
            self.finish_at[job.job_id] = self.stores.submit(forward_end_s, num_bytes)
        for job in transfers.loads:
            if job.is_sync_load:
                self.finish_at[job.job_id] = forward_end_s  # done before the forward
                continue
            num_bytes = len(job.keys) * self.chunk_bytes
            self.finish_at[job.job_id] = self.loads.submit(forward_end_s, num_bytes)

    def sync_load_wait_s(self, transfers: StepTransfers) -> float:
        """How long the step's forward waits for its sync loads, copied one after another."""
        return sum(
            transfer_seconds(self.link, len(job.keys) * self.chunk_bytes)
            for job in transfers.loads
            if job.is_sync_load
        )

    def flush_wait_s(self, transfers: StepTransfers, start_s: float) -> float:
        """How long the step's forward waits for the jobs it flushes."""
        finishes = [self.finish_at[job_id] for job_id in transfers.flush]
        return max(0.0, max(finishes, default=start_s) - start_s)

    def next_finish_s(self) -> float | None:
        """When the earliest job in flight finishes, if any."""
        return min(self.finish_at.values(), default=None)

    def take_done(self, step_end_s: float, flushed: set[int]) -> list[int]:
        """Jobs seen done by the poll at a step's end (flushed ones included), by finish time."""
        done = sorted(
            (finish, job_id)
            for job_id, finish in self.finish_at.items()
            if finish <= step_end_s or job_id in flushed
        )
        for _, job_id in done:
            del self.finish_at[job_id]
        return [job_id for _, job_id in done]
