"""The built-in autoscaler's decision, pure, shaped like the HPA's (kube-controller-manager's
podautoscaler, `behavior` included) so that people who know HPA can predict it:

    demand   = max(queue depth over the workers, outputs a client said are coming)
    raw      = ceil(demand / targetQueueDepth), kept at the current count within a 10% tolerance
    counted  = Ready + starting workers (never spec.replicas alone: a worker that is not there does no work)
    up       = at once, but within the scale-up policy: at most max(percent%, pods) more than the count at the
               start of the policy period (HPA's scaleUp policies, selectPolicy Max)
    down     = the highest recommendation over scaleDownStabilizationSeconds (HPA's scale-down stabilization
               window), so a lull between rollouts shorter than the window keeps the warm workers; and at
               most one scale-down per window (where HPA may step down again as peaks leave the window)
    pressure = store fill at or above PRESSURE x the eviction watermark adds max(1, counted/2) workers, at most
               once per PRESSURE_COOLDOWN and never while earlier additions are still starting
    bounds   = [minReplicas, maxReplicas], and the sizing's minimum whenever there is demand

Scale from zero (minReplicas 0): with no workers there is no queue; a client's demand hint (`expect`) activates
the pool, and an idle pool falls to zero once the window has seen nothing but zero. No signal at all while
workers exist (their metrics unreadable): hold. Missing data never scales a pool in."""
from __future__ import annotations

import math
from dataclasses import dataclass, field

from ..api import reasons as R
from ..api.spec import Autoscaling
from .observed import History, Signals

TOLERANCE = 0.1
PRESSURE = 0.8
PRESSURE_COOLDOWN = 30.0


@dataclass(frozen=True)
class ScalingInputs:
    """What the decision sees of the pool besides the signals (counted by the plan)."""
    replicas: int  # spec.replicas now
    counted: int  # Ready + starting workers (not draining, not lost)
    starting: int  # created, not Ready yet
    hint: int = 0  # outputs a client said are coming (an unexpired demand hint), 0 when none
    sizing_min: int = 0  # replicas the segment registration limit needs
    high_watermark: float = 0.9


@dataclass(frozen=True)
class Decision:
    desired: int
    reason: str
    message: str
    history: History = field(default_factory=History)  # to remember for the next decision


def decide(auto: Autoscaling, obs: ScalingInputs, sig: Signals, hist: History, now: float) -> Decision:
    """The new size and why; the history it returns replaces the one given (which is not changed)."""
    hist = History(list(hist.recommendations), list(hist.ups), hist.last_pressure,
                   now if hist.since is None else hist.since, hist.last_down)
    d = _decide(auto, obs, sig, hist, now)
    return Decision(d.desired, d.reason, d.message, hist)


def _decide(auto: Autoscaling, obs: ScalingInputs, sig: Signals, hist: History, now: float) -> Decision:
    target = auto.targetQueueDepth
    if sig.queue_depth is None and obs.counted > 0 and obs.hint == 0:
        return Decision(obs.replicas, R.METRICS_UNAVAILABLE,
                        "no worker metrics could be read: holding the current size")
    queue = sig.queue_depth or 0
    demand = max(queue, obs.hint)
    raw = math.ceil(demand / target)
    what = f"queue depth {queue} over {sig.workers_reporting} worker(s)" + \
        (f", {obs.hint} output(s) expected by a client" if obs.hint else "") + f", target {target} per worker"
    if obs.counted > 0 and abs(demand / (target * obs.counted) - 1) <= TOLERANCE:
        raw = obs.counted
    reason = R.ABOVE_TARGET if raw > obs.counted else R.BELOW_TARGET if raw < obs.counted else R.AT_TARGET
    if obs.counted == 0 and raw > 0:
        reason = R.ACTIVATED
    fill = sig.store_fill
    if fill is not None and fill >= PRESSURE * obs.high_watermark and obs.counted > 0:
        cooled = hist.last_pressure is None or now - hist.last_pressure >= PRESSURE_COOLDOWN
        bumped = obs.counted + max(1, math.ceil(obs.counted / 2))
        if bumped > raw and cooled and obs.starting == 0:
            raw, reason = bumped, R.STORE_PRESSURE
            what = (f"store {fill:.0%} full, near the {obs.high_watermark:.0%} eviction watermark: adding workers "
                    "so outputs are read before they can be evicted")
            hist.last_pressure = now
        elif bumped > raw:  # pressure, but the last additions are still starting or cooling down
            raw = max(raw, obs.counted)
    lo = max(auto.minReplicas, obs.sizing_min if demand > 0 or auto.minReplicas > 0 else 0)
    bounded = min(max(raw, lo), auto.maxReplicas)
    note = ""
    if bounded != raw:
        note = f"; held at the minimum {lo}" if bounded == lo else f"; capped at maxReplicas {auto.maxReplicas}"

    # Scale-down stabilization: the highest recommendation over the window (the start of the history counts
    # as the current size, so a restarted operator does not shrink a pool on its first look).
    window = auto.scaleDownStabilizationSeconds
    hist.recommendations = [(t, r) for t, r in hist.recommendations if now - t < window] + [(now, bounded)]
    floor = [obs.replicas] if now - hist.since < window else []
    stable = max([r for _, r in hist.recommendations] + floor)

    if bounded > obs.counted and bounded > obs.replicas:
        if obs.starting > 0:  # the last scale-up has not landed yet: judge again once it has
            return Decision(obs.replicas, R.WAITING_FOR_STARTING_WORKERS,
                            f"{what}{note}; {obs.starting} worker(s) still starting")
        period = auto.scaleUp.periodSeconds
        hist.ups = [(t, n) for t, n in hist.ups if now - t < period]
        base = min([n for _, n in hist.ups] + [obs.counted])
        allowed = max(math.ceil(base * (1 + auto.scaleUp.percent / 100)), base + auto.scaleUp.pods)
        desired = min(bounded, max(allowed, obs.replicas))
        if desired < bounded:
            note += f"; limited to {desired} by the scale-up policy ({auto.scaleUp.percent}% or " \
                    f"{auto.scaleUp.pods} pods per {period}s)"
        if desired > obs.replicas:
            hist.ups.append((now, obs.counted))
        return Decision(desired, reason, what + note)
    if stable < obs.replicas and (hist.last_down is None or now - hist.last_down >= window):
        hist.last_down = now
        return Decision(stable, reason, what + note)
    if bounded < obs.replicas:
        return Decision(obs.replicas, R.SCALE_DOWN_STABILIZING,
                        f"{what}{note}; waiting for the {window}s stabilization window (highest recommendation "
                        f"in it: {stable})")
    return Decision(obs.replicas, R.AT_TARGET if reason == R.BELOW_TARGET else reason, what + note)
