"""The whole system at once: the real control plane and operator, kwok worker pods, and for each pod a real
worker process on the pod's loopback address, with a real mooncake_master, real Ray and a producer that
puts outputs in bursts. The queue rises, the pool scales up, the new workers serve, the queue drains, the
pool scales in through drains, and every output put is scored once and released, with no eviction."""
from __future__ import annotations

import threading
import time
from concurrent.futures import as_completed

from kubernetes import client

from rewardpool_devcluster.fleet import WorkerFleet
from rewardpool_worker.client import Releaser, RewardPoolClient
from tests.conftest import wait_for
from tests.e2e import G, P, REPO, V, pool_spec


def test_queue_drives_scale_up_and_drained_scale_in_and_nothing_is_lost(
        api, ns, operator, master, producer, store, ray_cluster, tmp_path):
    co, core = client.CustomObjectsApi(api), client.CoreV1Api(api)
    spec = pool_spec(master, ray_cluster,
                     scorer={"class": "tests.worker.custom_scorer:OneSecondScorer", "batchSize": 1},
                     autoscaling={"enabled": True, "minReplicas": 1, "maxReplicas": 3, "targetQueueDepth": 2,
                                  "scaleDownStabilizationSeconds": 5},
                     drainTimeoutSeconds=90)
    seen_replicas: list[int] = []
    stop = threading.Event()

    def watch():
        while not stop.wait(0.5):
            try:
                seen_replicas.append(co.get_namespaced_custom_object(G, V, ns, P, "e2e")["spec"]["replicas"])
            except Exception:
                pass

    with WorkerFleet(core, ns, "e2e", tmp_path, env={"PYTHONPATH": str(REPO)}) as fleet:
        co.create_namespaced_custom_object(G, V, ns, P, {"apiVersion": f"{G}/{V}", "kind": "RewardPool",
                                                         "metadata": {"name": "e2e"}, "spec": spec})
        threading.Thread(target=watch, daemon=True).start()
        pool_client = RewardPoolClient("e2e", ns, refresh_seconds=1)
        wait_for(lambda: pool_client.refresh(), 90, what="the first worker's actor")
        releaser = Releaser(store)
        futures = {}
        for burst in range(3):
            refs = [producer.put(f"e2e-{burst}-{i}", seed=900 + 10 * burst + i, shape=(3, 2, 8, 8))
                    for i in range(8)]
            releaser.expect(refs)
            futures.update({pool_client.submit([r], ["p"]): r for r in refs})
            time.sleep(8)
        scores = {}
        for fut in as_completed(futures, timeout=180):
            ref = futures[fut]
            scores[ref.key] = fut.result()[0]
            releaser.rewarded([ref])

        # Demand is gone: the pool drains back to its minimum.
        def settled():
            pool = co.get_namespaced_custom_object(G, V, ns, P, "e2e")
            st = pool.get("status") or {}
            pods = core.list_namespaced_pod(ns, label_selector="rewardpool.io/pool=e2e").items
            return pool["spec"]["replicas"] == 1 and st.get("drainingReplicas") == 0 and len(pods) == 1 and pool
        pool = wait_for(settled, 120, what="scale-in back to one worker")
        stop.set()

        events = [(e.reason, e.message) for e in
                  core.list_namespaced_event(ns, field_selector="involvedObject.name=e2e").items]
        deleted_workers = [n for n in fleet.started if n not in
                           {p.metadata.name for p in core.list_namespaced_pod(ns).items}]
        wait_for(lambda: all(fleet.procs[n].poll() is not None for n in deleted_workers), 60,
                 what="deleted pods' workers to exit")
        # Workers that came up must drain and exit 0; one deleted while still starting (unreachable, holding
        # nothing) may be stopped by the signal itself.
        came_up = {n for n in deleted_workers if "worker ready" in (tmp_path / f"{n}.log").read_text()}
        exit_codes = {n: fleet.procs[n].returncode for n in came_up}

    assert max(seen_replicas) >= 2, seen_replicas
    assert len(fleet.started) >= 2
    assert len([n for n, c in pool_client.served.items() if c]) >= 2, pool_client.served  # new workers served
    assert len(scores) == 24 and sum(pool_client.served.values()) == 24
    assert releaser.stats.released == 24 and releaser.stats.release_failures == 0
    assert not {k for k in master.keys() if k.startswith("e2e-")}
    assert master.metrics().get("master_evicted_key_count", 0) == 0
    reasons = [r for r, _ in events]
    assert "Scaled" in reasons and "WorkerDraining" in reasons
    assert any(r == "WorkerDeleted" and "(Drained)" in m for r, m in events), events
    assert exit_codes and all(c == 0 for c in exit_codes.values()), exit_codes
    assert pool["status"]["lastScale"]["to"] == 1
