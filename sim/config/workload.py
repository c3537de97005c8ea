"""The `workload:` section of a scenario: what traffic arrives, built into a workloads.Workload.

Every generator field is optional here; omitted fields keep the generator's own default
(documented, with its calibration source, in workloads/). Distributions are a number (fixed)
or a tagged mapping such as `{dist: lognormal, median: 64, sigma: 0.8}`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, ClassVar, Literal, Union, cast

from pydantic import Field, ValidationInfo, create_model, field_validator, model_validator

from sim.config.base import StrictModel, field_problem
from sim.kvcache import cache_salt_problem
from workloads.api import (
    BUILTIN_LAYOUTS,
    GENERATOR_KINDS,
    TRACE_FORMATS,
    CommonSlots,
    Distribution,
    Exponential,
    Fixed,
    GammaArrivals,
    GeneratorKind,
    LogNormal,
    LoraSpec,
    MixComponent,
    MixConfig,
    PiecewiseRateArrivals,
    PoissonArrivals,
    PromptLayout,
    RatePiece,
    RequestSpec,
    SyntheticTokens,
    TenantSpec,
    TokenConfig,
    Uniform,
    Workload,
    WorkloadError,
    builtin_layout,
    config_fields,
    read_trace,
)


def accepted_by_workloads(settings: Any, owner: str) -> None:
    """Build `settings` into its workloads object (of class `owner`), so the workloads checks
    run at load time; a problem that object names as one of these settings' fields
    (`Owner.field: ...`, or `field: ...`) is reported at that field, so its line is shown."""
    try:
        settings.build()
    except WorkloadError as error:
        named, separator, message = str(error).partition(": ")
        named_owner, _, field = named.rpartition(".")
        if separator and named_owner in ("", owner) and field in type(settings).model_fields:
            raise field_problem(field, message) from None
        raise ValueError(str(error)) from None


class _TaggedDistSettings(StrictModel):
    def build(self) -> Distribution:
        """The workloads distribution object."""
        return build_distribution(cast("TaggedDist", self))

    @model_validator(mode="after")
    def _accepted(self) -> _TaggedDistSettings:
        accepted_by_workloads(self, type(self).__name__.removesuffix("Dist"))
        return self


class FixedDist(_TaggedDistSettings):
    dist: Literal["fixed"]
    value: float


class UniformDist(_TaggedDistSettings):
    dist: Literal["uniform"]
    low: float
    high: float


class LogNormalDist(_TaggedDistSettings):
    dist: Literal["lognormal"]
    median: float = Field(gt=0)
    sigma: float = Field(ge=0)
    low: float = 0.0
    high: float | None = None


class ExponentialDist(_TaggedDistSettings):
    dist: Literal["exponential"]
    mean: float = Field(gt=0)


TaggedDist = Annotated[
    FixedDist | UniformDist | LogNormalDist | ExponentialDist, Field(discriminator="dist")
]
Dist = float | TaggedDist


def build_distribution(value: Dist) -> Distribution:
    """The workloads distribution object for a YAML value."""
    if isinstance(value, int | float):
        return Fixed(float(value))
    if isinstance(value, FixedDist):
        return Fixed(value.value)
    if isinstance(value, UniformDist):
        return Uniform(value.low, value.high)
    if isinstance(value, LogNormalDist):
        high = float("inf") if value.high is None else value.high
        return LogNormal(median=value.median, sigma=value.sigma, low=value.low, high=high)
    return Exponential(mean=value.mean)


class CommonSlotsSettings(StrictModel):
    """Shared prompt parts: system prompt, tool definitions, few-shot examples, per-user fields."""

    system_prompt_tokens: int | None = Field(None, ge=0)
    system_prompt_text: str | None = None
    num_prompt_variants: int | None = Field(None, ge=1)
    tools_tokens: int | None = Field(None, ge=0)
    few_shot_tokens: int | None = Field(None, ge=0)
    user_id_tokens: int | None = Field(None, ge=0)
    timestamp_tokens: int | None = Field(None, ge=0)

    def build(self, default: CommonSlots) -> CommonSlots:
        """The generator's default slots with the given fields replaced."""
        values = {name: getattr(default, name) for name in CommonSlotsSettings.model_fields}
        values.update(self.model_dump(exclude_none=True))
        return CommonSlots(**values)


