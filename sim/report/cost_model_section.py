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
        frontend = (
            f"front end {block['frontend_request_s'] * 1e3:.3g} ms per request + "
            f"{block['frontend_per_prompt_token_s'] * 1e6:.3g} µs per prompt token, first "
            f"token out {block['frontend_first_token_s'] * 1e3:.3g} ms"
        )
        lines.append(f"- **{kind}** `{name}`: {frontend}.")
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
    return "\n".join(lines) + "\n"
