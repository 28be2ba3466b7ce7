"""One reconcile pass of a pool end to end, on fakes of the Kubernetes API and of the workers' HTTP
(tests/unit/fakes.py): what it writes (owned objects by apply, the control Secret, pods with the template
hash, status conditions, events) and, as important, what it does not write once nothing changed. The same
on the real control plane: tests/integration/test_operator.py."""
from __future__ import annotations

import asyncio

from rewardpool_operator.cluster.podcache import PodCache
from rewardpool_operator.controller.reconcile import PoolMemory, reconcile
from rewardpool_operator.api.spec import HASH_LABEL, POOL_LABEL
from rewardpool_worker.contract import DRAIN_ANNOTATION
from tests.unit.fakes import FakeKube, FakeWorkers

RDMA = {"feature.node.kubernetes.io/rdma.capable": "true"}
NODES = {"n0": {"metadata": {"name": "n0", "labels": RDMA}, "status": {
    "allocatable": {"memory": "2Ti", "rdma/rdma_shared_device_a": "4"},
    "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": "2026-01-01T00:00:00Z"}]}}}


def manifest(replicas=2, generation=1, **spec) -> dict:
    base = {"replicas": replicas, "image": "img:1", "scorer": {"name": "pickscore", "numFrames": 8},
            "store": {"master": "mc:50051", "devices": ["mlx5_0"]},
            "sizing": {"samplesPerRollout": 64, "outputBytesPerSample": "269M"},
            "network": {"ipvlan": {"master": "bond0", "ipam": {"type": "whereabouts", "range": "192.168.9.0/24"}}},
            "drainTimeoutSeconds": 600}
    base.update(spec)
    return {"apiVersion": "rewardpool.io/v1alpha1", "kind": "RewardPool",
            "metadata": {"name": "p", "namespace": "ns", "uid": "u-1", "generation": generation,
                         "resourceVersion": "1"}, "spec": base}


DRAIN_FIRST = {"maxSurge": 0, "maxUnavailable": 1}  # where a test follows one old worker out and its copy in


