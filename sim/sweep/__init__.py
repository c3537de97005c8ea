"""Parameter sweeps: grid/zip/seeds over a scenario, run locally or on Ray, with a manifest."""

from sim.sweep.driver import SweepResult, read_records, run_sweep, sweep_dir_of
from sim.sweep.expand import SweepPlan, SweepRun, is_sweep_file, load_sweep
from sim.sweep.manifest import RunRecord

__all__ = [
    "RunRecord",
    "SweepPlan",
    "SweepResult",
    "SweepRun",
    "is_sweep_file",
    "load_sweep",
    "read_records",
    "run_sweep",
    "sweep_dir_of",
]
