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
from sim.costmodel.model import (
    CostModel,
    FeatureRanges,
    OutOfRangeWarning,
    StepCoefficients,
    StepTimeModel,
)
from sim.costmodel.profiles import SHIPPED_PROFILE_DIR, profile_name, save_profile
from sim.costmodel.specs import GpuSpec, ModelSpec, get_gpu, get_model

__all__ = [
    "DEFAULT_ACTIVATION_RESERVE_BYTES",
    "SHIPPED_PROFILE_DIR",
    "BatchShape",
    "CostModel",
    "FeatureRanges",
    "GpuSpec",
    "ModelSpec",
    "OutOfRangeWarning",
    "StepCoefficients",
    "StepTimeModel",
    "get_gpu",
    "get_model",
    "kv_bytes_per_token",
    "load_cost_model",
    "num_gpu_blocks",
    "profile_name",
    "save_profile",
]
