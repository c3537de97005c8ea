#!/usr/bin/env python3
"""Generate random but valid KV-manager op traces for vllm_oracle.py.

Every trace is built op by op against a live vLLM KVCacheManager (the Oracle
class of vllm_oracle.py): the next op is chosen from the state vLLM is really
in (a refused admission leaves the request waiting, a refused decode step
leads to a preemption, ...), so every op in the file is valid whichever way
vLLM decided.  Run it with the oracle venv's python (see SETUP.md).

Usage:
    python random_streams.py --seed 7 --count 2000 --outdir /tmp/streams
    python vllm_oracle.py /tmp/streams/*.jsonl --outdir /tmp/streams-out

What varies (per trace unless noted):
  config   block_size 4/8/16/32, num_blocks 6..80 (frequent evictions and
           refused admissions), hash_algo sha256/sha256_cbor; sometimes a
           watermark, full_sequence_must_fit false or caching disabled.
  prompts  a few shared "system prompts" (lengths k*block_size -1/0/+1 or
           random; some share a head), duplicates, forks cut near block
           boundaries, fresh prompts, multi-turn continuations (previous
           prompt + outputs + new user tokens), twins (same prompt and same
           outputs running side by side).  Token ids of every pickle/CBOR
           integer width.
  requests cache_salt (incl. ""), LoRA (name/path/id variants),
           prompt_logprobs 0/1/5/-1, max_tokens and early stops.
  ops      concurrent running requests, chunked scheduling, decode steps with
           one output token each, refused schedules, preemption (random, and
           of the last running request when a step cannot be allocated) and
           re-scheduling, aborts of waiting/running/preempted requests,
           finish, run, reset_prefix_cache (fails while blocks are in use),
           snapshot.

Files are named <prefix><seed>_<index>.jsonl and start with one '#' comment
line (seed, index) which the trace format ignores.  Generation is
deterministic for a given seed and vLLM version.  An exception raised by vLLM
itself while generating is reported, the partial trace is saved under
<outdir>/_crashes/, and the trace is regenerated from another sub-seed.
"""

from __future__ import annotations

import argparse
import collections
import json
import logging
import os
import random
import sys
import time
import traceback
from dataclasses import dataclass

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import vllm_oracle as vo  # noqa: E402  (imports vLLM)
from _gen_common import PromptFactory, pick_lora, pick_salt, tokens  # noqa: E402
from vllm.v1.request import RequestStatus  # noqa: E402

WAITING_LIKE = (RequestStatus.WAITING, RequestStatus.PREEMPTED)

# vLLM warns on stderr for every refused reset_prefix_cache; keep generation quiet.
logging.getLogger("vllm").setLevel(logging.ERROR)


@dataclass(slots=True)
class Meta:
    outputs: list[int]  # tokens the "model" samples, in order
    stop_at: int  # finish after this many outputs (<= max_tokens)
    fail_limit: int  # abort after this many refused admissions in a row
    attrs: tuple  # (cache_salt, lora) for continuations
    fails: int = 0


