"""Simulated time (the only SimPy user): engine replicas, arrivals, sessions."""

from sim.engine.arrivals import WorkloadDriver
from sim.engine.core import EngineCore, request_record
from sim.engine.requests import request_from_spec
from sim.engine.simulation import SimulationResult, simulate

__all__ = [
    "EngineCore",
    "SimulationResult",
    "WorkloadDriver",
    "request_from_spec",
    "request_record",
    "simulate",
]
