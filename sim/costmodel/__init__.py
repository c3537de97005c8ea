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
from sim.costmodel.engine_terms import engine_coefficients, real_engine_coefficients
from sim.costmodel.frontend import NO_FRONTEND, FrontEnd, load_shipped_frontend
from sim.costmodel.loader import auto_cost_model_spec, load_cost_model
from sim.costmodel.model import (
    CostModel,
    FeatureRanges,
    OutOfRangeWarning,
    StepCoefficients,
    StepTimeModel,
)
from sim.costmodel.profiles import SHIPPED_PROFILE_DIR, Profile, profile_name, save_profile
from sim.costmodel.selection import CostModelChoice, choose_cost_model
from sim.costmodel.specs import (
    GpuSpec,
    ModelSpec,
    deployment_model,
    get_gpu,
    get_model,
    gpu_names,
    is_config_path,
    known_gpus,
    known_models,
    model_names,
    resolve_model,
)
from sim.costmodel.transfer import (
    HOST_LINK_BY_GPU,
    HOST_LINKS,
    HostLink,
    TransferQueue,
    get_host_link,
    is_reported,
    transfer_seconds,
)

__all__ = [
    "NO_FRONTEND",
    "CostModelChoice",
    "FrontEnd",
    "Profile",
    "choose_cost_model",
    "load_shipped_frontend",
    "DEFAULT_ACTIVATION_RESERVE_BYTES",
    "HOST_LINKS",
    "HOST_LINK_BY_GPU",
    "SHIPPED_PROFILE_DIR",
    "BatchShape",
    "CostModel",
    "FeatureRanges",
    "GpuSpec",
    "HostLink",
    "ModelSpec",
    "OutOfRangeWarning",
    "StepCoefficients",
    "StepTimeModel",
    "TransferQueue",
    "auto_cost_model_spec",
    "deployment_model",
    "engine_coefficients",
    "get_gpu",
    "get_host_link",
    "get_model",
    "gpu_names",
    "is_config_path",
    "is_reported",
    "known_gpus",
    "known_models",
    "kv_bytes_per_token",
    "load_cost_model",
    "model_names",
    "num_gpu_blocks",
    "profile_name",
    "real_engine_coefficients",
    "resolve_model",
    "save_profile",
    "transfer_seconds",
]
