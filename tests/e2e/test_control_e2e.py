"""Only the operator can drain a worker, with real workers (one process per kwok pod, real Ray and
Mooncake): a caller without the pool's token is refused and the worker keeps serving; after the Secret is
rotated the old token stops working and the operator's drains use the new one; and when the operator's HTTP
call cannot get through (a worker holding another token stands in for a network policy mistake), the drain
still happens through the pod annotation, so a scale-in is never stranded."""
from __future__ import annotations

import base64
import json
import urllib.error
import urllib.request

from kubernetes import client

from rewardpool_devcluster.fleet import WorkerFleet
from tests.conftest import wait_for
from tests.e2e import G, P, REPO, V, pool_spec

DRAIN = "rewardpool.io/drain-requested-at"


def _post_drain(ip: str, token: str | None) -> int:
    req = urllib.request.Request(f"http://{ip}:8000/drain", method="POST", data=b"")
    if token is not None:
        req.add_header("Authorization", f"Bearer {token}")
    try:
        return urllib.request.urlopen(req, timeout=5).status
    except urllib.error.HTTPError as e:
        return e.code


def _health(ip: str) -> dict:
    return json.loads(urllib.request.urlopen(f"http://{ip}:8000/healthz", timeout=2).read())


class _Pool:
    def __init__(self, api, ns, name):
        self.co, self.core, self.ns, self.name = client.CustomObjectsApi(api), client.CoreV1Api(api), ns, name

    def pods(self):
        return [p for p in self.core.list_namespaced_pod(self.ns, label_selector=f"rewardpool.io/pool={self.name}").items
                if p.metadata.deletion_timestamp is None]

    def all_ready(self, n):
        pods = self.pods()
        if len(pods) != n or not all(p.status.pod_ip for p in pods):
            return False
        try:
            return all(_health(p.status.pod_ip)["phase"] == "ready" for p in pods) and pods
        except OSError:
            return False

    def token(self):
        return base64.b64decode(self.core.read_namespaced_secret(f"{self.name}-control", self.ns).data["token"]).decode()

    def create(self, spec):
        self.co.create_namespaced_custom_object(G, V, self.ns, P, {"apiVersion": f"{G}/{V}", "kind": "RewardPool",
                                                                   "metadata": {"name": self.name}, "spec": spec})

    def scale(self, n):
        self.co.patch_namespaced_custom_object_scale(G, V, self.ns, P, self.name, {"spec": {"replicas": n}})


def test_only_the_token_drains_and_a_rotated_token_is_picked_up(api, ns, operator, master, ray_cluster, tmp_path):
    pool = _Pool(api, ns, "guarded")
    with WorkerFleet(pool.core, ns, "guarded", tmp_path, env={"PYTHONPATH": str(REPO)}) as fleet:
        pool.create(pool_spec(master, ray_cluster, replicas=2))
        pods = wait_for(lambda: pool.all_ready(2), 120, what="two workers ready")
        ip = pods[0].status.pod_ip
        assert _post_drain(ip, None) == 401
        assert _post_drain(ip, "guessed") == 403
        assert _health(ip)["phase"] == "ready"  # refused calls change nothing

        old = pool.token()
        pool.core.delete_namespaced_secret("guarded-control", ns)
        pool.co.patch_namespaced_custom_object(G, V, ns, P, "guarded", {"metadata": {"annotations": {"rotate": "1"}}})
        new = wait_for(lambda: (t := pool.token()) != old and t, 90, what="a new token")
        wait_for(lambda: fleet.token_file.read_text() == new, 30, what="the volume refreshed")
        assert _post_drain(ip, old) == 403

        pool.scale(1)
        victim = wait_for(lambda: [p.metadata.name for p in pool.pods() if DRAIN in (p.metadata.annotations or {})],
                          60, what="a worker marked for draining")[0]
        wait_for(lambda: victim not in [p.metadata.name for p in pool.pods()], 90, what="the drained worker deleted")
        log = (tmp_path / f"{victim}.log").read_text()
        assert "drain requested over HTTP" in log  # the operator's call, with the rotated token, got through
        wait_for(lambda: fleet.exit_codes.get(victim) == 0, 60, what="the drained worker exiting cleanly")


def test_drain_reaches_the_worker_through_the_annotation_when_http_is_refused(
        api, ns, operator, master, ray_cluster, tmp_path):
    pool = _Pool(api, ns, "walled")
    # Workers hold a token the operator does not have: every HTTP drain it sends is refused (403).
    with WorkerFleet(pool.core, ns, "walled", tmp_path, env={"PYTHONPATH": str(REPO)},
                     token_override="not-the-pools-token"):
        pool.create(pool_spec(master, ray_cluster, replicas=2))
        wait_for(lambda: pool.all_ready(2), 120, what="two workers ready")
        pool.scale(1)
        victim = wait_for(lambda: [p.metadata.name for p in pool.pods() if DRAIN in (p.metadata.annotations or {})],
                          60, what="a worker marked for draining")[0]
        wait_for(lambda: victim not in [p.metadata.name for p in pool.pods()], 120,
                 what="the worker drained through its annotation and deleted")
        log = (tmp_path / f"{victim}.log").read_text()
        assert "drain requested by the pod annotation" in log
        assert "drain requested over HTTP" not in log and "refused POST /drain" in log
        assert len(pool.pods()) == 1
