#!/usr/bin/env python3
"""Generate random but valid scheduler-level workloads for vllm_sched_oracle.py.

Each workload is built op by op against a live vLLM v1 Scheduler (the
SchedOracle class of vllm_sched_oracle.py), so continuations are added after
the turn they continue has really finished, aborts name live requests (and
now and then an already finished one, which vLLM ignores), and a workload
whose run_until_idle would not terminate is never written.  Run it with the
oracle venv's python (see SETUP.md).

Usage:
    python random_workloads.py --seed 7 --count 200 --outdir /tmp/workloads
    python vllm_sched_oracle.py /tmp/workloads/*.jsonl --outdir /tmp/workloads-out

What varies (per workload unless noted):
  config   block_size 4/8/16/32, num_blocks 6..80 (small: preemption and
           refused admissions), max_num_seqs 1..128, max_num_batched_tokens
           8..2048 (always >= max_num_seqs), chunked prefill (off: small
           max_model_len = max_num_batched_tokens), long_prefill_token_threshold,
           policy fcfs/priority, watermark, scheduler_reserve_full_isl,
           hash_algo sha256/sha256_cbor; now and then prefix caching off, the
           adaptive long-prefill cap, max_num_active_seqs and
           prefill_schedule_interval (spec §12.8).
  requests shared prefixes, duplicates, forks, multi-turn continuations
           (prompt + outputs + new tokens, added after the previous turn
           finished), twins, cache_salt (incl. ""), LoRA variants, priorities;
           every request fits the cache on its own (prompt + outputs <=
           usable blocks * block_size), except that with chunked prefill off a
           few requests run into max_model_len (length-capped).
  ops      add (1-3 at a time, at various steps), step n, run_until_idle
           (also mid-workload), abort of waiting/running/preempted requests.

Files are named <prefix><seed>_<index>.jsonl and start with a '#' comment
line.  Deterministic for a given seed and vLLM version.
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

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import vllm_sched_oracle as so  # noqa: E402  (imports vLLM)
from _gen_common import PromptFactory, pick_lora, pick_salt, tokens  # noqa: E402

logging.getLogger("vllm").setLevel(logging.ERROR)


class WorkloadGen:
    """Builds one workload while replaying it on a live SchedOracle."""

    def __init__(self, rng: random.Random, async_scheduling: bool = False):
        self.rng = rng
        bs = rng.choice([4, 8, 16, 16, 32])
        nb = rng.randint(6, 24) if rng.random() < 0.5 else rng.randint(25, 80)
        chunked = rng.random() < 0.9
        max_num_seqs = rng.choice([1, 2, 3, 4, 6, 8, 16, 128])
        cfg: dict = {"op": "config", "num_blocks": nb, "block_size": bs}
        if chunked:
            mbt = max(max_num_seqs, rng.choice([8, 16, 24, 32, 48, 64, 100, 128, 256, 512, 2048]))
            max_model_len = 8192
        else:
            mbt = rng.choice([128, 256, 512, 1024])
            max_model_len = mbt
            cfg["enable_chunked_prefill"] = False
            cfg["max_model_len"] = max_model_len
        cfg["max_num_batched_tokens"] = mbt
        cfg["max_num_seqs"] = max_num_seqs
        if chunked and rng.random() < 0.2:
            cfg["long_prefill_token_threshold"] = rng.choice([4, 8, 16, 33, 64])
            if rng.random() < 0.3:
                cfg["long_prefill_token_threshold_adaptive"] = True
        if max_num_seqs > 1 and rng.random() < 0.1:
            cfg["max_num_active_seqs"] = rng.randint(1, max_num_seqs)
        if rng.random() < 0.1:
            cfg["prefill_schedule_interval"] = rng.choice([2, 3, 4])
        self.priority = rng.random() < 0.15
        if self.priority:
            cfg["policy"] = "priority"
        if rng.random() < 0.12:
            cfg["watermark"] = rng.choice([0.01, 0.05, 0.1])
        if rng.random() < 0.1:
            cfg["scheduler_reserve_full_isl"] = False
        cfg["hash_algo"] = rng.choice(["sha256", "sha256_cbor"])
        if rng.random() < 0.05:
            cfg["enable_caching"] = False
        if async_scheduling:
            cfg["async_scheduling"] = True
        self.cfg = cfg
        self.bs = bs
        self.o = so.SchedOracle(cfg)
        self.ops: list[dict] = [cfg]
        self.max_model_len = max_model_len
        # One request alone must fit: prompt + outputs <= usable blocks.
        self.max_total = min((nb - 1) * bs, max_model_len)
        # A few requests may run into max_model_len, where that is below capacity.
        self.length_cap_ok = not chunked and max_model_len <= (nb - 1) * bs
        max_prompt = max(1, min(self.max_total - 1, 1500))
        self.pf = PromptFactory(rng, bs, max_prompt, max(1, min((nb - 1) * 2 // 3, 12)))
        self.hist_attrs: list[tuple] = []
        self.reqs: dict[str, dict] = {}  # rid -> add op
        self.finished: list[str] = []  # finished (not aborted) ids, in order
        self.aborted: set[str] = set()
        self.pending: list[tuple[int, list[int], tuple]] = []  # (due step, tokens, attrs)
        self.max_live = rng.randint(2, 12)
        self.p_salt = rng.choice([0.0, 0.1, 0.3])
        self.p_lora = rng.choice([0.0, 0.1, 0.3])
        self.p_add = rng.choice([0.4, 0.6, 0.9])
        self.p_abort = rng.choice([0.0, 0.03, 0.08])
        self.p_continue = rng.choice([0.2, 0.5, 0.8])
        self.num_rounds = rng.randint(5, 40)
        self.next_id = 0
        self.lines = 0

    # ------------------------------------------------------------- plumbing
    def apply(self, op: dict) -> list[dict]:
        self.ops.append(op)
        out: list[dict] = []
        so.apply_op(self.o, op, out.append, len(self.ops))
        self.lines += len(out)
        for res in out:
            for rid in res.get("finished", []) if res.get("op") == "step" else []:
                if rid not in self.aborted:
                    self.finished.append(rid)
                    self._maybe_continue(rid)
        return out

    def live(self) -> list[str]:
        return [
            rid for rid in self.o.sched.requests if not self.o.sched.requests[rid].is_finished()
        ]

    def _maybe_continue(self, rid: str) -> None:
        if self.rng.random() >= self.p_continue:
            return
        add = self.reqs[rid]
        done = (add["prompt"] + add["outputs"])[: self.max_model_len]
        due = self.o.step_no + self.rng.choice([0, 0, 1, 2, 5])
        self.pending.append((due, done, (add.get("cache_salt"), add.get("lora"))))

    # ------------------------------------------------------------------ ops
    def add(self, cont: tuple[list[int], tuple] | None = None) -> None:
        rng = self.rng
        rid = f"q{self.next_id}"
        self.next_id += 1
        salt, lora = pick_salt(rng, self.p_salt), pick_lora(rng, self.p_lora)
        prompt = None
        twin = None
        live = self.live()
        if cont is not None:
            prompt = self.pf.continuation(cont[0])
            if prompt is not None:
                self.hist_attrs.append(cont[1])
                if rng.random() < 0.85:
                    salt, lora = cont[1]
        elif live and rng.random() < 0.08:
            twin = self.reqs[rng.choice(live)]
        if twin is not None:
            op = {k: v for k, v in twin.items() if k != "priority"}
            op["id"] = rid
        else:
            if prompt is None:
                prompt, _kind, src = self.pf.new_prompt()
                if src is not None and rng.random() < 0.8:
                    salt, lora = self.hist_attrs[src]
                self.hist_attrs.append((salt, lora))
            room = self.max_total - len(prompt)
            if self.length_cap_ok and rng.random() < 0.05:
                room += rng.randint(1, 8)  # runs into max_model_len
            want = rng.choice(
                [
                    rng.randint(1, 4),
                    rng.randint(1, self.bs),
                    rng.randint(self.bs, 3 * self.bs),
                    rng.randint(1, 4 * self.bs),
                ]
            )
            n_out = max(1, min(want, room))
            op = {"op": "add", "id": rid, "prompt": prompt, "outputs": tokens(rng, n_out)}
            if salt is not None:
                op["cache_salt"] = salt
            if lora is not None:
                op["lora"] = dict(lora)
        if self.priority:
            op["priority"] = rng.choice([0, 0, 0, -1, 1, 2, -3])
        self.reqs[rid] = op
        self.apply(op)

    def abort(self) -> None:
        rng = self.rng
        live = self.live()
        if self.finished and (not live or rng.random() < 0.2):
            rid = rng.choice(self.finished)  # vLLM ignores it
        elif live:
            rid = rng.choice(live)
            self.aborted.add(rid)
        else:
            return
        self.apply({"op": "abort", "id": rid})

    def generate(self) -> list[dict]:
        rng = self.rng
        for _ in range(self.num_rounds):
            due = [p for p in self.pending if p[0] <= self.o.step_no]
            self.pending = [p for p in self.pending if p[0] > self.o.step_no]
            for _, toks, attrs in due:
                if len(self.live()) < self.max_live:
                    self.add((toks, attrs))
            if rng.random() < self.p_add:
                for _ in range(rng.choice([1, 1, 2, 3])):
                    if len(self.live()) < self.max_live:
                        self.add()
            if rng.random() < self.p_abort:
                self.abort()
            if rng.random() < 0.08:
                self.apply({"op": "run_until_idle"})
            elif self.o.has_work():
                self.apply({"op": "step", "n": rng.choice([1, 1, 1, 2, 3, 5, 8, 13])})
            elif rng.random() < 0.3:
                self.apply({"op": "step"})  # an idle engine step
        if rng.random() < 0.85:
            self.apply({"op": "run_until_idle"})
        else:
            self.apply({"op": "step", "n": rng.randint(1, 10)})
        return self.ops


def write_workload(path: str, ops: list[dict], comment: str) -> None:
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
    ap.add_argument("--count", type=int, default=50, help="number of workloads")
    ap.add_argument("--outdir", required=True)
    ap.add_argument("--prefix", default="rw", help="file name prefix (default rw)")
    ap.add_argument("--quiet", action="store_true")
    ap.add_argument(
        "--async-scheduling",
        action="store_true",
        help="drive vLLM's AsyncScheduler through the async engine-core loop",
    )
    args = ap.parse_args(argv)
    seed = args.seed if args.seed is not None else int(time.strftime("%Y%m%d%H%M%S"))
    os.makedirs(args.outdir, exist_ok=True)
    t0 = time.time()
    kinds: collections.Counter = collections.Counter()
    cov: collections.Counter = collections.Counter()
    crashes = 0
    for i in range(args.count):
        for attempt in range(20):
            rng = random.Random(f"{seed}/{i}/{attempt}")
            gen = WorkloadGen(rng, args.async_scheduling)
            try:
                ops = gen.generate()
            except (Exception, SystemExit) as e:  # vLLM raised or never went idle
                crashes += 1
                cdir = os.path.join(args.outdir, "_crashes")
                os.makedirs(cdir, exist_ok=True)
                name = f"{args.prefix}{seed}_{i:05d}_attempt{attempt}.jsonl"
                write_workload(
                    os.path.join(cdir, name),
                    gen.ops,
                    f"CRASH seed={seed} index={i} attempt={attempt}: {type(e).__name__}: {e}",
                )
                with open(os.path.join(cdir, name + ".traceback"), "w") as f:
                    f.write(traceback.format_exc())
                print(
                    f"random_workloads: workload {i} attempt {attempt} failed "
                    f"(op {gen.ops[-1].get('op')}): {type(e).__name__}: {e}; "
                    f"saved {cdir}/{name}",
                    file=sys.stderr,
                )
                continue
            break
        else:
            raise SystemExit(f"workload {i}: 20 attempts failed")
        name = f"{args.prefix}{seed}_{i:05d}.jsonl"
        write_workload(
            os.path.join(args.outdir, name),
            ops,
            f"random_workloads seed={seed} index={i} attempt={attempt} vllm={so.vllm.__version__}",
        )
        for op in ops[1:]:
            kinds[op["op"]] += 1
        cov["steps"] += gen.o.step_no
        cov["preemptions"] += gen.o.total_preemptions
        cov["workloads_with_preemption"] += gen.o.total_preemptions > 0
        cov["evictions"] += len(gen.o.evicted_all)
        cov["hits"] += gen.o.cum["hits"]
        cov["queries"] += gen.o.cum["queries"]
        cov["preempted_hits"] += gen.o.cum["preempted_hits"]
        cov["result_lines"] += gen.lines
    dt = time.time() - t0
    if not args.quiet:
        print(
            f"random_workloads: seed {seed}: {args.count} workloads in {dt:.1f}s "
            f"({100 * dt / max(1, args.count):.1f}s per 100) -> {args.outdir}",
            file=sys.stderr,
        )
        print(f"  ops: {dict(sorted(kinds.items()))}", file=sys.stderr)
        print(f"  coverage: {dict(sorted(cov.items()))}; failures: {crashes}", file=sys.stderr)
    print(seed)
    return 0


if __name__ == "__main__":
    sys.exit(main())
