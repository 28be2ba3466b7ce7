"""The operator on the real control plane (kwok nodes), running as its own process with the chart's RBAC."""
from __future__ import annotations

import json
import time

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from rewardpool_devcluster import RDMA_LABEL
from rewardpool_devcluster.stack import kubectl
from rewardpool_operator.api.spec import HASH_LABEL, POOL_LABEL
from rewardpool_worker.contract import ENV_VAR, WorkerConfig
from tests.conftest import wait_for
from tests.factories import G, P, V, pool_manifest

NAD = ("k8s.cni.cncf.io", "v1", "network-attachment-definitions")


def test_pool_becomes_ready_with_correct_pods_nad_and_status(pools, ns, cluster):
    pools.create(pool_manifest("ps", replicas=3))
    pools.wait_ready("ps", 3)

    # Placement: only RDMA nodes; pod spec as designed.
    nodes = {n.metadata.name: n for n in client.CoreV1Api(pools.api).list_node().items}
    pods = pools.pods("ps")
    for pod in pods:
        node = nodes[pod.spec.node_name]
        assert node.metadata.labels.get(RDMA_LABEL) == "true", f"{pod.metadata.name} on {node.metadata.name}"
        assert pod.status.phase == "Running"
        c = pod.spec.containers[0]
        assert c.security_context.capabilities.add == ["IPC_LOCK"] and not c.security_context.privileged
        assert not pod.spec.host_network and not any(v.host_path for v in pod.spec.volumes)
        assert c.resources.limits["rdma/rdma_shared_device_a"] == "1"
        assert c.resources.limits["memory"] == c.resources.requests["memory"]
        assert json.loads(pod.metadata.annotations["k8s.v1.cni.cncf.io/networks"])[0]["name"] == "ps-roce"
        assert pod.metadata.owner_references[0].kind == "RewardPool"
        env = {e.name: e for e in c.env}
        cfg = WorkerConfig.from_json(env[ENV_VAR].value)
        assert cfg.pool == "ps" and cfg.namespace == ns and cfg.store.protocol == "rdma"
        assert env["POD_IP"].value_from.field_ref.field_path == "status.podIP"
        assert c.readiness_probe.http_get.path == "/readyz"
    # The plain node is never used, even with three workers on two RDMA nodes.
    assert {p.spec.node_name for p in pods} <= {"rdma-node-0", "rdma-node-1"}

    # The NAD: ipvlan on the bond, owned by the pool.
    nad = client.CustomObjectsApi(pools.api).get_namespaced_custom_object(*NAD[:2], ns, NAD[2], "ps-roce")
    cfg = json.loads(nad["spec"]["config"])
    assert (cfg["type"], cfg["master"], cfg["mode"], cfg["mtu"]) == ("ipvlan", "bond0", "l2", 4200)
    assert nad["metadata"]["ownerReferences"][0]["name"] == "ps"

    # Status: sizing, memory, selector, conditions with observedGeneration.
    st = pools.get("ps")["status"]
    assert st["selector"] == f"{POOL_LABEL}=ps" and st["replicas"] == 3 and st["readyReplicas"] == 3
    assert st["segment"]["mode"] == "auto" and "highWatermark 0.9" in st["segment"]["rule"]
    assert st["memoryPerWorker"] == pods[0].spec.containers[0].resources.limits["memory"]
    assert st["networkAttachment"] == f"{ns}/ps-roce"
    types = {c["type"]: c for c in st["conditions"]}
    assert set(types) == {"Ready", "Progressing", "Degraded", "InvalidSpec", "NetworkReady", "ReplicaFailure"}
    assert all(c["observedGeneration"] == 1 and c["reason"] and c["message"] for c in types.values())
    assert types["NetworkReady"]["status"] == "True" and types["Degraded"]["status"] == "False"
    assert any(r == "WorkerCreated" for _, r, _ in pools.events("ps"))

    # kubectl shows the printer columns.
    out = kubectl(cluster, "get", "rewardpools", "-n", ns).stdout
    assert out.split("\n")[0].split()[:5] == ["NAME", "DESIRED", "READY", "QUEUE", "SEGMENT"]


