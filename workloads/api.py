"""The public names of the workloads package, for the engine, the config layer and the CLI."""

from workloads.arrivals import (
    ArrivalProcess,
    GammaArrivals,
    PiecewiseRateArrivals,
    PoissonArrivals,
    RatePiece,
    TraceArrivals,
)
from workloads.distributions import Distribution, Exponential, Fixed, LogNormal, Uniform
from workloads.errors import WorkloadError
from workloads.generators.agent import AgentConfig
from workloads.generators.chat import ChatConfig
from workloads.generators.common import CommonSlots
from workloads.generators.kind import GeneratorKind, config_fields, shortest_prompt_tokens
from workloads.generators.kinds import GENERATOR_KINDS
from workloads.generators.mix import MixComponent, MixConfig
from workloads.generators.rag import RagConfig
from workloads.layout import BUILTIN_LAYOUTS, SLOT_NAMES, PromptLayout, builtin_layout
from workloads.prompt import Piece
from workloads.spec import LoraSpec, RequestSpec, Segment
from workloads.synthetic_tokens import SyntheticTokens
from workloads.tags import TenantSpec
from workloads.text_lines import MAX_LINE_BYTES, bounded_lines
from workloads.text_tokens import TEMPLATE_SEGMENT, TextTokens
from workloads.traces.azure import read_azure
from workloads.traces.dynamo import read_dynamo
from workloads.traces.fields import json_object
from workloads.traces.mooncake import MOONCAKE_BLOCK_SIZE, read_mooncake
from workloads.traces.replay import TRACE_FORMATS, read_trace, trace_format_summaries
from workloads.workload import TokenConfig, Workload, generate

__all__ = [
    "BUILTIN_LAYOUTS",
    "GENERATOR_KINDS",
    "MAX_LINE_BYTES",
    "MOONCAKE_BLOCK_SIZE",
    "SLOT_NAMES",
    "TEMPLATE_SEGMENT",
    "TRACE_FORMATS",
    "AgentConfig",
    "ArrivalProcess",
    "ChatConfig",
    "CommonSlots",
    "Distribution",
    "Exponential",
    "Fixed",
    "GammaArrivals",
    "GeneratorKind",
    "LogNormal",
    "LoraSpec",
    "MixComponent",
    "MixConfig",
    "Piece",
    "PiecewiseRateArrivals",
    "PoissonArrivals",
    "PromptLayout",
    "RagConfig",
    "RatePiece",
    "RequestSpec",
    "Segment",
    "SyntheticTokens",
    "TenantSpec",
    "TextTokens",
    "TokenConfig",
    "TraceArrivals",
    "Uniform",
    "Workload",
    "WorkloadError",
    "bounded_lines",
    "builtin_layout",
    "config_fields",
    "generate",
    "json_object",
    "read_azure",
    "read_dynamo",
    "read_mooncake",
    "read_trace",
    "shortest_prompt_tokens",
    "trace_format_summaries",
]
