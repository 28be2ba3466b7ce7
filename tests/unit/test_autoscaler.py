import pytest

from rewardpool_operator.autoscaler import Signals, decide
from rewardpool_operator.spec import Autoscaling

A = Autoscaling(enabled=True, minReplicas=1, maxReplicas=10, targetQueueDepth=4, scaleDownDelaySeconds=60)


def d(current, queue, fill=None, below_since=None, now=1000.0, sizing_min=0, auto=A):
    return decide(auto, current, Signals(queue, 0 if queue is not None else None, fill, current), 0.9, sizing_min,
                  below_since, now)


def test_scales_up_at_once_to_the_queue_over_target():
    r = d(2, 20)
    assert (r.desired, r.reason, r.below_since) == (5, "QueueAboveTarget", None)


def test_tolerance_keeps_the_size_near_target():
    assert d(4, 17).desired == 4 and d(4, 15).desired == 4  # within 10% of 16
    assert d(4, 18).desired == 5


def test_scale_down_waits_for_the_delay_then_goes():
    first = d(5, 4, now=1000)
    assert (first.desired, first.reason, first.below_since) == (5, "ScaleDownDelayed", 1000)
    mid = d(5, 4, below_since=first.below_since, now=1030)
    assert mid.desired == 5 and "30s of the 60s" in mid.message
    done = d(5, 4, below_since=first.below_since, now=1061)
    assert (done.desired, done.reason, done.below_since) == (1, "QueueBelowTarget", None)


def test_demand_back_at_target_resets_the_delay():
    assert d(5, 20, below_since=900, now=1000).below_since is None


def test_store_pressure_adds_workers_before_eviction():
    r = d(4, 16, fill=0.75)  # 0.75 >= 0.8 x 0.9
    assert (r.desired, r.reason) == (6, "StorePressure") and "eviction watermark" in r.message
    assert d(4, 16, fill=0.5).desired == 4
    assert d(1, 0, fill=0.85).desired == 2


def test_bounds_and_sizing_minimum():
    assert d(8, 400).desired == 10 and "capped at maxReplicas 10" in d(8, 400).message
    assert d(3, 0, below_since=0, now=1000, sizing_min=3).desired == 3


def test_missing_metrics_hold_the_size_and_never_scale_in():
    r = d(6, None, below_since=0, now=10_000)
    assert (r.desired, r.reason) == (6, "MetricsUnavailable")


@pytest.mark.parametrize("current,queue,expected", [(0, 0, 1), (0, 9, 3)])
def test_from_zero(current, queue, expected):
    assert d(current, queue).desired == expected
