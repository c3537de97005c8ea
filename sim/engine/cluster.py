"""Engine replicas on one clock behind a router: each request goes to the replica it picks.

Every replica has the same scheduler config, so its own KV cache of `num_gpu_blocks`, and the
same hash settings, so a request hashed once can be looked up in any replica's cache. All
replicas report to one shared recorder (cluster-wide results); `replica_recorders` adds one
more recorder per replica for per-replica numbers.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import simpy

from sim.costmodel import CostModel
from sim.engine.compiled import CompiledReplicas
from sim.engine.core import ENGINE_VIEW, EngineCore, RecordView
from sim.engine.offload import OffloadSpec
from sim.kvcache import Hasher
from sim.metrics import FanOutRecorder, NullRecorder, Recorder, ReplicaRecorders, StepBuffer
from sim.routing import Router, SchedulerReplica
from sim.sched import Request, SchedulerConfig


class Cluster:
    """`num_replicas` EngineCores sharing `env` and a recorder; `submit` routes a request."""

    def __init__(
        self,
        env: simpy.Environment,
        config: SchedulerConfig,
        cost_model: CostModel,
        router: Router,
        *,
        num_replicas: int = 1,
        recorder: Recorder | None = None,
        replica_recorders: Sequence[Recorder] | None = None,
        record_block_events: bool = True,
        on_request_finished: Callable[[Request], None] | None = None,
        on_step: Callable[[float], None] | None = None,
        fast_decode_path: bool = True,
        offload: OffloadSpec | None = None,
        compiled_loop: bool = True,
        record_view: RecordView = ENGINE_VIEW,
    ) -> None:
        if num_replicas < 1:
            raise ValueError(f"a cluster needs at least one replica, got {num_replicas}")
        if replica_recorders is not None and len(replica_recorders) != num_replicas:
            raise ValueError(
                f"{len(replica_recorders)} replica recorders given for {num_replicas} replicas"
            )
        shared = recorder if recorder is not None else NullRecorder()
        engine_recorder = (
            shared
            if replica_recorders is None
            else FanOutRecorder([shared, ReplicaRecorders(replica_recorders)])
        )
        step_buffer = StepBuffer(engine_recorder)
        # One buffer and one set of compiled loops keep the replicas' steps in order.
        compiled_replicas = CompiledReplicas(env, step_buffer)
        self.router = router
        self.compiled_replicas = compiled_replicas
        self.replicas: list[EngineCore] = []
        for index in range(num_replicas):
            self.replicas.append(
                EngineCore(
                    env,
                    config,
                    cost_model,
                    recorder=engine_recorder,
                    step_buffer=step_buffer,
                    record_block_events=record_block_events,
                    on_request_finished=on_request_finished,
                    on_step=on_step,
                    fast_decode_path=fast_decode_path,
                    offload=offload,
                    replica=index,
                    compiled_loop=compiled_loop,
                    compiled_replicas=compiled_replicas,
                    record_view=record_view,
                )
            )
        self.views = [
            SchedulerReplica(index, engine.scheduler) for index, engine in enumerate(self.replicas)
        ]
        self.num_routed = [0] * num_replicas
        self._single = num_replicas == 1  # nothing to route

    def run_clock(self) -> None:
        """Run the clock until no event is left (`env.run()`, with the compiled loops' wakes
        run without a SimPy event each)."""
        self.compiled_replicas.run_clock()

    @property
    def hasher(self) -> Hasher:
        """The block hasher requests must be built with (every replica hashes alike)."""
        return self.replicas[0].hasher

    @property
    def num_steps(self) -> int:
        """Engine steps taken, summed over the replicas."""
        return sum(engine.num_steps for engine in self.replicas)

    def submit(self, request: Request) -> int:
        """Route `request` and queue it there; returns the replica index.

        A request the replica refuses (ValueError, e.g. a prompt too long) still counts as
        routed: a real router forwards it before the engine rejects it.
        """
        index = 0 if self._single else self.router.choose(request, self.views)
        self.num_routed[index] += 1
        self.replicas[index].submit(request)
        return index