def test_drift_is_repaired(pools, ns):
    pools.create(pool_manifest("drift", replicas=2))
    pools.wait_ready("drift", 2)
    victim = pools.pods("drift")[0].metadata.name
    pools.core.delete_namespaced_pod(victim, ns, grace_period_seconds=0)
    wait_for(lambda: victim not in [p.metadata.name for p in pools.pods("drift", True)] and
             len(pools.pods("drift")) == 2, 60, what="deleted pod replaced")
    pools.wait_ready("drift", 2)

    co = client.CustomObjectsApi(pools.api)
    co.delete_namespaced_custom_object(*NAD[:2], ns, NAD[2], "drift-roce")
    wait_for(lambda: co.get_namespaced_custom_object(*NAD[:2], ns, NAD[2], "drift-roce"), 60,
             what="deleted NAD recreated")

    before = {p.metadata.name for p in pools.pods("drift")}
    old_hash = {p.metadata.labels[HASH_LABEL] for p in pools.pods("drift")}
    pools.patch("drift", {"spec": {"image": "rewardpool-worker:v2"}})

    def rolled():
        pods = pools.pods("drift", include_terminating=True)
        return (len(pods) == 2 and all(p.spec.containers[0].image == "rewardpool-worker:v2" for p in pods)
                and not ({p.metadata.name for p in pods} & before))
    wait_for(rolled, 90, what="pods rolled to the new image")
    pools.wait_ready("drift", 2)
    assert {p.metadata.labels[HASH_LABEL] for p in pools.pods("drift")}.isdisjoint(old_hash)
    assert pools.condition("drift", "Ready")["observedGeneration"] == 2


def test_scale_subresource_and_kubectl_scale(pools, ns, cluster):
    pools.create(pool_manifest("sc", replicas=1))
    pools.wait_ready("sc", 1)
    kubectl(cluster, "scale", "rewardpool/sc", "--replicas=4", "-n", ns)
    pools.wait_ready("sc", 4)
    scale = pools.co.get_namespaced_custom_object_scale(G, V, ns, P, "sc")
    assert scale["status"]["replicas"] == 4 and scale["status"]["selector"] == f"{POOL_LABEL}=sc"
    kubectl(cluster, "scale", "rewardpool/sc", "--replicas=1", "-n", ns)
    pools.wait_ready("sc", 1)
    assert any(r == "WorkerDeleted" for _, r, _ in pools.events("sc"))


def test_deleting_the_pool_removes_every_owned_object(pools, ns):
    pools.create(pool_manifest("gone", replicas=2))
    pools.wait_ready("gone", 2)
    pools.co.delete_namespaced_custom_object(G, V, ns, P, "gone")
    co = client.CustomObjectsApi(pools.api)

    def all_gone():
        nads = co.list_namespaced_custom_object(*NAD[:2], ns, NAD[2])["items"]
        svcs = pools.core.list_namespaced_service(ns, label_selector=f"{POOL_LABEL}=gone").items
        return not pools.pods("gone", include_terminating=True) and not nads and not svcs
    wait_for(all_gone, 90, what="pods, NAD and service garbage-collected")


def test_operator_restart_creates_no_duplicates(pools, ns, operator):
    pools.create(pool_manifest("rs", replicas=3))
    pools.wait_ready("rs", 3)
    before = sorted(p.metadata.name for p in pools.pods("rs"))
    operator.kill()
    operator.start()
    time.sleep(5)  # the new operator has listed and reconciled everything by now
    after = sorted(p.metadata.name for p in pools.pods("rs", include_terminating=True))
    assert after == before


