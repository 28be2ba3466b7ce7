"""Builders of the objects tests start from, shared by several test modules (one place, so a change to what a
valid pool looks like is made once): pools and nodes as the pure operator code takes them, the observed state a
plan runs on, and pool manifests with a small API helper for the tests on the real control plane."""
from __future__ import annotations

from kubernetes import client

from rewardpool_operator.pool import builders, sizing
from rewardpool_operator.api.conditions import now as rfc3339
from rewardpool_operator.pool.observed import Network, Observed, Signals
from rewardpool_operator.pool.plan import plan
from rewardpool_operator.api.spec import HASH_LABEL, POOL_LABEL, Pool
from rewardpool_worker.contract import DRAIN_ANNOTATION
from tests.conftest import wait_for

G, V, P = "rewardpool.io", "v1alpha1", "rewardpools"


# ---- pure operator code ----------------------------------------------------------------------------------------
def pool(**spec_over) -> Pool:
    spec = {"image": "img:1", "replicas": 3, "scorer": {"name": "pickscore", "numFrames": 8},
            "store": {"master": "mc:50051", "devices": ["mlx5_0"]},
            "sizing": {"samplesPerRollout": 64, "outputBytesPerSample": "269M"},
            "network": {"ipvlan": {"master": "bond0", "mtu": 4200, "ipam": {"type": "whereabouts", "range": "192.168.9.0/24"}}}}
    spec.update(spec_over)
    return Pool.from_object({"metadata": {"name": "p", "namespace": "ns", "uid": "u-1"}, "spec": spec})


def allocatable_node(name, memory, rdma="1k"):
    """A node as placement sees it: allocatable memory and RDMA devices."""
    alloc = {"memory": memory}
    if rdma:
        alloc["rdma/rdma_shared_device_a"] = rdma
    return {"metadata": {"name": name}, "status": {"allocatable": alloc}}


NOW = 1_900_000_000.0
NET = Network(True, "AttachmentReady", "ok")


def ready_node(name="n0", ready=True, since=NOW - 3600):
    """A node as the plan sees it: its Ready condition and since when."""
    return {"metadata": {"name": name}, "status": {"conditions": [
        {"type": "Ready", "status": "True" if ready else "Unknown", "lastTransitionTime": rfc3339(since)}]}}


def pod(name, hash_="H", ready=True, phase="Running", node_name="n0", drain=None, deleted=None, created=0,
        reason=None, ip=None):
    meta = {"name": name, "labels": {HASH_LABEL: hash_}, "annotations": {},
            "creationTimestamp": rfc3339(NOW - 1000 + created)}
    if drain is not None:
        meta["annotations"][DRAIN_ANNOTATION] = rfc3339(NOW - drain)
    if deleted is not None:
        meta["deletionTimestamp"] = rfc3339(NOW - deleted)
        meta["deletionGracePeriodSeconds"] = 30
    status = {"phase": phase, "podIP": ip or f"10.0.0.{abs(hash(name)) % 250}",
              "conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}
    if reason:
        status["reason"] = reason
    return {"metadata": meta, "spec": {"nodeName": node_name}, "status": status}


def run_plan(pods, replicas=2, nodes=None, blocking=False, network=NET, health=None, silent=None, used=None,
             groups=None, old_status=None, reads=None, **spec):
    """`groups`: pod IP -> caller groups its worker reports pinned; `old_status`: the pool's last status; `reads`:
    pod IP -> its batch reads in the data-path window (datapath.Reads)."""
    p = pool(replicas=replicas, drainTimeoutSeconds=600, **spec)
    s = sizing.compute(p.spec)
    obs = Observed(pods=pods, nodes={n["metadata"]["name"]: n for n in (nodes or [ready_node()])},
                   signals=Signals(0, 0, None, len(pods), groups=groups or {}), health=health or {},
                   segment_used=used or {}, unreachable_for=silent or {}, now=NOW, reads=reads or {})
    return plan(p, s, builders.pod_template(p, s), "H", obs, blocking, network, old_status or {})


# ---- the real control plane ------------------------------------------------------------------------------------
def pool_manifest(name: str, replicas: int = 2, **spec) -> dict:
    base = {
        "replicas": replicas, "image": "rewardpool-worker:test",
        "scorer": {"name": "pickscore", "numFrames": 8, "batchSize": 4, "modelPath": "/models/pickscore"},
        "store": {"master": "127.0.0.1:50051", "protocol": "rdma", "devices": ["mlx5_0"]},
        "sizing": {"samplesPerRollout": 64, "outputBytesPerSample": "269M", "latentBytesPerSample": "10M"},
        "network": {"ipvlan": {"master": "bond0", "mtu": 4200,
                               "ipam": {"type": "whereabouts", "range": "192.168.77.0/24"}}},
        # kwok pods run no worker: to the operator they are Ready but never answer, so a drain ends at the
        # drain timeout (a real worker drains itself, through the HTTP call or its pod annotation).
        "drainTimeoutSeconds": 3,
    }
    base.update(spec)
    return {"apiVersion": f"{G}/{V}", "kind": "RewardPool", "metadata": {"name": name}, "spec": base}


class Pools:
    def __init__(self, api, ns):
        self.api, self.ns = api, ns
        self.co, self.core = client.CustomObjectsApi(api), client.CoreV1Api(api)

    def create(self, manifest):
        return self.co.create_namespaced_custom_object(G, V, self.ns, P, manifest)

    def get(self, name):
        return self.co.get_namespaced_custom_object(G, V, self.ns, P, name)

    def patch(self, name, patch):
        return self.co.patch_namespaced_custom_object(G, V, self.ns, P, name, patch)

    def pods(self, name, include_terminating=False):
        items = self.core.list_namespaced_pod(self.ns, label_selector=f"{POOL_LABEL}={name}").items
        return [p for p in items if include_terminating or p.metadata.deletion_timestamp is None]

    def condition(self, name, type_):
        for c in (self.get(name).get("status") or {}).get("conditions", []):
            if c["type"] == type_:
                return c
        return None

    def wait_ready(self, name, replicas, timeout=60):
        def ready():
            st = self.get(name).get("status") or {}
            c = self.condition(name, "Ready")
            return (c and c["status"] == "True" and st.get("readyReplicas") == replicas
                    and len(self.pods(name)) == replicas)
        return wait_for(ready, timeout, what=f"{name} Ready with {replicas} workers")

    def events(self, name):
        evs = self.core.list_namespaced_event(self.ns, field_selector=f"involvedObject.name={name}").items
        return [(e.type, e.reason, e.message) for e in evs]
