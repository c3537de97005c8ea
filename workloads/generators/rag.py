"""RAG: open-loop questions, each with the top-k documents of a Zipf-popular corpus.

Document d's length is drawn once when the corpus is built; popularity rank r has weight
1 / (r + 1)^zipf_exponent and ranks map to document ids through a seeded permutation, so a
document's id says nothing about its popularity. A query draws k distinct documents by
popularity; "relevance" order keeps the retrieval order, "canonical" sorts them by id (which
makes equal document sets share a prefix). Whether documents come before or after the
question is the layout's choice (rag_documents_first, rag_question_first).

Assumed defaults (not in the traces): 10,000 documents of median 400 tokens, top-4, Zipf 1.0,
questions of median 48 tokens, a 256-token system prompt. Answers follow
calibration.AZURE_CONV_OUTPUT.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal, get_args

import numpy as np

from workloads.calibration import AZURE_CONV_OUTPUT
from workloads.distributions import Distribution, LogNormal
from workloads.errors import WorkloadError
from workloads.generators.common import (
    CommonSlots,
    require_layout,
    require_name,
)
from workloads.generators.kind import GeneratorKind, require_distributions, setting
from workloads.generators.rendering import SessionPlan, render_sessions
from workloads.layout import RAG_DOCUMENTS_FIRST_LAYOUT, SLOT_ROLES, PromptLayout
from workloads.prompt import Piece, TokenMode
from workloads.spec import RequestSpec, SessionTurnSpec
from workloads.tags import TagSampler, TenantSpec, tenant_fields, validate_tagging
from workloads.validation import require_choice, require_int, require_number

DocumentOrder = Literal["relevance", "canonical"]
DOCUMENT_ORDERS: tuple[str, ...] = get_args(DocumentOrder)
MAX_CORPUS_SIZE = 10_000_000


@dataclass(slots=True, frozen=True)
class RagConfig:
    """A retrieval-augmented question-answering application; each arrival is one request."""

    name: str = "rag"
    corpus_size: int = setting("documents in the corpus", 10_000, bounds={"ge": 1})
    zipf_exponent: float = setting("popularity skew of the documents", 1.0, bounds={"ge": 0})
    top_k: int = setting("documents per request", 4, bounds={"ge": 1})
    document_tokens: Distribution = setting(
        "tokens per document",
        LogNormal(median=400, sigma=0.4, low=64, high=2048),
        slot="documents",
        copies="top_k",
    )
    document_order: DocumentOrder = setting(
        "documents by relevance or in a canonical order", "relevance"
    )
    question_tokens: Distribution = setting(
        "tokens per question",
        LogNormal(median=48, sigma=0.6, low=4, high=512),
        slot="question",
    )
    answer_tokens: Distribution = setting("output tokens per answer", AZURE_CONV_OUTPUT)
    common: CommonSlots = field(default_factory=lambda: CommonSlots(system_prompt_tokens=256))
    layout: PromptLayout = RAG_DOCUMENTS_FIRST_LAYOUT
    tenants: tuple[TenantSpec, ...] = ()
    prompt_logprobs_fraction: float = 0.0

    def __post_init__(self) -> None:
        require_name("RagConfig", self.name)
        require_int("RagConfig", "corpus_size", self.corpus_size, 1)
        if self.corpus_size > MAX_CORPUS_SIZE:
            raise WorkloadError(
                f"RagConfig.corpus_size: {self.corpus_size} is not allowed; use at most "
                f"{MAX_CORPUS_SIZE}"
            )
        require_number("RagConfig", "zipf_exponent", self.zipf_exponent, 0.0)
        require_int("RagConfig", "top_k", self.top_k, 1)
        if self.top_k > self.corpus_size:
            raise WorkloadError(
                f"RagConfig.top_k: {self.top_k} is not allowed; use at most corpus_size "
                f"({self.corpus_size})"
            )
        require_distributions(self)
        require_choice("RagConfig", "document_order", self.document_order, DOCUMENT_ORDERS)
        require_layout(
            "RagConfig", self.layout, [*self.common.produced_slots(), "documents", "question"]
        )
        validate_tagging("RagConfig", self.tenants, self.prompt_logprobs_fraction)


class RagBuilder:
    """Builds one request per arrival against a corpus drawn at construction."""

    def __init__(
        self,
        config: RagConfig,
        content_rng: np.random.Generator,
        tags_rng: np.random.Generator,
        tokens: TokenMode,
    ) -> None:
        corpus_rng, self._rng = content_rng.spawn(2)
        self._config = config
        self._tags = TagSampler(config.tenants, config.prompt_logprobs_fraction, tags_rng)
        self._tokens = tokens
        self._document_lengths = config.document_tokens.sample_counts(
            corpus_rng, config.corpus_size, minimum=1
        )
        self._document_of_rank = corpus_rng.permutation(config.corpus_size).tolist()
        weights = np.arange(1, config.corpus_size + 1, dtype=float) ** -config.zipf_exponent
        self._rank_cdf = np.cumsum(weights) / weights.sum()

    def retrieve(self) -> list[int]:
        """k distinct document ids drawn by popularity, in the configured order."""
        chosen: list[int] = []
        while len(chosen) < self._config.top_k:
            rank = int(np.searchsorted(self._rank_cdf, self._rng.random(), side="right"))
            document = self._document_of_rank[min(rank, self._config.corpus_size - 1)]
            if document not in chosen:
                chosen.append(document)
        if self._config.document_order == "canonical":
            chosen.sort()
        return chosen

    def build(self, arrival_index: int, arrival_at: float) -> list[RequestSpec]:
        """The one request of this arrival."""
        return self.build_many([(arrival_index, arrival_at)])[0]

    def build_many(self, arrivals: Sequence[tuple[int, float]]) -> list[list[RequestSpec]]:
        """The one request of each arrival, their tokens made together."""
        drawn = [self._draw(arrival_index) for arrival_index, _ in arrivals]
        contents = render_sessions(
            self._tokens, [(plan, [slots]) for _, plan, slots, _, _ in drawn], self._config.layout
        )
        return [
            [
                SessionTurnSpec(
                    content,
                    0,
                    request_id,
                    arrival_at,
                    None,
                    0.0,
                    prompt_logprobs=prompt_logprobs,
                    **tenant_fields(tenant),
                )
            ]
            for (_, arrival_at), (request_id, _, _, tenant, prompt_logprobs), content in zip(
                arrivals, drawn, contents, strict=True
            )
        ]

    def _draw(
        self, arrival_index: int
    ) -> tuple[str, SessionPlan, dict[str, list[Piece]], TenantSpec | None, bool]:
        """The request's id, plan, common and document pieces, tenant and prompt_logprobs."""
        config = self._config
        request_id = f"{config.name}-{arrival_index}"
        variant = int(self._rng.integers(config.common.num_prompt_variants))
        documents = self.retrieve()
        num_question_tokens = config.question_tokens.sample_count(self._rng, minimum=1)
        num_answer_tokens = config.answer_tokens.sample_count(self._rng, minimum=1)
        tenant = self._tags.tenant()
        prompt_logprobs = self._tags.prompt_logprobs()
        slots = config.common.pieces(config.name, variant, request_id, request_id)
        slots["documents"] = [
            Piece(
                "documents",
                f"{config.name}/document/{document}",
                SLOT_ROLES["documents"],
                self._document_lengths[document],
            )
            for document in documents
        ]
        plan = SessionPlan.one_question(
            (f"{config.name}/question/{request_id}", num_question_tokens),
            (f"{config.name}/answer/{request_id}", num_answer_tokens),
        )
        return request_id, plan, slots, tenant, prompt_logprobs


GENERATOR_KIND = GeneratorKind(
    "rag",
    "RAG: top-k documents from a Zipf-popular corpus, before or after the question (layout)",
    RagConfig,
    RagBuilder,
)
