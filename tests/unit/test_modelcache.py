"""The model cache's pure parts: the agent's decision per cache and node (a table of cases, and invariants under
generated sequences of what the node and its copy pod show), the objects it and the operator write, the pools'
placement and what a pool waiting on a cache is told."""
from __future__ import annotations

import re
from datetime import datetime, timedelta, timezone

import pytest
from hypothesis import given, settings, strategies as st

from rewardpool_operator.modelcache import layout as mc
from rewardpool_operator.modelcache.agent import pod_state

ID = "abc123"
READY = {"identity": ID, "digest": "sha256:" + "0" * 64, "bytes": 100, "files": 2, "seconds": 1.5}


def pod(phase="Running", identity=ID, reason="", message="", age=0.0):
    return mc.CopyPod(identity=identity, phase=phase, reason=reason, message=message, finished_age=age)


# (case, disk, pod, source_missing, digest) -> (phase, reason, create_pod, delete_pod)
CASES = [
    ("fresh node: start a copy", mc.DiskState(), None, None, None, ("Pending", "CopyStarting", True, False)),
    ("verified copy of this source", mc.DiskState(ready=READY), None, None, None, ("Ready", "Verified", False, False)),
    ("verified, the finished pod is cleaned up", mc.DiskState(ready=READY), pod("Succeeded"), None, None,
     ("Ready", "Verified", False, True)),
    ("a copy of another source is stale", mc.DiskState(ready={**READY, "identity": "old"}), None, None, None,
     ("Pending", "CopyStarting", True, False)),
    ("a file of the copy went missing", mc.DiskState(ready=READY, ready_intact=False), None, None, None,
     ("Pending", "CopyStarting", True, False)),
    ("the expected digest differs", mc.DiskState(ready=READY), None, None, "sha256:" + "1" * 64,
     ("Pending", "CopyStarting", True, False)),
    ("the expected digest matches", mc.DiskState(ready=READY), None, None, READY["digest"],
     ("Ready", "Verified", False, False)),
    ("copying: bytes reported", mc.DiskState(partial_bytes=40, total_bytes=100), pod("Running"), None, None,
     ("Downloading", "Copying", False, False)),
    ("pod of an older source: deleted first", mc.DiskState(), pod("Running", identity="old"), None, None,
     ("Pending", "CopyStarting", False, True)),
    ("claim missing", mc.DiskState(), None, "PersistentVolumeClaim w not found", None,
     ("Failed", "SourceNotFound", False, False)),
    ("claim missing, a waiting pod is removed", mc.DiskState(), pod("Pending"), "gone", None,
     ("Failed", "SourceNotFound", False, True)),
    ("out of disk, just now", mc.DiskState(), pod("Failed", reason="OutOfDisk", message="needs 16 GB", age=5),
     None, None, ("Failed", "OutOfDisk", False, False)),
    ("out of disk, retried after a while", mc.DiskState(),
     pod("Failed", reason="OutOfDisk", age=mc.RETRY_SECONDS + 1), None, None, ("Failed", "OutOfDisk", False, True)),
    ("image cannot be pulled", mc.DiskState(), pod("Pending", reason="ErrImagePull", message="not found"), None, None,
     ("Failed", "ErrImagePull", False, False)),
    ("pod scheduled, container creating", mc.DiskState(), pod("Pending", reason="ContainerCreating"), None, None,
     ("Pending", "ContainerCreating", False, False)),
    ("succeeded but nothing verified", mc.DiskState(), pod("Succeeded", age=1), None, None,
     ("Failed", "NotVerified", False, False)),
]


@pytest.mark.parametrize("case,disk,copy,missing,digest,want", CASES, ids=[c[0] for c in CASES])
def test_plan_node_table(case, disk, copy, missing, digest, want):
    plan = mc.plan_node("n1", ID, digest, disk, copy, missing)
    assert (plan.entry["phase"], plan.entry["reason"], plan.create_pod, plan.delete_pod) == want
    assert plan.entry["node"] == "n1" and plan.entry["phase"] in mc.PHASES


