"""NullRecorder accepts every hook; FanOutRecorder forwards each hook to every recorder in order."""

from __future__ import annotations

from step_helpers import steps_of

from sim.metrics.recorder import FanOutRecorder, NullRecorder
from sim.metrics.records import BlockEvent


class CallLog:
    def __init__(self, name: str, log: list[tuple[str, str, object]]) -> None:
        self.name = name
        self.log = log

    def on_block_event(self, event):
        self.log.append((self.name, "block", event.block_id))

    def on_steps(self, steps):
        self.log.append((self.name, "steps", steps.step_index.tolist()))

    def on_request_finished(self, request):
        self.log.append((self.name, "request", request.request_id))

    def close(self, end_at):
        self.log.append((self.name, "close", end_at))


def test_null_recorder_returns_none_for_every_hook(make_step, make_request):
    recorder = NullRecorder()
    event = BlockEvent("stored", 0.0, b"\x01", 1, 16)
    assert recorder.on_block_event(event) is None
    assert recorder.on_steps(steps_of(make_step())) is None
    assert recorder.on_request_finished(make_request()) is None
    assert recorder.close(1.0) is None


def test_fan_out_calls_each_recorder_in_order(make_step, make_request):
    log: list[tuple[str, str, object]] = []
    fan_out = FanOutRecorder([CallLog("a", log), NullRecorder(), CallLog("b", log)])
    fan_out.on_block_event(BlockEvent("hit", 1.0, b"\x02", 7, 32))
    fan_out.on_steps(steps_of(make_step(step_index=3)))
    fan_out.on_request_finished(make_request(request_id="x"))
    fan_out.close(9.5)
    assert log == [
        ("a", "block", 7),
        ("b", "block", 7),
        ("a", "steps", [3]),
        ("b", "steps", [3]),
        ("a", "request", "x"),
        ("b", "request", "x"),
        ("a", "close", 9.5),
        ("b", "close", 9.5),
    ]
