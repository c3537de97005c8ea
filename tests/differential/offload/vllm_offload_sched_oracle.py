#!/usr/bin/env python3
"""Drive vLLM 0.33.0's real v1 Scheduler with CPU offloading on (the OffloadingConnector and
its CPUOffloadingManager, LRU or ARC) and a fake worker, step by step; one JSON line per step.

prefixsim's own harness (oracle venv only): it subclasses the scheduler oracle of
tests/differential/oracle (same workload format; sync scheduling, or with
"async_scheduling": true vLLM's AsyncScheduler through the async engine-core loop) and only
calls vLLM.

Extra config keys (the config op):
  "offload_chunks": N        CPU tier size in chunks (one GPU block each); required to turn
                             offloading on; kv_offloading_size is N pages of 4096 bytes
  "offload_policy": "lru"    or "arc"
  "store_delay": 1           a store job planned in step S is reported done in the output of
  "load_delay": 1            step S + delay (loads likewise), or of the first step processed
                             after that (async: not every step number is a processed batch);
                             jobs vLLM asks to flush are reported in the output of the step
                             that flushes them
  "offload_prompt_only": true   false also stores blocks filled by decoding
  "sync_load_budget_tokens": 0  sync_load_budget_bytes in tokens of the harness's layout; a
                             sync load is reported done in the output of its own step

One more op: {"op": "reset_prefix_cache", "reset_external": false} calls the scheduler's
reset_prefix_cache (running requests left alone; reset_connector = reset_external) between
iterations and prints {"op": "reset_prefix_cache", "reset": <the result>}.

Each step line adds: "loads" and "stores" ([job id, request, chunks] planned by the batch
scheduled in this iteration, if any), "flush" (job ids), "done" (job ids reported by the batch
processed in this iteration, if any), "waiting_kv" (requests in
WAITING_FOR_REMOTE_KVS), "ext" (cumulative external_prefix_cache counters: queries, hits,
preempted_queries, preempted_hits, host, as reported by the latest processed step), "cpu"
(the tier: LRU "order" or ARC "t1", "t2", "b1", "b2", "p", keys as block labels) and
"cpu_pinned" (labels with a ref count other than 0).
"stored" and "evicted_labels" stay the GPU cache's (CPU-medium KV events are left out).

vLLM iterates the ids of finished requests as a set, whose order is arbitrary; this harness
keeps them in the order they finished (an insertion-ordered set), which is what prefixsim does.

Usage:
    python vllm_offload_sched_oracle.py WORKLOAD.jsonl [...] [--outdir DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from types import SimpleNamespace

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "oracle"))

import vllm_sched_oracle as base  # noqa: E402  (imports vLLM)
from vllm.config import KVTransferConfig  # noqa: E402
from vllm.distributed.kv_transfer.kv_connector.v1.offloading.common import (  # noqa: E402
    OffloadingWorkerMetadata,
)
from vllm.v1.core.sched.async_scheduler import AsyncScheduler  # noqa: E402
from vllm.v1.core.sched.scheduler import Scheduler  # noqa: E402
from vllm.v1.kv_cache_interface import (  # noqa: E402
    FullAttentionSpec,
    KVCacheConfig,
    KVCacheGroupSpec,
)
from vllm.v1.outputs import KVConnectorOutput  # noqa: E402
from vllm.v1.request import RequestStatus  # noqa: E402
from vllm.v1.structured_output import StructuredOutputManager  # noqa: E402

OFFLOAD_DEFAULTS = {
    "offload_chunks": None,
    "offload_policy": "lru",
    "store_delay": 1,
    "load_delay": 1,
    "offload_prompt_only": True,
    "sync_load_budget_tokens": 0,
}
PAGE_BYTES = 4096  # each chunk of the harness's tiny KV layout pads to one page
KV_BYTES_PER_TOKEN = 8  # that layout: K and V of one float32 head of size 1


class OrderedIdSet(dict):
    """The finished-id set, iterated in the order ids were added."""

    def add(self, request_id: str) -> None:
        self[request_id] = None


class OffloadSchedOracle(base.SchedOracle):
    def __init__(self, cfg: dict):
        offload = {k: cfg.get(k, v) for k, v in OFFLOAD_DEFAULTS.items()}
        super().__init__({k: v for k, v in cfg.items() if k not in OFFLOAD_DEFAULTS})
        self.cfg.update(offload)
        self.store_delay = int(offload["store_delay"])
        self.load_delay = int(offload["load_delay"])
        if offload["offload_chunks"]:
            self._build_offloading_scheduler(offload)
        self.sched.finished_req_ids = OrderedIdSet()
        self.due: dict[int, list[tuple[int, str | None]]] = {}
        self.ext = dict.fromkeys(
            ("queries", "hits", "preempted_queries", "preempted_hits", "host"), 0
        )
        self._kv_output = None
        self._engine_outputs: dict = {}
        update_from_output = self.sched.update_from_output

        def update_with_transfers(so, mro):
            # The fake worker's report rides on the model output, as the real worker's does.
            mro.kv_connector_output = self._kv_output
            self._engine_outputs = update_from_output(so, mro)
            return self._engine_outputs

        self.sched.update_from_output = update_with_transfers

    def _build_offloading_scheduler(self, offload: dict) -> None:
        c = self.cfg
        bs = int(c["block_size"])
        self.vllm_config.kv_transfer_config = KVTransferConfig(
            kv_connector="OffloadingConnector",
            kv_role="kv_both",
            kv_connector_extra_config={
                "cpu_bytes_to_use": int(offload["offload_chunks"]) * PAGE_BYTES,
                "eviction_policy": offload["offload_policy"],
                "offload_prompt_only": bool(offload["offload_prompt_only"]),
                "sync_load_budget_bytes": int(offload["sync_load_budget_tokens"])
                * KV_BYTES_PER_TOKEN,
            },
        )
        kv_cfg = KVCacheConfig(
            num_blocks=int(c["num_blocks"]),
            kv_cache_tensors=[],
            kv_cache_groups=[
                KVCacheGroupSpec(
                    ["layer.0"],
                    FullAttentionSpec(
                        block_size=bs, num_kv_heads=1, head_size=1, dtype=base.torch.float32
                    ),
                )
            ],
        )
        # The CPU platform turns async scheduling off in the config; on a GPU it stays on, and
        # the scheduler reads it (max_concurrent_batches) to defer block frees.
        self.vllm_config.scheduler_config.async_scheduling = bool(c["async_scheduling"])
        scheduler_class = AsyncScheduler if c["async_scheduling"] else Scheduler
        self.sched = scheduler_class(
            vllm_config=self.vllm_config,
            kv_cache_config=kv_cfg,
            structured_output_manager=StructuredOutputManager(self.vllm_config),
            block_size=bs,
            log_stats=True,
        )
        self.sched.kv_event_publisher = self.publisher
        manager = self.sched.connector.scheduler.manager
        assert manager._num_chunks == int(offload["offload_chunks"])
        assert self.sched.connector.scheduler.config.kv_bytes_per_token == KV_BYTES_PER_TOKEN
        # kv_both counts as a KV consumer: with two batches in flight frees are deferred.
        assert self.sched.defer_block_free == bool(c["async_scheduling"])

    def iterate(self, force: bool = False) -> dict | None:
        line = super().iterate(force)
        if line is not None:
            line.setdefault("done", [])  # nothing was processed in this iteration
        return line

    def _schedule(self) -> dict:
        batch = super()._schedule()
        self.sched.finished_req_ids = OrderedIdSet()
        loads, stores, flush = [], [], []
        meta = batch["so"].kv_connector_metadata
        if meta is not None:
            step = batch["step"]
            for job_id, job in meta.store_jobs.items():
                stores.append([job_id, job.req_id, len(job.dst_spec.block_ids)])
                self.due.setdefault(step + self.store_delay, []).append((job_id, None))
            for job_id, job in meta.load_jobs.items():
                loads.append([job_id, job.req_id, len(job.src_spec.block_ids)])
                # A sync load is done before the step's forward and not "received".
                due = (step, None) if job.sync else (step + self.load_delay, job.req_id)
                self.due.setdefault(due[0], []).append((job_id, due[1]))
            flush = sorted(meta.jobs_to_flush or ())
        batch.update(loads=loads, stores=stores, flush=flush)
        return batch

    def _step_line(self, batch: dict | None) -> dict:
        line = super()._step_line(batch)
        if batch is None:
            line.update(loads=[], stores=[], flush=[])
        else:
            line.update(loads=batch["loads"], stores=batch["stores"], flush=batch["flush"])
        return line

    def _process(self, batch: dict) -> dict:
        done = []
        for due_step in sorted(step for step in self.due if step <= batch["step"]):
            done.extend(self.due.pop(due_step))
        flush = set(batch["flush"])
        for due_step in sorted(self.due):
            done.extend(job for job in self.due[due_step] if job[0] in flush)
            self.due[due_step] = [job for job in self.due[due_step] if job[0] not in flush]
        worker_meta = OffloadingWorkerMetadata()
        for job_id, _ in done:
            worker_meta.mark_completed(job_id)
        self._kv_output = (
            KVConnectorOutput(
                finished_recving={rid for _, rid in done if rid is not None} or None,
                kv_connector_worker_meta=worker_meta if done else None,
            )
            if self.sched.connector is not None
            else None
        )
        result = super()._process(batch)
        for eco in self._engine_outputs.values():
            stats = eco.scheduler_stats
            cps = stats.connector_prefix_cache_stats if stats is not None else None
            if cps is not None:
                self.ext["queries"] += cps.queries
                self.ext["hits"] += cps.hits
                self.ext["preempted_queries"] += cps.preempted_queries
                self.ext["preempted_hits"] += cps.preempted_hits
                self.ext["host"] += sum(cps.hits_by_source.values())
        result["done"] = [job_id for job_id, _ in done]
        return result

    def _state(self) -> dict:
        # The GPU cache's events only: the connector publishes the CPU tier's too.
        self.publisher.batches = [
            SimpleNamespace(
                events=[ev for ev in batch.events if getattr(ev, "medium", None) in (None, "GPU")]
            )
            for batch in self.publisher.batches
        ]
        state = super()._state()
        s = self.sched
        state["waiting_kv"] = sorted(
            rid for rid, r in s.requests.items() if r.status == RequestStatus.WAITING_FOR_REMOTE_KVS
        )
        state["ext"] = dict(self.ext)
        state.update(self._cpu_state())
        return state

    def _label_of_key(self, key: bytes) -> str:
        block_hash = key[:-4].hex()
        return self.labels.get(block_hash, block_hash[:16])

    def _cpu_state(self) -> dict:
        connector = self.sched.connector
        if connector is None:
            return {}
        policy = connector.scheduler.manager._policy
        if self.cfg["offload_policy"] == "lru":
            order = sorted(policy.chunks, key=lambda k: (policy._ranks[k], k))
            state: dict = {"order": [self._label_of_key(k) for k in order]}
            chunks = policy.chunks
        else:
            state = {
                name: [self._label_of_key(k) for k in getattr(policy, name)]
                for name in ("t1", "t2", "b1", "b2")
            }
            state["p"] = float(policy.target_t1_size)
            chunks = {**policy.t1, **policy.t2}
        pinned = {self._label_of_key(k): c.ref_cnt for k, c in chunks.items() if c.ref_cnt != 0}
        return {"cpu": state, "cpu_pinned": pinned}


_base_apply_op = base.apply_op


def apply_op(o: base.SchedOracle, op: dict, emit, lineno="?") -> dict | None:
    """base.apply_op plus the reset_prefix_cache op (installed in its place, so the workload
    generator, which calls base.apply_op, can emit it too)."""
    if op.get("op") != "reset_prefix_cache":
        return _base_apply_op(o, op, emit, lineno)
    reset = o.sched.reset_prefix_cache(reset_connector=bool(op.get("reset_external", False)))
    line = {"op": "reset_prefix_cache", "reset": reset}
    emit(line)
    return line


base.apply_op = apply_op


def run_workload(path: str, out) -> None:
    ops = base.load_workload(path)
    cfg = ops[0][1] if ops and ops[0][1].get("op") == "config" else {}
    oracle = OffloadSchedOracle(cfg)
    header = {"op": "header", "vllm_version": base.vllm.__version__, "config": oracle.cfg}
    print(json.dumps(header), file=out)
    for lineno, op in ops:
        if op.get("op") != "config":
            base.apply_op(oracle, op, lambda res: print(json.dumps(res), file=out), lineno)
    print(json.dumps(base.summary(oracle)), file=out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("workloads", nargs="+")
    ap.add_argument("--outdir", help="write <name>.out.jsonl per workload here")
    args = ap.parse_args(argv)
    if args.outdir:
        os.makedirs(args.outdir, exist_ok=True)
    for path in args.workloads:
        if args.outdir:
            name = os.path.basename(path).removesuffix(".jsonl")
            with open(os.path.join(args.outdir, f"{name}.out.jsonl"), "w") as out:
                run_workload(path, out)
        else:
            run_workload(path, sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
