#!/usr/bin/env python3
"""Drive vLLM's real v1 Scheduler (with its real KVCacheManager) step by step
on a CPU-only machine, with a fake model that "samples" tokens given in the
trace, and print one JSON line per engine step.

This is our own harness code: it only calls an installed vLLM (see SETUP.md;
needs the extra `einops` package and VLLM_TARGET_DEVICE=cpu, which this script
sets).  No model weights are loaded: a throw-away config.json of a tiny Llama
architecture is written to a temp dir only so that vLLM's ModelConfig
validates; nothing is executed on it.

Usage:
    python vllm_sched_oracle.py WORKLOAD.jsonl [--out RESULTS.jsonl] [--check]
    python vllm_sched_oracle.py workloads/*.jsonl --outdir results/ [--check]
        (several workloads in one process: one vLLM import, ~10 s, instead of
        one per workload)

Workload ops (JSON lines):
  {"op": "config", "num_blocks": 64, "block_size": 16,
   "max_num_batched_tokens": 2048, "max_num_seqs": 128, "max_model_len": 8192,
   "enable_chunked_prefill": true, "long_prefill_token_threshold": 0,
   "policy": "fcfs", "watermark": 0.0, "scheduler_reserve_full_isl": true,
   "hash_algo": "sha256"}                            (first line, optional)
  {"op": "add", "id": "A", "prompt": [int...], "outputs": [int...],
   "priority": 0, "cache_salt": null, "lora": null}
        Queue a request; it generates exactly len(outputs) tokens (the fake
        model returns outputs[i] at its i-th sampling step; ignore_eos), or
        fewer if it reaches max_model_len.  "arrival_time" defaults to the
        number of steps run so far; under policy "priority" requests are
        ordered by (priority, arrival_time, request id as a string).
  {"op": "step", "n": 1}          run n engine steps (schedule -> fake
                                  execute -> update_from_output)
  {"op": "run_until_idle", "max_steps": 10000}
  {"op": "abort", "id": "A"}      finish_requests(..., FINISHED_ABORTED)

Each step prints: scheduled tokens per request, requests admitted this step
with their prefix-cache hit (tokens), preempted and finished request ids,
evicted block labels ("rid#block_index" of the first request that produced
the hash), free blocks, usage and cumulative prefix-cache counters (summed
over the per-step SchedulerStats, as a Prometheus counter would be).
"expect" fields on "step"/"run_until_idle" ops are checked against the
*last* step they ran (and the cumulative counters) with --check.
"""

from __future__ import annotations

import argparse
import atexit
import collections
import json
import os
import shutil
import sys
import tempfile

os.environ["VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES"] = "0"
os.environ.setdefault("VLLM_CONFIGURE_LOGGING", "0")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ["VLLM_TARGET_DEVICE"] = "cpu"

import torch  # noqa: E402
import vllm  # noqa: E402
from vllm.config import (  # noqa: E402
    CacheConfig,
    KVEventsConfig,
    ModelConfig,
    SchedulerConfig,
    VllmConfig,
)
from vllm.distributed.kv_events import BlockRemoved, BlockStored  # noqa: E402
from vllm.lora.request import LoRARequest  # noqa: E402
from vllm.sampling_params import SamplingParams  # noqa: E402
from vllm.utils.hashing import get_hash_fn_by_name  # noqa: E402
from vllm.v1.core.kv_cache_utils import (  # noqa: E402
    get_request_block_hasher,
    init_none_hash,
)
from vllm.v1.core.sched.async_scheduler import AsyncScheduler  # noqa: E402
from vllm.v1.core.sched.scheduler import Scheduler  # noqa: E402
from vllm.v1.kv_cache_interface import (  # noqa: E402
    FullAttentionSpec,
    KVCacheConfig,
    KVCacheGroupSpec,
)
from vllm.v1.outputs import ModelRunnerOutput  # noqa: E402
from vllm.v1.request import Request, RequestStatus  # noqa: E402
from vllm.v1.structured_output import StructuredOutputManager  # noqa: E402

