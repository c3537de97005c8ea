"""The compiled cache core (C++, built from src/ by `pip install -e .`) and the core switch.

`engine.core: native` (the default) runs block hashing, the block pool and the KV cache manager
in compiled code; `python` runs the readable reference in `sim.kvcache`. Both make the same
decisions block for block (tests/native compares every result file).
"""

from sim.native._core import (
    ClusterLoop,
    RequestColumnsBuffer,
    SchedulerCore,
    StepColumnsBuffer,
    StepLoop,
    StepOutput,
    StepUpdate,
)
from sim.native.cores import CORES, DEFAULT_CORE, make_hasher, make_manager
from sim.native.manager import NativeBlockHasher, NativeKVCacheManager

__all__ = [
    "CORES",
    "ClusterLoop",
    "DEFAULT_CORE",
    "NativeBlockHasher",
    "NativeKVCacheManager",
    "RequestColumnsBuffer",
    "SchedulerCore",
    "StepColumnsBuffer",
    "StepLoop",
    "StepOutput",
    "StepUpdate",
    "make_hasher",
    "make_manager",
]
