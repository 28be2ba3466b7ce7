"""A worker stopped by SIGTERM (a pod delete, an eviction, `kubectl drain`) whose segment still holds an output
another worker has to read: it finishes its batches, then waits for the output's release before it exits (the
output would go with the process); released, it exits 0. Real worker process, real master and Ray."""
from __future__ import annotations

import time

import ray
from kubernetes import client

from rewardpool_devcluster.fleet import WorkerFleet
from rewardpool_worker.client import RewardPoolClient
from tests.conftest import wait_for
from tests.e2e import G, P, REPO, V, pool_spec


def test_a_worker_stopped_by_sigterm_keeps_its_segment_until_what_it_holds_is_released(
        api, ns, operator, master, producer, store, ray_cluster, tmp_path):
    co, core = client.CustomObjectsApi(api), client.CoreV1Api(api)
    spec = pool_spec(master, ray_cluster, replicas=1, drainTimeoutSeconds=120)
    with WorkerFleet(core, ns, "sg", tmp_path, env={"PYTHONPATH": str(REPO)}) as fleet:
        co.create_namespaced_custom_object(G, V, ns, P, {"apiVersion": f"{G}/{V}", "kind": "RewardPool",
                                                         "metadata": {"name": "sg"}, "spec": spec})
        pool_client = RewardPoolClient("sg", ns, refresh_seconds=1)
        (name,) = wait_for(lambda: pool_client.refresh() or None, 120, what="the worker's actor")
        segment = ray.get(ray.get_actor(name, namespace="rewardpool").ready.remote())["store_hostname"]
        held = producer.put("sg/held", seed=7, shape=(3, 1, 8, 8), segment=segment)  # another's output, there
        (pod,) = [p.metadata.name for p in core.list_namespaced_pod(ns, label_selector="rewardpool.io/pool=sg").items]
        core.delete_namespaced_pod(pod, ns, grace_period_seconds=120)
        log = tmp_path / f"{pod}.log"
        wait_for(lambda: log.exists() and "waiting for the" in log.read_text() and segment in log.read_text(), 60,
                 what="the stopping worker waiting for its segment")
        time.sleep(3)
        assert fleet.exit_codes.get(pod) == -1, "exited with an output still in its segment"
        assert held.key in master.keys()
        producer.remove(held.key)  # the output's last reward came: the trainer releases it
        wait_for(lambda: fleet.exit_codes.get(pod) == 0, 60, what="the worker exiting 0 once its segment is empty")
        assert "drained after" in log.read_text()
