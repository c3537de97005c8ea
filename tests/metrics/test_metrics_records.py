"""Records: derived latencies and slot-only storage."""

from __future__ import annotations

import pytest


def test_request_latencies_are_measured_from_arrival(make_request):
    # Arrives at 10.0, scheduled at 10.75, first token at 11.5, done at 14.0.
    request = make_request(
        arrival_at=10.0, first_scheduled_at=10.75, first_token_at=11.5, finished_at=14.0
    )
    assert request.ttft_s == 1.5
    assert request.e2e_s == 4.0
    assert request.queue_s == 0.75


def test_records_have_slots_and_no_instance_dict(make_request, make_step):
    for record in (make_request(), make_step()):
        assert not hasattr(record, "__dict__")
        with pytest.raises(AttributeError):
            record.unknown_field = 1
