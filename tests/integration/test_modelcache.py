"""The model cache against the real API server (kwok nodes: copy pods run nothing there, so the copy itself is
made here with the copy pod's own code; the real node's test runs it in its pod). Two node agents with the chart's
agent identity each own their node's entry of the cache's status (server-side apply: neither overwrites the
other's), label their node with its phase, start one copy pod per node and clean up; the operator binds a local
volume and claim for a pool that uses the cache, keeps the cache's summary, and holds its deletion while a pool
names it. A cache whose source changes under a pool rolls the pool onto the new copy, while the copy its old worker
mounts stays (and stays offered) until no pod mounts it."""
from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from rewardpool_devcluster.stack import OPERATOR_NS, RELEASE, kubectl
from rewardpool_operator.modelcache import copier as cachecopy
from rewardpool_operator.modelcache.layout import (CACHE_LABEL, GROUP, PLURAL, VERSION, copy_dir, copy_label, node_label,
                                            ready_file, source_identity)
from tests.conftest import wait_for
from tests.factories import pool_manifest

NODES = ("rdma-node-0", "rdma-node-1")
AGENT_SA = f"{RELEASE}-rewardpool-operator-agent"


@pytest.fixture(scope="module")
def agent_kubeconfig(chart):
    chart.wait_crd_established(f"{PLURAL}.{GROUP}")
    token = kubectl(chart, "create", "token", AGENT_SA, "-n", OPERATOR_NS, "--duration=2h").stdout.strip()
    return chart.write_kubeconfig(chart.workdir / "agent.kubeconfig", f"system:serviceaccount:{OPERATOR_NS}:{AGENT_SA}",
                                  token)


def agent_step(kubeconfig: Path, node: str, root: Path) -> None:
    """One pass of the node agent, as its DaemonSet pod runs it (its identity, its node, its root)."""
    from kubernetes_asyncio import client as aclient, config as aconfig

    from rewardpool_operator.modelcache.agent import Agent

    async def run():
        cfg = aclient.Configuration()
        await aconfig.load_kube_config(config_file=str(kubeconfig), client_configuration=cfg)
        async with aclient.ApiClient(cfg) as api:
            await Agent(api, node, OPERATOR_NS, "rewardpool-operator:test", root, "/var/lib/rewardpool/models",
                        {}).step()
    asyncio.run(run())