def test_steady_pool_costs_no_writes(pools, ns):
    pools.create(pool_manifest("calm", replicas=2))
    pools.wait_ready("calm", 2)
    time.sleep(3)
    rv = pools.get("calm")["metadata"]["resourceVersion"]
    pod_rvs = {p.metadata.name: p.metadata.resource_version for p in pools.pods("calm")}
    co = client.CustomObjectsApi(pools.api)
    owned_rvs = lambda: (pools.core.read_namespaced_service("calm-workers", ns).metadata.resource_version,  # noqa: E731
                         co.get_namespaced_custom_object(*NAD[:2], ns, NAD[2], "calm-roce")["metadata"]["resourceVersion"])
    svc_nad = owned_rvs()
    n_events = len(pools.events("calm"))
    pools.patch("calm", {"metadata": {"annotations": {"poke": "1"}}})  # forces a reconcile of an unchanged spec
    time.sleep(5)
    assert pools.get("calm")["metadata"]["resourceVersion"] != rv  # our own annotation write
    st_before = pools.get("calm")["status"]
    time.sleep(3)
    assert pools.get("calm")["status"] == st_before
    assert {p.metadata.name: p.metadata.resource_version for p in pools.pods("calm")} == pod_rvs
    assert len(pools.events("calm")) == n_events
    assert owned_rvs() == svc_nad  # the Service and the NAD were compared, not patched


def test_owned_objects_are_server_side_applied_and_edits_are_taken_back(pools, ns):
    pools.create(pool_manifest("ssa", replicas=2))
    pools.wait_ready("ssa", 2)
    co, policy = client.CustomObjectsApi(pools.api), client.PolicyV1Api(pools.api)
    svc = lambda: pools.core.read_namespaced_service("ssa-workers", ns)  # noqa: E731
    pdb = lambda: policy.read_namespaced_pod_disruption_budget("ssa", ns)  # noqa: E731
    nad = co.get_namespaced_custom_object(*NAD[:2], ns, NAD[2], "ssa-roce")
    managers = lambda fields: {(f.manager, f.operation) for f in fields}  # noqa: E731
    assert ("rewardpool-operator", "Apply") in managers(svc().metadata.managed_fields)
    assert ("rewardpool-operator", "Apply") in managers(pdb().metadata.managed_fields)
    assert ("rewardpool-operator", "Apply") in {(f["manager"], f["operation"]) for f in nad["metadata"]["managedFields"]}
    secret = pools.core.read_namespaced_secret("ssa-control", ns)
    assert "rewardpool-operator" in {f.manager for f in secret.metadata.managed_fields}  # created, never applied

    # A user's edits of fields the operator sets (as `kubectl edit` makes them: an update by another field
    # manager, which takes those fields' ownership) come back at its next look (a poke: a full reconcile). An
    # apply that did not force ownership would be refused with a conflict instead, and the edits would stay.
    edit = "kubectl-edit"
    # (a non-default value: an omitempty field set to its zero value is dropped and nobody owns it)
    component = "app.kubernetes.io/component"
    edited = pools.core.patch_namespaced_service("ssa-workers", ns, {"spec": {"selector": {component: "edited"}}},
                                                 field_manager=edit)
    policy.patch_namespaced_pod_disruption_budget("ssa", ns, {"spec": {"maxUnavailable": 2}}, field_manager=edit)
    config = json.loads(nad["spec"]["config"])
    co.patch_namespaced_custom_object(*NAD[:2], ns, NAD[2], "ssa-roce",
                                      {"spec": {"config": json.dumps({**config, "mtu": 1500})}}, field_manager=edit)
    # the edit took the field (read from the patch's answer: the operator may already have taken it back)
    assert ("kubectl-edit", "Update") in managers(edited.metadata.managed_fields)
    assert edited.spec.selector[component] == "edited"
    pools.patch("ssa", {"metadata": {"annotations": {"poke": "1"}}})
    nad_config = lambda: json.loads(co.get_namespaced_custom_object(*NAD[:2], ns, NAD[2], "ssa-roce")["spec"]["config"])  # noqa: E731
    wait_for(lambda: svc().spec.selector[component] == "worker" and pdb().spec.max_unavailable == 1
             and nad_config() == config, 60, what="the operator's values applied back over another manager's edits")

    def owner_of(fields, path):  # the managers whose entry holds the field at `path` (f:spec, f:x, ...)
        out = set()
        for f in fields:
            node = f.fields_v1 if hasattr(f, "fields_v1") else f["fieldsV1"]
            for key in path:
                node = (node or {}).get(key)
            if node is not None:
                out.add(f.manager if hasattr(f, "manager") else f["manager"])
        return out
    # a Service's selector is an atomic map: owned whole
    assert owner_of(svc().metadata.managed_fields, ("f:spec", "f:selector")) == {"rewardpool-operator"}
    assert owner_of(pdb().metadata.managed_fields, ("f:spec", "f:maxUnavailable")) == {"rewardpool-operator"}
    live = co.get_namespaced_custom_object(*NAD[:2], ns, NAD[2], "ssa-roce")
    assert owner_of(live["metadata"]["managedFields"], ("f:spec", "f:config")) == {"rewardpool-operator"}
    assert pools.condition("ssa", "Ready")["status"] == "True"


