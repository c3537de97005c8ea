"""Runs that rejected requests are named in the report, marked in its tables and figures, and
never count as a sweep's capacity, since their numbers cover only the requests they admitted.

Scenario: a load sweep of `workload.arrivals.rate_per_s` over 5, 10 and 20 (seed 0), every run
stable; the 10/s run rejected 3 of 50 requests for prompts at least max_model_len long.
"""

from __future__ import annotations

from pathlib import Path

from sim.metrics import rejection_note
from sim.report.capacity import swept_capacity
from sim.report.report import stability_section
from sim.report.runs import REJECTED_MARK, Run, RunSet

PATH = "workload.arrivals.rate_per_s"
REJECTED = {"num_submitted": 50, "num_rejected": 3, "num_rejected_queue_full": 0}


def _run_set() -> RunSet:
    runs = []
    for rate in (5, 10, 20):
        summary = REJECTED if rate == 10 else {"num_submitted": 50, "num_rejected": 0}
        runs.append(
            Run(
                run_id=f"rate{rate}",
                variant=f"rate{rate}",
                seed=0,
                status="ok",
                error=None,
                run_dir=Path("."),
                parameters={PATH: rate},
                stable=True,
                rejected=rejection_note(summary),
            )
        )
    return RunSet(Path("."), True, (PATH,), runs)


def test_rejection_note_counts_each_cause():
    """3 too long of 50; 2 queue-full of 9 with 1 too long; none rejected: no note."""
    assert rejection_note(REJECTED) == (
        "3 of 50 requests were rejected: 3 with prompts of at least engine.max_model_len tokens"
    )
    assert rejection_note(
        {"num_submitted": 9, "num_rejected": 3, "num_rejected_queue_full": 2}
    ) == (
        "3 of 9 requests were rejected: 1 with prompts of at least engine.max_model_len tokens; "
        "2 turned away by the queue limits engine.max_num_queued_reqs / "
        "engine.max_num_queued_tokens"
    )
    assert rejection_note({"num_submitted": 9, "num_rejected": 0}) is None


def test_the_report_names_a_rejecting_run_and_marks_its_variant():
    run_set = _run_set()
    labels = run_set.variant_labels()
    assert labels["rate10"] == f"rate_per_s=10 {REJECTED_MARK}"
    assert labels["rate5"] == "rate_per_s=5"
    text = stability_section(run_set, labels)
    assert "**1 of 3 finished runs rejected requests**" in text
    assert (
        f"| rate10 | rate_per_s=10 {REJECTED_MARK} | 0 | 3 of 50 requests were rejected: 3 with "
        "prompts of at least engine.max_model_len tokens |"
    ) in text


def test_a_rejecting_run_ends_the_swept_capacity():
    """Stable at 5 and 20, but 10 rejected requests: the capacity stops below 10."""
    capacity = swept_capacity(_run_set(), PATH)
    assert (capacity.passing, capacity.failing) == (5.0, 10.0)
    assert "**Stable up to `workload.arrivals.rate_per_s` = 5**" in stability_section(
        _run_set(), _run_set().variant_labels()
    )
