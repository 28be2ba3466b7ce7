"""The built-in autoscaler's decision, table-driven, and a noisy demand trace that must not make it flap."""
import random

from rewardpool_operator.pool.autoscaler import ScalingInputs, decide
from rewardpool_operator.pool.observed import History, Signals
from rewardpool_operator.api.spec import Autoscaling

A = Autoscaling(enabled=True, minReplicas=1, maxReplicas=20, targetQueueDepth=4, scaleDownStabilizationSeconds=60)


def d(replicas, queue, fill=None, hist=None, now=1000.0, counted=None, starting=0, hint=0, sizing_min=0, auto=A):
    counted = replicas if counted is None else counted
    obs = ScalingInputs(replicas=replicas, counted=counted, starting=starting, hint=hint, sizing_min=sizing_min)
    sig = Signals(queue, 0 if queue is not None else None, fill, counted)
    return decide(auto, obs, sig, hist or History(since=0.0), now)


def test_scales_up_to_the_queue_over_target():
    r = d(2, 20)
    assert (r.desired, r.reason) == (5, "AboveTarget")


def test_tolerance_keeps_the_size_near_target():
    assert d(4, 17).desired == 4 and d(4, 15).desired == 4  # within 10% of 16
    assert d(4, 18).desired == 5


def test_scale_up_policy_bounds_a_jump():
    r = d(2, 400)  # wants 20 (max): at most max(100%, +4) = 6 from 2 in one period
    assert r.desired == 6 and "scale-up policy" in r.message
    r2 = d(6, 400, hist=r.history, now=1005)  # same period: still bounded by the count at its start (2)
    assert r2.desired == 6
    r3 = d(6, 400, hist=r.history, now=1016)  # next period: from 6, up to 12
    assert r3.desired == 12


def test_no_scale_up_while_the_last_one_is_starting():
    r = d(6, 400, counted=6, starting=4)
    assert (r.desired, r.reason) == (6, "WaitingForStartingWorkers")


def test_counts_workers_that_exist_not_spec():
    # spec says 6 but only 2 exist (4 lost, being replaced): demand 6 x 4 is judged against 2 workers
    r = d(6, 24, counted=2)
    assert r.desired == 6 and r.reason == "AboveTarget"


def test_scale_down_takes_the_highest_recommendation_of_the_window():
    h = History(since=0.0)
    seen = []
    for t, q in [(1000, 40), (1010, 4), (1020, 4), (1050, 4), (1059, 4), (1061, 4)]:
        r = d(10, q, hist=h, now=t)
        h = r.history
        seen.append(r.desired)
    assert seen == [10, 10, 10, 10, 10, 1]  # 40 at t=1000 keeps 10 until it leaves the 60 s window
    assert d(10, 4, hist=History(since=0.0), now=1000).desired == 1  # no recent peak: down at once


def test_a_fresh_history_does_not_shrink_the_pool_before_a_window_has_passed():
    r = d(8, 0, hist=History(), now=5000)  # operator just (re)started
    assert r.desired == 8 and r.reason == "ScaleDownStabilizing"


def test_store_pressure_adds_workers_with_a_cooldown_and_not_while_starting():
    r = d(4, 16, fill=0.75)  # 0.75 >= 0.8 x 0.9
    assert (r.desired, r.reason) == (6, "StorePressure") and "eviction watermark" in r.message
    assert d(6, 24, fill=0.75, hist=r.history, now=1010).desired == 6  # cooling down
    assert d(4, 16, fill=0.75, starting=1).desired == 4  # its workers are still starting
    assert d(4, 16, fill=0.5).desired == 4


def test_bounds_and_sizing_minimum():
    assert d(18, 400).desired == 20 and "capped at maxReplicas 20" in d(18, 400).message
    assert d(3, 1, sizing_min=3).desired == 3


def test_missing_metrics_hold_the_size_and_never_scale_in():
    r = d(6, None, now=10_000)
    assert (r.desired, r.reason) == (6, "MetricsUnavailable")


Z = Autoscaling(enabled=True, minReplicas=0, maxReplicas=8, targetQueueDepth=4, scaleDownStabilizationSeconds=60)


def test_zero_workers_wait_for_an_activation_signal():
    r = d(0, None, counted=0, auto=Z)
    assert r.desired == 0
    r = d(0, None, counted=0, hint=64, auto=Z)  # a client expects 64 outputs: start, within the policy
    assert (r.desired, r.reason) == (4, "Activated")


def test_idle_pool_goes_to_zero_after_the_window():
    h = History(since=0.0)
    r = d(2, 0, hist=h, now=1000, auto=Z)
    assert r.desired == 0  # the window has seen nothing but zero since long before
    h = History(since=0.0, recommendations=[(990.0, 2)])
    assert d(2, 0, hist=h, now=1000, auto=Z).desired == 2


def test_hint_scales_ahead_of_the_queue():
    r = d(1, 0, hint=32)  # rollout announced: 32 outputs coming, target 4 per worker
    assert r.desired == 5 and "expected by a client" in r.message  # bounded by +4 per period


def test_noisy_demand_does_not_flap():
    """Bursts and lulls: at most one scale-down per stabilization window, and no scale event while the
    workers of the previous one are still starting (they take 8 s to start here)."""
    rng = random.Random(7)
    auto = Autoscaling(enabled=True, minReplicas=1, maxReplicas=16, targetQueueDepth=4,
                       scaleDownStabilizationSeconds=60)
    h, replicas, ready, starting_until = History(since=0.0), 2, 2, []
    events = []
    for t in range(0, 600, 5):
        queue = rng.choice([0, 2, 40, 3, 60, 0, 1, 35]) if (t // 60) % 2 == 0 else rng.choice([0, 1, 2])
        starting_until = [s for s in starting_until if s > t]
        counted = replicas
        r = decide(auto, ScalingInputs(replicas=replicas, counted=counted, starting=len(starting_until)),
                   Signals(queue, 0, None, counted), h, float(t))
        h = r.history
        if r.desired != replicas:
            events.append((t, replicas, r.desired, len(starting_until)))
            if r.desired > replicas:
                starting_until += [t + 8] * (r.desired - replicas)
            replicas = r.desired
    downs = [t for t, a, b, _ in events if b < a]
    assert all(later - earlier >= 60 for earlier, later in zip(downs, downs[1:])), events
    assert all(starting == 0 for *_, starting in events), events
    assert events, "the trace should make the pool move at all"