def test_workers_that_fit_no_node_get_a_condition_not_pending_pods(pools, ns):
    # 1 replica of a 64-sample x 20G rollout: ~1.4 TiB segment, far above the 1 TiB nodes.
    pools.create(pool_manifest("huge", replicas=1, sizing={"samplesPerRollout": 64, "outputBytesPerSample": "20G"}))
    c = wait_for(lambda: (x := pools.condition("huge", "Degraded")) and x["status"] == "True" and x, 60,
                 what="Degraded condition")
    assert c["reason"] == "WorkersDoNotFit" and "largest RDMA node" in c["message"]
    assert pools.condition("huge", "Ready")["status"] == "False"
    assert pools.pods("huge") == []
    events = pools.events("huge")
    assert ("Warning", "WorkersDoNotFit") in [(t, r) for t, r, _ in events]
    # The registration limit is flagged too (a 1.4 TiB segment is one registration of > 64 GiB).
    assert "max_mr_size" in c["message"]


def test_a_model_claim_that_does_not_exist_is_said_until_it_does(pools, ns):
    """scorer.model.pvc (issue 34) naming a claim not in the namespace, read by the operator with the chart's
    identity (`get` on persistentvolumeclaims): Degraded ModelUnavailable with the claim and a warning event, the
    pods still created (they start once it exists); the claim created, the next pass clears it."""
    pools.create(pool_manifest("claimless", replicas=1, scorer={
        "name": "pickscore", "numFrames": 8, "batchSize": 4, "model": {"pvc": {"claimName": "reward-weights",
                                                                               "subPath": "pickscore"}}}))
    c = wait_for(lambda: (x := pools.condition("claimless", "Degraded")) and x["status"] == "True" and x, 60,
                 what="Degraded condition")
    assert c["reason"] == "ModelUnavailable" and f"PersistentVolumeClaim reward-weights not found in namespace {ns}" \
        in c["message"], c
    assert ("Warning", "ModelUnavailable") in [(t, r) for t, r, _ in pools.events("claimless")]
    wait_for(lambda: len(pools.pods("claimless")) == 1 or None, 60, what="the worker pod created anyway")
    pools.core.create_namespaced_persistent_volume_claim(ns, {
        "metadata": {"name": "reward-weights"},
        "spec": {"accessModes": ["ReadOnlyMany"], "resources": {"requests": {"storage": "1Gi"}}}})
    pools.patch("claimless", {"metadata": {"annotations": {"poke": "1"}}})
    wait_for(lambda: (x := pools.condition("claimless", "Degraded")) and x.get("reason") != "ModelUnavailable", 90,
             what="ModelUnavailable cleared once the claim exists")


