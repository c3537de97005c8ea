#!/usr/bin/env python3
"""Drive vLLM 0.33.0's own CPU offloading manager (`vllm/v1/kv_offload/cpu/manager.py`, LRU
and ARC) with a JSON-lines op stream, and generate random streams against it.

This is prefixsim's own harness: it only calls vLLM's classes from the oracle venv
(/tmp/vllm-oracle-venv, see SETUP.md of the shared oracle folder); no vLLM code is copied.

Usage (oracle venv):
    python vllm_offload_oracle.py OPS.jsonl [...] [--outdir DIR]       # replay, one file each
    python vllm_offload_oracle.py --generate --seed S --count N --outdir DIR

Op stream (one JSON object per line; blank and '#' lines skipped). Keys are ASCII names;
a key's position is its chunk index in the request plus 1 (`start` is the first index):
  {"op": "config", "num_chunks": 8, "policy": "lru" | "arc"}       first line
  {"op": "lookup", "keys": [..]}                         -> "results": ["HIT"|"MISS"|"HIT_PENDING"]
  {"op": "prepare_load", "req": "r1", "start": 0, "keys": [..]}      every key must be HIT
  {"op": "complete_load", "keys": [..]}
  {"op": "prepare_store", "req": "r1", "start": 2, "keys": [..]}
        -> "ok" (false = refused), "stored", "evicted"
  {"op": "complete_store", "keys": [..]}                 -> "stored" (keys that became ready)
  {"op": "finish", "req": "r1"}                          on_request_finished
  {"op": "reset"}                                        reset_cache

Every result line also carries the manager's state after the op: "state" (LRU: "order", every
resident key in eviction order by its rank; ARC: "t1", "t2", "b1", "b2", "p"), "pinned" (keys
with a ref count other than 0), "usage" and "write_usage" (the gauges), "alloc_sizes" (the
allocation-size histogram samples of this op).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
from typing import Any

from vllm.v1.kv_offload.base import LookupResult, ReqContext, make_offload_key
from vllm.v1.kv_offload.cpu.common import CPUOffloadingMetrics
from vllm.v1.kv_offload.cpu.manager import CPUOffloadingManager


def key_of(name: str) -> bytes:
    return make_offload_key(name.encode(), 0)


def name_of(key: bytes) -> str:
    return key[:-4].decode()


class OffloadOracle:
    """One CPUOffloadingManager and a ReqContext per request."""

    def __init__(self, num_chunks: int, policy: str) -> None:
        self.policy_name = policy
        self.manager = CPUOffloadingManager(num_chunks, cache_policy=policy)
        self.contexts: dict[str, ReqContext] = {}

    def context(self, req: str, start: int = 0, names: list[str] = ()) -> ReqContext:
        ctx = self.contexts.get(req)
        if ctx is None:
            ctx = self.contexts[req] = ReqContext(req_id=req)
            self.manager.on_new_request(ctx)
        for offset, name in enumerate(names):
            ctx.set_offload_key_position(key_of(name), start + offset + 1)
        return ctx

    def lookup_one(self, name: str) -> str:
        result = self.manager.lookup(key_of(name), None)
        return {
            LookupResult.MISS: "MISS",
            LookupResult.HIT: "HIT",
            LookupResult.HIT_PENDING: "HIT_PENDING",
        }[result]

    def apply(self, op: dict[str, Any]) -> dict[str, Any]:
        name = op["op"]
        out: dict[str, Any] = {"op": name}
        m = self.manager
        if name == "lookup":
            out["results"] = [self.lookup_one(k) for k in op["keys"]]
        elif name == "prepare_load":
            ctx = self.context(op["req"], op["start"], op["keys"])
            m.prepare_load([key_of(k) for k in op["keys"]], ctx)
        elif name == "complete_load":
            m.complete_load([key_of(k) for k in op["keys"]], None)
        elif name == "prepare_store":
            ctx = self.context(op["req"], op["start"], op["keys"])
            result = m.prepare_store([key_of(k) for k in op["keys"]], ctx)
            out["ok"] = result is not None
            out["stored"] = [name_of(k) for k in result.keys_to_store] if result else []
            out["evicted"] = [name_of(k) for k in result.evicted_keys] if result else []
        elif name == "complete_store":
            keys = [key_of(k) for k in op["keys"]]
            ready_before = {k for k in keys if (c := m._policy.get(k)) is not None and c.is_ready}
            m.complete_store(keys, None)
            out["stored"] = [
                name_of(k) for k in keys if m._policy.get(k) is not None and k not in ready_before
            ]
        elif name == "finish":
            ctx = self.contexts.pop(op["req"], None)
            if ctx is not None:
                m.on_request_finished(ctx)
        elif name == "reset":
            m.reset_cache()
        else:
            raise ValueError(f"unknown op {name!r}")
        out.update(self.state())
        return out

    def state(self) -> dict[str, Any]:
        policy = self.manager._policy
        if self.policy_name == "lru":
            order = sorted(policy.chunks, key=lambda k: (policy._ranks[k], k))
            state: dict[str, Any] = {"order": [name_of(k) for k in order]}
            chunks = policy.chunks
        else:
            state = {
                "t1": [name_of(k) for k in policy.t1],
                "t2": [name_of(k) for k in policy.t2],
                "b1": [name_of(k) for k in policy.b1],
                "b2": [name_of(k) for k in policy.b2],
                "p": float(policy.target_t1_size),
            }
            chunks = {**policy.t1, **policy.t2}
        stats = self.manager.get_stats()
        values = stats.metric_sections()[1]
        return {
            "state": state,
            "pinned": {name_of(k): c.ref_cnt for k, c in chunks.items() if c.ref_cnt != 0},
            "usage": values[CPUOffloadingMetrics.CPU_CACHE_USAGE_PERC][()],
            "write_usage": values[CPUOffloadingMetrics.CPU_CACHE_WRITE_USAGE_PERC][()],
            "alloc_sizes": values.get(CPUOffloadingMetrics.CPU_ALLOCATION_SIZE, {}).get((), []),
        }


def replay(lines: list[str]) -> list[dict[str, Any]]:
    ops = [
        (number, json.loads(line))
        for number, line in enumerate(lines, start=1)
        if line.strip() and not line.lstrip().startswith("#")
    ]
    config = ops[0][1]
    assert config["op"] == "config", "the first op must be config"
    oracle = OffloadOracle(config["num_chunks"], config["policy"])
    results = [{"op": "header", "num_chunks": config["num_chunks"], "policy": config["policy"]}]
    for line_number, op in ops[1:]:
        results.append({**oracle.apply(op), "line": line_number})
    return results


class StreamGenerator:
    """Builds one valid op stream against a live oracle: requests over a shared prefix tree
    that look up, load, store chunk by chunk, get preempted, finish; transfers complete
    mostly in order; rare resets drop every job in flight."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.num_chunks = rng.choice([2, 3, 4, 6, 8, 12, 16, 24, 40])
        self.policy = rng.choice(["lru", "arc"])
        self.oracle = OffloadOracle(self.num_chunks, self.policy)
        self.ops: list[dict[str, Any]] = [
            {"op": "config", "num_chunks": self.num_chunks, "policy": self.policy}
        ]
        self.prompts: list[list[str]] = []
        self.next_node = 0
        self.next_req = 0
        self.live: dict[str, dict[str, Any]] = {}
        self.store_jobs: list[list[str]] = []
        self.load_jobs: list[tuple[str, list[str]]] = []

    def emit(self, op: dict[str, Any]) -> dict[str, Any]:
        self.ops.append(op)
        return self.oracle.apply(op)

    def new_prompt(self) -> list[str]:
        rng = self.rng
        prompt: list[str] = []
        if self.prompts and rng.random() < 0.75:
            parent = rng.choice(self.prompts)
            prompt = parent[: rng.randint(1, len(parent))]
        for _ in range(rng.randint(0 if prompt else 1, 6)):
            prompt.append(f"n{self.next_node}")
            self.next_node += 1
        self.prompts.append(prompt)
        return prompt

    def admit(self) -> None:
        req = f"r{self.next_req}"
        self.next_req += 1
        self.live[req] = {"prompt": self.new_prompt(), "ptr": 0, "admitted": False}
        self.try_admit(req)

    def try_admit(self, req: str) -> None:
        rng = self.rng
        state = self.live[req]
        prompt = state["prompt"]
        gpu_hit = rng.randint(0, len(prompt) - 1) if rng.random() < 0.5 else 0
        rest = prompt[gpu_hit:]
        results = self.emit({"op": "lookup", "keys": rest})["results"] if rest else []
        run = 0
        for result in results:
            if result == "MISS":
                break
            run += 1
        if "HIT_PENDING" in results[:run] and rng.random() < 0.8:
            return  # deferred: retried later
        while run and results[run - 1] != "HIT":
            run -= 1
        if run and "HIT_PENDING" not in results[:run] and rng.random() < 0.85:
            keys = rest[:run]
            self.emit({"op": "prepare_load", "req": req, "start": gpu_hit, "keys": keys})
            self.load_jobs.append((req, keys))
            state["ptr"] = gpu_hit + run
        else:
            state["ptr"] = 0
        state["admitted"] = True

    def offer(self, req: str, upto: int | None = None) -> None:
        rng = self.rng
        state = self.live[req]
        prompt, ptr = state["prompt"], state["ptr"]
        end = len(prompt) if upto is None else upto
        if ptr >= end:
            return
        end = rng.randint(ptr + 1, end) if upto is None else end
        keys = prompt[ptr:end]
        result = self.emit({"op": "prepare_store", "req": req, "start": ptr, "keys": keys})
        if result["ok"]:
            state["ptr"] = end
            if result["stored"]:
                self.store_jobs.append(result["stored"])

    def step(self) -> None:
        rng = self.rng
        roll = rng.random()
        if (roll < 0.14 or not self.live) and len(self.live) < 6:
            self.admit()
            return
        waiting = [r for r, s in self.live.items() if not s["admitted"]]
        if waiting and roll < 0.25:
            self.try_admit(rng.choice(waiting))
            return
        running = [r for r, s in self.live.items() if s["admitted"]]
        if roll < 0.55 and running:
            self.offer(rng.choice(running))
        elif roll < 0.68 and self.store_jobs:
            index = 0 if rng.random() < 0.8 else rng.randrange(len(self.store_jobs))
            self.emit({"op": "complete_store", "keys": self.store_jobs.pop(index)})
        elif roll < 0.76 and self.load_jobs:
            index = 0 if rng.random() < 0.8 else rng.randrange(len(self.load_jobs))
            self.emit({"op": "complete_load", "keys": self.load_jobs.pop(index)[1]})
        elif roll < 0.88 and running:
            req = rng.choice(running)
            if rng.random() < 0.5:
                self.offer(req, len(self.live[req]["prompt"]))
            self.emit({"op": "finish", "req": req})
            del self.live[req]
        elif roll < 0.93 and running:
            req = rng.choice(running)
            self.live[req].update(ptr=0, admitted=False)
        elif roll < 0.96:
            self.emit(
                {"op": "lookup", "keys": rng.sample(self.all_nodes(), k=min(3, self.next_node))}
            )
        elif roll < 0.965:
            self.emit({"op": "reset"})
            self.store_jobs.clear()
            self.load_jobs.clear()
            for state in self.live.values():
                state["ptr"] = 0
        elif running and rng.random() < 0.3:
            # A request that re-offers the chunks it already stored (a preempted re-admission).
            req = rng.choice(running)
            self.live[req]["ptr"] = 0
            self.offer(req)

    def all_nodes(self) -> list[str]:
        return [f"n{i}" for i in range(self.next_node)] or ["n0"]

    def build(self, num_ops: int) -> list[dict[str, Any]]:
        while len(self.ops) < num_ops:
            self.step()
        return self.ops


