"""`kubectl drain` of a node under load, with real workers: the pool's PodDisruptionBudget lets one worker go
at a time, the evicted worker gets SIGTERM (from the fleet, as from a kubelet), stops taking batches and
finishes the one it has, its replacement starts on another node, and every output is scored and released
exactly once: nothing is lost and nothing is left in the store."""
from __future__ import annotations

import time
from concurrent.futures import as_completed

from kubernetes import client

from rewardpool_devcluster.fleet import WorkerFleet
from rewardpool_devcluster.stack import kubectl
from rewardpool_worker.client import Releaser, RewardPoolClient
from tests.conftest import wait_for
from tests.e2e import G, P, REPO, V, pool_spec


def test_node_drain_under_load_loses_nothing(api, ns, operator, master, producer, store, ray_cluster, cluster,
                                             tmp_path):
    co, core = client.CustomObjectsApi(api), client.CoreV1Api(api)
    spec = pool_spec(master, ray_cluster, replicas=2, drainTimeoutSeconds=60,
                     scorer={"class": "tests.worker.custom_scorer:OneSecondScorer", "batchSize": 1})

    def pods():
        return [p for p in core.list_namespaced_pod(ns, label_selector="rewardpool.io/pool=nd").items
                if p.metadata.deletion_timestamp is None]

    def pdb_allows_one():
        got = kubectl(cluster, "get", "pdb", "nd", "-n", ns, "-o", "jsonpath={.status.disruptionsAllowed}").stdout
        if got != "1":  # see tests/integration/test_rollout_path.py: the controller-manager catches up on a pod change
            for p in pods():
                core.patch_namespaced_pod(p.metadata.name, ns, {"metadata": {"annotations": {"test/poke": str(time.time())}}})
        return got == "1"

    with WorkerFleet(core, ns, "nd", tmp_path, env={"PYTHONPATH": str(REPO)}) as fleet:
        co.create_namespaced_custom_object(G, V, ns, P, {"apiVersion": f"{G}/{V}", "kind": "RewardPool",
                                                         "metadata": {"name": "nd"}, "spec": spec})
        pool_client = RewardPoolClient("nd", ns, refresh_seconds=1)
        wait_for(lambda: len(pool_client.refresh()) == 2, 120, what="two workers' actors")
        wait_for(pdb_allows_one, 90, interval=3, what="the PDB counting the workers")
        node0 = [p.metadata.name for p in pods() if p.spec.node_name == "rdma-node-0"]
        assert len(node0) == 1, "topology spread puts one worker on each RDMA node"

        refs = [producer.put(f"nd-{i}", seed=700 + i, shape=(3, 2, 8, 8)) for i in range(16)]
        releaser = Releaser(store)
        releaser.expect(refs)
        futures = {pool_client.submit([r], ["p"]): r for r in refs}
        time.sleep(1.5)  # batches are in flight on both workers when the drain starts
        try:
            res = kubectl(cluster, "drain", "rdma-node-0", "--pod-selector=rewardpool.io/pool=nd",
                          "--ignore-daemonsets", "--delete-emptydir-data", "--timeout=150s", check=False, timeout=180)
            assert res.returncode == 0, res.stderr
            scored = {}
            for fut in as_completed(futures, timeout=180):
                ref = futures[fut]
                scored[ref.key] = fut.result()
                releaser.rewarded([ref])
        finally:
            kubectl(cluster, "uncordon", "rdma-node-0", check=False)
        assert len(scored) == 16 and all(len(v) == 1 for v in scored.values())
        assert releaser.stats.released == 16
        assert not {k for k in master.keys() if k.startswith("nd-")}
        wait_for(lambda: fleet.exit_codes.get(node0[0]) == 0, 90, what="the evicted worker drained and exited 0")
        log = (tmp_path / f"{node0[0]}.log").read_text()
        assert "finishing in-flight work" in log
        wait_for(lambda: len(pods()) == 2 and all(p.spec.node_name == "rdma-node-1" for p in pods()), 90,
                 what="the replacement on the other node")
