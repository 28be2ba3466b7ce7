"""Scale to and from zero with real workers: a pool at zero has no worker and so no queue; a client's demand
hint (`rewardpool_worker.client.demand.expect`, the pool annotation) starts workers before any batch is sent, they
score the rollout, and once the hint is withdrawn and the stabilization window has seen only idleness the
pool drains back to zero. Nothing is lost on the way."""
from __future__ import annotations

from kubernetes import client

from rewardpool_devcluster.fleet import WorkerFleet
from rewardpool_worker.client import demand
from rewardpool_worker.client import Releaser, RewardPoolClient
from tests.conftest import wait_for
from tests.e2e import G, P, REPO, V, pool_spec


def test_hint_starts_a_pool_from_zero_and_idleness_returns_it(api, ns, operator, master, producer, store,
                                                                 ray_cluster, cluster, tmp_path, monkeypatch):
    monkeypatch.setenv("KUBECONFIG", str(cluster.kubeconfig))
    co, core = client.CustomObjectsApi(api), client.CoreV1Api(api)
    spec = pool_spec(master, ray_cluster, replicas=0, drainTimeoutSeconds=30,
                     autoscaling={"enabled": True, "minReplicas": 0, "maxReplicas": 3, "targetQueueDepth": 2,
                                  "scaleDownStabilizationSeconds": 6})

    def pods():
        return [p for p in core.list_namespaced_pod(ns, label_selector="rewardpool.io/pool=zero").items
                if p.metadata.deletion_timestamp is None]

    def status():
        return co.get_namespaced_custom_object(G, V, ns, P, "zero").get("status") or {}

    with WorkerFleet(core, ns, "zero", tmp_path, env={"PYTHONPATH": str(REPO)}):
        co.create_namespaced_custom_object(G, V, ns, P, {"apiVersion": f"{G}/{V}", "kind": "RewardPool",
                                                         "metadata": {"name": "zero"}, "spec": spec})
        wait_for(lambda: status().get("observedGeneration") == 1, 60, what="the pool reconciled")
        assert pods() == [] and status()["desiredReplicas"] == 0  # no demand, no worker

        demand.expect("zero", ns, 6)  # a rollout of 6 outputs is starting
        wait_for(lambda: len(pods()) == 3, 60, what="workers started by the hint alone")
        assert any(c["type"] == "ScalingActive" and c["reason"] == "Activated" for c in status()["conditions"]) or \
            status()["lastScale"]["reason"] == "Activated"
        pool_client = RewardPoolClient("zero", ns, refresh_seconds=1)
        wait_for(lambda: len(pool_client.refresh()) == 3, 120, what="three workers' actors")
        refs = [producer.put(f"zero-{i}", seed=300 + i, shape=(3, 2, 8, 8)) for i in range(6)]
        releaser = Releaser(store)
        releaser.expect(refs)
        for ref in refs:
            assert len(pool_client.score([ref], ["p"])) == 1
            releaser.rewarded([ref])
        demand.expect("zero", ns, 0)  # the rollout is done

        wait_for(lambda: pods() == [] and status().get("replicas") == 0, 120, what="the pool back at zero")
        assert co.get_namespaced_custom_object(G, V, ns, P, "zero")["spec"]["replicas"] == 0
        assert releaser.stats.released == 6 and not {k for k in master.keys() if k.startswith("zero-")}
