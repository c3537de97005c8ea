"""Simulated time (the only SimPy user): engine replicas, arrivals, sessions."""

from sim.engine.arrivals import WorkloadDriver
from sim.engine.collector import relaxed_garbage_collection
from sim.engine.core import EngineCore, check_max_model_len_fits, request_record
from sim.engine.offload import OffloadSpec
from sim.engine.requests import (
    SpecLike,
    cache_request_from_spec,
    hash_keys_from_spec,
    request_from_spec,
)
from sim.engine.simulation import SimulationResult, simulate

__all__ = [
    "EngineCore",
    "OffloadSpec",
    "SimulationResult",
    "SpecLike",
    "WorkloadDriver",
    "cache_request_from_spec",
    "check_max_model_len_fits",
    "hash_keys_from_spec",
    "relaxed_garbage_collection",
    "request_from_spec",
    "request_record",
    "simulate",
]