def generate(seed: int, count: int, outdir: str) -> None:
    os.makedirs(outdir, exist_ok=True)
    for index in range(count):
        rng = random.Random(f"{seed}-{index}")
        ops = StreamGenerator(rng).build(rng.randint(40, 300))
        path = os.path.join(outdir, f"os{seed}_{index}.jsonl")
        with open(path, "w") as handle:
            handle.write(f"# offload manager stream, seed {seed}, index {index}\n")
            for op in ops:
                handle.write(json.dumps(op) + "\n")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("streams", nargs="*", help="op streams to replay")
    ap.add_argument("--outdir", help="write <name>.jsonl results (or generated streams) here")
    ap.add_argument("--generate", action="store_true", help="write random streams to --outdir")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--count", type=int, default=100)
    args = ap.parse_args(argv)
    if args.generate:
        if not args.outdir:
            ap.error("--generate needs --outdir")
        generate(args.seed, args.count, args.outdir)
        return 0
    if args.outdir:
        os.makedirs(args.outdir, exist_ok=True)
    for path in args.streams:
        with open(path) as handle:
            results = replay(handle.readlines())
        text = "".join(json.dumps(line) + "\n" for line in results)
        if args.outdir:
            with open(os.path.join(args.outdir, os.path.basename(path)), "w") as out:
                out.write(text)
        else:
            sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
