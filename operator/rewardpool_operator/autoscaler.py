"""The built-in autoscaler's decision, pure: signals and the current size in, the desired size and why out.

- Queue: desired = ceil(queue depth / targetQueueDepth), with HPA's 10% tolerance around the current size.
- Store pressure: when the store's fill reaches PRESSURE of the eviction watermark, add at least half the
  pool (one worker minimum), so outputs are read before Mooncake starts evicting unread ones.
- Bounds: minReplicas..maxReplicas, and never below the replicas the sizing needs.
- Up at once; down only after demand has stayed lower for scaleDownDelaySeconds.
- No signal (metrics unreadable): hold the current size. Missing data never scales a pool in."""
from __future__ import annotations

import math
from dataclasses import dataclass, field

from .spec import Autoscaling

TOLERANCE = 0.1
PRESSURE = 0.8


@dataclass(frozen=True)
class Signals:
    queue_depth: int | None  # summed over the workers that answered; None when none did
    pending_bytes: int | None
    store_fill: float | None  # master_allocated_bytes / master_total_capacity_bytes; None if unknown
    workers_reporting: int = 0
    per_worker: dict[str, int] = field(default_factory=dict)  # pod IP -> queue depth, for picking who drains


@dataclass(frozen=True)
class Decision:
    desired: int
    reason: str
    message: str
    below_since: float | None  # when demand first fell below the current size (drives the delay)


def decide(auto: Autoscaling, current: int, signals: Signals, high_watermark: float, sizing_min: int,
           below_since: float | None, now: float) -> Decision:
    lo, hi = max(auto.minReplicas, sizing_min), auto.maxReplicas
    if signals.queue_depth is None:
        return Decision(current, "MetricsUnavailable",
                        "no worker metrics could be read: holding the current size", below_since)
    q = signals.queue_depth
    raw = math.ceil(q / auto.targetQueueDepth)
    if current > 0 and abs(q / (auto.targetQueueDepth * current) - 1) <= TOLERANCE:
        raw = current
    reason, message = ("QueueAboveTarget" if raw > current else "QueueBelowTarget" if raw < current else "AtTarget",
                       f"queue depth {q} over {signals.workers_reporting} worker(s), target "
                       f"{auto.targetQueueDepth} per worker")
    fill = signals.store_fill
    if fill is not None and fill >= PRESSURE * high_watermark:
        bumped = current + max(1, math.ceil(current / 2))
        if bumped > raw:
            raw = bumped
            reason = "StorePressure"
            message = (f"store {fill:.0%} full, near the {high_watermark:.0%} eviction watermark: adding workers "
                       "so outputs are read before they can be evicted")
    desired = min(max(raw, lo), hi)
    if desired != raw and desired == lo and raw < lo:
        message += f"; held at the minimum {lo}"
    elif desired != raw:
        message += f"; capped at maxReplicas {hi}"
    if desired > current:
        return Decision(desired, reason, message, None)
    if desired < current:
        since = below_since if below_since is not None else now
        waited = now - since
        if waited >= auto.scaleDownDelaySeconds:
            return Decision(desired, reason, message, None)
        return Decision(current, "ScaleDownDelayed",
                        f"{message}; lower for {waited:.0f}s of the {auto.scaleDownDelaySeconds}s delay", since)
    return Decision(current, reason if reason != "QueueBelowTarget" else "AtTarget", message, None)
