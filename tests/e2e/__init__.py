"""Whole-system tests: control plane, operator, a real worker process per kwok pod, Mooncake and Ray."""
from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
G, V, P = "rewardpool.io", "v1alpha1", "rewardpools"


def pool_spec(master, ray_address: str, **over) -> dict:
    """A pool whose workers run for real on loopback: tcp store clients lending 16 MiB each, the master's
    metrics for segment checks and store fill, the test's Ray cluster."""
    spec = {
        "replicas": 1, "image": "rewardpool-worker:e2e",
        "scorer": {"name": "mean-intensity", "batchSize": 1},
        "store": {"master": master.address, "metricsAddress": f"127.0.0.1:{master.metrics_port}",
                  "protocol": "tcp", "segmentSize": "16Mi", "localBufferSize": "16Mi"},
        "sizing": {"samplesPerRollout": 8, "outputBytesPerSample": "1Mi"},
        "ray": {"address": ray_address, "namespace": "rewardpool"},
    }
    spec.update(over)
    return spec