def test_downloading_reports_bytes_of_total():
    plan = mc.plan_node("n1", ID, None, mc.DiskState(partial_bytes=40, total_bytes=100), pod("Running"))
    assert plan.entry["bytes"] == 40 and plan.entry["totalBytes"] == 100 and "40 of 100" in plan.entry["message"]


disks = st.builds(mc.DiskState, ready=st.sampled_from([None, READY, {**READY, "identity": "old"}]),
                  ready_intact=st.booleans(), partial_bytes=st.integers(0, 10), total_bytes=st.sampled_from([None, 10]))
pods = st.one_of(st.none(), st.builds(pod, phase=st.sampled_from(["Pending", "Running", "Succeeded", "Failed"]),
                                      identity=st.sampled_from([ID, "old"]),
                                      reason=st.sampled_from(["", "OutOfDisk", "ErrImagePull", "ContainerCreating"]),
                                      age=st.floats(0, 2 * mc.RETRY_SECONDS)))


@settings(max_examples=400, deadline=None)
@given(disk=disks, copy=pods, missing=st.sampled_from([None, "gone"]))
def test_plan_invariants(disk, copy, missing):
    """Whatever the node and its pod show: Ready only for an intact copy of this very source; never a second
    copy pod beside one that exists; never a copy started while the source is missing; a pod of another source
    is never left running."""
    plan = mc.plan_node("n", ID, None, disk, copy, missing)
    verified = disk.ready is not None and disk.ready.get("identity") == ID and disk.ready_intact
    assert (plan.entry["phase"] == "Ready") == verified
    assert not (plan.create_pod and copy is not None)
    assert not (plan.create_pod and missing)
    if copy is not None and copy.identity != ID and not verified:
        assert plan.delete_pod
    if plan.entry["phase"] == "Failed":
        assert plan.entry["reason"] and plan.entry["message"]


def test_pod_state_reads_the_termination_message():
    now = datetime(2026, 12, 3, tzinfo=timezone.utc)
    ended = (now - timedelta(seconds=30)).isoformat().replace("+00:00", "Z")
    body = {"metadata": {"annotations": {"rewardpool.io/cache-identity": ID}},
            "status": {"phase": "Failed", "containerStatuses": [{"state": {"terminated": {
                "reason": "Error", "message": "OutOfDisk: the node's disk has 5 bytes free", "finishedAt": ended}}}]}}
    got = pod_state(body, now)
    assert (got.identity, got.phase, got.reason) == (ID, "Failed", "OutOfDisk")
    assert got.message == "the node's disk has 5 bytes free" and got.finished_age == pytest.approx(30)
    body["status"]["containerStatuses"][0]["state"]["terminated"]["message"] = "Traceback: x y"
    assert pod_state(body, now).reason == "Error"  # a traceback's first word is not a reason
    waiting = {"metadata": {}, "status": {"phase": "Pending", "containerStatuses": [
        {"state": {"waiting": {"reason": "ErrImagePull", "message": "no such image"}}}]}}
    assert (pod_state(waiting, now).reason, pod_state(waiting, now).message) == ("ErrImagePull", "no such image")


def cache(source, **spec):
    return {"metadata": {"name": "pick"}, "spec": {"source": source, **spec}}


def test_source_identity_follows_source_and_digest():
    a = mc.source_identity(cache({"pvc": {"claimName": "w", "subPath": "/pick/"}})["spec"])
    assert a == mc.source_identity(cache({"pvc": {"claimName": "w", "subPath": "pick"}})["spec"])
    assert a != mc.source_identity(cache({"pvc": {"claimName": "w", "subPath": "hps"}})["spec"])
    assert a != mc.source_identity(cache({"pvc": {"claimName": "v", "subPath": "pick"}})["spec"])
    assert a != mc.source_identity(cache({"pvc": {"claimName": "w", "subPath": "pick"}}, digest="sha256:1")["spec"])
    assert a != mc.source_identity(cache({"image": {"reference": "r/m:1"}})["spec"])


