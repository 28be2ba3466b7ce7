"""Per-pool figures on the operator's /metrics, labelled namespace and pool (names in the contract,
config.OperatorMetricNames): what a KEDA ScaledObject (Prometheus scaler) or an HPA on external metrics reads
to drive /scale instead of the built-in autoscaler, and what the dashboard shows next to the workers' own."""
from __future__ import annotations

from rewardpool_worker.contract import OperatorMetricNames as M

QUEUE_DEPTH = M.POOL_QUEUE_DEPTH.make()
PENDING_BYTES = M.POOL_PENDING_BYTES.make()
DEMAND_HINT = M.POOL_EXPECTED_OUTPUTS.make()
STORE_FILL = M.POOL_STORE_FILL.make()
STORE_WATERMARK = M.POOL_STORE_WATERMARK.make()
DESIRED = M.POOL_DESIRED.make()
READY = M.POOL_READY.make()
DRAINING = M.POOL_DRAINING.make()
OLDEST_DRAIN = M.POOL_OLDEST_DRAIN.make()
SCALE_EVENTS = M.POOL_SCALE_EVENTS.make()
_GAUGES = (QUEUE_DEPTH, PENDING_BYTES, DEMAND_HINT, STORE_FILL, STORE_WATERMARK, DESIRED, READY, DRAINING,
           OLDEST_DRAIN)


def record(namespace: str, pool: str, status: dict, spec_replicas: int, watermark: float,
           oldest_drain_seconds: float) -> None:
    labels = (namespace, pool)
    QUEUE_DEPTH.labels(*labels).set(status.get("queueDepth") or 0)
    PENDING_BYTES.labels(*labels).set(status.get("pendingBytes") or 0)
    DEMAND_HINT.labels(*labels).set(status.get("demandHint") or 0)
    if status.get("storeFill") is not None:
        STORE_FILL.labels(*labels).set(status["storeFill"])
    STORE_WATERMARK.labels(*labels).set(watermark)
    DESIRED.labels(*labels).set(status.get("desiredReplicas", spec_replicas))
    READY.labels(*labels).set(status.get("readyReplicas") or 0)
    DRAINING.labels(*labels).set(status.get("drainingReplicas") or 0)
    OLDEST_DRAIN.labels(*labels).set(oldest_drain_seconds)
    for direction in ("up", "down"):  # both present from the start: rate() and increase() see a series
        SCALE_EVENTS.labels(*labels, direction)


def scaled(namespace: str, pool: str, before: int, after: int) -> None:
    SCALE_EVENTS.labels(namespace, pool, "up" if after > before else "down").inc()


def forget(namespace: str, pool: str) -> None:
    for g in _GAUGES:
        try:
            g.remove(namespace, pool)
        except KeyError:
            pass
    for direction in ("up", "down"):
        try:
            SCALE_EVENTS.remove(namespace, pool, direction)
        except KeyError:
            pass