class LoraSettings(StrictModel):
    name: str = Field(min_length=1)
    id: int = Field(1, ge=1)
    path: str = Field(min_length=1)


class TenantSettings(StrictModel):
    """A tenant: its share of sessions and the salt / LoRA / priority its requests carry."""

    name: str = Field(min_length=1)
    weight: float = Field(1.0, ge=0)
    cache_salt: str | None = None
    lora: LoraSettings | None = None
    priority: int = 0

    @field_validator("cache_salt")
    @classmethod
    def _salt_as_the_api_accepts_it(cls, salt: str | None) -> str | None:
        problem = cache_salt_problem(salt)
        if problem is not None:
            raise ValueError(problem)
        return salt

    def build(self) -> TenantSpec:
        """The workloads tenant."""
        lora = None if self.lora is None else LoraSpec(self.lora.name, self.lora.id, self.lora.path)
        return TenantSpec(self.name, self.weight, self.cache_salt, lora, self.priority)


class LayoutSettings(StrictModel):
    """A named order of prompt slots (see workloads.layout.SLOT_NAMES)."""

    name: str = Field(min_length=1)
    order: list[str] = Field(min_length=1)


def build_layout(value: str | LayoutSettings) -> PromptLayout:
    """A builtin layout by name, or a custom order."""
    if isinstance(value, str):
        return builtin_layout(value)
    return PromptLayout(value.name, tuple(value.order))


_DIST = "a number, or {dist: fixed|uniform|exponential|lognormal, ...}"


def _build_tenants(tenants: list[TenantSettings], _default: object) -> tuple[TenantSpec, ...]:
    return tuple(tenant.build() for tenant in tenants)


# The scenario form of each generator-config type, and how a given value becomes the config's
# (`default` is the kind's own default for the field). Other types are offered as they are.
_SETTINGS_OF_TYPE: dict[Any, tuple[Any, Callable[[Any, Any], Any]]] = {
    Distribution: (Dist, lambda value, _default: build_distribution(value)),
    CommonSlots: (CommonSlotsSettings, lambda value, default: value.build(default)),
    PromptLayout: (str | LayoutSettings, lambda value, _default: build_layout(value)),
    tuple[TenantSpec, ...]: (list[TenantSettings], _build_tenants),
}


class GeneratorSourceSettings(StrictModel):
    """The fields every generator kind has; each kind's model (derived from its config class
    by `generator_source_model`) adds the config's own fields, all optional."""

    generator: ClassVar[GeneratorKind]
    config_types: ClassVar[dict[str, Any]]

    name: str | None = Field(
        None, description="name of the application (request ids start with it)"
    )
    common: CommonSlotsSettings | None = Field(
        None, description="lengths (or text) of the prompt slots every request carries"
    )
    layout: str | LayoutSettings | None = Field(
        None, description=f"builtin: {', '.join(sorted(BUILTIN_LAYOUTS))}, or {{name, order}}"
    )
    tenants: list[TenantSettings] | None = Field(
        None, description="tenants sharing the traffic, with their salts, adapters and priorities"
    )
    prompt_logprobs_fraction: float | None = Field(
        None,
        ge=0,
        le=1,
        description="share of requests asking for prompt logprobs (these skip the prefix cache, "
        "as in vLLM)",
    )

    @model_validator(mode="after")
    def _accepted(self) -> GeneratorSourceSettings:
        accepted_by_workloads(self, self.generator.config.__name__)
        return self

    def build(self) -> Any:
        """The generator config: the kind's defaults with the given fields replaced."""
        config_class = self.generator.config
        default = config_class()
        values: dict[str, Any] = {}
        for name, value in self:
            if name == "kind" or value is None:
                continue
            settings = _SETTINGS_OF_TYPE.get(self.config_types[name])
            values[name] = value if settings is None else settings[1](value, getattr(default, name))
        return config_class(**values)