class World:
    """A pool, the fakes and the operator's memory of the pool, passed from one reconcile to the next."""

    def __init__(self, **spec):
        self.kube, self.workers = FakeKube(), FakeWorkers()
        self.cache = PodCache()
        self.watch = self.cache.handler(None)
        self.memory = PoolMemory()
        self.body = manifest(**spec)

    def reconcile(self, full=True) -> dict | None:
        status, written = asyncio.run(reconcile(self.kube, self.workers, self.body, NODES, self.cache, self.memory,
                                                full=full))
        if written is not None:
            self.body = {**self.body, "status": written["status"],
                         "metadata": {**self.body["metadata"], **written["metadata"]}}
        return status

    def pods_seen(self, ready=True):
        """The pod watch delivers every pod as the fake API holds it, scheduled and (by default) Ready."""
        for i, pod in enumerate(self.kube.pods()):
            pod["spec"]["nodeName"] = "n0"
            pod["status"] = {"phase": "Running", "podIP": f"10.0.0.{i + 1}",
                             "conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}
            self.kube.objects[("Pod", "ns", pod["metadata"]["name"])] = pod
            self.watch("MODIFIED", pod)

    def since(self, mark: int) -> list[tuple[str, str, str]]:
        return self.kube.writes[mark:]


def conditions(status: dict) -> dict[str, tuple[str, str]]:
    return {c["type"]: (c["status"], c["reason"]) for c in status["conditions"]}


def test_a_new_pool_gets_its_objects_pods_status_and_events_in_one_pass():
    w = World()
    status = w.reconcile()
    k = w.kube
    assert sorted(k.kinds("apply")) == ["NetworkAttachmentDefinition", "PodDisruptionBudget", "Service", "Service"]
    assert k.kinds("create") == ["Secret", "Pod", "Pod"] and k.kinds("status") == ["RewardPool"]
    pods = k.pods()
    assert len({p["metadata"]["name"] for p in pods}) == 2
    assert all(p["metadata"]["name"].startswith("p-") and len(p["metadata"]["name"]) == 7 for p in pods)
    want_hash = {p["metadata"]["labels"][HASH_LABEL] for p in pods}
    assert len(want_hash) == 1 and all(p["metadata"]["labels"][POOL_LABEL] == "p" for p in pods)
    assert all(p["metadata"]["ownerReferences"][0]["uid"] == "u-1" for p in pods)
    assert len(k.token("ns", "p-control")) >= 40

    assert conditions(status) == {"InvalidSpec": ("False", "SpecValid"), "NetworkReady": ("True", "AttachmentReady"),
                                  "Degraded": ("False", "AsExpected"), "ReplicaFailure": ("False", "NoFailures"),
                                  "Progressing": ("True", "WaitingForReady"), "Ready": ("False", "WorkersNotReady")}
    assert status["replicas"] == 2 and status["readyReplicas"] == 0 and status["selector"] == f"{POOL_LABEL}=p"
    assert k.statuses[-1] == status
    reasons = [r for _, r, _ in k.events]
    assert reasons == ["NetworkAttachmentCreated", "ServiceCreated", "ServiceCreated", "DisruptionBudgetCreated",
                       "ControlTokenCreated", "WorkerCreated"]
    assert all(t == "Normal" for t, _, _ in k.events) and "created 2 worker pods" in k.events[-1][2]


def test_nothing_is_written_until_the_watch_shows_the_created_pods():
    w = World()
    w.reconcile()
    mark = len(w.kube.writes)
    w.reconcile(full=False)  # the cache has not seen the two creates yet: no second pair of pods
    assert w.since(mark) == []


def test_a_steady_pool_costs_no_writes_even_when_everything_is_looked_at():
    w = World()
    w.reconcile()
    w.pods_seen()
    status = w.reconcile()  # Ready now: one status write, nothing else
    assert [v for v, _, _ in w.since(5)][-1] == "status"
    assert conditions(status)["Ready"] == ("True", "AllWorkersReady")
    assert conditions(status)["Progressing"] == ("False", "Stable")
    mark, n_events = len(w.kube.writes), len(w.kube.events)
    for full in (True, False, True):  # full: the owned objects are read again, and found as wanted
        w.reconcile(full=full)
    assert w.since(mark) == [] and len(w.kube.events) == n_events


def test_owned_objects_are_applied_again_only_when_they_drifted_or_went_missing():
    w = World()
    w.reconcile()
    w.pods_seen()
    w.reconcile()
    mark = len(w.kube.writes)
    token = w.kube.token("ns", "p-control")

    # Someone else's change that leaves what the operator set (the disruption controller's status): no write.
    pdb = w.kube.get("PodDisruptionBudget", "ns", "p")
    w.kube.put({**pdb, "status": {"currentHealthy": 2}})
    # A user's edit of a field the operator sets, and a deleted Service: both applied back.
    nad = w.kube.get("NetworkAttachmentDefinition", "ns", "p-roce")
    w.kube.put({**nad, "spec": {"config": "{}"}})
    del w.kube.objects[("Service", "ns", "p-workers")]
    w.reconcile()
    assert sorted(w.since(mark)) == [("apply", "NetworkAttachmentDefinition", "p-roce"),
                                     ("apply", "Service", "p-workers")]
    assert w.kube.get("NetworkAttachmentDefinition", "ns", "p-roce")["spec"] == nad["spec"]
    assert [r for _, r, _ in w.kube.events[-2:]] == ["NetworkAttachmentUpdated", "ServiceCreated"]
    assert w.kube.token("ns", "p-control") == token  # the Secret is never rewritten

    # A deleted Secret is created again, with a new token (how a user rotates it).
    del w.kube.objects[("Secret", "ns", "p-control")]
    mark = len(w.kube.writes)
    w.reconcile()
    assert w.since(mark) == [("create", "Secret", "p-control")] and w.kube.token("ns", "p-control") != token


def test_a_scale_in_drains_through_the_worker_client_then_deletes_the_drained_worker():
    w = World(replicas=2)
    w.reconcile()
    w.pods_seen()
    w.reconcile()
    w.workers.queues = {"10.0.0.1": 0, "10.0.0.2": 3}  # the idle worker is the one to go
    w.body["spec"]["replicas"] = 1
    w.body["metadata"]["generation"] = 2
    mark = len(w.kube.writes)
    status = w.reconcile()
    annotated = [n for v, _, n in w.since(mark) if v == "annotate"]
    idle = next(p["metadata"]["name"] for p in w.kube.pods() if p["status"]["podIP"] == "10.0.0.1")
    assert annotated == [idle]
    assert w.workers.drains == [("10.0.0.1", w.kube.token("ns", "p-control"))]
    assert ("Normal", "WorkerDraining") in [(t, r) for t, r, _ in w.kube.events]
    assert status["drainingReplicas"] == 1

    pod = w.kube.get("Pod", "ns", idle)
    w.watch("MODIFIED", pod)  # the watch shows the drain annotation
    assert DRAIN_ANNOTATION in pod["metadata"]["annotations"]
    w.workers.healths["10.0.0.1"] = {"phase": "drained", "in_flight": 0}
    mark = len(w.kube.writes)
    status = w.reconcile()
    assert [(v, n) for v, _, n in w.since(mark) if v != "status"] == [("delete", idle)]
    assert [r for t, r, _ in w.kube.events][-1] == "WorkerDeleted"


def test_a_blocking_finding_creates_no_worker_and_says_why():
    w = World(scorer={"name": "pikscore"})
    status = w.reconcile()
    assert "Pod" not in w.kube.kinds() and w.kube.kinds("status") == ["RewardPool"]
    assert conditions(status)["InvalidSpec"] == ("True", "UnknownScorer")
    assert conditions(status)["Ready"] == ("False", "Blocked")
    assert ("Warning", "UnknownScorer") in [(t, r) for t, r, _ in w.kube.events]
    mark, n_events = len(w.kube.writes), len(w.kube.events)
    w.reconcile()
    assert w.since(mark) == [] and len(w.kube.events) == n_events  # told once, not on every pass


def test_a_new_roll_phase_is_recorded_before_any_pod_is_touched_and_a_refused_record_touches_none():
    from kubernetes_asyncio.client.exceptions import ApiException

    w = World(replicas=2)
    w.reconcile()
    w.pods_seen()
    w.reconcile()
    w.body["spec"]["image"] = "img:2"  # a roll
    w.body["metadata"]["generation"] = 2
    real = w.kube.patch_pool_status

    async def refused(*a, **kw):
        raise ApiException(status=409, reason="Conflict")
    w.kube.patch_pool_status = refused
    mark = len(w.kube.writes)
    w.reconcile()
    assert w.since(mark) == []  # not recorded, so nothing acted on it
    w.kube.patch_pool_status = real
    mark = len(w.kube.writes)
    status = w.reconcile()
    writes = [(v, k) for v, k, _ in w.since(mark)]
    assert writes[0] == ("status", "RewardPool") and ("create", "Pod") in writes  # recorded, then the surge
    assert w.kube.statuses[-2]["roll"]["phase"] == "Replacing"  # the first write: the phase alone
    assert set(w.kube.statuses[-2]) == {"roll", "shadow"}
    assert status["roll"]["phase"] == "Replacing"
    mark = len(w.kube.writes)
    w.reconcile()
    assert ("status", "RewardPool") not in [(v, k) for v, k, _ in w.since(mark)]  # a kept phase: no write first


def test_the_operator_remembers_pinned_versions_across_passes_whose_status_writes_fail():
    from kubernetes_asyncio.client.exceptions import ApiException

    w = World(replicas=1, rollout={"maxVersionSkewSeconds": 300})
    w.reconcile()
    w.pods_seen()
    w.reconcile()
    old_version = w.kube.pods()[0]["metadata"]["labels"]["rewardpool.io/scorer-version"]
    w.workers.queues, w.workers.groups = {"10.0.0.1": 0}, {"10.0.0.1": 2}
    w.body["spec"]["image"] = "img:2"
    w.body["metadata"]["generation"] = 2
    w.reconcile()
    assert set(w.memory.pins) == {old_version}  # kept by the operator, whatever happens to the status write
    assert w.body["status"]["roll"]["pins"] == {old_version: w.body["status"]["roll"]["phaseSince"]}
    assert ("annotate", "Pod") not in [(v, k) for v, k, _ in w.kube.writes]  # held: the old version's last worker
    # the pins' write is lost (say a 409 the next pass did not repair) and the worker misses its readiness probes,
    # so its groups are not read: the operator's memory still holds it
    del w.body["status"]["roll"]["pins"]
    w.pods_seen(ready=False)
    status = w.reconcile()
    assert ("annotate", "Pod") not in [(v, k) for v, k, _ in w.kube.writes]
    assert status["roll"]["pins"] == {old_version: w.body["status"]["roll"]["phaseSince"]}


def test_a_worker_whose_reads_fail_while_its_peers_succeed_is_drained_replaced_and_said():
    """The data-path verdict across passes: the operator remembers each worker's read counters per scrape, and
    the one whose reads fail (a bad MTU, a duplicate net1 address) while its peers' succeed is drained through the
    worker client, a replacement is created and the pool is Degraded DataPathBroken."""
    w = World(replicas=3)
    w.reconcile()
    w.pods_seen()
    w.workers.reads = {"10.0.0.1": (50, 0), "10.0.0.2": (40, 0), "10.0.0.3": (45, 0)}
    w.reconcile()  # the first scrape: nothing to compare yet
    assert w.workers.drains == []
    w.workers.reads = {"10.0.0.1": (50, 6), "10.0.0.2": (52, 0), "10.0.0.3": (55, 1)}
    mark = len(w.kube.writes)
    status = w.reconcile()
    bad = next(p["metadata"]["name"] for p in w.kube.pods() if (p.get("status") or {}).get("podIP") == "10.0.0.1")
    assert [n for v, _, n in w.since(mark) if v == "annotate"] == [bad]
    assert [ip for ip, _ in w.workers.drains] == ["10.0.0.1"]
    assert [v for v, _, _ in w.since(mark)].count("create") == 1  # its replacement
    assert conditions(status)["Degraded"] == ("True", "DataPathBroken")
    assert any(r == "DataPathBroken" and bad in m for _, r, m in w.kube.events)


def _secret(name, **data):
    import base64

    return {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name, "namespace": "ns"},
            "data": {k: base64.b64encode(v.encode()).decode() for k, v in data.items()}}