class StreamGen:
    """Builds one trace while replaying it on a live Oracle."""

    def __init__(self, rng: random.Random, max_ops: int):
        self.rng = rng
        self.max_ops = max_ops
        bs = rng.choice([4, 8, 16, 32])
        nb = rng.randint(6, 80)
        cfg: dict = {
            "op": "config",
            "num_blocks": nb,
            "block_size": bs,
            "hash_algo": rng.choice(["sha256", "sha256_cbor"]),
        }
        if rng.random() < 0.12:
            cfg["watermark"] = rng.choice([0.01, 0.05, 0.1, 0.2])
        if rng.random() < 0.08:
            cfg["full_sequence_must_fit"] = False
        if rng.random() < 0.03:
            cfg["enable_caching"] = False
        self.cfg = cfg
        self.bs = bs
        self.oracle = vo.Oracle(cfg)
        self.ops: list[dict] = [cfg]
        self.results: list[dict] = []
        usable = nb - 1
        cap_tokens = usable * bs
        max_prompt = max(bs + 2, min(int(cap_tokens * 1.2), 1500))
        self.pf = PromptFactory(rng, bs, max_prompt, max(1, min(usable * 2 // 3, 12)))
        self.hist_attrs: list[tuple] = []  # parallel to self.pf.history
        self.done: list[tuple[list[int], tuple]] = []  # finished (tokens, attrs)
        self.max_running = rng.randint(1, 6)
        self.max_live = self.max_running + rng.randint(0, 4)
        self.p_salt = rng.choice([0.0, 0.1, 0.3])
        self.p_lora = rng.choice([0.0, 0.1, 0.3])
        self.p_logprobs = rng.choice([0.0, 0.04, 0.12])
        self.p_chunk = rng.choice([0.0, 0.3, 0.6])
        self.p_preempt = rng.choice([0.0, 0.03, 0.08])
        self.p_abort = rng.choice([0.0, 0.02, 0.05])
        self.p_arrive = rng.choice([0.3, 0.5, 0.8])
        self.num_steps = rng.randint(10, 80)
        self.meta: dict[str, Meta] = {}
        self.run_order: list[str] = []  # RUNNING, in admission order (vLLM's running list)
        self.waiting: list[str] = []  # WAITING/PREEMPTED, queue order
        self.next_id = 0

    # ------------------------------------------------------------- plumbing
    def apply(self, op: dict) -> dict:
        self.ops.append(op)
        res = self.oracle.apply(op)
        self.results.append(res)
        self._sync()
        return res

    def status(self, rid: str) -> RequestStatus:
        return self.oracle.requests[rid].status

    def _sync(self) -> None:
        """Align our queues with the statuses vLLM really holds."""
        reqs = self.oracle.requests
        self.run_order = [r for r in self.run_order if reqs[r].status == RequestStatus.RUNNING]
        for r in self.waiting:
            if reqs[r].status == RequestStatus.RUNNING and r not in self.run_order:
                self.run_order.append(r)
        self.waiting = [r for r in self.waiting if reqs[r].status in WAITING_LIKE]

    def live(self) -> list[str]:
        return self.run_order + self.waiting

    # ------------------------------------------------------------------ ops
    def arrive(self) -> None:
        rng = self.rng
        rid = f"r{self.next_id}"
        self.next_id += 1
        salt, lora = pick_salt(rng, self.p_salt), pick_lora(rng, self.p_lora)
        twin = None
        if self.live() and rng.random() < 0.08:
            twin = rng.choice(self.live())
        if twin is not None:
            t = self.oracle.requests[twin]
            tm = self.meta[twin]
            prompt = list(t.prompt_token_ids)
            salt, lora = tm.attrs
            outputs, stop_at = list(tm.outputs), tm.stop_at
            max_tokens = len(outputs)
        else:
            prompt = None
            if self.done and rng.random() < 0.3:
                toks, attrs = rng.choice(self.done)
                prompt = self.pf.continuation(toks)
                if prompt is not None:
                    self.hist_attrs.append(attrs)
                    if rng.random() < 0.85:
                        salt, lora = attrs
            if prompt is None:
                prompt, _kind, src = self.pf.new_prompt()
                if src is not None and rng.random() < 0.8:
                    salt, lora = self.hist_attrs[src]
                self.hist_attrs.append((salt, lora))
            max_tokens = rng.choice(
                [rng.randint(1, 4), rng.randint(1, self.bs), rng.randint(1, 2 * self.bs + 3)]
            )
            outputs = tokens(rng, max_tokens)
            stop_at = max_tokens if rng.random() < 0.5 else rng.randint(1, max_tokens)
        op: dict = {"op": "arrive", "id": rid, "prompt": prompt, "max_tokens": max_tokens}
        if salt is not None:
            op["cache_salt"] = salt
        if lora is not None:
            op["lora"] = dict(lora)
        if rng.random() < self.p_logprobs:
            op["prompt_logprobs"] = rng.choice([0, 1, 5, -1])
        self.meta[rid] = Meta(outputs, stop_at, rng.randint(2, 8), (salt, lora))
        self.apply(op)
        self.waiting.append(rid)
        if not self.run_order and rng.random() < 0.06:
            self.run_whole(rid)

    def run_whole(self, rid: str) -> None:
        """The 'run' convenience op: prefill, decode, maybe finish."""
        m = self.meta[rid]
        k = self.rng.randint(1, m.stop_at)
        op: dict = {"op": "run", "id": rid, "outputs": m.outputs[:k]}
        if k < m.stop_at:
            op["finish"] = False
        self.apply(op)
        if self.status(rid).name.startswith("FINISHED"):
            self._remember(rid)

    def chunk(self, remaining: int) -> int | None:
        rng = self.rng
        if rng.random() >= self.p_chunk:
            return None
        r = rng.random()
        if r < 0.5:
            return rng.randint(1, max(1, remaining))
        if r < 0.8:
            return max(1, rng.randint(1, max(1, remaining // self.bs))) * self.bs
        if r < 0.9:
            return 1
        # The replay format defines num_new_tokens only up to what is left to compute.
        return remaining

    def schedule(self, rid: str) -> bool:
        req = self.oracle.requests[rid]
        if req.status == RequestStatus.RUNNING:
            remaining = req.num_tokens - req.num_computed_tokens
        else:
            # What is left after the prefix hit (the lookup itself changes nothing).
            remaining = req.num_tokens - self.oracle.mgr.get_computed_blocks(req)[1]
        op: dict = {"op": "schedule", "id": rid}
        n = self.chunk(remaining)
        if n is not None:
            # The replay format allows at most what is left to compute.
            op["num_new_tokens"] = max(1, min(n, remaining))
        return bool(self.apply(op).get("ok"))

    def preempt(self, rid: str) -> None:
        self.apply({"op": "preempt", "id": rid})
        if rid in self.waiting:
            self.waiting.remove(rid)
        self.waiting.insert(0, rid)  # vLLM puts preempted requests first

    def _remember(self, rid: str) -> None:
        req = self.oracle.requests[rid]
        if req.num_output_tokens:
            self.done.append((list(req.all_token_ids), self.meta[rid].attrs))

    def finish(self, rid: str) -> None:
        self.apply({"op": "finish", "id": rid})
        self._remember(rid)

    # ----------------------------------------------------------------- step
    def step(self, arrivals: bool) -> None:
        rng = self.rng
        if arrivals and rng.random() < self.p_arrive:
            for _ in range(rng.choice([1, 1, 1, 2, 3])):
                if len(self.live()) < self.max_live:
                    self.arrive()
        if rng.random() < 0.05:
            self.apply({"op": "snapshot"})
        if rng.random() < (0.12 if not self.run_order else 0.015):
            self.apply({"op": "reset_prefix_cache"})
        if self.run_order and rng.random() < self.p_preempt:
            victim = self.run_order[-1] if rng.random() < 0.7 else rng.choice(self.run_order)
            self.preempt(victim)
        if self.live() and rng.random() < self.p_abort:
            self.finish(rng.choice(self.live()))

        # Running requests first (decode steps and further prefill chunks).
        order = list(self.run_order)
        if rng.random() < 0.15:
            rng.shuffle(order)
        for rid in order:
            if rid not in self.run_order or rng.random() < 0.08:
                continue
            req = self.oracle.requests[rid]
            if req.num_computed_tokens >= req.num_tokens:
                continue
            ok = self.schedule(rid)
            while not ok and self.run_order and rng.random() < 0.85:
                victim = self.run_order[-1]  # vLLM preempts the last running request
                self.preempt(victim)
                if victim == rid:
                    break
                ok = self.schedule(rid)

        # Then admissions from the waiting queue.
        for rid in list(self.waiting):
            if len(self.run_order) >= self.max_running:
                break
            if rid not in self.waiting or rng.random() < 0.1:
                continue
            if self.schedule(rid):
                self.meta[rid].fails = 0
                continue
            m = self.meta[rid]
            m.fails += 1
            if m.fails >= m.fail_limit:
                self.finish(rid)  # give up: abort a request that never fits
            elif rng.random() < 0.7:
                break  # FCFS: stop admitting at the first refusal

        # Sample one token for every request whose tokens are all computed.
        for rid in list(self.run_order):
            req = self.oracle.requests[rid]
            if req.status != RequestStatus.RUNNING or req.num_computed_tokens < req.num_tokens:
                continue
            m = self.meta[rid]
            self.apply({"op": "output", "id": rid, "tokens": [m.outputs[req.num_output_tokens]]})
            if req.num_output_tokens >= m.stop_at:
                self.finish(rid)

    def generate(self) -> list[dict]:
        rng = self.rng
        for _ in range(self.num_steps):
            self.step(arrivals=True)
            if len(self.ops) > self.max_ops:
                break
        # Drain: no arrivals; give every live request time to finish.
        for _ in range(400):
            if not self.live() or len(self.ops) > 2 * self.max_ops:
                break
            self.step(arrivals=False)
        if self.live() and rng.random() < 0.7:
            for rid in list(self.live()):
                self.finish(rid)
        if rng.random() < 0.3:
            self.apply({"op": "reset_prefix_cache"})
        if rng.random() < 0.6:
            self.apply({"op": "snapshot"})
        return self.ops


def write_trace(path: str, ops: list[dict], comment: str) -> None:
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write(f"# {comment}\n")
        for op in ops:
            f.write(json.dumps(op, separators=(",", ":")) + "\n")
    os.replace(tmp, path)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--seed",
        type=int,
        default=None,
        help="master seed (default: derived from the current time)",
    )
    ap.add_argument("--count", type=int, default=100, help="number of traces")
    ap.add_argument("--outdir", required=True)
    ap.add_argument("--prefix", default="rs", help="file name prefix (default rs)")
    ap.add_argument(
        "--max-ops",
        type=int,
        default=400,
        help="soft cap on ops per trace before draining (default 400)",
    )
    ap.add_argument("--quiet", action="store_true")
    args = ap.parse_args(argv)
    seed = args.seed if args.seed is not None else int(time.strftime("%Y%m%d%H%M%S"))
    os.makedirs(args.outdir, exist_ok=True)
    t0 = time.time()
    n_ops = 0
    kinds: collections.Counter = collections.Counter()
    cov: collections.Counter = collections.Counter()
    crashes = 0
    for i in range(args.count):
        for attempt in range(20):
            rng = random.Random(f"{seed}/{i}/{attempt}")
            gen = StreamGen(rng, args.max_ops)
            try:
                ops = gen.generate()
            except Exception as e:  # vLLM itself raised: keep the evidence, retry
                crashes += 1
                cdir = os.path.join(args.outdir, "_crashes")
                os.makedirs(cdir, exist_ok=True)
                name = f"{args.prefix}{seed}_{i:05d}_attempt{attempt}.jsonl"
                write_trace(
                    os.path.join(cdir, name),
                    gen.ops,
                    f"CRASH seed={seed} index={i} attempt={attempt}: {type(e).__name__}: {e}",
                )
                with open(os.path.join(cdir, name + ".traceback"), "w") as f:
                    f.write(traceback.format_exc())
                print(
                    f"random_streams: vLLM raised on trace {i} attempt {attempt} "
                    f"(op {gen.ops[-1].get('op')}): {type(e).__name__}: {e}; "
                    f"saved {cdir}/{name}",
                    file=sys.stderr,
                )
                continue
            break
        else:
            raise SystemExit(f"trace {i}: 20 attempts crashed")
        name = f"{args.prefix}{seed}_{i:05d}.jsonl"
        write_trace(
            os.path.join(args.outdir, name),
            ops,
            f"random_streams seed={seed} index={i} attempt={attempt} vllm={vo.vllm.__version__}",
        )
        n_ops += len(ops)
        for op, res in zip(ops[1:], gen.results, strict=False):
            kinds[op["op"]] += 1
            if op["op"] == "schedule":
                if not res.get("ok"):
                    cov["schedule_refused"] += 1
                if res.get("admission") and res.get("hit_tokens", 0) > 0:
                    cov["admission_with_hit"] += 1
            if op["op"] == "reset_prefix_cache" and res.get("ok"):
                cov["reset_ok"] += 1
            cov["evicted_blocks"] += len(res.get("evicted", []))
            cov["stored_blocks"] += len(res.get("stored", []))
        st = gen.results[-1]["stats"] if gen.results else {}
        cov["preempted_lookups"] += st.get("preempted_requests", 0)
    dt = time.time() - t0
    if not args.quiet:
        print(
            f"random_streams: seed {seed}: {args.count} traces, {n_ops} ops in "
            f"{dt:.1f}s ({100 * dt / max(1, args.count):.1f}s per 100 traces) "
            f"-> {args.outdir}",
            file=sys.stderr,
        )
        print(f"  ops: {dict(sorted(kinds.items()))}", file=sys.stderr)
        print(
            f"  coverage: {dict(sorted(cov.items()))}; vLLM exceptions: {crashes}", file=sys.stderr
        )
    print(seed)
    return 0


if __name__ == "__main__":
    sys.exit(main())