def generator_source_model(kind: GeneratorKind) -> type[GeneratorSourceSettings]:
    """The scenario model of a workload kind, derived from its config class's fields."""
    fields: dict[str, Any] = {"kind": (Literal[kind.name], Field(description=kind.summary))}
    config_types: dict[str, Any] = {}
    for field in config_fields(kind.config):
        config_types[field.name] = field.annotation
        if field.name in GeneratorSourceSettings.model_fields:
            continue
        if field.description is None:
            raise TypeError(
                f"{kind.config.__name__}.{field.name}: declare it with workloads' "
                "setting(description, default) so scenarios can offer it"
            )
        settings_type = _SETTINGS_OF_TYPE.get(field.annotation, (field.annotation,))[0]
        description = field.description
        if field.annotation == Distribution:
            description = f"{description}: {_DIST}"
        fields[field.name] = (
            settings_type | None,
            Field(None, description=description, **dict[str, Any](field.bounds)),
        )
    title = "".join(part.capitalize() for part in kind.name.split("_"))
    model = create_model(
        f"{title}Source",
        __base__=GeneratorSourceSettings,
        __doc__=kind.summary,
        __module__=__name__,
        **fields,
    )
    model.generator = kind
    model.config_types = config_types
    return model


# One scenario model per registered workload kind, in registry order.
GENERATOR_SOURCES = tuple(generator_source_model(kind) for kind in GENERATOR_KINDS)
# Pickling a scenario (sweep worker processes) finds each model by its module and name.
globals().update({model.__name__: model for model in GENERATOR_SOURCES})
_SOURCE_OF_KIND = {model.generator.name: model for model in GENERATOR_SOURCES}
DEFAULT_KIND = "chat"
if TYPE_CHECKING:
    GeneratorSource = GeneratorSourceSettings
else:
    GeneratorSource = Annotated[Union[GENERATOR_SOURCES], Field(discriminator="kind")]  # noqa: UP007


class MixPart(StrictModel):
    weight: float = Field(gt=0)
    source: GeneratorSource


class MixSource(StrictModel):
    """A weighted mix of generators; each arrival picks one by weight."""

    kind: Literal["mix"]
    components: list[MixPart] = Field(min_length=1)

    @model_validator(mode="after")
    def _accepted(self) -> MixSource:
        accepted_by_workloads(self, MixConfig.__name__)
        return self

    def build(self) -> MixConfig:
        """The generator config."""
        return MixConfig(tuple(MixComponent(p.weight, p.source.build()) for p in self.components))


if TYPE_CHECKING:
    TraceFormatName = str
else:
    # The registered names (workloads.traces.replay), so validation and the schema follow it.
    TraceFormatName = Literal[TRACE_FORMATS]


class TraceSource(StrictModel):
    """Replay a public trace file (arrivals, lengths and shared blocks come from the trace)."""

    kind: Literal["trace"]
    path: str = Field(min_length=1)
    format: TraceFormatName
    speedup: float = Field(1.0, gt=0)
    max_requests: int | None = Field(None, ge=1)

    @model_validator(mode="after")
    def _file_exists(self, info: ValidationInfo) -> TraceSource:
        # Relative paths are resolved against the scenario file's directory, known at load.
        base_dir = (info.context or {}).get("base_dir")
        path = Path(self.path)
        if path.is_absolute():
            resolved = path
        elif base_dir is None:
            return self
        else:
            resolved = base_dir / path
        if not resolved.is_file():
            problem = "is a directory" if resolved.is_dir() else "does not exist"
            raise field_problem(
                "path", f"{self.path!r} {problem}; expected a {self.format} trace file ({resolved})"
            )
        return self


if TYPE_CHECKING:
    Source = GeneratorSourceSettings | MixSource | TraceSource
else:
    Source = Annotated[
        Union[(*GENERATOR_SOURCES, MixSource, TraceSource)],  # noqa: UP007
        Field(discriminator="kind"),
    ]


class PoissonSettings(StrictModel):
    process: Literal["poisson"]
    rate_per_s: float = Field(gt=0)


class GammaSettings(StrictModel):
    process: Literal["gamma"]
    rate_per_s: float = Field(gt=0)
    cv: float = Field(gt=0)