def _digest(token):
    import hashlib

    return hashlib.sha256(token.encode()).hexdigest()


def test_a_tenant_whose_token_secret_is_missing_is_said_and_the_others_score():
    """spec.access.tenants: a tenant whose Secret or key is missing gets no token (no call is its), and the pool
    says which tenant lacks what; the workers still come, and hold the others; once the Secret exists, the
    workers are sent the new set, and nothing is replaced."""
    w = World(access={"tenants": [{"name": "grpo", "tokenSecret": {"name": "grpo-token"}},
                                  {"name": "evals", "tokenSecret": {"name": "shared", "key": "evals"}, "weight": 3}]})
    w.kube.put(_secret("shared", other="x"))
    status = w.reconcile()
    assert len(w.kube.pods()) == 2  # not blocking
    (c,) = [c for c in status["conditions"] if c["reason"] == "TenantTokenMissing"]
    assert "grpo: Secret grpo-token not found" in c["message"] and "evals: Secret shared has no (non-empty) key " \
        "evals" in c["message"]
    assert any(r == "TenantTokenMissing" for _, r, _ in w.kube.events)
    w.pods_seen()
    w.reconcile()
    sent = w.workers.tenants
    assert set(sent) == {"10.0.0.1", "10.0.0.2"}
    assert [(t.name, t.weight, t.sha256) for t in sent["10.0.0.1"].tenants] == [("grpo", 1, None), ("evals", 3, None)]
    pods = {p["metadata"]["name"] for p in w.kube.pods()}
    w.kube.put(_secret("grpo-token", token="t1\n"))
    w.kube.put(_secret("shared", evals="t2"))
    status = w.reconcile()  # the next full pass (or OWNED_RESYNC_SECONDS later) looks again
    assert not [c for c in status["conditions"] if c["reason"] == "TenantTokenMissing"]
    assert [(t.name, t.sha256) for t in w.workers.tenants["10.0.0.2"].tenants] == [("grpo", _digest("t1")),
                                                                                     ("evals", _digest("t2"))]
    assert {p["metadata"]["name"] for p in w.kube.pods()} == pods  # nothing replaced
    assert [m for _, r, m in w.kube.events if r == "TenantsSent"][-1].startswith("tenants grpo, evals (version ")


