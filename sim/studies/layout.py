"""Layout advisor: which order of a prompt template's segments caches best under given traffic.

Every ordering serves the same request stream (same arrivals, tenants, users and content) through
the simulated engine, so orderings differ in segment order only. They are ranked by token hit
rate, then p50 TTFT, then p99 TTFT. An ordering's cacheable prefix is the tokens before its
first non-static segment (every request shares them), rounded down to whole KV blocks; that
segment is the one that breaks the shared prefix. Scopes are declarations; the simulation
measures what the text really shares (a per-request timestamp to the second is identical for
requests arriving in the same second, and its date and hour are shared far longer).

Each segment is rendered as its own chat message. A message opens with a special token, so
tokenizing message by message gives exactly the tokens of the whole rendered prompt, and each
segment's tokens can be computed once per scope key and reused by every ordering.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

import numpy as np

from sim.studies.layout_config import LayoutStudySettings, PromptSegmentSettings, TrafficSettings
from sim.studies.study_runs import StudyEngine, ttft_percentiles_s
from workloads.api import TEMPLATE_SEGMENT, Piece, RequestSpec, Segment, TextTokens

TIME_ORIGIN = datetime(2025, 1, 1, 9, 0, 0)  # the {time} of a request arriving at t = 0
TIME_FORMAT = "%Y-%m-%d %H:%M:%S"


@dataclass(slots=True, frozen=True)
class TrafficRequest:
    """One request of the stream every ordering serves: when, from which tenant and user."""

    request_id: str
    arrival_at: float
    tenant: str
    user: str


def draw_traffic(traffic: TrafficSettings) -> list[TrafficRequest]:
    """Poisson arrivals; each request's tenant uniform, its user uniform within the tenant."""
    rng = np.random.default_rng(np.random.SeedSequence(traffic.seed))
    arrivals_at = np.cumsum(rng.exponential(1.0 / traffic.request_rate_per_s, traffic.num_requests))
    tenant_indexes = rng.integers(traffic.num_tenants, size=traffic.num_requests)
    user_indexes = rng.integers(traffic.users_per_tenant, size=traffic.num_requests)
    tenant_width = len(str(traffic.num_tenants - 1))
    user_width = len(str(traffic.users_per_tenant - 1))
    request_width = len(str(traffic.num_requests - 1))
    requests = []
    for index, (arrival_at, tenant_index, user_index) in enumerate(
        zip(arrivals_at.tolist(), tenant_indexes.tolist(), user_indexes.tolist(), strict=True)
    ):
        tenant = f"tenant-{tenant_index:0{tenant_width}d}"
        requests.append(
            TrafficRequest(
                request_id=f"req-{index:0{request_width}d}",
                arrival_at=arrival_at,
                tenant=tenant,
                user=f"{tenant}-user-{user_index:0{user_width}d}",
            )
        )
    return requests


def scope_key(segment: PromptSegmentSettings, request: TrafficRequest) -> str:
    """Who shares this segment's content with `request`: equal keys mean equal content."""
    if segment.scope == "static":
        return "static"
    if segment.scope == "per_tenant":
        return request.tenant
    if segment.scope == "per_user":
        return request.user
    return request.request_id


class PromptRenderer:
    """Real cl100k tokens of each segment as its own chat message, cached per scope key."""

    def __init__(self, template_name: str) -> None:
        self.tokenizer = TextTokens(template_name)
        template = self.tokenizer.template
        # ChatML has no begin-of-text marker; Llama-3 opens every prompt with one.
        self.opening = (
            [Segment(TEMPLATE_SEGMENT, f"template:{template.begin}", self.encode(template.begin))]
            if template.begin
            else []
        )
        self.generation_prompt = Segment(
            TEMPLATE_SEGMENT,
            f"template:{template.generation_prompt}",
            self.encode(template.generation_prompt),
        )
        self._segments: dict[tuple[str, str], Segment] = {}

    def encode(self, text: str) -> list[int]:
        """cl100k tokens of `text`, the template's markers read as special tokens."""
        return self.tokenizer.encode(text)

    def segment(self, settings: PromptSegmentSettings, request: TrafficRequest) -> Segment:
        """The segment's message for `request` (shared with every request of the same key)."""
        key = (settings.name, scope_key(settings, request))
        cached = self._segments.get(key)
        if cached is None:
            content_id = f"{settings.name}:{key[1]}"
            template = self.tokenizer.template
            message = (
                template.message_open.format(role=template.role_name(settings.role))
                + self.segment_text(settings, request, content_id)
                + template.message_close
            )
            cached = Segment(settings.name, content_id, self.encode(message))
            self._segments[key] = cached
        return cached

    def segment_text(
        self, settings: PromptSegmentSettings, request: TrafficRequest, content_id: str
    ) -> str:
        """The text with its placeholders filled in, then the filler text (if any)."""
        parts = []
        if settings.text is not None:
            arrived = TIME_ORIGIN + timedelta(seconds=request.arrival_at)
            parts.append(
                settings.text.format(
                    tenant=request.tenant,
                    user=request.user,
                    request=request.request_id,
                    time=arrived.strftime(TIME_FORMAT),
                )
            )
        if settings.filler_tokens:
            filler = Piece(settings.name, content_id, settings.role, settings.filler_tokens)
            parts.append(self.tokenizer.piece_text(filler))
        return "\n".join(parts)