def test_agents_report_per_node_and_the_operator_binds_and_guards(api, chart, operator, agent_kubeconfig, ns, pools,
                                                                    tmp_path):
    co, core = client.CustomObjectsApi(api), client.CoreV1Api(api)
    name, claim = f"c-{uuid.uuid4().hex[:6]}", f"src-{uuid.uuid4().hex[:6]}"
    roots = {n: tmp_path / n for n in NODES}
    spec = {"source": {"pvc": {"claimName": claim, "subPath": "pick"}},
            "nodeSelector": {"feature.node.kubernetes.io/rdma.capable": "true"}}
    co.create_cluster_custom_object(GROUP, VERSION, PLURAL, {"apiVersion": f"{GROUP}/{VERSION}",
                                                             "kind": "RewardModelCache", "metadata": {"name": name},
                                                             "spec": spec})
    entries = lambda: {e["node"]: e for e in (co.get_cluster_custom_object(  # noqa: E731
        GROUP, VERSION, PLURAL, name).get("status") or {}).get("nodes") or []}
    labels = lambda n: core.read_node(n).metadata.labels or {}  # noqa: E731

    # the source claim is missing: each node says so, in its own entry (the other's stays), and on its label
    for n in NODES:
        agent_step(agent_kubeconfig, n, roots[n])
    got = entries()
    assert set(got) == set(NODES), got
    assert all(e["phase"] == "Failed" and e["reason"] == "SourceNotFound" and claim in e["message"]
               for e in got.values()), got
    assert all(labels(n).get(node_label(name)) == "Failed" for n in NODES)
    assert all((roots[n] / name / "data").is_dir() for n in NODES)  # what a local volume mounts, even empty

    # the claim exists: one copy pod per node, pinned there, in the operator's namespace; a second pass adds none
    core.create_namespaced_persistent_volume_claim(OPERATOR_NS, {
        "metadata": {"name": claim}, "spec": {"accessModes": ["ReadOnlyMany"], "storageClassName": "none",
                                              "resources": {"requests": {"storage": "1Ki"}}}})
    for _ in range(2):
        for n in NODES:
            agent_step(agent_kubeconfig, n, roots[n])
    copies = core.list_namespaced_pod(OPERATOR_NS, label_selector=f"{CACHE_LABEL}={name}").items
    assert sorted(p.spec.node_name for p in copies) == sorted(NODES), [p.metadata.name for p in copies]
    assert all(p.spec.volumes[0].persistent_volume_claim.claim_name == claim for p in copies)
    assert {e["phase"] for e in entries().values()} <= {"Pending", "Downloading"}

    # the copy lands on node 0 (made by the copy pod's own code): Ready there with its digest, node 1 still not
    src = tmp_path / "src" / "pick"
    src.mkdir(parents=True)
    (src / "config.json").write_text("{}")
    (src / "weights.bin").write_bytes(b"\0" * 4096)
    old_id = source_identity(spec)
    made = cachecopy.copy(src, roots[NODES[0]], name, old_id)
    for n in NODES:
        agent_step(agent_kubeconfig, n, roots[n])
    got = entries()
    assert got[NODES[0]]["phase"] == "Ready" and got[NODES[0]]["digest"] == made["digest"]
    assert got[NODES[0]]["bytes"] == 4098
    assert got[NODES[1]]["phase"] != "Ready"
    assert labels(NODES[0])[node_label(name)] == "Ready" and labels(NODES[1])[node_label(name)] != "Ready"
    assert labels(NODES[0])[copy_label(name, old_id)] == "Ready" and copy_label(name, old_id) not in labels(NODES[1])

    # a pool that uses it: the operator binds a local volume and claim in the pool's namespace, its pods are
    # required on nodes whose copy is Ready, the cache's summary names the pool
    pools.create(pool_manifest("cached", replicas=1, scorer={"name": "pickscore", "batchSize": 4,
                                                             "model": {"cache": {"name": name}}}))
    pvc = wait_for(lambda: core.read_namespaced_persistent_volume_claim(f"rewardpool-cache-{name}", ns), timeout=60,
                   what="the cache's claim in the pool's namespace")
    assert pvc.spec.volume_name == f"rewardpool-cache-{name}-{ns}"
    pv = core.read_persistent_volume(f"rewardpool-cache-{name}-{ns}")
    assert pv.spec.local.path == f"/var/lib/rewardpool/models/{name}/data"
    assert pv.spec.claim_ref.namespace == ns
    wait_for(lambda: core.read_namespaced_persistent_volume_claim(pvc.metadata.name, ns).status.phase == "Bound",
             timeout=60, what="the claim bound to the cache's local volume")
    (pod,) = wait_for(lambda: pools.pods("cached"), timeout=60, what="the pool's worker pod")
    terms = pod.spec.affinity.node_affinity.required_during_scheduling_ignored_during_execution.node_selector_terms
    assert [(e.key, e.operator, e.values) for e in terms[0].match_expressions] == \
        [(copy_label(name, old_id), "In", ["Ready"])]
    assert _copy_mounted(pod) == old_id
    wait_for(lambda: (st := co.get_cluster_custom_object(GROUP, VERSION, PLURAL, name).get("status") or {})
             .get("usedBy") == f"{ns}/cached" and st.get("ready") == "1/2", timeout=30, what="the cache's summary")
    wait_for(lambda: (p := core.read_namespaced_pod(pod.metadata.name, ns)).spec.node_name == NODES[0]
             and p.status.phase == "Running", timeout=60, what="the worker running on the node with the copy")

    # the source changes under the pool: the pool rolls to a pod that mounts and requires the new copy (Pending
    # until a node offers it), while the copy the old worker mounts stays on its node, offered
    spec = {**spec, "source": {"pvc": {"claimName": claim, "subPath": "pick2"}}}
    new_id = source_identity(spec)
    co.patch_cluster_custom_object(GROUP, VERSION, PLURAL, name, {"spec": {"source": spec["source"]}})
    (new,) = wait_for(lambda: [p for p in pools.pods("cached") if _copy_mounted(p) == new_id], timeout=60,
                      what="a worker of the new copy")
    terms = new.spec.affinity.node_affinity.required_during_scheduling_ignored_during_execution.node_selector_terms
    assert [e.key for e in terms[0].match_expressions] == [copy_label(name, new_id)]
    for _ in range(2):
        for n in NODES:
            agent_step(agent_kubeconfig, n, roots[n])
    assert core.read_namespaced_pod(pod.metadata.name, ns).metadata.deletion_timestamp is None  # not Ready: held
    assert labels(NODES[0])[copy_label(name, old_id)] == "Ready" and cachecopy.intact(roots[NODES[0]], name, made)
    assert entries()[NODES[0]]["phase"] != "Ready"  # the node's entry is of the current source
    src2 = tmp_path / "src" / "pick2"
    src2.mkdir(parents=True)
    (src2 / "config.json").write_text('{"v": 2}')
    made2 = cachecopy.copy(src2, roots[NODES[0]], name, new_id)
    agent_step(agent_kubeconfig, NODES[0], roots[NODES[0]])
    assert labels(NODES[0])[copy_label(name, new_id)] == "Ready" and entries()[NODES[0]]["digest"] == made2["digest"]

    # the new worker starts where the new copy is, the old one goes; its copy is then no longer offered, and goes
    def old_gone():
        agent_step(agent_kubeconfig, NODES[0], roots[NODES[0]])
        return [p.metadata.name for p in pools.pods("cached")] == [new.metadata.name]
    wait_for(old_gone, timeout=120, what="the old worker replaced by the new copy's")
    assert core.read_namespaced_pod(new.metadata.name, ns).spec.node_name == NODES[0]
    agent_step(agent_kubeconfig, NODES[0], roots[NODES[0]])
    wait_for(lambda: copy_label(name, old_id) not in labels(NODES[0]), timeout=30, what="the old copy unoffered")
    agent_step(agent_kubeconfig, NODES[0], roots[NODES[0]])
    assert not (roots[NODES[0]] / copy_dir(name, old_id)).exists()
    assert not (roots[NODES[0]] / ready_file(name, old_id)).exists()
    assert cachecopy.intact(roots[NODES[0]], name, made2)

    # deleting the cache while the pool names it: held, with the reason in an event
    co.delete_cluster_custom_object(GROUP, VERSION, PLURAL, name)
    wait_for(lambda: any("is the model of pool(s)" in (e.message or "") for e in core.list_event_for_all_namespaces(
        field_selector=f"involvedObject.name={name}").items), timeout=60, what="the in-use event")
    held = co.get_cluster_custom_object(GROUP, VERSION, PLURAL, name)
    assert held["metadata"].get("deletionTimestamp") and held["metadata"].get("finalizers")
    for n in NODES:  # the copy the pool reads stays while the cache is held
        agent_step(agent_kubeconfig, n, roots[n])
    assert (roots[NODES[0]] / ready_file(name, new_id)).exists() and labels(NODES[0])[node_label(name)] == "Ready"

    # the pool goes: the cache goes, with its volume and claim; the agents remove the copies, labels and pods
    pools.co.delete_namespaced_custom_object(GROUP, VERSION, ns, "rewardpools", "cached")

    def gone():
        try:
            co.get_cluster_custom_object(GROUP, VERSION, PLURAL, name)
            return False
        except ApiException as e:
            return e.status == 404
    wait_for(gone, timeout=90, what="the cache deleted once no pool uses it")
    wait_for(lambda: not core.list_persistent_volume(label_selector=f"{CACHE_LABEL}={name}").items, timeout=30,
             what="its local volumes deleted")
    for _ in range(2):  # a copy is first no longer offered, then removed
        for n in NODES:
            agent_step(agent_kubeconfig, n, roots[n])
    assert not any((roots[n] / name).exists() for n in NODES)
    assert not any(node_label(name) in labels(n) or copy_label(name, new_id) in labels(n) for n in NODES)
    wait_for(lambda: not [p for p in core.list_namespaced_pod(OPERATOR_NS, label_selector=f"{CACHE_LABEL}={name}")
                          .items if p.metadata.deletion_timestamp is None], timeout=30, what="copy pods deleted")
    core.delete_namespaced_persistent_volume_claim(claim, OPERATOR_NS)


def _copy_mounted(pod) -> str | None:
    """The copy (identity) a worker pod mounts: the first part of its cache mount's subPath."""
    claims = {v.name for v in pod.spec.volumes or []
              if v.persistent_volume_claim and v.persistent_volume_claim.claim_name.startswith("rewardpool-cache-")}
    subs = [m.sub_path for m in pod.spec.containers[0].volume_mounts or [] if m.name in claims]
    return subs[0].split("/")[0] if subs and subs[0] else None