def test_tenants_added_removed_and_rotated_reach_the_workers_and_roll_nothing():
    """The template carries only whether the pool has tenants: a tenant added, one rotated, one removed changes
    the set the workers are sent (each worker once per version), never the template; a worker that does not
    answer is sent to again on the next pass, and one that restarted (its container's restartCount) too."""
    w = World(access={"tenants": [{"name": "a", "tokenSecret": {"name": "a"}}]})
    w.kube.put(_secret("a", token="one"))
    w.reconcile()
    w.pods_seen()
    w.workers.silent.add("10.0.0.2")  # still starting
    w.reconcile()
    assert set(w.workers.tenants) == {"10.0.0.1"}
    w.workers.silent.clear()
    w.reconcile(full=False)
    assert set(w.workers.tenants) == {"10.0.0.1", "10.0.0.2"}
    pods = {p["metadata"]["name"]: p["metadata"]["labels"][HASH_LABEL] for p in w.kube.pods()}
    first = w.workers.tenants["10.0.0.1"].version

    w.body["spec"]["access"]["tenants"].append({"name": "b", "tokenSecret": {"name": "b"}, "weight": 2})  # added
    w.body["metadata"]["generation"] = 2
    w.kube.put(_secret("b", token="two"))
    w.kube.put(_secret("a", token="one-rotated"))  # and a rotated
    w.workers.tenants.clear()
    w.reconcile()
    held = w.workers.tenants["10.0.0.1"]
    assert [(t.name, t.weight, t.sha256) for t in held.tenants] == [("a", 1, _digest("one-rotated")),
                                                                    ("b", 2, _digest("two"))]
    assert held.version != first and set(w.workers.tenants) == {"10.0.0.1", "10.0.0.2"}
    w.workers.tenants.clear()
    w.reconcile()
    assert w.workers.tenants == {}  # each worker once per version
    w.kube.put(_secret("b", token="two-rotated"))  # rotated alone: no spec change, no look at the owned objects
    w.reconcile(full=False)
    assert {ip: [t.sha256 for t in x.tenants] for ip, x in w.workers.tenants.items()} == {
        ip: [_digest("one-rotated"), _digest("two-rotated")] for ip in ("10.0.0.1", "10.0.0.2")}
    w.workers.tenants.clear()

    pod = w.kube.pods()[0]
    pod["status"]["containerStatuses"] = [{"name": "worker", "restartCount": 1, "state": {"running": {}}}]
    w.watch("MODIFIED", pod)
    w.reconcile()
    assert set(w.workers.tenants) == {pod["status"]["podIP"]}  # a restarted worker knows no one: sent again

    w.body["spec"]["access"]["tenants"] = w.body["spec"]["access"]["tenants"][1:]  # a removed
    w.body["metadata"]["generation"] = 3
    w.reconcile()
    assert [t.name for t in w.workers.tenants["10.0.0.2"].tenants] == ["b"]
    assert {p["metadata"]["name"]: p["metadata"]["labels"][HASH_LABEL] for p in w.kube.pods()} == pods  # no roll
    assert [(v, k) for v, k, _ in w.kube.writes if k == "Pod"] == [("create", "Pod")] * 2  # the first two only