def test_copy_pod_is_pinned_read_only_and_unprivileged():
    p = mc.copy_pod(cache({"pvc": {"claimName": "w", "subPath": "pick"}}, digest="sha256:" + "a" * 64), "node-a",
                    "ops", "op:1", mc.ROOT, ID)
    spec = p["spec"]
    assert spec["nodeName"] == "node-a" and spec["restartPolicy"] == "Never"
    assert spec["automountServiceAccountToken"] is False
    c = spec["containers"][0]
    assert c["securityContext"] == {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True,
                                    "capabilities": {"drop": ["ALL"]}}
    mounts = {m["name"]: m for m in c["volumeMounts"]}
    assert mounts["source"]["readOnly"] is True and mounts["source"]["subPath"] == "pick"
    vols = {v["name"]: v for v in spec["volumes"]}
    assert vols["source"]["persistentVolumeClaim"] == {"claimName": "w", "readOnly": True}
    assert vols["cache"]["hostPath"]["path"] == mc.ROOT
    assert "--digest" in c["args"] and ID in c["args"]
    assert p["metadata"]["annotations"]["rewardpool.io/cache-identity"] == ID
    assert p["metadata"]["labels"][mc.CACHE_LABEL] == "pick"
    img = mc.copy_pod(cache({"image": {"reference": "r/m:1", "pullPolicy": "Never"}}), "node-a", "ops", "op:1",
                      mc.ROOT, ID)
    assert {v["name"]: v for v in img["spec"]["volumes"]}["source"]["image"] == {"reference": "r/m:1",
                                                                                 "pullPolicy": "Never"}
    assert mc.copy_pod_name("pick", "node-a") != mc.copy_pod_name("pick", "node-b")
    long = "x" * 40
    assert mc.copy_pod_name(long + "a", "node-a") != mc.copy_pod_name(long + "b", "node-a")


def test_local_volume_and_claim_bind_each_other_on_the_cache_nodes():
    pv, pvc = mc.local_volume("pick", "team-a"), mc.local_claim("pick", "team-a")
    assert pv["spec"]["claimRef"]["name"] == pvc["metadata"]["name"] == mc.claim_name("pick")
    assert pv["spec"]["claimRef"]["namespace"] == pvc["metadata"]["namespace"] == "team-a"
    assert pvc["spec"]["volumeName"] == pv["metadata"]["name"]
    assert pv["spec"]["local"]["path"] == f"{mc.ROOT}/pick/data"
    assert pv["spec"]["accessModes"] == pvc["spec"]["accessModes"] == ["ReadOnlyMany"]
    assert pv["spec"]["storageClassName"] == pvc["spec"]["storageClassName"]
    assert pv["spec"]["persistentVolumeReclaimPolicy"] == "Retain"  # never deletes a node's copy
    term = pv["spec"]["nodeAffinity"]["required"]["nodeSelectorTerms"][0]["matchExpressions"]
    assert term == [{"key": "cache.rewardpool.io/pick", "operator": "Exists"}]
    assert mc.local_volume("pick", "team-b")["metadata"]["name"] != pv["metadata"]["name"]


