"""Issue 34: the node-local model cache on the real nodes. The chart's agent (a DaemonSet on both) copies a
RewardModelCache's source (a claim in the operator's namespace) onto the disk of each node the cache selects
through a copy pod, verifies it and says Ready in the cache's status and on the node's label; a PickScore pool
whose model is the cache starts where the copy is, never on the node without it, with no mount of its own, and
scores; a cache whose source changes rolls the pool onto the new copy, which scores with the new weights, and the
old copy goes once no worker mounts it; a cache whose source is missing says so, and so does the pool waiting on
it; a node out of room says so while the other node's copy serves; a cache in use is not deleted from under its
pool, and once free it goes with its copy and volumes. Each node has a disk of its own: realnode2's
/var/lib/rewardpool is not the host's (realnode_peer)."""
from __future__ import annotations

import copy
import json
import shutil
import time
import uuid
from pathlib import Path

from tests.conftest import wait_for
from tests.realnode.conftest import pool_ready, run_job


def _node_phase(kube, cache, node):
    entries = (kube.json("rewardmodelcache", cache).get("status") or {}).get("nodes") or []
    return next((e for e in entries if e["node"] == node), None)


def test_a_pool_from_a_model_cache_starts_where_the_copy_is_and_scores(kube, node, peer, incluster_operator, infra,
                                                                        rns, tmp_path):
    from rewardpool_devcluster import random_clip
    from rewardpool_devcluster.incluster import real_node_pool
    from rewardpool_devcluster.realnode_config import NODE_NAME
    from rewardpool_devcluster.stack import OPERATOR_NS
    from rewardpool_operator.modelcache.layout import ROOT, copy_dir, copy_label, node_label, ready_file, source_identity

    node_name, other = NODE_NAME, peer.spec.name  # the copy on the first node only: its source is local to it
    tag = uuid.uuid4().hex[:6]
    src = tmp_path / "weights"
    random_clip.build(src / "pick", "tiny")
    claim, cache, bad = f"src-{tag}", f"pick-{tag}", f"nosrc-{tag}"
    kube.apply([
        {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": f"rn-src-{tag}"},
         "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadOnlyMany"], "storageClassName": "",
                  "persistentVolumeReclaimPolicy": "Retain", "local": {"path": str(src)},
                  "claimRef": {"namespace": OPERATOR_NS, "name": claim},
                  "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                      {"key": "kubernetes.io/hostname", "operator": "In", "values": [node_name]}]}]}}}},
        {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": claim, "namespace": OPERATOR_NS},
         "spec": {"accessModes": ["ReadOnlyMany"], "storageClassName": "", "volumeName": f"rn-src-{tag}",
                  "resources": {"requests": {"storage": "1Gi"}}}},
        {"apiVersion": "rewardpool.io/v1alpha1", "kind": "RewardModelCache", "metadata": {"name": cache},
         "spec": {"source": {"pvc": {"claimName": claim, "subPath": "pick"}},
                  "nodeSelector": {"kubernetes.io/hostname": node_name}}},
        {"apiVersion": "rewardpool.io/v1alpha1", "kind": "RewardModelCache", "metadata": {"name": bad},
         "spec": {"source": {"pvc": {"claimName": "no-such-claim"}}}},
    ])
    pick = {"name": "pickscore", "batchSize": 2, "modelMemory": "256Mi", "model": {"cache": {"name": cache}}}
    waiting = real_node_pool("waits", rns, node.images.worker, replicas=1, cpu="250m",
                             scorer={**pick, "model": {"cache": {"name": bad}}})
    kube.apply([waiting])

    # the copy: made on the node, verified, reported with its bytes and digest, the node labelled
    entry = wait_for(lambda: (e := _node_phase(kube, cache, node_name)) and e["phase"] == "Ready" and e,
                     timeout=240, interval=1, what=f"{cache} Ready on {node_name}")
    source_bytes = sum(f.stat().st_size for f in (src / "pick").rglob("*") if f.is_file())
    assert entry["bytes"] == source_bytes and entry["digest"].startswith("sha256:"), entry
    assert kube.json("node", node_name)["metadata"]["labels"].get(node_label(cache)) == "Ready"
    # the node's disk is this machine's (the real node shares its filesystem): the copy is the source's files
    old_id = source_identity(kube.json("rewardmodelcache", cache)["spec"])
    data = Path(ROOT) / copy_dir(cache, old_id)
    assert {p.relative_to(data) for p in data.rglob("*") if p.is_file()} == \
        {p.relative_to(src / "pick") for p in (src / "pick").rglob("*") if p.is_file()}
    # the other node is not selected: no entry, no label, nothing on its disk
    assert _node_phase(kube, cache, other) is None
    assert node_label(cache) not in kube.json("node", other)["metadata"]["labels"]
    assert not peer.host_path(f"{ROOT}/{cache}").exists()

    # the source that is not there: Failed with its reason on the cache, and the pool waiting on it says why
    bad_entry = wait_for(lambda: (e := _node_phase(kube, bad, node_name)) and e["phase"] == "Failed" and e,
                         timeout=60, interval=1, what=f"{bad} Failed")
    assert bad_entry["reason"] == "SourceNotFound" and "no-such-claim" in bad_entry["message"]

    def model_unavailable():
        st = kube.json("rewardpool", "-n", rns, "waits").get("status", {})
        return next((c for c in st.get("conditions", []) if c.get("reason") == "ModelUnavailable"
                     and "SourceNotFound" in c["message"]), None)
    wait_for(model_unavailable, timeout=60, interval=1, what="the waiting pool says ModelUnavailable: SourceNotFound")
    (pending,) = kube.pods(rns, "rewardpool.io/pool=waits")
    assert pending["status"]["phase"] == "Pending"  # required placement: no node holds a Ready copy

    # the pool from the cache: no mount of its own, Ready (model loaded and warmed) where the copy is, both
    # workers there (required placement outweighs the spread over the two real nodes), scores
    kube.apply([incluster_operator.macvlan_attachment(rns)])  # the store's traffic, as the other pools'
    pool = real_node_pool("cached", rns, node.images.worker, replicas=2, cpu="250m", scorer=pick,
                          attachment=f"{rns}/macvlan-store")
    assert "volumes" not in pool["spec"]["podTemplate"]["spec"]
    kube.apply([pool])
    pods = wait_for(pool_ready(kube, rns, "cached", 2), timeout=300, interval=1,
                    what="the cached pool's workers Ready")
    assert [p["spec"]["nodeName"] for p in pods] == [node_name, node_name]
    for pod in pods:
        assert any(v.get("persistentVolumeClaim", {}).get("claimName") == f"rewardpool-cache-{cache}"
                   for v in pod["spec"]["volumes"])
    result = run_job(kube, node, rns, f"job-{tag}", "cached", samples=4, frames=1, batch=2, timeout=300,
                     attachment=f"{rns}/macvlan-store")
    assert result["scored"] == 4 and result["left"] == 0, result
    assert kube.json("rewardmodelcache", cache)["status"].get("usedBy") == f"{rns}/cached"
    assert {_copy_mounted(p) for p in pods} == {old_id}

    # another checkpoint: the cache's source changes under the pool. The pool rolls onto the new copy; the copy
    # the old workers mounted stays until none does, then goes; the same rollout scores with the new weights, one
    # scorer version per run
    random_clip.build(src / "pick2", "tiny", seed=1)
    kube("patch", "rewardmodelcache", cache, "--type=merge", "-p",
         json.dumps({"spec": {"source": {"pvc": {"claimName": claim, "subPath": "pick2"}}}}))
    new_id = source_identity(kube.json("rewardmodelcache", cache)["spec"])
    assert new_id != old_id

    def rolled():
        ready = pool_ready(kube, rns, "cached", 2)()
        return ready if ready and {_copy_mounted(p) for p in ready} == {new_id} else None
    pods = wait_for(rolled, timeout=300, interval=1, what="the cached pool rolled onto the new copy")
    wait_for(lambda: not (Path(ROOT) / copy_dir(cache, old_id)).exists(), timeout=60, interval=1,
             what="the old copy removed once no worker mounts it")
    labels = kube.json("node", node_name)["metadata"]["labels"]
    assert labels.get(copy_label(cache, new_id)) == "Ready" and copy_label(cache, old_id) not in labels
    again = run_job(kube, node, rns, f"job2-{tag}", "cached", samples=4, frames=1, batch=2, timeout=300,
                    attachment=f"{rns}/macvlan-store")
    assert again["scored"] == 4 and again["left"] == 0, again
    assert len(result["versions"]) == len(again["versions"]) == 1 and again["versions"] != result["versions"]
    assert again["first_scores"] != result["first_scores"]  # the same samples, other weights

    # deleting the cache while the pool uses it: it stays (Terminating), its copy too; once no pool names it,
    # it goes, with its volumes and the node's copy and label
    kube("delete", "rewardmodelcache", cache, "--wait=false")
    wait_for(lambda: kube.json("rewardmodelcache", cache)["metadata"].get("deletionTimestamp"), timeout=30,
             what="the cache marked for deletion")
    time.sleep(8)
    held = kube.json("rewardmodelcache", cache)
    assert held["metadata"].get("finalizers"), held["metadata"]
    assert (Path(ROOT) / ready_file(cache, new_id)).exists()  # the copy the pool reads stays while the cache is held
    assert kube.json("node", node_name)["metadata"]["labels"].get(node_label(cache)) == "Ready"
    events = json.loads(kube("get", "events", "-A", "--field-selector", f"involvedObject.name={cache}",
                             "-o", "json").stdout)["items"]
    assert any("is the model of pool(s)" in e.get("message", "") for e in events), [e.get("message") for e in events]
    kube("delete", "rewardpool", "-n", rns, "cached", "waits", "--wait=true", timeout=200)
    wait_for(lambda: kube("get", "rewardmodelcache", cache, check=False).returncode != 0, timeout=120, interval=1,
             what="the cache gone once no pool uses it")
    assert kube("get", "pv", f"rewardpool-cache-{cache}-{rns}", check=False).returncode != 0
    wait_for(lambda: node_label(cache) not in kube.json("node", node_name)["metadata"]["labels"], timeout=60,
             what="the node's cache label removed")
    wait_for(lambda: not (Path(ROOT) / cache).exists(), timeout=30, what="the node's copy removed")
    kube("delete", "rewardmodelcache", bad, "--wait=false", check=False)
    wait_for(lambda: not (Path(ROOT) / bad).exists(), timeout=60, what="the failed cache's directory removed")
    kube("delete", "pvc", "-n", OPERATOR_NS, claim, "--wait=false", check=False)
    kube("delete", "pv", f"rn-src-{tag}", "--wait=false", check=False)


