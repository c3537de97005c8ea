"""GPU step-time model: batch shape -> seconds, plus GPU/model specs and KV-cache capacity.

Pure computation (numpy at most; profile files are YAML). The engine codes against `CostModel`,
`BatchShape` and `load_cost_model`.
"""

from sim.costmodel.batch import BatchShape
from sim.costmodel.capacity import (
    DEFAULT_ACTIVATION_RESERVE_BYTES,
    kv_bytes_per_token,
    num_gpu_blocks,
)
from sim.costmodel.loader import load_cost_model
from sim.costmodel.model import CostModel, OutOfRangeWarning, StepCoefficients, StepTimeModel
from sim.costmodel.specs import (
    GpuSpec,
    ModelSpec,
    deployment_model,
    get_gpu,
    get_model,
    known_gpus,
    known_models,
)

__all__ = [
    "DEFAULT_ACTIVATION_RESERVE_BYTES",
    "BatchShape",
    "CostModel",
    "GpuSpec",
    "ModelSpec",
    "OutOfRangeWarning",
    "StepCoefficients",
    "StepTimeModel",
    "deployment_model",
    "get_gpu",
    "get_model",
    "known_gpus",
    "known_models",
    "kv_bytes_per_token",
    "load_cost_model",
    "num_gpu_blocks",
]