def test_segment_above_the_registration_limit_is_flagged_but_runs(pools, ns):
    # One worker holding 64 x 1.2 GB / 0.9 = 85 GB: one RDMA registration above the NIC's 64 GiB limit.
    pools.create(pool_manifest("bigseg", replicas=1, sizing={"samplesPerRollout": 64, "outputBytesPerSample": "1.2G"}))
    c = wait_for(lambda: (x := pools.condition("bigseg", "Degraded")) and x["status"] == "True" and x, 60,
                 what="Degraded condition")
    assert c["reason"] == "SegmentExceedsRegistrationLimit" and "at least 2 replicas" in c["message"]
    assert ("Warning", "SegmentExceedsRegistrationLimit") in [(t, r) for t, r, _ in pools.events("bigseg")]
    pools.wait_ready("bigseg", 1)  # flagged, not blocked: the pods still run


def test_semantic_problem_is_a_condition_and_the_operator_keeps_working(pools, ns):
    pools.create(pool_manifest("typo", replicas=1, scorer={"name": "pikscore"}))
    c = wait_for(lambda: (x := pools.condition("typo", "InvalidSpec")) and x["status"] == "True" and x, 60,
                 what="InvalidSpec condition")
    assert c["reason"] == "UnknownScorer" and "pikscore" in c["message"] and "pickscore" in c["message"]
    assert pools.pods("typo") == []
    assert ("Warning", "UnknownScorer") in [(t, r) for t, r, _ in pools.events("typo")]
    # Another pool is served meanwhile, and fixing the typo brings the workers.
    pools.create(pool_manifest("fine", replicas=1))
    pools.wait_ready("fine", 1)
    pools.patch("typo", {"spec": {"scorer": {"name": "pickscore", "modelPath": "/models/pickscore"}}})
    pools.wait_ready("typo", 1)
    assert pools.condition("typo", "InvalidSpec")["status"] == "False"


def test_external_attachment_missing_blocks_pods(pools, ns):
    pools.create(pool_manifest("ext", replicas=1, network={"attachment": "roce-shared"}))
    c = wait_for(lambda: (x := pools.condition("ext", "NetworkReady")) and x["status"] == "False" and x, 60,
                 what="NetworkReady False")
    assert c["reason"] == "AttachmentNotFound" and f"{ns}/roce-shared" in c["message"]
    assert pools.pods("ext") == []
    client.CustomObjectsApi(pools.api).create_namespaced_custom_object(*NAD[:2], ns, NAD[2], {
        "apiVersion": "k8s.cni.cncf.io/v1", "kind": "NetworkAttachmentDefinition",
        "metadata": {"name": "roce-shared"}, "spec": {"config": "{}"}})
    pools.patch("ext", {"metadata": {"annotations": {"retry": "1"}}})
    pools.wait_ready("ext", 1)
    pod = pools.pods("ext")[0]
    assert json.loads(pod.metadata.annotations["k8s.v1.cni.cncf.io/networks"])[0]["name"] == "roce-shared"


def test_missing_nad_crd_gives_network_condition_and_no_broken_pods(pools, ns, cluster):
    from rewardpool_devcluster.nodes import NAD_CRD

    ext = client.ApiextensionsV1Api(pools.api)
    ext.delete_custom_resource_definition(NAD_CRD["metadata"]["name"])
    wait_for(lambda: _crd_gone(ext), 60, what="NAD CRD deleted")
    try:
        pools.create(pool_manifest("nocrd", replicas=2))
        c = wait_for(lambda: (x := pools.condition("nocrd", "NetworkReady")) and x["status"] == "False" and x, 60,
                     what="NetworkReady False")
        assert c["reason"] == "NetworkAttachmentCRDMissing" and "Multus" in c["message"]
        assert pools.pods("nocrd") == []
        assert ("Warning", "NetworkAttachmentCRDMissing") in [(t, r) for t, r, _ in pools.events("nocrd")]
    finally:
        cluster.apply_objects([NAD_CRD])
        cluster.wait_crd_established(NAD_CRD["metadata"]["name"])
    pools.patch("nocrd", {"metadata": {"annotations": {"retry": "1"}}})
    pools.wait_ready("nocrd", 2, timeout=90)