def test_a_model_claim_that_does_not_exist_is_said_and_the_pods_still_come():
    """scorer.model.pvc naming a claim that is not there: the pods are created (they wait Pending and start once
    the claim exists), and the pool says ModelUnavailable with the claim, an event too; once it exists, not."""
    w = World(scorer={"name": "pickscore", "model": {"pvc": {"claimName": "weights", "subPath": "clip"}}})
    status = w.reconcile()
    assert len(w.kube.pods()) == 2
    (c,) = [c for c in status["conditions"] if c["reason"] == "ModelUnavailable"]
    assert c["type"] == "Degraded" and "PersistentVolumeClaim weights not found in namespace ns" in c["message"]
    assert any(r == "ModelUnavailable" for _, r, _ in w.kube.events)
    w.kube.put({"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "weights", "namespace": "ns"},
                "spec": {}})
    w.pods_seen(ready=False)  # the pods the first pass created, waiting for their claim
    status = w.reconcile()
    assert not [c for c in status["conditions"] if c["reason"] == "ModelUnavailable"]


def test_a_cache_model_binds_a_local_volume_and_says_why_it_waits():
    """scorer.model.cache: the operator makes the cache's local volume and the claim bound to it in the pool's
    namespace; until some node holds a Ready copy the pool says ModelUnavailable with each node's phase and reason
    (pods still created: they wait Pending for a node with the copy); a Released volume (its claim was deleted)
    is made again; a cache that does not exist is said too."""
    w = World(scorer={"name": "pickscore", "model": {"cache": {"name": "pick"}}}, rollout=DRAIN_FIRST)
    status = w.reconcile()
    (c,) = [c for c in status["conditions"] if c["reason"] == "ModelUnavailable"]
    assert "RewardModelCache pick not found" in c["message"]
    assert w.kube.get("PersistentVolume", "", "rewardpool-cache-pick-ns") is None  # nothing to bind yet
    w.kube.put({"apiVersion": "rewardpool.io/v1alpha1", "kind": "RewardModelCache", "metadata": {"name": "pick"},
                "spec": {"source": {"pvc": {"claimName": "w"}}},
                "status": {"nodes": [{"node": "n1", "phase": "Failed", "reason": "OutOfDisk",
                                      "message": "needs 4 GB"}]}})
    w.pods_seen(ready=False)
    status = w.reconcile()
    (c,) = [c for c in status["conditions"] if c["reason"] == "ModelUnavailable"]
    assert "Ready on no node" in c["message"] and "n1: Failed OutOfDisk: needs 4 GB" in c["message"]
    pv = w.kube.get("PersistentVolume", "", "rewardpool-cache-pick-ns")
    pvc = w.kube.get("PersistentVolumeClaim", "ns", "rewardpool-cache-pick")
    assert pv["spec"]["claimRef"]["name"] == pvc["metadata"]["name"] and pvc["spec"]["volumeName"] == \
        pv["metadata"]["name"]
    assert len(w.kube.pods()) == 2
    cache = w.kube.get("RewardModelCache", "", "pick")
    cache["status"]["nodes"][0] = {"node": "n1", "phase": "Ready", "reason": "Verified"}
    w.kube.put(cache)
    pv["status"] = {"phase": "Released"}
    w.kube.put(pv)
    w.pods_seen(ready=False)
    status = w.reconcile()
    assert not [c for c in status["conditions"] if c["reason"] == "ModelUnavailable"]
    assert ("delete", "PersistentVolume", "rewardpool-cache-pick-ns") in w.kube.writes
    assert "status" not in w.kube.get("PersistentVolume", "", "rewardpool-cache-pick-ns")  # made anew