def test_pool_affinity_required_and_preferred():
    aff = mc.pool_affinity({"pick": "Required", "hps": "Preferred"})["nodeAffinity"]
    req = aff["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert req == [{"matchExpressions": [{"key": "cache.rewardpool.io/pick", "operator": "In", "values": ["Ready"]}]}]
    pref = aff["preferredDuringSchedulingIgnoredDuringExecution"]
    assert pref == [{"weight": 100, "preference": {"matchExpressions": [
        {"key": "cache.rewardpool.io/hps", "operator": "In", "values": ["Ready"]}]}}]
    assert mc.pool_affinity({}) == {}


PICK = {"key": "cache.rewardpool.io/pick", "operator": "In", "values": ["Ready"]}
GPU = {"key": "gpu", "operator": "In", "values": ["h200"]}
ZONE = {"key": "zone", "operator": "In", "values": ["a"]}


@pytest.mark.parametrize("template, terms", [
    (None, [[PICK]]),                                                                        # the cache alone
    ({"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [GPU]}]}}}, [[GPU, PICK]]),                                     # ANDed into the term
    ({"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [GPU]}, {"matchExpressions": [ZONE]}]}}}, [[GPU, PICK], [ZONE, PICK]]),  # into each
    ({"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [GPU, PICK]}]}}}, [[GPU, PICK]]),                               # not twice
    ({"podAntiAffinity": {"x": 1}}, [[PICK]]),                                               # other affinities kept
], ids=["none", "one-term", "two-terms", "already-there", "anti-affinity"])
def test_a_required_cache_joins_every_term_of_the_templates_node_affinity(template, terms):
    aff = mc.pool_affinity({"pick": "Required"}, template)
    got = aff["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert [t["matchExpressions"] for t in got] == terms
    if template and "podAntiAffinity" in template:
        assert aff["podAntiAffinity"] == {"x": 1}


exprs = st.lists(st.fixed_dictionaries({"key": st.sampled_from(["gpu", "zone", "rack"]),
                                        "operator": st.sampled_from(["In", "NotIn"]),
                                        "values": st.lists(st.sampled_from(["a", "b"]), min_size=1, max_size=2)}),
                 max_size=3)


@settings(max_examples=200, deadline=None)
@given(terms=st.lists(st.fixed_dictionaries({"matchExpressions": exprs}), max_size=3),
       prefs=st.lists(st.fixed_dictionaries({"weight": st.integers(1, 100),
                                             "preference": st.fixed_dictionaries({"matchExpressions": exprs})}),
                      max_size=2),
       modes=st.dictionaries(st.sampled_from(["pick", "hps"]), st.sampled_from(["Required", "Preferred"]),
                             min_size=1))
def test_the_templates_node_affinity_and_the_caches_both_hold(terms, prefs, modes):
    """Generated template affinities: every node a pod may go to matches one of the template's terms AND holds
    each required copy; the template's preferences stay, each preferred cache is one more; the template is not
    changed in place."""
    node = {}
    if terms:
        node["requiredDuringSchedulingIgnoredDuringExecution"] = {"nodeSelectorTerms": terms}
    if prefs:
        node["preferredDuringSchedulingIgnoredDuringExecution"] = prefs
    template = {"nodeAffinity": node} if node else None
    before = repr(template)
    aff = mc.pool_affinity(modes, template)["nodeAffinity"]
    assert repr(template) == before
    required = [mc.placement_term(n) for n, m in modes.items() if m == "Required"]
    got = (aff.get("requiredDuringSchedulingIgnoredDuringExecution") or {}).get("nodeSelectorTerms") or []
    assert len(got) == (max(len(terms), 1) if required else len(terms))
    for i, term in enumerate(got):
        own = terms[i]["matchExpressions"] if i < len(terms) else []
        assert all(e in term["matchExpressions"] for e in own + required)
        assert all(e in own + required for e in term["matchExpressions"])
    pref = aff.get("preferredDuringSchedulingIgnoredDuringExecution") or []
    assert pref[:len(prefs)] == prefs
    assert [p["preference"]["matchExpressions"][0] for p in pref[len(prefs):]] == \
        [mc.placement_term(n) for n, m in sorted(modes.items()) if m != "Required"]


def test_what_a_waiting_pool_is_told():
    assert "not found" in mc.cache_problem("pick", None)
    assert "deleted" in mc.cache_problem("pick", {"metadata": {"deletionTimestamp": "x"}})
    assert "no node has reported" in mc.cache_problem("pick", {"metadata": {}, "status": {}})
    failing = {"metadata": {}, "status": {"nodes": [
        {"node": "a", "phase": "Failed", "reason": "OutOfDisk", "message": "needs 16 GB"}]}}
    said = mc.cache_problem("pick", failing)
    assert "Ready on no node" in said and "OutOfDisk" in said and "needs 16 GB" in said and "a:" in said
    ok = {"metadata": {}, "status": {"nodes": [failing["status"]["nodes"][0], {"node": "b", "phase": "Ready"}]}}
    assert mc.cache_problem("pick", ok) is None


def test_caches_named_and_summary():
    spec = {"scorer": {"model": {"cache": {"name": "pick"}}},
            "scorers": [{"name": "hps", "model": {"cache": {"name": "hps"}}}, {"name": "ocr", "model": {"pvc": {}}}]}
    assert mc.caches_named(spec) == {"pick", "hps"}
    assert mc.caches_named({"scorer": {"name": "x"}}) == set()
    d = "sha256:" + "0" * 64
    s = mc.cache_summary([{"node": "a", "phase": "Ready", "digest": d}, {"node": "b", "phase": "Downloading"}],
                         ["ns/p1", "ns/p2"])
    assert s == {"ready": "1/2", "digest": d, "usedBy": "ns/p1, ns/p2"}
    mixed = mc.cache_summary([{"phase": "Ready", "digest": "x"}, {"phase": "Ready", "digest": "y"}], [])
    assert mixed["digest"] == "mixed" and mixed["usedBy"] is None


def copies(on_disk=(), verified=(), offered=()):
    return mc.Copies(frozenset(on_disk), frozenset(verified), frozenset(offered))


# (case, wanted, copies, in use) -> (offered, removed)
COPY_CASES = [
    ("the current copy only", "new", copies({"new"}, {"new"}, {"new"}), set(), ({"new"}, set())),
    ("the current copy, not verified yet: kept, not offered", "new", copies({"new"}), set(), (set(), set())),
    ("the source changed, the old copy still mounted: offered, kept", "new",
     copies({"old", "new"}, {"old", "new"}, {"old"}), {"old"}, ({"old", "new"}, set())),
    ("the old copy no longer mounted: first no longer offered", "new",
     copies({"old", "new"}, {"old", "new"}, {"old", "new"}), set(), ({"new"}, set())),
    ("then removed, once unoffered", "new", copies({"old", "new"}, {"old", "new"}, {"new"}), set(),
     ({"new"}, {"old"})),
    ("a broken leftover never offered: removed at once", "new", copies({"old", "new"}, {"new"}, {"new"}), set(),
     ({"new"}, {"old"})),
    ("an empty folder a kubelet made for a pod: kept while mounted, not offered", "new",
     copies({"gone", "new"}, {"new"}, {"new"}), {"gone"}, ({"new"}, set())),
    ("the cache no longer kept here, still mounted", None, copies({"a"}, {"a"}, {"a"}), {"a"}, ({"a"}, set())),
    ("the cache no longer kept here, unused", None, copies({"a"}, {"a"}, {"a"}), set(), (set(), set())),
    ("... and next pass", None, copies({"a"}, {"a"}), set(), (set(), {"a"})),
    ("a pod mounting every copy (no identity subPath): nothing removed", "new",
     copies({"old", "new"}, {"old", "new"}, {"old"}), {mc.ANY_COPY}, ({"old", "new"}, set())),
]


@pytest.mark.parametrize("case,wanted,have,in_use,want", COPY_CASES, ids=[c[0] for c in COPY_CASES])
def test_plan_copies_table(case, wanted, have, in_use, want):
    got = mc.plan_copies(wanted, have, in_use)
    assert (set(got.offer), set(got.remove)) == want


IDS = ["a", "b", "c"]


@settings(max_examples=300, deadline=None)
@given(steps=st.lists(st.tuples(st.sampled_from([None, *IDS]),  # the identity the cache names this pass
                                st.sets(st.sampled_from(IDS)),   # pods arriving before the pass lists pods
                                st.sets(st.sampled_from(IDS)),   # pods bound while the pass runs (unseen by it)
                                st.sets(st.sampled_from(IDS)),   # pods leaving
                                st.sets(st.sampled_from(IDS))),  # copies that finish (verified) before the pass
                      min_size=1, max_size=12))
def test_copies_under_generated_passes(steps):
    """Agent passes under generated source changes and pods coming and going, where the scheduler places a pod
    only on a copy the node's labels offer, and may bind it while a pass runs (after its listing, before its
    label change): a copy a pod mounts is never removed, nor the current one; only verified copies are offered;
    once nothing changes, two passes leave only the current copy and the mounted ones."""
    disk, verified, labels, mounted = set(), set(), set(), set()
    wanted = None
    for wanted, arrive, late, leave, finish in steps:
        mounted |= {i for i in arrive if i in labels}
        mounted -= leave
        if wanted:
            disk.add(wanted)
        verified |= {i for i in finish if i in disk}
        plan = mc.plan_copies(wanted, copies(disk, verified, labels), mounted)
        late = {i for i in late if i in labels}  # placed by the labels as they were when the pass began
        assert not plan.remove & (mounted | late | {wanted})
        assert plan.offer <= verified
        disk -= plan.remove
        verified -= plan.remove
        mounted |= late
        labels = set(plan.offer)
    for _ in range(2):
        plan = mc.plan_copies(wanted, copies(disk, verified, labels), mounted)
        disk -= plan.remove
        labels = set(plan.offer)
    assert disk <= mounted | ({wanted} if wanted else set())


def test_copies_in_use_reads_the_subpaths_of_cache_claims():
    def pod_(claims_mounts, phase="Running"):
        return {"status": {"phase": phase}, "spec": {
            "volumes": [{"name": f"v{i}", "persistentVolumeClaim": {"claimName": c}}
                        for i, (c, _) in enumerate(claims_mounts)] + [{"name": "shm", "emptyDir": {}}],
            "containers": [{"volumeMounts": [{"name": f"v{i}", "mountPath": "/m", **({"subPath": s} if s else {})}
                                             for i, (_, s) in enumerate(claims_mounts)] + [{"name": "shm"}]}]}}
    pods = [pod_([("rewardpool-cache-pick", "id1/clip"), ("weights", "x")]),
            pod_([("rewardpool-cache-pick", "id2")]),
            pod_([("rewardpool-cache-hps", None)]),  # the whole copies folder
            pod_([("rewardpool-cache-ocr", "id3")], phase="Failed")]  # ended: nothing mounted
    assert mc.copies_in_use(pods) == {"pick": {"id1", "id2"}, "hps": {mc.ANY_COPY}}


def test_copy_labels_name_the_cache_and_the_copy():
    key = mc.copy_label("pick", "0123456789abcdef")
    assert key == "0123456789abcdef.copy.rewardpool.io/pick"
    assert mc.parse_copy_label(key) == ("pick", "0123456789abcdef")
    assert mc.parse_copy_label(mc.node_label("pick")) is None
    assert mc.parse_copy_label("kubernetes.io/hostname") is None
    # a valid label key (the API server's own check is in tests/integration/test_modelcache.py): a DNS subdomain
    # prefix, the cache's name
    prefix, name = key.split("/")
    dns_subdomain = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*"
    assert re.fullmatch(dns_subdomain, prefix) and len(prefix) <= 253


def test_pool_affinity_places_by_the_copy_when_known():
    aff = mc.pool_affinity({"pick": "Required", "hps": "Preferred"}, None, {"pick": "id1", "hps": "id2"})
    node = aff["nodeAffinity"]
    assert node["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"] == [{"matchExpressions": [
        {"key": "id1.copy.rewardpool.io/pick", "operator": "In", "values": ["Ready"]}]}]
    assert node["preferredDuringSchedulingIgnoredDuringExecution"][0]["preference"]["matchExpressions"] == [
        {"key": "id2.copy.rewardpool.io/hps", "operator": "In", "values": ["Ready"]}]