def _crd_gone(ext) -> bool:
    try:
        ext.read_custom_resource_definition("network-attachment-definitions.k8s.cni.cncf.io")
        return False
    except ApiException as e:
        return e.status == 404


def test_autoscaler_without_readable_metrics_holds_the_size(pools, ns):
    # kwok pods run no worker: no /metrics answers. The pool must keep 3 workers, not fall to the minimum.
    pools.create(pool_manifest("blind", replicas=3, autoscaling={"enabled": True, "minReplicas": 1, "maxReplicas": 6,
                                                                  "targetQueueDepth": 4, "scaleDownStabilizationSeconds": 0}))
    pools.wait_ready("blind", 3)
    c = wait_for(lambda: (x := pools.condition("blind", "ScalingActive")) and x["status"] == "False" and x, 60,
                 what="ScalingActive False")
    assert c["reason"] == "MetricsUnavailable" and "holding the current size" in c["message"]
    time.sleep(12)  # two autoscaler periods
    pool = pools.get("blind")
    assert pool["spec"]["replicas"] == 3 and pool["status"]["desiredReplicas"] == 3 and len(pools.pods("blind")) == 3
    assert ("Warning", "MetricsUnavailable") in [(t, r) for t, r, _ in pools.events("blind")]


def test_a_shadow_roll_starts_one_shadow_worker_holds_and_turning_it_off_promotes_it(pools, ns):
    from rewardpool_worker.contract import SCORER_VERSION_LABEL, SHADOW_ANNOTATION

    pools.create(pool_manifest("shd", replicas=2, rollout={"shadow": True, "shadowSamples": 50}))
    pools.wait_ready("shd", 2)
    old = {p.metadata.name for p in pools.pods("shd")}
    old_version = {p.metadata.labels[SCORER_VERSION_LABEL] for p in pools.pods("shd")}
    pools.patch("shd", {"spec": {"image": "rewardpool-worker:v2"}})  # the image is part of the scorer version

    def shadowing():
        pods = pools.pods("shd")
        shadows = [p for p in pods if SHADOW_ANNOTATION in (p.metadata.annotations or {})]
        return len(pods) == 3 and len(shadows) == 1 and shadows[0].spec.containers[0].image.endswith(":v2") \
            and {p.metadata.name for p in pods} - old == {shadows[0].metadata.name} and shadows[0]
    shadow = wait_for(shadowing, 60, what="one shadow worker beside the two old ones")
    time.sleep(5)  # a few reconciles later: still held (kwok workers report no agreement: 0 samples)
    assert shadowing() and {p.metadata.name for p in pools.pods("shd")} >= old
    st = pools.get("shd")["status"]
    assert st["shadow"]["samples"] == 0 and st["shadow"]["against"] == sorted(old_version), st["shadow"]
    assert st["shadow"]["workers"] == [shadow.metadata.name] and st["shadow"].get("promoted") is None
    assert pools.condition("shd", "Progressing")["reason"] == "ShadowScoring"
    assert st["replicas"] == 2  # the shadow is not one of the replicas
    assert any(r == "ShadowStarted" and shadow.metadata.name in m for _, r, m in pools.events("shd"))
    # the phase is recorded (the API server's schema takes it), and the old version serves: the pool is Ready
    assert st["roll"]["phase"] == "Shadow" and st["roll"]["from"] == sorted(old_version), st["roll"]
    assert pools.condition("shd", "Ready")["status"] == "True"

    # an old worker lost in the shadow phase is replaced at once by a copy of an old one (the API server takes
    # the copy of a running pod), not by the new version and not after the phase
    gone = sorted(old)[0]
    pools.core.delete_namespaced_pod(gone, ns, grace_period_seconds=0)

    def replaced():
        pods = pools.pods("shd")
        olds = [p for p in pods if p.spec.containers[0].image.endswith(":test")
                and p.metadata.labels[SCORER_VERSION_LABEL] in old_version]
        # scheduled too (CI's run read the copy before the scheduler had bound it)
        return len(pods) == 3 and len(olds) == 2 and gone not in {p.metadata.name for p in pods} and \
            all(p.spec.node_name for p in olds) and olds
    olds = wait_for(replaced, 60, what="the lost old worker replaced by a copy of an old one, scheduled")
    copy = next(p for p in olds if p.metadata.name not in old)
    assert copy.spec.automount_service_account_token is False
    assert copy.metadata.owner_references[0].controller
    old = {p.metadata.name for p in olds}

    pools.patch("shd", {"spec": {"rollout": {"shadow": False}}})  # the user stops waiting: promoted, rolled

    def rolled():
        pods = pools.pods("shd", include_terminating=True)
        return len(pods) == 2 and all(p.spec.containers[0].image.endswith(":v2") for p in pods) \
            and not ({p.metadata.name for p in pods} & old)
    wait_for(rolled, 120, what="the shadow promoted and the old workers replaced")
    promoted = next(p for p in pools.pods("shd") if p.metadata.name == shadow.metadata.name)  # it stayed
    assert SHADOW_ANNOTATION not in (promoted.metadata.annotations or {})
    assert pools.get("shd")["status"]["shadow"]["promoted"]
    assert any(r == "ShadowPromoted" and "turned off" in m for _, r, m in pools.events("shd"))