def test_a_restricted_pool_whose_model_is_an_oci_image_scores_with_no_mount_of_its_own(kube, node, peer,
                                                                                      incluster_operator, infra,
                                                                                      tmp_path):
    """scorer.model.image on the real node's containerd 2: the random-weight PickScore packaged as an OCI image
    with buildah (weights only, no base) and imported as the worker image is; a pool at the restricted Pod Security
    level mounts it as an `image` volume, reads it as non-root, loads and warms it, and scores. The API server's
    own admission judges the running pod in a namespace enforcing restricted: refused for IPC_LOCK alone (the one
    exception the operator adds), admitted without it. A RewardModelCache whose source is the same image copies it onto
    both real nodes' disks through the agents' copy pods (their own image volumes) and says Ready with the bytes of
    the model on each."""
    from rewardpool_devcluster import random_clip
    from rewardpool_devcluster.incluster import real_node_pool
    from rewardpool_operator.pool.builders import IPC_LOCK
    from rewardpool_operator.modelcache.layout import ROOT, copy_dir, source_identity

    tag = uuid.uuid4().hex[:6]
    model = tmp_path / "pick"
    random_clip.build(model, "tiny")
    ref = node.import_model(model, "pickscore-tiny")
    assert all(ref in n.ctr("images", "ls", "-q").stdout.split() for n in node.nodes)  # a pool may land on either
    ns, strict = f"rn-img-{tag}", f"rn-strict-{tag}"
    kube.apply([{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}},
                {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": strict, "labels": {
                    "pod-security.kubernetes.io/enforce": "restricted",
                    "pod-security.kubernetes.io/enforce-version": "latest"}}},
                incluster_operator.macvlan_attachment(ns)])
    pick = {"name": "pickscore", "batchSize": 2, "modelMemory": "256Mi",
            "model": {"image": {"reference": ref, "pullPolicy": "IfNotPresent"}}}
    pool = real_node_pool("fromimage", ns, node.images.worker, replicas=1, cpu="250m", scorer=pick,
                          attachment=f"{ns}/macvlan-store")
    pool["spec"]["podSecurity"] = "restricted"
    assert "volumes" not in pool["spec"]["podTemplate"]["spec"]
    cache = f"img-{tag}"
    cache_spec = {"source": {"image": {"reference": ref, "pullPolicy": "IfNotPresent"}}}
    kube.apply([pool, {"apiVersion": "rewardpool.io/v1alpha1", "kind": "RewardModelCache", "metadata": {"name": cache},
                       "spec": cache_spec}])
    try:
        (pod,) = wait_for(pool_ready(kube, ns, "fromimage", 1), timeout=300, interval=1,
                          what="the pool from the model image Ready")
        assert [v["image"]["reference"] for v in pod["spec"]["volumes"] if "image" in v] == [ref]
        assert not any("persistentVolumeClaim" in v or "hostPath" in v for v in pod["spec"]["volumes"])
        name = pod["metadata"]["name"]
        assert kube.exec(ns, name, "id", "-u").strip() == "65532"  # restricted: the model is read as non-root
        refused = _admission(kube, strict, pod["spec"])
        assert refused.returncode != 0 and "violates PodSecurity" in refused.stderr, refused.stderr
        said = refused.stderr.split('"restricted:latest": ', 1)[1].strip()
        # one violation (PSA joins several with "), "): the worker's IPC_LOCK
        assert said.startswith('unrestricted capabilities (container "worker"') and '"IPC_LOCK"' in said \
            and "), " not in said, said
        admitted = _admission(kube, strict, pod["spec"], drop=IPC_LOCK)
        assert admitted.returncode == 0, admitted.stderr
        result = run_job(kube, node, ns, f"job-{tag}", "fromimage", samples=4, frames=1, batch=2, timeout=300,
                         attachment=f"{ns}/macvlan-store")
        assert result["scored"] == 4 and result["left"] == 0, result

        for n in node.nodes:  # each node's copy on its own disk
            entry = wait_for(lambda: (e := _node_phase(kube, cache, n.spec.name)) and e["phase"] == "Ready" and e,
                             timeout=240, interval=1, what=f"{cache} (from the image) Ready on {n.spec.name}")
            assert entry["bytes"] == sum(f.stat().st_size for f in model.rglob("*") if f.is_file()), entry
            at = f"{ROOT}/{copy_dir(cache, source_identity(cache_spec))}"
            data = Path(at) if n is node else peer.host_path(at)
            assert {p.relative_to(data) for p in data.rglob("*") if p.is_file()} == \
                {p.relative_to(model) for p in model.rglob("*") if p.is_file()}
    finally:
        kube("delete", "rewardmodelcache", cache, "--wait=false", check=False)
        kube("delete", "namespace", ns, strict, "--wait=false", check=False)


