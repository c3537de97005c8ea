"""The report's cost-model lines, from summary.json's `cost_model` block."""

from __future__ import annotations

from sim.costmodel.selection import choose_cost_model
from sim.report.cost_model_section import describe_cost_model


def test_an_engine_without_cuda_graphs_says_what_its_host_adds():
    """Llama-3.1-8B on 4 H100s without CUDA graphs: 181.1 us per layer and 140.2 + 2 x 64.8 =
    269.8 us per decoding sequence on each decode step, at least 701 us per layer under a prefill
    step; with CUDA graphs no such line."""
    eager = choose_cost_model(
        "auto", "auto", gpu="h100", model="llama-3.1-8b", tp=4, cuda_graphs=False
    )
    lines = describe_cost_model("shipped", "h100/llama-3.1-8b/tp4", eager.summary())
    assert lines[1] == (
        "  Engine without CUDA graphs: every decode step adds 181.1 µs of host time per layer "
        "and 269.8 µs per decoding sequence; a step with a prefill chunk lasts at least 701 µs "
        "per layer."
    )
    assert lines[2].startswith("  Validated MAPE against real measurements (")
    graphs = choose_cost_model("auto", "auto", gpu="h100", model="llama-3.1-8b", tp=4)
    graph_lines = describe_cost_model("shipped", "h100/llama-3.1-8b/tp4", graphs.summary())
    assert len(graph_lines) == 2
    assert not any("CUDA graphs" in line for line in graph_lines)


def test_a_run_written_before_the_sequence_term_still_reports():
    """A summary.json from before eager_host_per_sequence_s existed: the per-layer time and the
    floor, no per-sequence clause, no error."""
    eager = choose_cost_model(
        "auto", "auto", gpu="h100", model="llama-3.1-8b", tp=1, cuda_graphs=False
    )
    block = eager.summary()
    del block["eager_host_per_sequence_s"]
    lines = describe_cost_model("shipped", "h100/llama-3.1-8b/tp1", block)
    assert lines[1] == (
        "  Engine without CUDA graphs: every decode step adds 181.1 µs of host time per layer; "
        "a step with a prefill chunk lasts at least 701 µs per layer."
    )
