"""StepMerge: replicas' steps released in (started_at, replica, step_index) order once no
replica can still hand an earlier one."""

from step_helpers import steps_of

from sim.metrics.step_merge import StepMerge


def _keys(steps):
    return list(zip(steps.started_at.tolist(), steps.replica.tolist(), strict=True))


def test_steps_wait_for_every_replica_then_come_out_in_order(make_step):
    # Replica 1 hands steps at 0.5 and 1.0 first: replica 0 has not stepped, nothing is
    # released. Replica 0 then hands 0.2 and 0.7: the steps before 0.7 (both replicas' latest
    # is at least 0.7) come out in time order; the rest at drain.
    merge = StepMerge(2)
    late = steps_of(
        make_step(step_index=1, started_at=0.5, replica=1),
        make_step(step_index=2, started_at=1.0, replica=1),
    )
    assert merge.add(late) is None
    early = steps_of(
        make_step(step_index=1, started_at=0.2, replica=0),
        make_step(step_index=2, started_at=0.7, replica=0),
    )
    released = merge.add(early)
    assert released is not None and _keys(released) == [(0.2, 0), (0.5, 1)]
    rest = merge.drain()
    assert rest is not None and _keys(rest) == [(0.7, 0), (1.0, 1)]
    assert merge.drain() is None


def test_same_start_orders_by_replica_then_step_index(make_step):
    # Two zero-length steps of replica 1 and one of replica 0, all at 3.0, handed replica 1
    # first: drained as (0, 1), (1, 4), (1, 5).
    merge = StepMerge(2)
    merge.add(
        steps_of(
            make_step(step_index=4, started_at=3.0, duration_s=0.0, replica=1),
            make_step(step_index=5, started_at=3.0, duration_s=0.0, replica=1),
        )
    )
    merge.add(steps_of(make_step(step_index=1, started_at=3.0, replica=0)))
    drained = merge.drain()
    assert drained is not None
    assert list(zip(drained.replica.tolist(), drained.step_index.tolist(), strict=True)) == [
        (0, 1),
        (1, 4),
        (1, 5),
    ]


def test_one_replica_passes_batches_straight_through(make_step):
    merge = StepMerge(1)
    batch = steps_of(make_step(step_index=1, started_at=2.0), make_step(step_index=2))
    assert merge.add(batch) is batch
    assert merge.drain() is None