def _copy_mounted(pod: dict) -> str | None:
    """The copy (identity) a worker pod mounts: the first part of its cache mount's subPath."""
    claims = {v["name"] for v in pod["spec"]["volumes"]
              if v.get("persistentVolumeClaim", {}).get("claimName", "").startswith("rewardpool-cache-")}
    subs = [m.get("subPath") or "" for m in pod["spec"]["containers"][0].get("volumeMounts") or []
            if m["name"] in claims]
    return subs[0].split("/")[0] if subs and subs[0] else None


def _admission(kube, ns, spec, drop=None):
    """The API server's verdict (server-side dry run) on a running pod's spec created in `ns` (its service account
    the namespace's default), with the capability `drop` off the worker."""
    spec = {k: v for k, v in copy.deepcopy(spec).items() if k not in ("nodeName", "serviceAccount")}
    spec["serviceAccountName"] = "default"
    for c in spec["containers"]:
        caps = c.get("securityContext", {}).get("capabilities") or {}
        caps["add"] = [x for x in caps.get("add") or [] if x != drop]
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "admission-check", "namespace": ns}, "spec": spec}
    return kube("create", "--dry-run=server", "-f", "-", input=json.dumps(pod), check=False)


def test_a_node_without_room_for_the_copy_says_out_of_disk_and_so_does_the_pool_waiting(kube, node, peer,
                                                                                       incluster_operator, infra, rns,
                                                                                       tmp_path):
    """The first node's disk full for one cache: its folder there is a 2 MiB tmpfs (the copy pod's hostPath sees
    it, as it would a full disk), the source an image the copy would need more room for. The cache, selecting
    that node only, says Failed with OutOfDisk and the bytes on the node's entry, the node's label says Failed,
    and a pool requiring the copy stays Pending with ModelUnavailable naming OutOfDisk; nothing is published.
    Then the cache selects both real nodes: the second one, with room on its own disk, holds a Ready copy and the
    waiting worker starts there, while the first still says OutOfDisk."""
    import subprocess

    from rewardpool_devcluster import random_clip
    from rewardpool_devcluster.incluster import real_node_pool
    from rewardpool_devcluster.realnode_config import NODE_LABEL, NODE_NAME
    from rewardpool_operator.modelcache.layout import ROOT, node_label, ready_file, source_identity

    node_name, other = NODE_NAME, peer.spec.name
    tag = uuid.uuid4().hex[:6]
    model = tmp_path / "pick"
    random_clip.build(model, "tiny")
    ref = node.import_model(model, "pickscore-tiny")
    cache = f"full-{tag}"
    folder = Path(ROOT) / cache
    try:
        kube.apply([{"apiVersion": "rewardpool.io/v1alpha1", "kind": "RewardModelCache", "metadata": {"name": cache},
                     "spec": {"source": {"image": {"reference": ref, "pullPolicy": "IfNotPresent"}},
                              "nodeSelector": {"kubernetes.io/hostname": node_name}}},
                    real_node_pool("waitsroom", rns, node.images.worker, replicas=1, cpu="250m",
                                   scorer={"name": "pickscore", "batchSize": 2, "modelMemory": "256Mi",
                                           "model": {"cache": {"name": cache}}})])
        # the full folder once the cache exists (the copy pod the agent starts on its next pass, seconds later,
        # sees the tmpfs)
        folder.mkdir(parents=True, exist_ok=True)
        subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", f"rewardpool-full-{tag}", str(folder)], check=True)
        entry = wait_for(lambda: (e := _node_phase(kube, cache, node_name)) and e["phase"] == "Failed" and e,
                         timeout=180, interval=1, what=f"{cache} Failed on {node_name}")
        assert entry["reason"] == "OutOfDisk" and "bytes free" in entry["message"], entry
        assert kube.json("node", node_name)["metadata"]["labels"].get(node_label(cache)) == "Failed"
        assert not any(folder.glob("ready/*")) and not any(folder.glob("data/*"))  # nothing published

        def model_unavailable():
            st = kube.json("rewardpool", "-n", rns, "waitsroom").get("status", {})
            return next((c for c in st.get("conditions", []) if c.get("reason") == "ModelUnavailable"
                         and "OutOfDisk" in c["message"]), None)
        wait_for(model_unavailable, timeout=60, interval=1, what="the waiting pool says ModelUnavailable: OutOfDisk")
        (pending,) = kube.pods(rns, "rewardpool.io/pool=waitsroom")
        assert pending["status"]["phase"] == "Pending"

        # both real nodes selected: the second copies onto its own disk and serves the waiting worker
        kube("patch", "rewardmodelcache", cache, "--type=merge", "-p",
             json.dumps({"spec": {"nodeSelector": {"kubernetes.io/hostname": None, NODE_LABEL: "real"}}}))
        other_entry = wait_for(lambda: (e := _node_phase(kube, cache, other)) and e["phase"] == "Ready" and e,
                               timeout=180, interval=1, what=f"{cache} Ready on {other}")
        assert other_entry["bytes"] == sum(f.stat().st_size for f in model.rglob("*") if f.is_file())
        identity = source_identity(kube.json("rewardmodelcache", cache)["spec"])
        assert peer.host_path(f"{ROOT}/{ready_file(cache, identity)}").exists()
        (pod,) = wait_for(pool_ready(kube, rns, "waitsroom", 1), timeout=240, interval=1,
                          what="the waiting worker Ready on the node with room")
        assert pod["spec"]["nodeName"] == other
        assert _node_phase(kube, cache, node_name)["reason"] == "OutOfDisk"  # the full node still says so
        assert not any(folder.glob("ready/*"))
    finally:
        kube("delete", "rewardpool", "-n", rns, "waitsroom", "--wait=true", check=False, timeout=120)
        kube("delete", "rewardmodelcache", cache, "--wait=true", check=False, timeout=120)
        subprocess.run(["umount", "-l", str(folder)], check=False)
        shutil.rmtree(folder, ignore_errors=True)
