"""`prefixsim cache offload-replay`: drive the CPU offload tier op by op, in the op-stream
format of the offload manager oracle (tests/differential/offload/vllm_offload_oracle.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from sim.errors import InputError
from sim.kvcache import OFFLOAD_POLICIES, CpuOffloadTier
from sim.replay.ops import Op, ReplayLine, read_ops

_OP_KEYS = {
    "config": frozenset({"num_chunks", "policy"}),
    "lookup": frozenset({"keys"}),
    "prepare_load": frozenset({"req", "start", "keys"}),
    "complete_load": frozenset({"keys"}),
    "prepare_store": frozenset({"req", "start", "keys"}),
    "complete_store": frozenset({"keys"}),
    "finish": frozenset({"req"}),
    "reset": frozenset(),
}
OFFLOAD_OPS = frozenset(_OP_KEYS)
# A tier of this many chunks is ~100 MB of bookkeeping; far beyond any op stream.
MAX_OP_STREAM_CHUNKS = 1_000_000


def _names(op: Op) -> list[str]:
    value = op.fields.get("keys")
    if not isinstance(value, list) or not all(isinstance(k, str) and k for k in value):
        raise op.error(f"'keys' must be a list of non-empty strings, got {value!r}")
    if len(set(value)) != len(value):
        raise op.error("'keys' must not repeat a key")
    return value


def _request(op: Op) -> str:
    value = op.fields.get("req")
    if not isinstance(value, str) or not value:
        raise op.error(f"'req' must be a non-empty string, got {value!r}")
    return value


class OffloadReplay:
    """Applies offload ops to one CpuOffloadTier and reports its state after each."""

    def __init__(self, config: Op) -> None:
        config.check_keys(_OP_KEYS["config"])
        num_chunks = config.get_int("num_chunks", minimum=1)
        if num_chunks > MAX_OP_STREAM_CHUNKS:
            raise config.error(f"'num_chunks' must be at most {MAX_OP_STREAM_CHUNKS:,}")
        self.policy = config.get_str("policy", "lru", choices=OFFLOAD_POLICIES)
        self.tier = CpuOffloadTier(num_chunks, self.policy)

    def header(self) -> dict[str, Any]:
        """The first output line."""
        return {"op": "header", "num_chunks": self.tier.num_chunks, "policy": self.policy}

    def apply(self, op: Op) -> dict[str, Any]:
        """Run one op; its output line."""
        if op.name == "config":
            raise op.error("'config' must be the first op and appear once")
        op.check_keys(_OP_KEYS[op.name])
        tier = self.tier
        result: dict[str, Any] = {"op": op.name}
        keys = [name.encode() for name in _names(op)] if "keys" in _OP_KEYS[op.name] else []
        if op.name == "lookup":
            result["results"] = [tier.lookup(key).value for key in keys]
        elif op.name == "prepare_load":
            self._check_ready(op, keys)
            tier.prepare_load(_request(op), keys, op.get_int("start"))
        elif op.name == "complete_load":
            for key in keys:
                if tier.ref_counts.get(key, 0) < 1:
                    raise op.error(f"key {key.decode()!r} has no load in flight")
            tier.complete_load(keys)
        elif op.name == "prepare_store":
            plan = tier.prepare_store(_request(op), keys, op.get_int("start"))
            result["ok"] = plan is not None
            result["stored"] = [key.decode() for key in plan.stored] if plan else []
            result["evicted"] = [key.decode() for key in plan.evicted] if plan else []
        elif op.name == "complete_store":
            result["stored"] = [key.decode() for key in tier.complete_store(keys)]
        elif op.name == "finish":
            tier.request_finished(_request(op))
        else:
            tier.reset()
        result.update(self.state())
        result["line"] = op.line
        return result

    def _check_ready(self, op: Op, keys: list[bytes]) -> None:
        for key in keys:
            if self.tier.ref_counts.get(key, -1) < 0:
                raise op.error(f"key {key.decode()!r} is not resident and ready (load needs HIT)")

    def state(self) -> dict[str, Any]:
        """The tier's order, pinned chunks and gauges, as the oracle prints them."""
        tier = self.tier
        policy_state = {
            name: [key.decode() for key in value] if isinstance(value, list) else value
            for name, value in tier.policy.snapshot().items()
        }
        return {
            "state": policy_state,
            "pinned": {key.decode(): n for key, n in tier.ref_counts.items() if n != 0},
            "usage": tier.usage(),
            "write_usage": tier.write_usage(),
            "alloc_sizes": tier.take_allocation_sizes(),
        }


def replay_offload(path: Path) -> Iterator[ReplayLine]:
    """Header, then one line per op."""
    ops = read_ops(path, OFFLOAD_OPS)
    first = next(ops, None)
    if first is None:
        raise InputError("no ops; the first op must be 'config'", source=str(path))
    if first.name != "config":
        raise first.error("the first op must be 'config'")
    replay = OffloadReplay(first)
    yield ReplayLine(None, replay.header(), {})
    for op in ops:
        line = replay.apply(op)
        yield ReplayLine(op, line, line)
