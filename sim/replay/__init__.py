"""JSON-lines replay harnesses driving the cache or the scheduler op by op (replay_formats.md)."""

from sim.replay.offload_replay import replay_offload
from sim.replay.ops import ReplayLine, compare_expectations

__all__ = [
    "ReplayLine",
    "compare_expectations",
    "replay_offload",
]
