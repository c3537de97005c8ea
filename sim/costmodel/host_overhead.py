"""CPU and launch time a step costs outside the GPU kernels (inference-sim's trained per-step and
per-layer overheads, cost_model.md §1 and §5.4)."""

STEP_OVERHEAD_S = 0.126e-3
LAYER_OVERHEAD_S = 0.032e-3