def test_a_new_judge_engine_image_is_another_scorer_version_rolled_under_the_shadow_gate(pools, ns):
    """A hosted judge's engine, as the API server and the operator process take it: the worker pods carry the
    engine container beside the worker; another engine image is another reward, so it starts one shadow worker
    with the new engine and holds (kwok workers report no agreement) while the old version serves."""
    from rewardpool_worker.contract import SCORER_VERSION_LABEL, SHADOW_ANNOTATION

    # weights from an image volume: kwok schedules the pod (a claim would have to exist and bind first)
    engine = {"kind": "vllm", "image": "vllm/vllm-openai:v0.33.0", "memory": "1Gi", "cpu": "100m",
              "model": {"image": {"reference": "registry.example/models/qwen-vl:7b"}}}
    pools.create(pool_manifest("jdg", replicas=2, rollout={"shadow": True, "shadowSamples": 50},
                               scorer={"name": "openai-judge", "batchSize": 8, "engine": engine}))
    pools.wait_ready("jdg", 2)
    pods = pools.pods("jdg")
    assert all([c.name for c in p.spec.containers] == ["worker", "engine-0"] for p in pods)
    assert all(p.spec.containers[1].image == "vllm/vllm-openai:v0.33.0" for p in pods)
    old = {p.metadata.name for p in pods}
    old_version = {p.metadata.labels[SCORER_VERSION_LABEL] for p in pods}
    assert len(old_version) == 1

    pools.patch("jdg", {"spec": {"scorer": {"engine": {"image": "vllm/vllm-openai:v0.34.0"}}}})

    def shadowing():
        pods = pools.pods("jdg")
        shadows = [p for p in pods if SHADOW_ANNOTATION in (p.metadata.annotations or {})]
        return len(pods) == 3 and len(shadows) == 1 and shadows[0].spec.containers[1].image.endswith(":v0.34.0") \
            and shadows[0].metadata.labels[SCORER_VERSION_LABEL] not in old_version and shadows[0]
    shadow = wait_for(shadowing, 60, what="one shadow worker with the new engine beside the two old ones")
    time.sleep(5)  # held: no agreement from kwok workers
    assert shadowing() and {p.metadata.name for p in pools.pods("jdg")} >= old
    assert pools.condition("jdg", "Progressing")["reason"] == "ShadowScoring"
    assert pools.condition("jdg", "Ready")["status"] == "True"  # the old version serves
    assert pools.get("jdg")["status"]["shadow"]["workers"] == [shadow.metadata.name]
