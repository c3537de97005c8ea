#!/usr/bin/env python3
"""Random scheduler workloads with CPU offloading on, built op by op against vLLM's live
Scheduler with the OffloadingConnector (vllm_offload_sched_oracle.py); oracle venv only.

The workloads of tests/differential/oracle/random_workloads.py (small GPU caches, shared
prefixes, twins, multi-turn continuations, chunked prefill, long-prefill thresholds, FCFS and
priority, preemption, aborts), sync scheduling or with --async-scheduling vLLM's
AsyncScheduler, plus a CPU tier of 2 to 96 chunks, LRU or ARC, store/load delays of 0-3
steps, a sync-load budget (none in three of seven), and prefix-cache resets with and
without the CPU tier in place of some aborts. Usage and output as random_workloads.py; files
are named ow<seed>_<index>.jsonl.
"""

from __future__ import annotations

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "oracle"))

import random_workloads as rw  # noqa: E402  (imports vLLM)
from vllm_offload_sched_oracle import OffloadSchedOracle  # noqa: E402


class OffloadWorkloadGen(rw.WorkloadGen):
    def __init__(self, rng, async_scheduling: bool = False) -> None:
        super().__init__(rng, async_scheduling)
        num_blocks = self.cfg["num_blocks"]
        self.cfg["offload_chunks"] = rng.choice([2, 4, 8, 16, 32, 96, 2 * num_blocks])
        self.cfg["offload_policy"] = rng.choice(["lru", "arc"])
        self.cfg["store_delay"] = rng.choice([1, 1, 2, 3])
        self.cfg["load_delay"] = rng.choice([0, 1, 1, 2, 3])
        # Sync loads (off by default in vLLM): a per-step budget of 0 to 64 blocks' tokens.
        self.cfg["sync_load_budget_tokens"] = rng.choice([0, 0, 0, 16, 48, 128, 1024])
        self.o = OffloadSchedOracle(self.cfg)

    def abort(self) -> None:
        # A quarter of the abort draws reset the prefix cache instead, the CPU tier with it in
        # about half of them (vLLM's reset_prefix_cache, reset_connector).
        if self.rng.random() < 0.25:
            reset_external = self.rng.random() < 0.5
            self.apply({"op": "reset_prefix_cache", "reset_external": reset_external})
        else:
            super().abort()


if __name__ == "__main__":
    rw.WorkloadGen = OffloadWorkloadGen
    argv = sys.argv[1:]
    if "--prefix" not in argv:
        argv += ["--prefix", "ow"]
    sys.exit(rw.main(argv))
