"""NullRecorder accepts every hook (a batch of finished requests as one call per request);
FanOutRecorder forwards each hook to every recorder in order; ReplicaRecorders splits hooks by
replica; StepBuffer hands steps over in batches."""

from __future__ import annotations

from array import array

from step_helpers import steps_of

from sim.metrics.recorder import FanOutRecorder, NullRecorder, ReplicaRecorders
from sim.metrics.records import BlockEvent, RequestColumns, RequestRecord
from sim.metrics.step_buffer import StepBuffer


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

    def on_requests_finished(self, requests):
        self.log.append((self.name, "requests", requests.request_id))

    def close(self, end_at):
        self.log.append((self.name, "close", end_at))


def test_null_recorder_returns_none_for_every_hook(make_step, make_request):
    recorder = NullRecorder()
    event = BlockEvent("stored", 0.0, b"\x01", 1, 16)
    assert recorder.on_block_event(event) is None
    assert recorder.on_steps(steps_of(make_step())) is None
    assert recorder.on_request_finished(make_request()) is None
    assert recorder.on_requests_finished(RequestColumns.from_records([make_request()])) is None
    assert recorder.close(1.0) is None


class _Collector(NullRecorder):
    def __init__(self) -> None:
        self.records: list[RequestRecord] = []

    def on_request_finished(self, request: RequestRecord) -> None:
        self.records.append(request)


def test_null_recorder_hands_a_batch_over_one_request_at_a_time(make_request):
    # Two requests in one batch reach on_request_finished as the records they were made from.
    records = [
        make_request(request_id="x", inter_token_latencies_s=array("d", [0.5, 0.25])),
        make_request(request_id="y", replica=1, inter_token_latencies_s=array("d")),
    ]
    collector = _Collector()
    collector.on_requests_finished(RequestColumns.from_records(records))
    assert collector.records == records


def test_fan_out_calls_each_recorder_in_order(make_step, make_request):
    log: list[tuple[str, str, object]] = []
    fan_out = FanOutRecorder([CallLog("a", log), NullRecorder(), CallLog("b", log)])
    fan_out.on_block_event(BlockEvent("hit", 1.0, b"\x02", 7, 32))
    fan_out.on_steps(steps_of(make_step(step_index=3)))
    fan_out.on_request_finished(make_request(request_id="x"))
    fan_out.on_requests_finished(RequestColumns.from_records([make_request(request_id="y")]))
    fan_out.close(9.5)
    assert log == [
        ("a", "block", 7),
        ("b", "block", 7),
        ("a", "steps", [3]),
        ("b", "steps", [3]),
        ("a", "request", "x"),
        ("b", "request", "x"),
        ("a", "requests", ["y"]),
        ("b", "requests", ["y"]),
        ("a", "close", 9.5),
        ("b", "close", 9.5),
    ]


def test_replica_recorders_send_each_hook_to_its_replica(make_step, make_request):
    # Steps of replicas 1, 0, 1 in one batch: replica 0 gets [2], replica 1 gets [1, 3].
    log: list[tuple[str, str, object]] = []
    split = ReplicaRecorders([CallLog("r0", log), CallLog("r1", log)])
    split.on_steps(
        steps_of(
            make_step(step_index=1, replica=1),
            make_step(step_index=2, replica=0),
            make_step(step_index=3, replica=1),
        )
    )
    split.on_steps(steps_of(make_step(step_index=4, replica=1)))
    split.on_request_finished(make_request(request_id="x", replica=1))
    # A batch of replicas 1, 0, 1: replica 0 gets [z], replica 1 gets [y, w].
    batch = [
        make_request(request_id=rid, replica=replica)
        for rid, replica in zip("yzw", (1, 0, 1), strict=True)
    ]
    split.on_requests_finished(RequestColumns.from_records(batch))
    split.on_block_event(BlockEvent("hit", 1.0, b"\x02", 7, 32, replica=0))
    split.close(2.0)
    assert log == [
        ("r0", "steps", [2]),
        ("r1", "steps", [1, 3]),
        ("r1", "steps", [4]),
        ("r1", "request", "x"),
        ("r0", "requests", ["z"]),
        ("r1", "requests", ["y", "w"]),
        ("r0", "block", 7),
        ("r0", "close", 2.0),
        ("r1", "close", 2.0),
    ]


def test_step_buffer_hands_over_full_batches_and_the_rest_on_flush(make_step):
    # Capacity 2, five steps: batches [1, 2] and [3, 4] on the way, [5] on flush, nothing more.
    log: list[tuple[str, str, object]] = []
    buffer = StepBuffer(CallLog("a", log), capacity=2)
    for index in range(1, 6):
        buffer.add(make_step(step_index=index))
    buffer.flush()
    buffer.flush()
    assert log == [("a", "steps", [1, 2]), ("a", "steps", [3, 4]), ("a", "steps", [5])]


def test_step_buffer_flushes_when_every_engine_is_idle(make_step):
    # Two engines: the first going idle keeps step 1 buffered; both idle hands it over; the
    # second wakes, adds step 2 and idles again: with the first still idle, step 2 follows.
    log: list[tuple[str, str, object]] = []
    buffer = StepBuffer(CallLog("a", log))
    buffer.attach_engine()
    buffer.attach_engine()
    buffer.add(make_step(step_index=1))
    buffer.engine_idle()
    assert log == []
    buffer.engine_idle()
    assert log == [("a", "steps", [1])]
    buffer.engine_busy()
    buffer.add(make_step(step_index=2))
    buffer.engine_idle()
    assert log == [("a", "steps", [1]), ("a", "steps", [2])]
