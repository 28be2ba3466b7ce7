"""Per-pool figures on the operator's /metrics, labelled namespace and pool: what a KEDA ScaledObject
(Prometheus scaler) or an HPA on external metrics reads to drive /scale instead of the built-in autoscaler,
and what a dashboard shows next to the workers' own metrics."""
from __future__ import annotations

from prometheus_client import Gauge

_L = ["namespace", "pool"]
QUEUE_DEPTH = Gauge("rewardpool_pool_queue_depth", "Batches accepted by the pool's workers and not finished", _L)
PENDING_BYTES = Gauge("rewardpool_pool_pending_bytes", "Stored bytes of the pool's accepted, unfinished batches", _L)
DEMAND_HINT = Gauge("rewardpool_pool_expected_outputs", "Outputs a client said are coming (demand hint)", _L)
STORE_FILL = Gauge("rewardpool_pool_store_fill_ratio", "Allocated over total capacity of the pool's store", _L)
DESIRED = Gauge("rewardpool_pool_desired_replicas", "spec.replicas, or the built-in autoscaler's decision", _L)
READY = Gauge("rewardpool_pool_ready_replicas", "Ready workers", _L)
DRAINING = Gauge("rewardpool_pool_draining_replicas", "Workers draining before deletion", _L)
_ALL = (QUEUE_DEPTH, PENDING_BYTES, DEMAND_HINT, STORE_FILL, DESIRED, READY, DRAINING)


def record(namespace: str, pool: str, status: dict, spec_replicas: int) -> None:
    labels = (namespace, pool)
    QUEUE_DEPTH.labels(*labels).set(status.get("queueDepth") or 0)
    PENDING_BYTES.labels(*labels).set(status.get("pendingBytes") or 0)
    DEMAND_HINT.labels(*labels).set(status.get("demandHint") or 0)
    if status.get("storeFill") is not None:
        STORE_FILL.labels(*labels).set(status["storeFill"])
    DESIRED.labels(*labels).set(status.get("desiredReplicas", spec_replicas))
    READY.labels(*labels).set(status.get("readyReplicas") or 0)
    DRAINING.labels(*labels).set(status.get("drainingReplicas") or 0)


def forget(namespace: str, pool: str) -> None:
    for g in _ALL:
        try:
            g.remove(namespace, pool)
        except KeyError:
            pass
