"""`prefixsim cache replay`: drive the KV-cache manager op by op (replay_formats.md §1)."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from sim.kvcache import (
    BLOCK_EVICTED,
    BLOCK_STORED,
    CacheRequest,
    HashKeys,
    RequestStatus,
    run_alone,
)
from sim.native import DEFAULT_CORE, make_hasher, make_manager
from sim.replay.ops import Op, ReplayLine, check_hash_algo, read_ops

CACHE_OPS = frozenset(
    {
        "config",
        "arrive",
        "schedule",
        "output",
        "run",
        "preempt",
        "finish",
        "reset_prefix_cache",
        "snapshot",
    }
)
_CONFIG_KEYS = frozenset(
    {
        "num_blocks",
        "block_size",
        "hash_algo",
        "hash_seed",
        "max_model_len",
        "watermark",
        "full_sequence_must_fit",
        "enable_caching",
    }
)
_OP_KEYS = {
    "arrive": frozenset({"id", "prompt", "max_tokens", "cache_salt", "lora", "prompt_logprobs"}),
    "schedule": frozenset({"id", "num_new_tokens"}),
    "output": frozenset({"id", "tokens"}),
    "run": frozenset({"id", "outputs", "finish"}),
    "preempt": frozenset({"id"}),
    "finish": frozenset({"id"}),
    "reset_prefix_cache": frozenset(),
    "snapshot": frozenset(),
}


@dataclass(slots=True)
class CacheReplayConfig:
    """The `config` op: pool size, block size, hashing, limits."""

    num_blocks: int = 64
    block_size: int = 16
    hash_algo: str = "sha256"
    hash_seed: str | None = None
    max_model_len: int = 8192
    watermark: float = 0.0
    full_sequence_must_fit: bool = True
    enable_caching: bool = True

    @classmethod
    def from_op(cls, op: Op) -> CacheReplayConfig:
        """Validate a config op."""
        op.check_keys(_CONFIG_KEYS)
        hash_seed = op.fields.get("hash_seed")
        if hash_seed is not None and not isinstance(hash_seed, str):
            raise op.error(f"'hash_seed' must be a string or null, got {hash_seed!r}")
        return cls(
            num_blocks=op.get_num_blocks(),
            block_size=op.get_int("block_size", 16, minimum=1),
            hash_algo=check_hash_algo(op),
            hash_seed=hash_seed,
            max_model_len=op.get_int("max_model_len", 8192, minimum=1),
            watermark=op.get_float("watermark", 0.0, minimum=0.0, maximum=1.0),
            full_sequence_must_fit=op.get_bool("full_sequence_must_fit", True),
            enable_caching=op.get_bool("enable_caching", True),
        )

    def as_dict(self) -> dict[str, Any]:
        """The config as the header prints it (without the hash seed, which it never showed)."""
        return {name: value for name, value in asdict(self).items() if name != "hash_seed"}


def parse_lora(op: Op) -> tuple[str | None, str | None]:
    """The (name, path) a `lora` object adds to block hashes; its integer id is not hashed."""
    lora = op.fields.get("lora")
    if lora is None:
        return None, None
    if not isinstance(lora, dict) or not isinstance(lora.get("name"), str):
        raise op.error(f"'lora' must be null or an object with a string 'name', got {lora!r}")
    unknown = sorted(set(lora) - {"name", "id", "path"})
    if unknown:
        raise op.error(f"unknown lora key {unknown[0]!r}; allowed: id, name, path")
    lora_id = lora.get("id")
    if lora_id is not None and (isinstance(lora_id, bool) or not isinstance(lora_id, int)):
        raise op.error(f"lora 'id' must be an integer, got {lora_id!r}")
    path = lora.get("path")
    if path is not None and not isinstance(path, str):
        raise op.error(f"lora 'path' must be a string, got {path!r}")
    return lora["name"], path


def parse_salt(op: Op) -> str | None:
    """The engine-level cache_salt (an empty salt is accepted, as vLLM's engine does)."""
    salt = op.fields.get("cache_salt")
    if salt is not None and not isinstance(salt, str):
        raise op.error(f"'cache_salt' must be a string or null, got {salt!r}")
    return salt


class _OpEventLog:
    """Collects the hashes stored and evicted while one op runs."""

    __slots__ = ("stored", "evicted")

    def __init__(self) -> None:
        self.stored: list[bytes] = []
        self.evicted: list[bytes] = []

    def on_block_event(
        self, kind: str, block_hash: bytes, block_id: int, num_tokens: int, now: float
    ) -> None:
        if kind == BLOCK_STORED:
            self.stored.append(block_hash)
        elif kind == BLOCK_EVICTED:
            self.evicted.append(block_hash)


class CacheReplay:
    """Applies cache ops to one KVCacheManager and reports every decision."""

    def __init__(self, config: CacheReplayConfig, core: str = DEFAULT_CORE) -> None:
        self.config = config
        self.hasher = make_hasher(core, config.hash_algo, config.block_size, config.hash_seed)
        self.events = _OpEventLog()
        self.manager = make_manager(
            core,
            config.num_blocks,
            config.block_size,
            max_model_len=config.max_model_len,
            enable_caching=config.enable_caching,
            watermark=config.watermark,
            observer=self.events,
        )
        self.requests: dict[str, CacheRequest] = {}
        self.labels: dict[bytes, str] = {}
        self.evicted_sequence: list[bytes] = []

    def header(self, trace: str) -> dict[str, Any]:
        """The first output line."""
        return {
            "op": "header",
            "trace": trace,
            "config": self.config.as_dict(),
            "none_hash": self.hasher.none_hash.hex(),
            "pythonhashseed": self.config.hash_seed,
        }

    def apply(self, op: Op) -> dict[str, Any]:
        """Run one op and return its output line."""
        op.check_keys(_OP_KEYS[op.name])
        self.events.stored.clear()
        self.events.evicted.clear()
        result: dict[str, Any] = {"op": op.name}
        request = None
        if op.name in ("reset_prefix_cache", "snapshot"):
            getattr(self, f"_{op.name}")(result)
        else:
            request = getattr(self, f"_{op.name}")(op, result)
        self.evicted_sequence.extend(self.events.evicted)
        result.update(self._event_fields())
        if request is not None:
            result.update(self._request_fields(request, include_num_tokens=op.name != "arrive"))
        result.update(self._pool_fields())
        result["line"] = op.line
        return result

    def summary(self) -> dict[str, Any]:
        """The last output line."""
        pool = self.manager.block_pool
        return {
            "op": "summary",
            "stats": self.manager.cumulative_stats.as_dict(),
            "num_evictions": pool.num_evictions,
            "evicted_sequence": [block_hash.hex() for block_hash in self.evicted_sequence],
            "evicted_sequence_labels": [self.labels.get(h) for h in self.evicted_sequence],
            "num_stored": pool.num_stored,
            "free_queue": self._free_queue(),
        }

    def _arrive(self, op: Op, result: dict[str, Any]) -> CacheRequest:
        request_id = op.get_id()
        if request_id in self.requests:
            raise op.error(f"request {request_id!r} already arrived")
        prompt = op.get_tokens("prompt")
        op.get_optional_int("max_tokens", minimum=1)
        lora_name, lora_path = parse_lora(op)
        prompt_logprobs = op.fields.get("prompt_logprobs")
        if prompt_logprobs is not None and (
            isinstance(prompt_logprobs, bool) or not isinstance(prompt_logprobs, int)
        ):
            raise op.error(f"'prompt_logprobs' must be null or an integer, got {prompt_logprobs!r}")
        keys = HashKeys(lora_name=lora_name, lora_path=lora_path, cache_salt=parse_salt(op))
        request = CacheRequest(
            request_id,
            prompt,
            self.hasher,
            hash_keys=keys,
            skip_reading_prefix_cache=prompt_logprobs is not None,
        )
        self.requests[request_id] = request
        self._label(request, 0)
        result["id"] = request_id
        result["num_tokens"] = request.num_tokens
        result["block_hashes"] = [block_hash.hex() for block_hash in request.block_hashes]
        return request

    def _live_request(self, op: Op) -> CacheRequest:
        request_id = op.get_id()
        request = self.requests.get(request_id)
        if request is None:
            raise op.error(f"unknown request id {request_id!r} (no earlier 'arrive')")
        if request.status.is_finished:
            raise op.error(f"request {request_id!r} has already finished")
        return request

    def _schedule(self, op: Op, result: dict[str, Any]) -> CacheRequest:
        request = self._live_request(op)
        result["id"] = request.request_id
        self._schedule_request(op, request, op.get_optional_int("num_new_tokens"), result)
        return request

    def _schedule_request(
        self, op: Op, request: CacheRequest, num_new_tokens: int | None, result: dict[str, Any]
    ) -> bool:
        manager = self.manager
        admission = request.status is not RequestStatus.RUNNING
        result["admission"] = admission
        if admission:
            hit_blocks, num_hit_tokens = manager.get_computed_blocks(request)
            result["hit_tokens"] = num_hit_tokens
        else:
            hit_blocks, num_hit_tokens = [], 0
        num_remaining = request.num_tokens - request.num_computed_tokens - num_hit_tokens
        if num_new_tokens is None:
            num_new_tokens = num_remaining
        if num_remaining == 0:
            raise op.error(
                f"request {request.request_id!r} has no tokens left to compute "
                "(append an output first)"
            )
        if not 1 <= num_new_tokens <= num_remaining:
            raise op.error(
                f"num_new_tokens must be in 1..{num_remaining} (tokens not yet computed), "
                f"got {num_new_tokens}"
            )
        result["num_new_tokens"] = num_new_tokens
        new_blocks = manager.allocate_slots(
            request,
            num_new_tokens,
            num_hit_tokens,
            hit_blocks,
            full_sequence_must_fit=admission and self.config.full_sequence_must_fit,
            has_running_requests=self._has_running(),
        )
        result["ok"] = new_blocks is not None
        if new_blocks is None:
            return False
        result["new_block_ids"] = manager.block_ids(new_blocks)
        if admission:
            manager.record_prefix_cache_stats(request, num_hit_tokens)
            request.status = RequestStatus.RUNNING
            request.num_computed_tokens = num_hit_tokens
        request.num_computed_tokens += num_new_tokens
        return True

    def _has_running(self) -> bool:
        return any(r.status is RequestStatus.RUNNING for r in self.requests.values())

    def _output(self, op: Op, result: dict[str, Any]) -> CacheRequest:
        request = self._live_request(op)
        tokens = op.get_tokens("tokens")
        result["id"] = request.request_id
        result["new_block_hashes"] = self._append_outputs(request, tokens)
        return request

    def _append_outputs(self, request: CacheRequest, tokens: list[int]) -> list[str]:
        num_before = len(request.block_hashes)
        request.append_output_token_ids(tokens)
        self._label(request, num_before)
        return [block_hash.hex() for block_hash in request.block_hashes[num_before:]]

    def _run(self, op: Op, result: dict[str, Any]) -> CacheRequest:
        request = self._live_request(op)
        outputs = op.get_tokens("outputs")
        finish = op.get_bool("finish", True)
        if request.status is RequestStatus.RUNNING:
            raise op.error(f"request {request.request_id!r} is already running; 'run' admits it")
        run = run_alone(
            self.manager,
            request,
            outputs,
            full_sequence_must_fit=self.config.full_sequence_must_fit,
            has_running_requests=self._has_running(),
            finish=finish,
            stop_when_full=True,
        )
        result.update(
            id=request.request_id,
            admission=True,
            hit_tokens=run.num_hit_tokens,
            num_new_tokens=run.num_new_tokens,
            ok=run.admitted,
        )
        if run.failed_at_output is not None:
            self._label(request, 0)
            result.update(
                ok=False, new_block_ids=run.new_block_ids, failed_at_output=run.failed_at_output
            )
        elif run.admitted:
            self._label(request, 0)
            result.update(
                new_block_ids=run.new_block_ids,
                block_ids_at_finish=run.block_ids_at_finish,
                decode_steps=len(outputs) - 1,
            )
        return request

    def _preempt(self, op: Op, result: dict[str, Any]) -> CacheRequest:
        request = self._live_request(op)
        result["id"] = request.request_id
        self.manager.free(request)
        request.num_computed_tokens = 0
        request.status = RequestStatus.PREEMPTED
        request.num_preemptions += 1
        return request

    def _finish(self, op: Op, result: dict[str, Any]) -> CacheRequest:
        request = self._live_request(op)
        result["id"] = request.request_id
        self.manager.free(request)
        request.status = RequestStatus.FINISHED_STOPPED
        return request

    def _reset_prefix_cache(self, result: dict[str, Any]) -> None:
        ok = self.manager.reset_prefix_cache()
        result["ok"] = ok
        if ok:
            result["all_blocks_cleared"] = True

    def _snapshot(self, result: dict[str, Any]) -> None:
        free_queue = self._free_queue()
        result["free_queue"] = free_queue
        result["free_queue_ids"] = [entry[0] for entry in free_queue]
        result["free_queue_labels"] = [entry[2] for entry in free_queue]
        result["num_cached_hashes"] = self.manager.block_pool.num_cached_hashes

    def _label(self, request: CacheRequest, start: int) -> None:
        for index in range(start, len(request.block_hashes)):
            self.labels.setdefault(request.block_hashes[index], f"{request.request_id}#{index}")

    def _free_queue(self) -> list[list[Any]]:
        return [
            [
                block_id,
                block_hash.hex() if block_hash is not None else None,
                self.labels.get(block_hash) if block_hash is not None else None,
            ]
            for block_id, block_hash in self.manager.block_pool.free_queue_entries()
        ]

    def _event_fields(self) -> dict[str, Any]:
        stored, evicted = self.events.stored, self.events.evicted
        return {
            "num_evicted": len(evicted),
            "stored": [block_hash.hex() for block_hash in stored],
            "stored_labels": [self.labels.get(block_hash) for block_hash in stored],
            "evicted": [block_hash.hex() for block_hash in evicted],
            "evicted_labels": [self.labels.get(block_hash) for block_hash in evicted],
        }

    def _request_fields(self, request: CacheRequest, *, include_num_tokens: bool) -> dict[str, Any]:
        fields: dict[str, Any] = {"status": request.status.value}
        if include_num_tokens:
            fields["num_tokens"] = request.num_tokens
        fields["num_computed_tokens"] = request.num_computed_tokens
        fields["block_ids"] = self.manager.get_block_ids(request.request_id)
        return fields

    def _pool_fields(self) -> dict[str, Any]:
        return {
            "num_free_blocks": self.manager.num_free_blocks,
            "usage": round(self.manager.usage, 6),
            "stats": self.manager.cumulative_stats.as_dict(),
        }


def replay_cache(path: Path, core: str = DEFAULT_CORE) -> Iterator[ReplayLine]:
    """Replay a cache op script: a header line, one line per op, then the summary."""
    ops = read_ops(path, CACHE_OPS)
    first = next(ops, None)
    config_op = first if first is not None and first.name == "config" else None
    config = CacheReplayConfig.from_op(config_op) if config_op is not None else CacheReplayConfig()
    replay = CacheReplay(config, core)
    header = replay.header(path.name)
    yield ReplayLine(None, header, header)
    pending = [] if first is None or config_op is not None else [first]
    for op in itertools.chain(pending, ops):
        if op.name == "config":
            raise op.error("a config op may only be the first line")
        line = replay.apply(op)
        yield ReplayLine(op, line, {**line, **line["stats"]})
    summary = replay.summary()
    yield ReplayLine(None, summary, summary)
