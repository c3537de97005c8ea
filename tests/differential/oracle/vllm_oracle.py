#!/usr/bin/env python3
"""Replay a JSON-lines trace of KV-cache operations against vLLM's real
KVCacheManager and print one JSON result line per operation.

This file is our own harness code.  It only *calls* vLLM's public-ish Python
classes (KVCacheManager, Request, SamplingParams, ...) from an installed vLLM;
it contains no vLLM source.  See SETUP.md for building the environment.

Usage:
    python vllm_oracle.py TRACE.jsonl [--out RESULTS.jsonl] [--check]
    python vllm_oracle.py traces/*.jsonl --outdir results/ --check

Trace format (one JSON object per line; blank lines and lines starting with
'#' are ignored):

  {"op": "config", "num_blocks": 64, "block_size": 16, "hash_algo": "sha256",
   "max_model_len": 8192, "watermark": 0.0, "full_sequence_must_fit": true,
   "enable_caching": true}
      Must be the first op if present; builds the manager.  num_blocks
      INCLUDES vLLM's reserved null block (block 0), so num_blocks=64 gives
      63 usable blocks.  Defaults as shown.

  {"op": "arrive", "id": "A", "prompt": [int, ...], "max_tokens": 16,
   "cache_salt": null, "lora": {"name": "x", "id": 1, "path": "/p"} | null,
   "prompt_logprobs": null}
      Creates a Request (WAITING).  Block hashes of every full prompt block
      are computed immediately, as vLLM does.

  {"op": "schedule", "id": "A", "num_new_tokens": null}
      One scheduler allocation for this request, as vLLM's sync scheduler
      does it.  WAITING/PREEMPTED request: prefix-cache lookup
      (get_computed_blocks, hit capped at num_tokens-1), then allocate_slots
      for num_new_tokens (default: everything not yet computed) with the
      full-sequence admission check; on success the lookup is recorded in
      the prefix-cache stats and the request becomes RUNNING.  RUNNING
      request: allocate_slots for num_new_tokens (default
      num_tokens - num_computed_tokens, i.e. 1 in decode).  On failure
      (None from allocate_slots) nothing changes and "ok" is false.

  {"op": "output", "id": "A", "tokens": [int, ...]}
      Append sampled token ids (hashes of newly full blocks are computed).

  {"op": "run", "id": "A", "outputs": [int, ...], "finish": true}
      Convenience for one request running alone in a sync engine:
      schedule the whole prefill; then for each output token append it and,
      unless it is the last one, schedule its decode step; then finish.

  {"op": "preempt", "id": "A"}     free blocks, num_computed_tokens=0,
                                   status PREEMPTED, num_preemptions += 1
  {"op": "finish", "id": "A"}      status FINISHED_STOPPED, free blocks
  {"op": "reset_prefix_cache"}     BlockPool.reset_prefix_cache()
  {"op": "snapshot"}               dump the free queue (front = next evicted)

Any op may carry "expect": {key: value}; with --check every key is compared
with the result line and mismatches are reported (exit status 1).

Output: one JSON line per op with (where applicable) ok, hit_tokens,
new_block_ids, block_ids, num_computed_tokens, num_tokens, block_hashes,
stored (hex hashes newly cached, in order), evicted (hex hashes removed
from the prefix cache, in order), num_free_blocks, usage and the cumulative
prefix-cache counters.  A final {"op": "summary"} line holds the totals,
the whole eviction sequence and the final free-queue order.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

# Full-width (bytes) block hashes in KV events instead of 64-bit ints, and keep
# vLLM's logger off stdout (our results go there).
os.environ["VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES"] = "0"
os.environ.setdefault("VLLM_CONFIGURE_LOGGING", "0")

_t0 = time.time()
import torch  # noqa: E402
import vllm  # noqa: E402
from vllm.distributed.kv_events import (  # noqa: E402
    AllBlocksCleared,
    BlockRemoved,
    BlockStored,
)
from vllm.lora.request import LoRARequest  # noqa: E402
from vllm.sampling_params import SamplingParams  # noqa: E402
from vllm.utils.hashing import get_hash_fn_by_name  # noqa: E402
from vllm.v1.core import kv_cache_utils  # noqa: E402
from vllm.v1.core.kv_cache_manager import KVCacheManager  # noqa: E402
from vllm.v1.core.kv_cache_utils import (  # noqa: E402
    get_block_hash,
    get_request_block_hasher,
    init_none_hash,
)
from vllm.v1.kv_cache_interface import (  # noqa: E402
    FullAttentionSpec,
    KVCacheConfig,
    KVCacheGroupSpec,
)
from vllm.v1.request import Request, RequestStatus  # noqa: E402

IMPORT_SECONDS = time.time() - _t0

DEFAULT_CONFIG = {
    "num_blocks": 64,
    "block_size": 16,
    "hash_algo": "sha256",
    "max_model_len": 8192,
    "watermark": 0.0,
    "full_sequence_must_fit": True,
    "enable_caching": True,
}


def _hex(h) -> str | None:
    if h is None:
        return None
    if isinstance(h, int):
        return format(h, "x")
    return bytes(h).hex()


class Oracle:
    def __init__(self, cfg: dict):
        unknown = set(cfg) - set(DEFAULT_CONFIG) - {"op", "expect"}
        if unknown:
            raise ValueError(f"config: unknown keys {sorted(unknown)}")
        self.cfg = {**DEFAULT_CONFIG, **{k: v for k, v in cfg.items() if k in DEFAULT_CONFIG}}
        bs = int(self.cfg["block_size"])
        self.block_size = bs
        self.hash_fn = get_hash_fn_by_name(self.cfg["hash_algo"])
        init_none_hash(self.hash_fn)
        self.none_hash_hex = _hex(kv_cache_utils.NONE_HASH)
        self.hasher = get_request_block_hasher(bs, self.hash_fn)
        spec = FullAttentionSpec(block_size=bs, num_kv_heads=1, head_size=1, dtype=torch.float32)
        kv_cfg = KVCacheConfig(
            num_blocks=int(self.cfg["num_blocks"]),
            kv_cache_tensors=[],
            kv_cache_groups=[KVCacheGroupSpec(["layer.0"], spec)],
        )
        self.mgr = KVCacheManager(
            kv_cache_config=kv_cfg,
            max_model_len=int(self.cfg["max_model_len"]),
            scheduler_block_size=bs,
            hash_block_size=bs,
            enable_caching=bool(self.cfg["enable_caching"]),
            log_stats=True,
            enable_kv_cache_events=True,
            watermark=float(self.cfg["watermark"]),
        )
        self.pool = self.mgr.block_pool
        self.requests: dict[str, Request] = {}
        self.running: set[str] = set()
        self.evicted_all: list[str] = []
        self.stored_total = 0
        # hex hash -> "rid#block_index" of the first request that produced it,
        # so expectations can name blocks instead of 64-hex-digit hashes.
        self.labels: dict[str, str] = {}

    def _label_hashes(self, req: Request, start: int = 0) -> None:
        for i in range(start, len(req.block_hashes)):
            self.labels.setdefault(_hex(req.block_hashes[i]), f"{req.request_id}#{i}")

    def label(self, h: str | None) -> str | None:
        if h is None:
            return None
        return self.labels.get(h, h[:16])

    # ------------------------------------------------------------------ helpers
    def _req(self, op: dict) -> Request:
        rid = op.get("id")
        if rid not in self.requests:
            raise KeyError(f"{op.get('op')}: unknown request id {rid!r}")
        return self.requests[rid]

    def _drain_events(self) -> dict:
        stored: list[str] = []
        evicted: list[str] = []
        cleared = False
        for ev in self.mgr.take_events():
            if isinstance(ev, BlockStored):
                stored.extend(_hex(h) for h in ev.block_hashes)
            elif isinstance(ev, BlockRemoved):
                evicted.extend(_hex(h) for h in ev.block_hashes)
            elif isinstance(ev, AllBlocksCleared):
                cleared = True
        self.evicted_all.extend(evicted)
        self.stored_total += len(stored)
        out = {
            "num_evicted": len(evicted),
            "stored": stored,
            "stored_labels": [self.label(h) for h in stored],
            "evicted": evicted,
            "evicted_labels": [self.label(h) for h in evicted],
        }
        if cleared:
            out["all_blocks_cleared"] = True
        return out

    def _stats(self) -> dict:
        s = self.mgr.prefix_cache_stats
        return {
            "requests": s.requests,
            "queries": s.queries,
            "hits": s.hits,
            "preempted_requests": s.preempted_requests,
            "preempted_queries": s.preempted_queries,
            "preempted_hits": s.preempted_hits,
        }

    def free_queue(self) -> list[list]:
        """[block_id, hex hash or None, label or None], front (next victim) first."""
        out = []
        for blk in self.pool.free_block_queue.get_all_free_blocks():
            h = _hex(get_block_hash(blk.block_hash)) if blk.block_hash is not None else None
            out.append([blk.block_id, h, self.label(h)])
        return out

    def _req_view(self, req: Request) -> dict:
        ids = self.mgr.get_block_ids(req.request_id)[0] if req.request_id in self.running else []
        return {
            "status": req.status.name,
            "num_tokens": req.num_tokens,
            "num_computed_tokens": req.num_computed_tokens,
            "block_ids": list(ids),
        }

    def _common(self) -> dict:
        return {
            "num_free_blocks": self.pool.get_num_free_blocks(),
            "usage": round(self.mgr.usage, 6),
            "stats": self._stats(),
        }

    # --------------------------------------------------------------------- ops
    def op_arrive(self, op: dict) -> dict:
        rid = op["id"]
        if rid in self.requests:
            raise ValueError(f"arrive: duplicate request id {rid!r}")
        prompt = [int(t) for t in op["prompt"]]
        lora = op.get("lora")
        lora_req = (
            LoRARequest(
                lora_name=str(lora["name"]),
                lora_int_id=int(lora.get("id", 1)),
                lora_path=str(lora.get("path", "")),
            )
            if lora
            else None
        )
        sp = SamplingParams(
            max_tokens=int(op.get("max_tokens", 16)),
            prompt_logprobs=op.get("prompt_logprobs"),
        )
        req = Request(
            request_id=rid,
            prompt_token_ids=prompt,
            sampling_params=sp,
            pooling_params=None,
            arrival_time=float(op.get("arrival_time", 0.0)),
            lora_request=lora_req,
            cache_salt=op.get("cache_salt"),
            block_hasher=self.hasher,
        )
        self.requests[rid] = req
        self._label_hashes(req)
        return {
            "num_tokens": req.num_tokens,
            "block_hashes": [_hex(h) for h in req.block_hashes],
        }

    def _schedule(self, req: Request, num_new_tokens: int | None) -> dict:
        rid = req.request_id
        if req.status in (RequestStatus.WAITING, RequestStatus.PREEMPTED):
            blocks, hit, _boundary = self.mgr.get_computed_blocks(req)
            num_computed = hit
            want = req.num_tokens - num_computed
            n = want if num_new_tokens is None else min(int(num_new_tokens), want)
            new_blocks = self.mgr.allocate_slots(
                req,
                n,
                num_new_computed_tokens=hit,
                new_computed_blocks=blocks,
                full_sequence_must_fit=bool(self.cfg["full_sequence_must_fit"]),
                has_scheduled_reqs=bool(self.running),
            )
            res = {"admission": True, "hit_tokens": hit, "num_new_tokens": n}
            if new_blocks is None:
                res["ok"] = False
                return res
            self.mgr.record_prefix_cache_stats(req, hit)
            req.status = RequestStatus.RUNNING
            req.num_computed_tokens = num_computed + n
            self.running.add(rid)
        elif req.status == RequestStatus.RUNNING:
            want = req.num_tokens - req.num_computed_tokens
            n = want if num_new_tokens is None else min(int(num_new_tokens), want)
            if n <= 0:
                raise ValueError(f"schedule: request {rid!r} has nothing to compute")
            new_blocks = self.mgr.allocate_slots(req, n)
            res = {"admission": False, "num_new_tokens": n}
            if new_blocks is None:
                res["ok"] = False
                return res
            req.num_computed_tokens += n
        else:
            raise ValueError(f"schedule: request {rid!r} is {req.status.name}")
        res["ok"] = True
        res["new_block_ids"] = new_blocks.get_block_ids()[0] if new_blocks.blocks else []
        return res

    def op_schedule(self, op: dict) -> dict:
        req = self._req(op)
        return self._schedule(req, op.get("num_new_tokens"))

    def op_output(self, op: dict) -> dict:
        req = self._req(op)
        if req.status != RequestStatus.RUNNING:
            raise ValueError(f"output: request {req.request_id!r} is not RUNNING")
        before = len(req.block_hashes)
        req.append_output_token_ids([int(t) for t in op["tokens"]])
        self._label_hashes(req, before)
        return {"new_block_hashes": [_hex(h) for h in req.block_hashes[before:]]}

    def _finish(self, req: Request) -> None:
        req.status = RequestStatus.FINISHED_STOPPED
        self.mgr.free(req)
        self.running.discard(req.request_id)

    def op_finish(self, op: dict) -> dict:
        req = self._req(op)
        if req.is_finished():
            raise ValueError(f"finish: request {req.request_id!r} already finished")
        self._finish(req)
        return {}

    def op_preempt(self, op: dict) -> dict:
        req = self._req(op)
        if req.status != RequestStatus.RUNNING:
            raise ValueError(f"preempt: request {req.request_id!r} is not RUNNING")
        self.mgr.free(req)
        self.running.discard(req.request_id)
        req.status = RequestStatus.PREEMPTED
        req.num_computed_tokens = 0
        req.num_preemptions += 1
        return {}

    def op_run(self, op: dict) -> dict:
        req = self._req(op)
        first = self._schedule(req, None)
        if not first["ok"]:
            return first
        outs = [int(t) for t in op.get("outputs", [])]
        decode_steps = 0
        for i, tok in enumerate(outs):
            before = len(req.block_hashes)
            req.append_output_token_ids(tok)
            self._label_hashes(req, before)
            if i == len(outs) - 1:
                break
            step = self._schedule(req, 1)
            if not step["ok"]:
                return {**first, "ok": False, "failed_at_output": i}
            decode_steps += 1
        if op.get("finish", True):
            blocks_before_free = self.mgr.get_block_ids(req.request_id)[0]
            self._finish(req)
            first["block_ids_at_finish"] = list(blocks_before_free)
        first["decode_steps"] = decode_steps
        return first

    def op_reset_prefix_cache(self, op: dict) -> dict:
        return {"ok": bool(self.mgr.reset_prefix_cache())}

    def op_snapshot(self, op: dict) -> dict:
        fq = self.free_queue()
        return {
            "free_queue": fq,
            "free_queue_ids": [b for b, _, _ in fq],
            "free_queue_labels": [lab for _, _, lab in fq],
            "num_cached_hashes": len(self.pool.cached_block_hash_to_block),
        }

    # ------------------------------------------------------------------ driver
    def apply(self, op: dict) -> dict:
        name = op.get("op")
        fn = getattr(self, f"op_{name}", None)
        if fn is None:
            raise ValueError(f"unknown op {name!r}")
        res = {"op": name}
        if "id" in op:
            res["id"] = op["id"]
        res.update(fn(op))
        res.update(self._drain_events())
        if "id" in op and op["id"] in self.requests:
            res.update(
                {k: v for k, v in self._req_view(self.requests[op["id"]]).items() if k not in res}
            )
        res.update(self._common())
        return res


def _flatten(res: dict) -> dict:
    flat = dict(res)
    for k, v in res.get("stats", {}).items():
        flat.setdefault(k, v)
    return flat


def _load_trace(path: str) -> list[tuple[int, dict]]:
    ops = []
    with open(path) as f:
        for lineno, line in enumerate(f, 1):
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            try:
                ops.append((lineno, json.loads(line)))
            except json.JSONDecodeError as e:
                raise SystemExit(f"{path}:{lineno}: bad JSON: {e}") from None
    return ops


def run_trace(path: str, out, check: bool) -> list[str]:
    """Replay one trace, writing result lines to `out`; return failed expectations."""
    ops = _load_trace(path)
    cfg = ops[0][1] if ops and ops[0][1].get("op") == "config" else {}
    oracle = Oracle(cfg)
    header = {
        "op": "header",
        "trace": os.path.basename(path),
        "vllm_version": vllm.__version__,
        "torch_version": torch.__version__,
        "config": oracle.cfg,
        "none_hash": oracle.none_hash_hex,
        "pythonhashseed": os.environ.get("PYTHONHASHSEED"),
    }
    print(json.dumps(header), file=out)
    failures: list[str] = []
    for lineno, op in ops:
        if op.get("op") == "config":
            if lineno != ops[0][0]:
                raise SystemExit(f"{path}:{lineno}: config must be the first op")
            continue
        try:
            res = oracle.apply(op)
        except (KeyError, ValueError) as e:
            raise SystemExit(f"{path}:{lineno}: {e}") from None
        res["line"] = lineno
        if check and "expect" in op:
            flat = _flatten(res)
            bad = [
                f"{os.path.basename(path)} line {lineno} ({op.get('op')} {op.get('id', '')}): "
                f"{k} = {flat.get(k)!r}, expected {v!r}"
                for k, v in op["expect"].items()
                if flat.get(k) != v
            ]
            failures.extend(bad)
            res["expect_ok"] = not bad
        print(json.dumps(res), file=out)
    summary = {
        "op": "summary",
        "stats": oracle._stats(),
        "num_evictions": len(oracle.evicted_all),
        "evicted_sequence": oracle.evicted_all,
        "evicted_sequence_labels": [oracle.label(h) for h in oracle.evicted_all],
        "num_stored": oracle.stored_total,
        "free_queue": oracle.free_queue(),
    }
    print(json.dumps(summary), file=out)
    return failures


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("traces", nargs="+", help="trace file(s), JSON lines")
    ap.add_argument("--out", help="result file (single trace only; default stdout)")
    ap.add_argument("--outdir", help="write <trace-name>.out.jsonl per trace here")
    ap.add_argument("--check", action="store_true", help="verify 'expect' fields")
    args = ap.parse_args(argv)
    if args.out and len(args.traces) > 1:
        ap.error("--out takes a single trace; use --outdir for several")
    if args.outdir:
        os.makedirs(args.outdir, exist_ok=True)
    print(f"vllm {vllm.__version__} imported in {IMPORT_SECONDS:.1f}s", file=sys.stderr)

    all_failures: list[str] = []
    for path in args.traces:
        if args.outdir:
            name = os.path.basename(path)
            name = name[: -len(".jsonl")] if name.endswith(".jsonl") else name
            out = open(os.path.join(args.outdir, f"{name}.out.jsonl"), "w")  # noqa: SIM115 (closed below)
        elif args.out:
            out = open(args.out, "w")  # noqa: SIM115 (closed below)
        else:
            out = sys.stdout
        try:
            failures = run_trace(path, out, args.check)
        finally:
            if out is not sys.stdout:
                out.close()
        all_failures.extend(failures)
        if args.check:
            status = "FAIL" if failures else "OK"
            print(
                f"{status} {os.path.basename(path)}: {len(failures)} expectation(s) failed",
                file=sys.stderr,
            )
    if args.check:
        for f in all_failures:
            print("EXPECT FAILED:", f, file=sys.stderr)
        return 1 if all_failures else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