DEFAULTS = {
    "num_blocks": 64,
    "block_size": 16,
    "max_num_batched_tokens": 2048,
    "max_num_seqs": 128,
    "max_model_len": 8192,
    "enable_chunked_prefill": True,
    "long_prefill_token_threshold": 0,
    "policy": "fcfs",
    "watermark": 0.0,
    "scheduler_reserve_full_isl": True,
    "hash_algo": "sha256",
    "enable_caching": True,
    "async_scheduling": False,
    "long_prefill_token_threshold_adaptive": False,
    "max_num_active_seqs": None,
    "prefill_schedule_interval": 1,
}

_TINY_LLAMA = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "num_hidden_layers": 2,
    "vocab_size": 65536,
    "max_position_embeddings": 131072,
    "rms_norm_eps": 1e-5,
    "torch_dtype": "float16",
    "bos_token_id": 1,
    "eos_token_id": 2,
}


class _CapturePublisher:
    def __init__(self):
        self.batches = []

    def publish(self, batch) -> None:
        self.batches.append(batch)

    def shutdown(self) -> None:
        pass


class SchedOracle:
    def __init__(self, cfg: dict):
        unknown = set(cfg) - set(DEFAULTS) - {"op", "expect"}
        if unknown:
            raise ValueError(f"config: unknown keys {sorted(unknown)}")
        self.cfg = {**DEFAULTS, **{k: v for k, v in cfg.items() if k in DEFAULTS}}
        c = self.cfg
        bs = int(c["block_size"])
        self._model_dir = tempfile.mkdtemp(prefix="tiny-llama-")
        atexit.register(shutil.rmtree, self._model_dir, ignore_errors=True)
        with open(os.path.join(self._model_dir, "config.json"), "w") as f:
            json.dump(_TINY_LLAMA, f)
        model_config = ModelConfig(
            model=self._model_dir,
            skip_tokenizer_init=True,
            dtype="float16",
            seed=0,
            max_model_len=int(c["max_model_len"]),
        )
        scheduler_config = SchedulerConfig(
            max_num_seqs=int(c["max_num_seqs"]),
            max_num_batched_tokens=int(c["max_num_batched_tokens"]),
            max_model_len=int(c["max_model_len"]),
            enable_chunked_prefill=bool(c["enable_chunked_prefill"]),
            long_prefill_token_threshold=int(c["long_prefill_token_threshold"]),
            policy=c["policy"],
            watermark=float(c["watermark"]),
            scheduler_reserve_full_isl=bool(c["scheduler_reserve_full_isl"]),
            async_scheduling=bool(c["async_scheduling"]),
            long_prefill_token_threshold_adaptive=bool(c["long_prefill_token_threshold_adaptive"]),
            max_num_active_seqs=c["max_num_active_seqs"],
            prefill_schedule_interval=int(c["prefill_schedule_interval"]),
            is_encoder_decoder=False,
        )
        cache_config = CacheConfig(
            block_size=bs,
            enable_prefix_caching=bool(c["enable_caching"]),
            prefix_caching_hash_algo=c["hash_algo"],
        )
        self.vllm_config = VllmConfig(
            model_config=model_config,
            cache_config=cache_config,
            scheduler_config=scheduler_config,
            kv_events_config=KVEventsConfig(enable_kv_cache_events=True, publisher="null"),
        )
        # The CPU platform may rewrite settings; refuse to run if it changed ours.
        got = {
            "block_size": self.vllm_config.cache_config.block_size,
            "max_num_batched_tokens": self.vllm_config.scheduler_config.max_num_batched_tokens,
            "max_num_seqs": self.vllm_config.scheduler_config.max_num_seqs,
            "enable_chunked_prefill": self.vllm_config.scheduler_config.enable_chunked_prefill,
        }
        for k, v in got.items():
            if v != c[k]:
                raise RuntimeError(f"vLLM changed {k}: asked {c[k]!r}, got {v!r}")
        num_blocks = int(c["num_blocks"])
        self.vllm_config.cache_config.num_gpu_blocks = num_blocks
        kv_cfg = KVCacheConfig(
            num_blocks=num_blocks,
            kv_cache_tensors=[],
            kv_cache_groups=[
                KVCacheGroupSpec(
                    ["layer.0"],
                    FullAttentionSpec(
                        block_size=bs, num_kv_heads=1, head_size=1, dtype=torch.float32
                    ),
                )
            ],
        )
        scheduler_class = AsyncScheduler if c["async_scheduling"] else Scheduler
        self.sched = scheduler_class(
            vllm_config=self.vllm_config,
            kv_cache_config=kv_cfg,
            structured_output_manager=StructuredOutputManager(self.vllm_config),
            block_size=bs,
            log_stats=True,
        )
        self.publisher = _CapturePublisher()
        self.sched.kv_event_publisher = self.publisher
        hash_fn = get_hash_fn_by_name(c["hash_algo"])
        init_none_hash(hash_fn)
        self.hasher = get_request_block_hasher(bs, hash_fn)
        self.outputs: dict[str, list[int]] = {}
        self.labels: dict[str, str] = {}
        self.step_no = 0
        self.cum = {
            k: 0
            for k in (
                "requests",
                "queries",
                "hits",
                "preempted_requests",
                "preempted_queries",
                "preempted_hits",
            )
        }
        self.total_preemptions = 0
        self.evicted_all: list[str] = []
        self.in_flight: collections.deque[dict] = collections.deque()  # async, newest first

    def has_work(self) -> bool:
        """The engine loop steps while the scheduler has requests or a batch is in flight."""
        return self.sched.has_requests() or bool(self.in_flight)

    def _label(self, req: Request, start: int = 0) -> None:
        for i in range(start, len(req.block_hashes)):
            self.labels.setdefault(bytes(req.block_hashes[i]).hex(), f"{req.request_id}#{i}")

    def add(self, op: dict) -> dict:
        rid = op["id"]
        outs = [int(t) for t in op["outputs"]]
        if not outs:
            raise ValueError(f"add {rid!r}: outputs must not be empty")
        lora = op.get("lora")
        req = Request(
            request_id=rid,
            prompt_token_ids=[int(t) for t in op["prompt"]],
            sampling_params=SamplingParams(max_tokens=len(outs), ignore_eos=True),
            pooling_params=None,
            arrival_time=float(op.get("arrival_time", self.step_no)),
            lora_request=LoRARequest(
                str(lora["name"]), int(lora.get("id", 1)), str(lora.get("path", ""))
            )
            if lora
            else None,
            cache_salt=op.get("cache_salt"),
            priority=int(op.get("priority", 0)),
            block_hasher=self.hasher,
        )
        self.outputs[rid] = outs
        self.sched.add_request(req)
        self._label(req)
        return {"op": "add", "id": rid, "num_tokens": req.num_tokens}

    def step(self) -> dict:
        """One sync engine step: schedule, fake execute, update from output."""
        batch = self._schedule()
        line = self._step_line(batch)
        line.update(self._process(batch))
        line.update(self._state())
        return line

    def iterate(self, force: bool = False) -> dict | None:
        """One async engine-core iteration (EngineCore.step_with_batch_queue, queue of 2):
        schedule a batch if there is work, and return at once while fewer than two batches are
        in flight and there is more to schedule; otherwise process the oldest batch in flight.
        `force` (a `step` op) schedules even an idle engine, as the sync `step` op does.
        Returns None when there was nothing to do."""
        s = self.sched
        batch = None
        if s.has_requests() or (force and not self.in_flight):
            batch = self._schedule()
            self.in_flight.appendleft(batch)
            if len(self.in_flight) < 2 and (
                batch["so"].total_num_scheduled_tokens > 0 or s.has_requests()
            ):
                line = self._step_line(batch)
                line.update({"processed_step": None, "finished": []})
                line.update(self._state())
                return line
        elif not self.in_flight:
            return None
        if batch is None:
            self.step_no += 1
        oldest = self.in_flight.pop()
        line = self._step_line(batch)
        line["processed_step"] = oldest["step"]
        line.update(self._process(oldest))
        line.update(self._state())
        return line

    def _schedule(self) -> dict:
        """Schedule one batch and decide what the fake model samples for it."""
        s = self.sched
        waiting_before = {
            rid
            for rid, r in s.requests.items()
            if r.status in (RequestStatus.WAITING, RequestStatus.PREEMPTED)
        }
        so = s.schedule()
        self.step_no += 1
        scheduled = dict(so.num_scheduled_tokens)
        admitted = []
        for rid in scheduled:
            if rid in waiting_before:
                r = s.requests[rid]
                admitted.append(
                    {
                        "id": rid,
                        "hit_tokens": r.num_computed_tokens - scheduled[rid],
                        "resumed": r.num_preemptions > 0,
                    }
                )
        preempted = sorted(so.preempted_req_ids)
        self.total_preemptions += len(preempted)
        ids = list(scheduled)
        sampled = []
        for rid in ids:
            r = s.requests[rid]
            if r.is_prefill_chunk:
                sampled.append([])
            else:
                # The token at position num_computed_tokens (placeholders included).
                index = r.num_computed_tokens - r.num_prompt_tokens
                if index >= len(self.outputs[rid]):
                    raise RuntimeError(f"{rid}: vLLM scheduled a step past its last output")
                sampled.append([self.outputs[rid][index]])
        return {
            "so": so,
            "step": self.step_no,
            "ids": ids,
            "sampled": sampled,
            "scheduled": scheduled,
            "admitted": admitted,
            "preempted": preempted,
        }

    def _step_line(self, batch: dict | None) -> dict:
        if batch is None:
            batch = {"scheduled": {}, "admitted": [], "preempted": []}
        return {
            "op": "step",
            "step": self.step_no,
            "scheduled": batch["scheduled"],
            "num_scheduled_tokens": sum(batch["scheduled"].values()),
            "admitted": batch["admitted"],
            "preempted": batch["preempted"],
        }

    def _process(self, batch: dict) -> dict:
        """Feed a batch's fake model output to update_from_output."""
        s = self.sched
        ids = batch["ids"]
        mro = ModelRunnerOutput(
            req_ids=ids,
            req_id_to_index={rid: i for i, rid in enumerate(ids)},
            sampled_token_ids=batch["sampled"],
            logprobs=None,
            prompt_logprobs_dict={},
            pooler_output=[],
        )
        before_ids = set(s.requests)
        before_reqs = dict(s.requests)
        before_hashes = {rid: len(r.block_hashes) for rid, r in s.requests.items()}
        engine_outputs = s.update_from_output(batch["so"], mro)
        # HFIX1: label hashes appended in this step also for requests that finished in it
        # HFIX2: in this step's schedule order (who sampled first), not in add order
        for rid in ids:
            if rid in before_reqs:  # async: not aborted while the batch was in flight
                self._label(before_reqs[rid], before_hashes[rid])
        finished = sorted(before_ids - set(s.requests))
        delta = {k: 0 for k in self.cum}
        for eco in engine_outputs.values():
            st = eco.scheduler_stats
            if st is not None and st.prefix_cache_stats is not None:
                for k in delta:
                    delta[k] += getattr(st.prefix_cache_stats, k)
        for k, v in delta.items():
            self.cum[k] += v
        return {"finished": finished}

    def _state(self) -> dict:
        """Queues, cache state and the KV events since the previous line."""
        s = self.sched
        events = [ev for batch in self.publisher.batches for ev in batch.events]
        self.publisher.batches.clear()
        if self.cfg["async_scheduling"]:
            # Events of a schedule() not followed by update_from_output are published by the
            # next update; take them now so each line reports its own iteration's events.
            events.extend(s.kv_cache_manager.take_events())
        evicted, stored = [], 0
        for ev in events:
            if isinstance(ev, BlockRemoved):
                evicted.extend(bytes(h).hex() for h in ev.block_hashes)
            elif isinstance(ev, BlockStored):
                stored += len(ev.block_hashes)
        self.evicted_all.extend(evicted)
        return {
            "running": [r.request_id for r in s.running],
            "waiting": [r.request_id for r in s.waiting],
            "stored": stored,
            "evicted_labels": [self.labels.get(h, h[:16]) for h in evicted],
            "num_free_blocks": s.kv_cache_manager.block_pool.get_num_free_blocks(),
            "usage": round(s.kv_cache_manager.usage, 6),
            "cum": dict(self.cum),
        }


