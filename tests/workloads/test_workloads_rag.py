"""RAG: Zipf-popular corpus, top-k retrieval, document order and position."""

from __future__ import annotations

import dataclasses
from collections import Counter

import pytest

from workloads.api import (
    CommonSlots,
    Fixed,
    PoissonArrivals,
    RagConfig,
    Workload,
    WorkloadError,
    builtin_layout,
)

RAG = RagConfig(
    corpus_size=200,
    zipf_exponent=1.1,
    top_k=5,
    document_tokens=Fixed(64),
    question_tokens=Fixed(10),
    answer_tokens=Fixed(8),
    common=CommonSlots(system_prompt_tokens=32),
)


def _documents(spec) -> list[str]:
    return [segment.content_id for segment in spec.segments if segment.name == "documents"]


def test_each_request_has_top_k_distinct_documents_before_the_question() -> None:
    specs = list(Workload(RAG, PoissonArrivals(10.0), num_arrivals=100, seed=1))
    assert len(specs) == 100 and all(spec.session_id is None for spec in specs)
    for spec in specs:
        assert len(set(_documents(spec))) == 5
        assert [segment.name for segment in spec.segments] == ["system_prompt"] + [
            "documents"
        ] * 5 + ["question"]
        assert spec.num_prompt_tokens == 32 + 5 * 64 + 10 and spec.num_output_tokens == 8


def test_a_document_has_the_same_tokens_in_every_request() -> None:
    seen: dict[str, list[int]] = {}
    for spec in Workload(RAG, PoissonArrivals(10.0), num_arrivals=100, seed=1):
        for segment in spec.segments:
            tokens = list(segment.tokens)
            assert seen.setdefault(segment.content_id, tokens) == tokens


def test_popularity_follows_zipf_and_zero_exponent_is_flat() -> None:
    def counts(exponent: float) -> list[int]:
        config = dataclasses.replace(RAG, zipf_exponent=exponent, top_k=1)
        specs = Workload(config, PoissonArrivals(10.0), num_arrivals=4000, seed=2)
        return sorted(Counter(_documents(spec)[0] for spec in specs).values(), reverse=True)

    skewed, flat = counts(1.1), counts(0.0)
    # Zipf 1.1 over 200 ranks: the top document holds 1/H(200, 1.1) ~ 21% of the draws.
    assert 0.18 < skewed[0] / 4000 < 0.24
    assert skewed[0] > 1.9 * skewed[1]
    # Flat: 20 per document on average; no document near the Zipf head.
    assert flat[0] < 45 and len(flat) == 200


def test_canonical_order_sorts_documents_and_relevance_order_does_not() -> None:
    def orders(order: str) -> list[list[int]]:
        config = dataclasses.replace(RAG, document_order=order)
        specs = Workload(config, PoissonArrivals(10.0), num_arrivals=50, seed=3)
        return [[int(doc.rsplit("/", 1)[1]) for doc in _documents(spec)] for spec in specs]

    canonical, relevance = orders("canonical"), orders("relevance")
    assert all(ids == sorted(ids) for ids in canonical)
    assert sum(ids != sorted(ids) for ids in relevance) > 40
    assert [sorted(ids) for ids in relevance] == canonical


def test_question_first_layout_puts_documents_after_the_question() -> None:
    config = dataclasses.replace(RAG, layout=builtin_layout("rag_question_first"))
    spec = next(iter(Workload(config, PoissonArrivals(10.0), num_arrivals=1, seed=1)))
    assert [segment.name for segment in spec.segments] == ["system_prompt", "question"] + [
        "documents"
    ] * 5


def test_invalid_settings_name_the_field() -> None:
    with pytest.raises(
        WorkloadError, match=r"RagConfig.top_k: 201 is not allowed; use at most corpus_size \(200\)"
    ):
        dataclasses.replace(RAG, top_k=201)
    with pytest.raises(
        WorkloadError,
        match=r"RagConfig.document_order: 'random' is not allowed; allowed: relevance, canonical",
    ):
        dataclasses.replace(RAG, document_order="random")
    with pytest.raises(WorkloadError, match=r"RagConfig.zipf_exponent: -1 is not allowed"):
        dataclasses.replace(RAG, zipf_exponent=-1)
