"""Drain-aware scale-in with real workers: a worker leaving the pool is kept while its segment holds outputs
that are not yet scored, the drain survives an operator restart, a drain past its timeout is reported (not
silently resolved), and the pod goes once the outputs are released."""
from __future__ import annotations

import json
import urllib.request

from kubernetes import client

from rewardpool_devcluster.fleet import WorkerFleet
from rewardpool_worker.client import Releaser, RewardPoolClient
from tests.conftest import wait_for
from tests.e2e import G, P, REPO, V, pool_spec


def test_drain_waits_for_the_segment_survives_a_restart_and_reports_a_stuck_drain(
        api, ns, operator, master, producer, store, ray_cluster, tmp_path):
    co, core = client.CustomObjectsApi(api), client.CoreV1Api(api)
    spec = pool_spec(master, ray_cluster, replicas=2, drainTimeoutSeconds=10)

    def pods():
        return core.list_namespaced_pod(ns, label_selector="rewardpool.io/pool=held").items

    def condition(type_):
        st = co.get_namespaced_custom_object(G, V, ns, P, "held").get("status") or {}
        return next((c for c in st.get("conditions", []) if c["type"] == type_), None)

    with WorkerFleet(core, ns, "held", tmp_path, env={"PYTHONPATH": str(REPO)}):
        co.create_namespaced_custom_object(G, V, ns, P, {"apiVersion": f"{G}/{V}", "kind": "RewardPool",
                                                         "metadata": {"name": "held"}, "spec": spec})
        pool_client = RewardPoolClient("held", ns, refresh_seconds=0)
        wait_for(lambda: len(pool_client.refresh()) == 2, 120, what="two workers' actors")
        # Outputs stored in both workers' segments, not yet scored.
        def healthz():
            h = {p.metadata.name: json.loads(urllib.request.urlopen(
                f"http://{p.status.pod_ip}:8000/healthz", timeout=2).read()) for p in pods()}
            return all(x["phase"] == "ready" for x in h.values()) and h
        health = wait_for(healthz, 60, what="both workers ready")
        refs = [producer.put(f"held-{name}-{i}", seed=950 + i, shape=(3, 2, 8, 8), segment=h["store_hostname"])
                for i, (name, h) in enumerate(sorted(health.items())) for _ in range(1)]
        releaser = Releaser(store)
        releaser.expect(refs)

        def events():
            return [(e.type, e.reason) for e in core.list_namespaced_event(
                ns, field_selector="involvedObject.name=held").items]
        co.patch_namespaced_custom_object_scale(G, V, ns, P, "held", {"spec": {"replicas": 1}})
        victim = wait_for(lambda: [p.metadata.name for p in pods()
                                   if "rewardpool.io/drain-requested-at" in (p.metadata.annotations or {})], 60,
                          what="a worker marked for draining")[0]
        # its event is posted right after the annotation: killed in between, the operator would not say it again
        # (the suite saw that race once)
        wait_for(lambda: ("Normal", "WorkerDraining") in events(), 20, what="the WorkerDraining event")
        operator.kill()  # the drain must survive the operator going away
        operator.start()
        c = wait_for(lambda: (x := condition("Degraded")) and x["reason"] == "DrainStuck" and x, 60,
                     what="DrainStuck after the drain timeout")
        assert victim in c["message"] and "segment still holds" in c["message"]
        assert victim in [p.metadata.name for p in pods()]  # kept: its segment holds an unscored output
        # The event is written in the same pass as the condition, after it: wait for it rather than race it.
        wait_for(lambda: ("Warning", "DrainStuck") in events(), 20, what="the DrainStuck event")

        # Score and release everything (the draining worker's segment is still readable), and it goes.
        for ref in refs:
            assert len(pool_client.score([ref], ["p"])) == 1
            releaser.rewarded([ref])
        wait_for(lambda: victim not in [p.metadata.name for p in pods()], 60, what="the drained worker deleted")
        wait_for(lambda: condition("Degraded")["status"] == "False", 30, what="Degraded cleared")
        assert len(pods()) == 1 and releaser.stats.released == 2
        assert not {k for k in master.keys() if k.startswith("held-")}