def load_workload(path: str) -> list[tuple[int, dict]]:
    """(line number, op) for every non-blank, non-comment line of a workload file."""
    ops = []
    with open(path) as f:
        for lineno, line in enumerate(f, 1):
            line = line.strip()
            if line and not line.startswith("#"):
                ops.append((lineno, json.loads(line)))
    return ops


def apply_op(o: SchedOracle, op: dict, emit, lineno="?") -> dict | None:
    """Run one workload op, call emit(result) for each line it produces and
    return the last one (None for config)."""
    kind = op.get("op")
    last = None
    if kind == "config":
        return None
    if kind == "add":
        last = o.add(op)
        emit(last)
    elif kind == "step":
        for _ in range(int(op.get("n", 1))):
            last = o.iterate(force=True) if o.cfg["async_scheduling"] else o.step()
            emit(last)
    elif kind == "run_until_idle":
        limit = int(op.get("max_steps", 10000))
        while o.has_work() and limit > 0:
            last = o.iterate() if o.cfg["async_scheduling"] else o.step()
            emit(last)
            limit -= 1
        if o.has_work():
            raise SystemExit(f"line {lineno}: still busy after max_steps")
    elif kind == "abort":
        o.sched.finish_requests(op["id"], RequestStatus.FINISHED_ABORTED)
        last = {"op": "abort", "id": op["id"]}
        emit(last)
    else:
        raise SystemExit(f"line {lineno}: unknown op {kind!r}")
    return last


