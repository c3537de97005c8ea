"""The report's "Cost model" section: which step-time model and front end the runs used and
how far that kind of model is from real measurements (summary.json's `cost_model` block)."""

from __future__ import annotations

import json
from typing import Any

from sim.metrics import SUMMARY_FILE
from sim.report.runs import RunSet


def cost_model_section(run_set: RunSet) -> str:
    """Markdown naming each distinct cost model of the finished runs, or '' if none says."""
    seen: dict[tuple[str, str], dict[str, Any]] = {}
    for run in run_set.runs:
        if run.status != "ok":
            continue
        path = run.run_dir / SUMMARY_FILE
        block = json.loads(path.read_text()).get("cost_model") if path.is_file() else None
        if isinstance(block, dict):
            seen.setdefault((str(block.get("kind")), str(block.get("name"))), block)
    if not seen:
        return ""
    lines = ["## Cost model\n"]
    for (kind, name), block in seen.items():
        lines += describe_cost_model(kind, name, block)
    return "\n".join(lines) + "\n"


def describe_cost_model(kind: str, name: str, block: dict[str, Any]) -> list[str]:
    """The report's lines on one cost model: its front end, the eager engine's host terms when
    it runs without CUDA graphs, and its validated error."""
    frontend = (
        f"front end {block['frontend_request_s'] * 1e3:.3g} ms per request + "
        f"{block['frontend_per_prompt_token_s'] * 1e6:.3g} µs per prompt token, first "
        f"token out {block['frontend_first_token_s'] * 1e3:.3g} ms"
    )
    lines = [f"- **{kind}** `{name}`: {frontend}."]
    if block.get("cuda_graphs") is False and block.get("eager_host_per_layer_s") is not None:
        # Runs written before the per-sequence term have no such key: their steps had none.
        per_sequence_s = block.get("eager_host_per_sequence_s")
        per_sequence = (
            f" and {per_sequence_s * 1e6:.4g} µs per decoding sequence"
            if per_sequence_s is not None
            else ""
        )
        lines.append(
            "  Engine without CUDA graphs: every decode step adds "
            f"{block['eager_host_per_layer_s'] * 1e6:.4g} µs of host time per layer"
            f"{per_sequence}; a step with a prefill chunk lasts at least "
            f"{block['eager_prefill_floor_per_layer_s'] * 1e6:.4g} µs per layer."
        )
    error = block.get("validated_error")
    if error:
        figures = ", ".join(
            f"{key.removesuffix('_mape').replace('_', ' ')} {value:.1%}"
            for key, value in error.items()
            if key.endswith("_mape")
        )
        lines.append(
            f"  Validated MAPE against real measurements ({error['measured_by']}): {figures}."
        )
    else:
        lines.append("  No validated error for this kind of cost model.")
    return lines