class RatePieceSettings(StrictModel):
    duration_s: float = Field(gt=0)
    rate_per_s: float = Field(ge=0)


class PiecewiseSettings(StrictModel):
    process: Literal["piecewise"]
    pieces: list[RatePieceSettings] = Field(min_length=1)
    repeat: bool = True


Arrivals = Annotated[
    PoissonSettings | GammaSettings | PiecewiseSettings, Field(discriminator="process")
]


class TokenSettings(StrictModel):
    """Synthetic token ids per content identity (fast) or real text through cl100k (exact)."""

    mode: Literal["synthetic", "text"] = "synthetic"
    chat_template: Literal["chatml", "qwen", "llama3"] = "chatml"


class WorkloadSettings(StrictModel):
    """Traffic: a generator (or trace), its arrival process, and the token mode."""

    source: Source = Field(
        default_factory=lambda: _SOURCE_OF_KIND[DEFAULT_KIND].model_validate({"kind": DEFAULT_KIND})
    )
    arrivals: Arrivals | None = Field(None, description="required for generators, not traces")
    num_arrivals: int | None = Field(None, ge=1)
    tokens: TokenSettings = Field(default_factory=TokenSettings)

    @model_validator(mode="after")
    def _arrivals_for_generators(self) -> WorkloadSettings:
        if isinstance(self.source, TraceSource):
            if self.arrivals is not None:
                raise field_problem(
                    "arrivals", "a trace brings its own arrival times; remove 'arrivals'"
                )
            if self.num_arrivals is not None and self.source.max_requests is not None:
                raise field_problem(
                    "num_arrivals",
                    "a trace takes its count from source.max_requests when that is set; give "
                    "one of the two",
                )
            if self.tokens != TokenSettings():
                raise field_problem(
                    "tokens",
                    "a trace's prompts are its block hashes, not text, so no token setting "
                    "applies; remove 'tokens'",
                )
        elif self.arrivals is None:
            raise field_problem(
                "arrivals",
                "required for generated traffic, e.g. {process: poisson, rate_per_s: 2}",
            )
        else:
            try:
                _build_arrivals(self.arrivals)
            except WorkloadError as error:
                raise field_problem("arrivals", str(error)) from None
        return self

    def build(self, *, seed: int, until_s: float | None, base_dir: Path) -> Iterable[RequestSpec]:
        """The request stream: a seeded Workload, or a trace reader."""
        source = self.source
        if isinstance(source, TraceSource):
            path = Path(source.path)
            path = path if path.is_absolute() else base_dir / path
            max_requests = source.max_requests or self.num_arrivals
            return _TraceStream(source.format, path, source.speedup, max_requests)
        arrivals = self.arrivals
        assert arrivals is not None  # every other source requires arrivals (validated)
        return Workload(
            source.build(),
            _build_arrivals(arrivals),
            num_arrivals=self.num_arrivals,
            until_s=until_s,
            seed=seed,
            tokens=TokenConfig(mode=self.tokens.mode, chat_template=self.tokens.chat_template),
        )


class _TraceStream:
    """A re-iterable trace replay (each iteration reads the file again)."""

    def __init__(self, trace_format: str, path: Path, speedup: float, max_requests: int | None):
        self.trace_format = trace_format
        self.path = path
        self.speedup = speedup
        self.max_requests = max_requests

    def __iter__(self):
        return read_trace(
            self.trace_format,
            self.path,
            speedup=self.speedup,
            max_requests=self.max_requests,
            tokens=SyntheticTokens(),
        )


def _build_arrivals(arrivals: PoissonSettings | GammaSettings | PiecewiseSettings):
    if isinstance(arrivals, PoissonSettings):
        return PoissonArrivals(arrivals.rate_per_s)
    if isinstance(arrivals, GammaSettings):
        return GammaArrivals(arrivals.rate_per_s, arrivals.cv)
    return PiecewiseRateArrivals(
        tuple(RatePiece(p.duration_s, p.rate_per_s) for p in arrivals.pieces),
        repeat=arrivals.repeat,
    )