def test_a_cache_whose_source_changes_rolls_the_pool_and_one_being_deleted_does_not():
    """The copy the pods mount and are placed by comes from the cache's spec as the reconcile reads it: a cache
    marked for deletion (held while the pool names it) changes nothing about the pods; another source is another
    template (the roll drains an old worker and creates one of the new copy; the others keep theirs)."""
    from rewardpool_operator.modelcache.layout import copy_label, source_identity

    def mounted(pod):
        (m,) = [m for m in pod["spec"]["containers"][0]["volumeMounts"] if m["name"] == "rewardpool-model-0"]
        return m["subPath"].split("/")[0]
    w = World(scorer={"name": "pickscore", "model": {"cache": {"name": "pick", "subPath": "clip"}}},
              rollout=DRAIN_FIRST)
    spec = {"source": {"pvc": {"claimName": "w", "subPath": "v1"}}}
    w.kube.put({"apiVersion": "rewardpool.io/v1alpha1", "kind": "RewardModelCache", "metadata": {"name": "pick"},
                "spec": spec, "status": {"nodes": [{"node": "n0", "phase": "Ready", "reason": "Verified"}]}})
    w.reconcile()
    old = source_identity(spec)
    assert [mounted(p) for p in w.kube.pods()] == [old, old]
    req = w.kube.pods()[0]["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert req["nodeSelectorTerms"][0]["matchExpressions"][0]["key"] == copy_label("pick", old)
    w.pods_seen()
    w.reconcile()
    old_pods = {p["metadata"]["name"] for p in w.kube.pods()}

    cache = w.kube.get("RewardModelCache", "", "pick")  # marked for deletion: the finalizer holds it
    cache["metadata"]["deletionTimestamp"] = "2026-12-05T00:00:00Z"
    w.kube.put(cache)
    mark = len(w.kube.writes)
    w.reconcile()
    assert not [(v, n) for v, _, n in w.since(mark) if v in ("annotate", "create", "delete")]
    del cache["metadata"]["deletionTimestamp"]  # (a test's liberty: back in use)

    cache["spec"] = {"source": {"pvc": {"claimName": "w", "subPath": "v2"}}}
    w.kube.put(cache)
    mark = len(w.kube.writes)
    w.reconcile()
    (drained,) = [n for v, _, n in w.since(mark) if v == "annotate"]  # the roll's budget: one old worker at a time
    assert any(r == "WorkerDraining" and drained in m and "spec changed" in m for _, r, m in w.kube.events)
    pod = w.kube.get("Pod", "ns", drained)
    w.watch("MODIFIED", pod)
    w.workers.healths[pod["status"]["podIP"]] = {"phase": "drained", "in_flight": 0}
    w.reconcile()  # the drained worker goes
    w.reconcile()  # and one of the new copy takes its place
    new = source_identity(cache["spec"])
    created = [p for p in w.kube.pods() if p["metadata"]["name"] not in old_pods]
    assert created and {mounted(p) for p in created} == {new}
    assert {mounted(p) for p in w.kube.pods() if p["metadata"]["name"] in old_pods} == {old}
    version = lambda p: p["metadata"]["labels"]["rewardpool.io/scorer-version"]  # noqa: E731
    assert {version(p) for p in created} != {version(p) for p in w.kube.pods() if p["metadata"]["name"] in old_pods}


def test_a_promotion_goes_out_before_the_drains_it_allows_and_a_refused_one_drains_nothing():
    """The plan lets an old worker go in the pass that promotes a shadow (it counts the shadow as serving): the
    shadow takes traffic first, so the pool is never without a serving worker between the two writes; a refused
    promotion drains nobody this pass."""
    from kubernetes_asyncio.client.exceptions import ApiException

    from rewardpool_operator.api.spec import Pool
    from rewardpool_operator.controller.reconcile import _apply
    from rewardpool_operator.pool.observed import Observed, Signals
    from rewardpool_operator.pool.plan import Plan
    from tests.factories import pod

    for refuse in (False, True):
        kube, workers = FakeKube(), FakeWorkers()
        pods = [pod("old", hash_="old", ip="10.0.0.1"), pod("s", ip="10.0.0.2")]
        for x in pods:
            kube.objects[("Pod", "ns", x["metadata"]["name"])] = x
        if refuse:
            async def refused(namespace, name, annotations):
                raise ApiException(status=422, reason="Invalid")
            kube.annotate_pod = refused
        p = Plan(template={}, want_hash="H", promote=["s"], drain=[("old", "spec changed")])
        observed = Observed(pods=pods, nodes={}, signals=Signals(0, 0, None, 2))
        body = manifest()
        failures, _ = asyncio.run(_apply(kube, workers, body, Pool.from_object(body), p, observed, PodCache(), "tok"))
        if refuse:
            assert workers.drains == [] and [r for r, _ in failures] == ["FailedPromote"]
        else:
            assert [n for v, _, n in kube.writes if v == "annotate"] == ["s", "old"]  # promoted, then drained
            assert workers.promotes == [("10.0.0.2", "tok")] and workers.drains == [("10.0.0.1", "tok")]