@dataclass(slots=True, frozen=True)
class OrderingResult:
    """How one segment order did on the shared request stream."""

    order: tuple[str, ...]
    is_as_written: bool
    hit_rate: float  # prefix-cache hit tokens / prompt tokens, over all requests
    ttft_p50_s: float
    ttft_p99_s: float
    cacheable_prefix_tokens: int  # before the first non-static segment, whole blocks only
    breaking_segment: str | None  # the first non-static segment; None when all are static
    breaking_scope: str | None
    mean_prompt_tokens: float

    @property
    def label(self) -> str:
        """The order as 'a > b > c'."""
        return " > ".join(self.order)


@dataclass(slots=True, frozen=True)
class LayoutReport:
    """Every evaluated ordering, best first, and what they were evaluated on."""

    name: str
    chat_template: str
    block_size: int
    num_requests: int
    num_tenants: int
    num_users: int
    segment_scopes: tuple[tuple[str, str], ...]  # (name, scope) as written
    rows: tuple[OrderingResult, ...]

    @property
    def best(self) -> OrderingResult:
        """The top-ranked ordering."""
        return self.rows[0]

    @property
    def as_written(self) -> OrderingResult | None:
        """The file's own segment order, when it was among those evaluated."""
        return next((row for row in self.rows if row.is_as_written), None)

    def rank_of(self, order: Sequence[str]) -> int:
        """1-based rank of `order`."""
        for rank, row in enumerate(self.rows, start=1):
            if row.order == tuple(order):
                return rank
        raise KeyError(f"ordering {list(order)} was not evaluated")


# Any request renders a static segment the same way; this one stands for them all.
_STATIC_PROBE = TrafficRequest("static", 0.0, "static", "static")


def candidate_orderings(settings: LayoutStudySettings) -> list[tuple[str, ...]]:
    """The listed orderings, or every permutation (the file's own order first)."""
    if settings.orderings is not None:
        return [tuple(ordering) for ordering in settings.orderings]
    return list(itertools.permutations(segment.name for segment in settings.segments))


def cacheable_prefix(
    order: Sequence[PromptSegmentSettings], renderer: PromptRenderer, block_size: int
) -> tuple[int, PromptSegmentSettings | None]:
    """Whole-block tokens before the first non-static segment, and that segment (or None)."""
    num_tokens = sum(len(segment.tokens) for segment in renderer.opening)
    for segment in order:
        if segment.scope != "static":
            return num_tokens // block_size * block_size, segment
        num_tokens += len(renderer.segment(segment, _STATIC_PROBE).tokens)
    num_tokens += len(renderer.generation_prompt.tokens)
    return num_tokens // block_size * block_size, None


def evaluate_ordering(
    order: Sequence[PromptSegmentSettings],
    traffic: Sequence[TrafficRequest],
    renderer: PromptRenderer,
    engine: StudyEngine,
    output_tokens: list[int],
    *,
    is_as_written: bool,
) -> OrderingResult:
    """Serve the traffic with prompts in this segment order; hit rate, TTFT and prefix facts."""
    specs = [
        RequestSpec.open_loop(
            request.request_id,
            request.arrival_at,
            [
                *renderer.opening,
                *(renderer.segment(segment, request) for segment in order),
                renderer.generation_prompt,
            ],
            output_tokens,
            tenant=request.tenant,
        )
        for request in traffic
    ]
    records = engine.run(specs)
    num_prompt_tokens = sum(record.num_prompt_tokens for record in records.values())
    num_cached_tokens = sum(record.num_cached_tokens for record in records.values())
    ttft_p50_s, ttft_p99_s = ttft_percentiles_s(records.values(), (50, 99))
    prefix_tokens, breaker = cacheable_prefix(order, renderer, engine.config.block_size)
    return OrderingResult(
        order=tuple(segment.name for segment in order),
        is_as_written=is_as_written,
        hit_rate=num_cached_tokens / num_prompt_tokens,
        ttft_p50_s=ttft_p50_s,
        ttft_p99_s=ttft_p99_s,
        cacheable_prefix_tokens=prefix_tokens,
        breaking_segment=breaker.name if breaker is not None else None,
        breaking_scope=breaker.scope if breaker is not None else None,
        mean_prompt_tokens=num_prompt_tokens / len(records),
    )


def advise_layout(
    settings: LayoutStudySettings,
    base_dir: Path,
    *,
    on_ordering_done: Callable[[int, int], None] | None = None,
) -> LayoutReport:
    """Evaluate the orderings on one request stream and rank them (best first).

    `on_ordering_done(num_done, num_total)` is called after each ordering.
    """
    engine = StudyEngine.from_settings(settings, base_dir)
    renderer = PromptRenderer(settings.chat_template)
    traffic = draw_traffic(settings.traffic)
    output_tokens = renderer.tokenizer.output_tokens("answer", settings.traffic.output_tokens)
    by_name = {segment.name: segment for segment in settings.segments}
    written = tuple(by_name)
    orderings = candidate_orderings(settings)
    results = []
    for index, order in enumerate(orderings):
        results.append(
            evaluate_ordering(
                [by_name[name] for name in order],
                traffic,
                renderer,
                engine,
                output_tokens,
                is_as_written=order == written,
            )
        )
        if on_ordering_done is not None:
            on_ordering_done(index + 1, len(orderings))
    ranked = sorted(
        enumerate(results),
        key=lambda item: (-item[1].hit_rate, item[1].ttft_p50_s, item[1].ttft_p99_s, item[0]),
    )
    return LayoutReport(
        name=settings.name,
        chat_template=settings.chat_template,
        block_size=engine.config.block_size,
        num_requests=len(traffic),
        num_tenants=len({request.tenant for request in traffic}),
        num_users=len({request.user for request in traffic}),
        segment_scopes=tuple((segment.name, segment.scope) for segment in settings.segments),
        rows=tuple(result for _, result in ranked),
    )