def summary(o: SchedOracle) -> dict:
    return {
        "op": "summary",
        "steps": o.step_no,
        "cum": o.cum,
        "total_preemptions": o.total_preemptions,
        "num_evictions": len(o.evicted_all),
        "evicted_sequence_labels": [o.labels.get(h, h[:16]) for h in o.evicted_all],
    }


def run_workload(path: str, out, check: bool) -> list[str]:
    """Replay one workload file, writing result lines to `out`; return failed
    expectations."""
    ops = load_workload(path)
    cfg = ops[0][1] if ops and ops[0][1].get("op") == "config" else {}
    o = SchedOracle(cfg)
    print(json.dumps({"op": "header", "vllm_version": vllm.__version__, "config": o.cfg}), file=out)

    def emit(res: dict) -> None:
        print(json.dumps(res), file=out)

    failures = []
    for lineno, op in ops:
        kind = op.get("op")
        if kind == "config":
            continue
        last = apply_op(o, op, emit, lineno)
        if check and "expect" in op:
            flat = dict(last or {})
            flat.update(o.cum)
            flat["total_preemptions"] = o.total_preemptions
            flat["step_count"] = o.step_no
            for k, v in op["expect"].items():
                if flat.get(k) != v:
                    failures.append(
                        f"line {lineno} ({kind}): {k} = {flat.get(k)!r}, expected {v!r}"
                    )
    print(json.dumps(summary(o)), file=out)
    return failures


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("workloads", nargs="+", metavar="workload")
    ap.add_argument("--out", help="result file (single workload only; default stdout)")
    ap.add_argument("--outdir", help="write <workload-name>.out.jsonl per workload here")
    ap.add_argument("--check", action="store_true")
    args = ap.parse_args(argv)
    if args.out and len(args.workloads) > 1:
        ap.error("--out takes a single workload; use --outdir for several")
    if args.outdir:
        os.makedirs(args.outdir, exist_ok=True)
    all_failures = []
    for path in args.workloads:
        if args.outdir:
            name = os.path.basename(path)
            name = name[: -len(".jsonl")] if name.endswith(".jsonl") else name
            out = open(os.path.join(args.outdir, f"{name}.out.jsonl"), "w")  # noqa: SIM115 (closed below)
        elif args.out:
            out = open(args.out, "w")  # noqa: SIM115 (closed below)
        else:
            out = sys.stdout
        try:
            failures = run_workload(path, out, args.check)
        finally:
            if out is not sys.stdout:
                out.close()
        if args.check and len(args.workloads) > 1:
            print(
                f"{'FAIL' if failures else 'OK'} {os.path.basename(path)}: "
                f"{len(failures)} expectation(s) failed",
                file=sys.stderr,
            )
        all_failures.extend(failures)
    if args.check:
        for f_ in all_failures:
            print("EXPECT FAILED:", f_, file=sys.stderr)
        print(
            f"{'FAIL' if all_failures else 'OK'}: {len(all_failures)} expectation(s) failed",
            file=sys.stderr,
        )
        return 1 if all_failures else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
