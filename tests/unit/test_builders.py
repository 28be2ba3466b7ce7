import copy
import json

import pytest

from rewardpool_operator.pool import builders, owned, sizing, validate
from rewardpool_operator.pool.placement import nodes_that_fit
from rewardpool_operator.api.spec import HASH_LABEL, Pool
from rewardpool_worker.contract import ENV_VAR, WorkerConfig
from tests.factories import allocatable_node, pool


def render(p: Pool):
    s = sizing.compute(p.spec)
    return s, builders.pod_template(p, s)


def test_nad_is_ipvlan_on_the_bond():
    nad = owned.network_attachment(pool())
    cfg = json.loads(nad["spec"]["config"])
    assert cfg == {"cniVersion": "0.3.1", "name": "p-roce", "type": "ipvlan", "master": "bond0", "mode": "l2",
                   "mtu": 4200, "ipam": {"type": "whereabouts", "range": "192.168.9.0/24"}}
    assert nad["metadata"]["ownerReferences"][0]["uid"] == "u-1"
    assert owned.network_attachment(pool(network={})) is None


def test_pod_lands_on_rdma_nodes_with_ipc_lock_and_nothing_privileged():
    s, pod = render(pool())
    spec, c = pod["spec"], pod["spec"]["containers"][0]
    assert spec["nodeSelector"] == {"feature.node.kubernetes.io/rdma.capable": "true"}
    assert c["securityContext"]["capabilities"] == {"drop": ["ALL"], "add": ["IPC_LOCK"]}
    assert c["securityContext"]["privileged"] is False and spec["hostNetwork"] is False
    assert not any("hostPath" in v for v in spec["volumes"])
    assert c["resources"]["limits"]["rdma/rdma_shared_device_a"] == "1"
    assert c["resources"]["limits"]["memory"] == c["resources"]["requests"]["memory"]
    assert json.loads(pod["metadata"]["annotations"]["k8s.v1.cni.cncf.io/networks"]) == [
        {"name": "p-roce", "namespace": "ns", "interface": "net1"}]
    shm = next(v for v in spec["volumes"] if v["name"] == "dshm")
    assert shm["emptyDir"]["medium"] == "Memory"
    assert {p["path"] for p in next(v for v in spec["volumes"] if v["name"] == "podinfo")["downwardAPI"]["items"]} >= {"annotations"}
    assert c["readinessProbe"]["httpGet"]["path"] == "/readyz" and spec["terminationGracePeriodSeconds"] >= 60


def test_tcp_pool_requests_no_rdma_device():
    _, pod = render(pool(store={"master": "mc:1", "protocol": "tcp"}, network={}))
    limits = pod["spec"]["containers"][0]["resources"]["limits"]
    assert not any(k.startswith("rdma/") for k in limits)
    assert "k8s.v1.cni.cncf.io/networks" not in pod["metadata"]["annotations"]


def test_worker_config_round_trips_through_the_contract():
    p = pool()
    s, pod = render(p)
    env = {e["name"]: e.get("value") for e in pod["spec"]["containers"][0]["env"]}
    cfg = WorkerConfig.from_json(env[ENV_VAR])
    assert cfg.store.segment_bytes == s.per_worker_bytes and cfg.store.devices == ["mlx5_0"]
    assert cfg.scorer.name == "pickscore" and cfg.scorer.num_frames == 8
    assert cfg.network_attachment == "ns/p-roce" and cfg.read_buffer_bytes == s.read_buffer_bytes
    assert {"POD_NAME", "POD_NAMESPACE", "POD_IP"} <= env.keys()


def test_gcs_fault_tolerance_reaches_the_worker_config_and_rolls_the_pods_but_not_the_scorer_version():
    ray = {"address": "ray-head.ray.svc:6379"}
    plain, ft = pool(ray=ray), pool(ray={**ray, "gcsFaultTolerance": {}})
    cfg = lambda p: WorkerConfig.from_json(  # noqa: E731
        {e["name"]: e.get("value") for e in render(p)[1]["spec"]["containers"][0]["env"]}[ENV_VAR])
    assert cfg(plain).ray.gcs_reconnect_seconds is None
    assert cfg(ft).ray.gcs_reconnect_seconds == 600  # the CRD's default, KubeRay's value
    assert cfg(pool(ray={**ray, "gcsFaultTolerance": {"reconnectTimeoutSeconds": 90}})).ray.gcs_reconnect_seconds == 90
    # the pods must restart with the new waiting rule (it decides whether a worker exits), scores do not change
    assert render(plain)[1]["metadata"]["labels"][HASH_LABEL] != render(ft)[1]["metadata"]["labels"][HASH_LABEL]
    assert builders.scorer_digest(plain) == builders.scorer_digest(ft)


def test_gpu_pool_requests_gpus_for_the_container_and_the_ray_actor():
    p = pool(scorer={"name": "pickscore", "numFrames": 8, "device": "cuda", "gpus": 2, "dtype": "bfloat16",
                     "framesPerForward": 16, "modelPath": "/m"})
    s, pod = render(p)
    res = pod["spec"]["containers"][0]["resources"]
    assert res["limits"]["nvidia.com/gpu"] == "2" and res["requests"]["nvidia.com/gpu"] == "2"
    env = {e["name"]: e.get("value") for e in pod["spec"]["containers"][0]["env"]}
    cfg = WorkerConfig.from_json(env[ENV_VAR])
    assert (cfg.scorer.device, cfg.scorer.gpus, cfg.scorer.dtype, cfg.scorer.frames_per_forward) == (
        "cuda", 2, "bfloat16", 16)
    assert s.gpus == 2 and "GPU: 2 x nvidia.com/gpu" in s.memory_formula
    # another vendor's resource name
    _, amd = render(pool(scorer={"name": "pickscore", "gpus": 1}, placement={"gpuResource": "amd.com/gpu"}))
    assert amd["spec"]["containers"][0]["resources"]["limits"]["amd.com/gpu"] == "1"
    # a CPU pool requests none and lets the worker pick the device
    _, cpu = render(pool())
    assert not any("gpu" in k for k in cpu["spec"]["containers"][0]["resources"]["limits"])
    cpu_env = {e["name"]: e.get("value") for e in cpu["spec"]["containers"][0]["env"]}
    assert WorkerConfig.from_json(cpu_env[ENV_VAR]).scorer.device == "auto"


def qos(pod) -> str:
    """The pod's QoS class as the kubelet computes it (one container here)."""
    res = pod["spec"]["containers"][0]["resources"]
    req, lim = res.get("requests", {}), res.get("limits", {})
    if all(k in lim and k in req and req[k] == lim[k] for k in ("cpu", "memory")):
        return "Guaranteed"
    return "Burstable" if req or lim else "BestEffort"


def test_a_cpu_limit_makes_the_pod_guaranteed():
    _, burstable = render(pool())
    assert qos(burstable) == "Burstable"
    _, guaranteed = render(pool(resources={"limits": {"cpu": "16"}}, scorer={"name": "pickscore", "gpus": 1}))
    res = guaranteed["spec"]["containers"][0]["resources"]
    assert qos(guaranteed) == "Guaranteed" and res["requests"]["cpu"] == "16"
    assert res["requests"]["nvidia.com/gpu"] == res["limits"]["nvidia.com/gpu"] == "1"
    # an explicit request is kept (the user chose Burstable)
    _, chosen = render(pool(resources={"requests": {"cpu": "2"}, "limits": {"cpu": "16"}}))
    assert qos(chosen) == "Burstable"


def test_mixture_components_inherit_the_shared_settings():
    p = pool(scorer={"numFrames": 8, "batchSize": 4, "device": "cuda", "gpus": 1, "modelPath": "/models/ps"},
             scorers=[{"name": "pickscore", "weight": 0.7},
                      {"class": "rm.ocr:OcrScorer", "key": "ocr", "weight": 0.3, "numFrames": 1,
                       "modelPath": "/models/ocr", "args": {"lang": "en"}}])
    s, pod = render(p)
    env = {e["name"]: e.get("value") for e in pod["spec"]["containers"][0]["env"]}
    cfg = WorkerConfig.from_json(env[ENV_VAR])
    ps, ocr = cfg.scorers
    assert cfg.scorer.ref == "" and cfg.scorer.batch_size == 4 and [c.component for c in cfg.components] == [
        "pickscore", "ocr"]
    assert (ps.num_frames, ps.model_path, ps.weight, ps.device, ps.batch_size) == (8, "/models/ps", 0.7, "cuda", 4)
    assert (ocr.num_frames, ocr.model_path, ocr.args, ocr.cls) == (1, "/models/ocr", {"lang": "en"}, "rm.ocr:OcrScorer")
    assert cfg.read_buffer_max_bytes == s.read_buffer_bytes == 4 * 269_000_000


def test_processor_path_reaches_the_worker_and_components_inherit_it():
    p = pool(scorer={"name": "pickscore", "modelPath": "/models/ps", "processorPath": "/models/laion-clip"})
    _, pod = render(p)
    env = {e["name"]: e.get("value") for e in pod["spec"]["containers"][0]["env"]}
    cfg = WorkerConfig.from_json(env[ENV_VAR])
    assert (cfg.scorer.model_path, cfg.scorer.processor_path) == ("/models/ps", "/models/laion-clip")
    mix = pool(scorer={"modelPath": "/models/ps", "processorPath": "/models/laion-clip"},
               scorers=[{"name": "pickscore"}, {"class": "rm.hps:Hps", "key": "hps", "processorPath": "/models/hps-proc"}])
    _, pod = render(mix)
    env = {e["name"]: e.get("value") for e in pod["spec"]["containers"][0]["env"]}
    ps, hps = WorkerConfig.from_json(env[ENV_VAR]).scorers
    assert (ps.processor_path, hps.processor_path) == ("/models/laion-clip", "/models/hps-proc")
    unset = WorkerConfig.from_json({e["name"]: e.get("value") for e in render(pool(
        scorer={"name": "pickscore", "modelPath": "/m"}))[1]["spec"]["containers"][0]["env"]}[ENV_VAR])
    assert unset.scorer.processor_path is None  # the worker then loads the processor from modelPath


def test_scorer_forms_are_exclusive():
    import pydantic
    import pytest

    with pytest.raises(pydantic.ValidationError, match="exactly one of scorer.name"):
        pool(scorer={"batchSize": 2})
    with pytest.raises(pydantic.ValidationError, match="drop its name/class"):
        pool(scorer={"name": "pickscore"}, scorers=[{"name": "mean-intensity"}])
    with pytest.raises(pydantic.ValidationError, match="exactly one of name"):
        pool(scorer={}, scorers=[{"weight": 1}])


def test_template_hash_changes_with_the_spec_only():
    _, a = render(pool())
    _, b = render(pool())
    _, c = render(pool(image="img:2"))
    assert a["metadata"]["labels"][HASH_LABEL] == b["metadata"]["labels"][HASH_LABEL]
    assert a["metadata"]["labels"][HASH_LABEL] != c["metadata"]["labels"][HASH_LABEL]


def test_pod_template_merges_by_name():
    _, pod = render(pool(podTemplate={"metadata": {"labels": {"team": "rl"}},
                                      "spec": {"priorityClassName": "high",
                                               "containers": [{"name": "worker", "imagePullPolicy": "Always"},
                                                              {"name": "sidecar", "image": "s"}]}}))
    names = [c["name"] for c in pod["spec"]["containers"]]
    worker = pod["spec"]["containers"][0]
    assert names == ["worker", "sidecar"] and worker["imagePullPolicy"] == "Always" and worker["image"] == "img:1"
    assert pod["spec"]["priorityClassName"] == "high" and pod["metadata"]["labels"]["team"] == "rl"


def test_semantic_checks():
    reasons = lambda p: [x.reason for x in validate.check(p.spec, render(p)[1])]  # noqa: E731
    assert reasons(pool()) == []
    assert reasons(pool(scorer={"name": "nope"})) == ["UnknownScorer"]
    assert reasons(pool(podTemplate={"spec": {"hostNetwork": True}})) == ["ForbiddenPodSetting"]
    assert reasons(pool(podTemplate={"spec": {"containers": [{"name": "worker", "securityContext": {"privileged": True}}]}})) == ["ForbiddenPodSetting"]
    assert reasons(pool(podTemplate={"spec": {"volumes": [{"name": "d", "hostPath": {"path": "/dev/infiniband"}}]}})) == ["ForbiddenPodSetting"]
    assert reasons(pool(network={})) == ["NoRoceNetwork"]
    assert reasons(pool(scorer={"name": "pickscore", "device": "cuda"})) == ["NoGpuRequested"]
    assert reasons(pool(scorer={"name": "pickscore", "device": "cpu", "dtype": "float16"})) == ["HalfPrecisionOnCpu"]
    assert reasons(pool(scorer={}, scorers=[{"name": "pickscore"}, {"name": "pikscore"}])) == ["UnknownScorer"]
    assert reasons(pool(scorer={}, scorers=[{"name": "pickscore"}, {"name": "pickscore", "weight": 2}])) == [
        "DuplicateScorer"]
    for twice, key in (([{"name": "pickscore"}, {"class": "rm.b:Bright", "key": "pickscore"}], "pickscore"),
                       ([{"name": "pickscore", "key": "ocr"}, {"class": "rm.ocr:Ocr", "key": "ocr"}], "ocr")):
        p = pool(scorer={}, scorers=twice)
        (dup,) = [x for x in validate.check(p.spec, builders.pod_template(p, sizing.compute(p.spec)))
                  if x.reason == "DuplicateScorer"]
        assert dup.blocking and f"names the reward key {key} twice" in dup.message, dup
    assert reasons(pool(scorer={}, scorers=[{"name": "pickscore"}, {"name": "pickscore", "key": "ps2"}])) == []


def test_placement_fit():
    p = pool()
    s = sizing.compute(p.spec)
    assert nodes_that_fit(p.spec, s.memory_bytes, [allocatable_node("a", "1Ti"), allocatable_node("b", "1Gi")])[0] == ["a"]
    fit, why = nodes_that_fit(p.spec, s.memory_bytes, [allocatable_node("b", "8Gi")])
    assert fit == [] and "largest RDMA node" in why and "8.0GiB" in why
    fit, why = nodes_that_fit(p.spec, s.memory_bytes, [allocatable_node("c", "1Ti", rdma=None)])
    assert fit == [] and "rdma/rdma_shared_device_a" in why
    assert "no node carries" in nodes_that_fit(p.spec, 1, [])[1]


def test_one_drain_timeout_drives_grace_and_worker():
    s, pod = render(pool(drainTimeoutSeconds=120))
    cfg = WorkerConfig.from_json(next(e["value"] for e in pod["spec"]["containers"][0]["env"] if e["name"] == ENV_VAR))
    assert cfg.drain_timeout_seconds == 120
    assert pod["spec"]["terminationGracePeriodSeconds"] == 150  # timeout + the contract's margin
    assert pod["spec"]["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}


def test_identity_covers_what_the_worker_sees_and_nothing_else():
    auto = {"enabled": True, "minReplicas": 2, "maxReplicas": 8}
    base = builders.template_hash(render(pool(replicas=2, autoscaling=auto))[1])
    # Not replicas, autoscaling bounds or the drain timeout.
    assert builders.template_hash(render(pool(replicas=5, autoscaling=auto))[1]) == base
    assert builders.template_hash(render(pool(replicas=2, autoscaling={**auto, "maxReplicas": 9}))[1]) == base
    assert builders.template_hash(render(pool(replicas=2, autoscaling=auto, drainTimeoutSeconds=30))[1]) == base
    # But the image, the network and the podTemplate.
    assert builders.template_hash(render(pool(replicas=2, autoscaling=auto, image="img:2"))[1]) != base
    net = {"ipvlan": {"master": "bond1", "ipam": {"type": "whereabouts", "range": "192.168.9.0/24"}}}
    assert builders.template_hash(render(pool(replicas=2, autoscaling=auto, network=net))[1]) != base
    pt = {"metadata": {"labels": {"team": "rl"}}}
    assert builders.template_hash(render(pool(replicas=2, autoscaling=auto, podTemplate=pt))[1]) != base


def test_fixed_pool_keeps_its_recorded_basis_when_scaled():
    p2 = pool(replicas=2)
    s2 = sizing.compute(p2.spec)
    recorded = sizing.recorded_basis(pool(replicas=4).spec, {"segment": s2.status()})
    assert recorded == 2
    s4 = sizing.compute(pool(replicas=4).spec, basis=recorded)
    assert s4.per_worker_bytes == s2.per_worker_bytes and s4.total_bytes == 2 * s2.total_bytes
    s1 = sizing.compute(pool(replicas=1).spec, basis=recorded)
    assert [p.reason for p in s1.problems] == ["SegmentTooSmall"]
    # New sizing inputs re-base.
    other = pool(replicas=4, sizing={"samplesPerRollout": 32, "outputBytesPerSample": "269M"})
    assert sizing.recorded_basis(other.spec, {"segment": s2.status()}) is None


def test_the_typed_scorer_spec_mirrors_the_crd():
    from pathlib import Path

    import yaml

    from rewardpool_operator.api.spec import Placement, Scorer, ScorerComponent

    crd = yaml.safe_load((Path(__file__).resolve().parents[2] / "crds" / "rewardpool.io_rewardpools.yaml").read_text())
    props = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]

    def fields(model):
        return {f.alias or name for name, f in model.model_fields.items()}

    assert fields(Scorer) == set(props["scorer"]["properties"])
    assert fields(ScorerComponent) == set(props["scorers"]["items"]["properties"])
    assert fields(Placement) == set(props["placement"]["properties"])
    for name, prop in {**props["scorer"]["properties"], **props["scorers"]["items"]["properties"]}.items():
        assert prop.get("description"), f"scorer field {name} has no description for kubectl explain"
    defaults = {k: v["default"] for k, v in props["scorer"]["properties"].items() if "default" in v}
    assert defaults == {k: Scorer.model_fields[k].default for k in defaults}


@pytest.mark.parametrize("change,moves", [
    ({"image": "img:2"}, True),
    ({"scorer": {"name": "pickscore", "numFrames": 4}}, True),
    ({"scorer": {"name": "pickscore", "numFrames": 8, "modelPath": "/models/v2"}}, True),
    ({"scorer": {"name": "pickscore", "numFrames": 8, "processorPath": "/models/laion"}}, True),
    ({"scorer": {"name": "pickscore", "numFrames": 8, "dtype": "bfloat16", "device": "cuda", "gpus": 1}}, True),
    ({"scorer": {"name": "mean-intensity", "numFrames": 8}}, True),
    ({"scorer": {"name": "pickscore", "numFrames": 8, "batchSize": 2}}, False),
    ({"scorer": {"name": "pickscore", "numFrames": 8, "framesPerForward": 4}}, False),
    ({"replicas": 7}, False),
    ({"drainTimeoutSeconds": 30}, False),
])
def test_the_scorer_version_moves_with_what_decides_scores_only(change, moves):
    # The outside fact: a reward differs when the model, its inputs (frames, processor) or its precision differ;
    # batching and replica counts change only speed.
    base, changed = pool(), pool(**change)
    assert (builders.scorer_digest(changed) != builders.scorer_digest(base)) is moves
    s = sizing.compute(changed.spec)
    pod = builders.pod_template(changed, s)
    assert pod["metadata"]["labels"]["rewardpool.io/scorer-version"] == builders.scorer_digest(changed)
    assert builders.worker_config(changed, s).scorer_version == builders.scorer_digest(changed)


def test_mixture_weights_are_part_of_the_scorer_version():
    a = pool(scorer={}, scorers=[{"name": "pickscore", "weight": 1.0}, {"name": "mean-intensity", "weight": 0.5}])
    b = pool(scorer={}, scorers=[{"name": "pickscore", "weight": 1.0}, {"name": "mean-intensity", "weight": 0.25}])
    assert builders.scorer_digest(a) != builders.scorer_digest(b)


def test_a_copy_of_an_old_worker_is_that_worker_as_it_was_created_not_as_it_ran():
    from rewardpool_operator.pool.builders import copy_of
    from rewardpool_worker.contract import DRAIN_ANNOTATION, SHADOW_ANNOTATION

    p = pool()
    s = sizing.compute(p.spec)
    template = builders.pod_template(p, s)
    old = copy.deepcopy(template)
    old["metadata"].update(name="p-abcde", uid="u-9", resourceVersion="7", creationTimestamp="2026-01-01T00:00:00Z")
    old["metadata"]["labels"]["rewardpool.io/template-hash"] = "old"
    old["metadata"]["annotations"].update({DRAIN_ANNOTATION: "t", SHADOW_ANNOTATION: "t",
                                           "k8s.v1.cni.cncf.io/network-status": "[...]"})
    old["spec"]["nodeName"] = "n0"
    old["status"] = {"phase": "Running", "podIP": "10.0.0.1"}
    new = copy_of(old, template)
    assert new["metadata"]["labels"] == old["metadata"]["labels"]  # its template hash and scorer version
    assert set(new["metadata"]["annotations"]) == set(template["metadata"]["annotations"])  # none added at run time
    assert new["metadata"]["generateName"] == "p-" and "name" not in new["metadata"] and "uid" not in new["metadata"]
    assert new["metadata"]["ownerReferences"] == template["metadata"]["ownerReferences"]
    assert "nodeName" not in new["spec"] and "status" not in new
    assert {k: v for k, v in new["spec"].items()} == {k: v for k, v in old["spec"].items() if k != "nodeName"}
    # the pod's security context and token mounting are the old worker's, as the operator set them
    assert new["spec"]["automountServiceAccountToken"] is False


def test_the_scoring_service_routes_http_to_ready_workers_only():
    """The pool's front door: a ClusterIP Service on the workers' http port, selecting this pool's workers; not
    publishing not-Ready addresses, so a draining or shadow worker (not Ready) gets no HTTP call."""
    from rewardpool_operator.pool.owned import headless_service, score_service
    from rewardpool_worker.contract import HTTP_PORT

    p = pool()
    svc = score_service(p)
    assert svc["metadata"]["name"] == f"{p.name}-score" and svc["spec"]["type"] == "ClusterIP"
    assert svc["spec"]["selector"] == headless_service(p)["spec"]["selector"]
    assert svc["spec"]["ports"] == [{"name": "http", "port": HTTP_PORT, "targetPort": "http"}]
    assert "publishNotReadyAddresses" not in svc["spec"]
    assert svc["metadata"]["ownerReferences"][0]["controller"] is True


def test_tenants_are_not_in_the_pod_only_whether_the_pool_has_any():
    """spec.access.tenants: no token is mounted and no tenant is in the worker's config (they are sent to the
    running workers), so a tenant added, removed or rotated is the same template; the config says only whether
    HTTP scoring needs a tenant's token (open <-> tenants is a roll: it changes who may score on a new worker)."""
    def tenants(*names):
        return {"tenants": [{"name": n, "weight": i + 1, "tokenSecret": {"name": f"{n}-token"}}
                            for i, n in enumerate(names)]}
    s = sizing.compute(pool().spec)
    pods = {k: builders.pod_template(pool(access=a), s) for k, a in (
        ("one", tenants("grpo")), ("two", tenants("grpo", "evals")), ("other", tenants("evals")), ("open", {}))}
    hashes = {k: builders.template_hash(v) for k, v in pods.items()}
    assert hashes["one"] == hashes["two"] == hashes["other"] != hashes["open"]
    for k, pod in pods.items():
        assert all("secret" not in v and "projected" not in v for v in pod["spec"]["volumes"]
                   if v["name"] != "control"), k
        cfg = WorkerConfig.from_json(next(e["value"] for e in pod["spec"]["containers"][0]["env"]
                                          if e["name"] == ENV_VAR))
        assert cfg.tenant_auth is (k != "open")


def test_duplicate_tenant_names_are_refused():
    with pytest.raises(ValueError, match="unique"):
        pool(access={"tenants": [{"name": "a", "tokenSecret": {"name": "x"}},
                                 {"name": "a", "tokenSecret": {"name": "y"}}]})


def _worker_config(p: Pool) -> WorkerConfig:
    s = sizing.compute(p.spec)
    return builders.worker_config(p, s)


def test_a_model_source_is_mounted_read_only_where_the_scorer_reads():
    """scorer.model: a PVC (with its subPath) or an OCI image as an image volume, read-only at /models/<component>,
    and the scorer's model path is that directory; a mixture component inherits the shared source unless it names
    its own (or a plain modelPath); no init container, nothing else changes."""
    p = pool(scorer={"name": "pickscore", "model": {"image": {"reference": "reg/pickscore:v1",
                                                               "pullPolicy": "IfNotPresent"}}})
    _, pod = render(p)
    worker = pod["spec"]["containers"][0]
    assert {"name": "rewardpool-model-0", "image": {"reference": "reg/pickscore:v1", "pullPolicy": "IfNotPresent"}} \
        in pod["spec"]["volumes"]
    assert {"name": "rewardpool-model-0", "mountPath": "/models/pickscore", "readOnly": True} in worker["volumeMounts"]
    assert _worker_config(p).scorer.model_path == "/models/pickscore" and "initContainers" not in pod["spec"]

    mix = pool(scorer={"batchSize": 4, "model": {"pvc": {"claimName": "weights", "subPath": "/clip/"}}},
               scorers=[{"name": "pickscore"}, {"name": "hps", "model": {"image": {"reference": "reg/hps:2"}}},
                        {"name": "ocr", "modelPath": "/mine/ocr"}])
    _, pod = render(mix)
    vols = {v["name"]: v for v in pod["spec"]["volumes"] if v["name"].startswith("rewardpool-model-")}
    mounts = {m["name"]: m for m in pod["spec"]["containers"][0]["volumeMounts"]
              if m["name"].startswith("rewardpool-model-")}
    assert vols == {"rewardpool-model-0": {"name": "rewardpool-model-0", "persistentVolumeClaim": {
                        "claimName": "weights", "readOnly": True}},
                    "rewardpool-model-1": {"name": "rewardpool-model-1", "image": {"reference": "reg/hps:2"}}}
    assert mounts == {"rewardpool-model-0": {"name": "rewardpool-model-0", "mountPath": "/models/pickscore",
                                             "readOnly": True, "subPath": "clip"},
                      "rewardpool-model-1": {"name": "rewardpool-model-1", "mountPath": "/models/hps",
                                             "readOnly": True}}
    paths = {c.name: c.model_path for c in _worker_config(mix).scorers}
    assert paths == {"pickscore": "/models/pickscore", "hps": "/models/hps", "ocr": "/mine/ocr"}

    shared = pool(scorer={"batchSize": 4}, scorers=[
        {"name": "pickscore", "model": {"pvc": {"claimName": "weights", "subPath": "clip"}}},
        {"name": "hps", "model": {"pvc": {"claimName": "weights", "subPath": "hps"}}}])
    _, pod = render(shared)
    assert [v["name"] for v in pod["spec"]["volumes"] if v["name"].startswith("rewardpool-model-")] == \
        ["rewardpool-model-0"]  # one claim, one volume
    assert [(m["mountPath"], m.get("subPath")) for m in pod["spec"]["containers"][0]["volumeMounts"]
            if m["name"] == "rewardpool-model-0"] == [("/models/pickscore", "clip"), ("/models/hps", "hps")]


def test_a_cache_source_mounts_the_nodes_copy_and_places_pods_where_it_is_ready():
    """scorer.model.cache: the claim bound to the cache's local volume, read-only with its subPath; pods required
    (default) or preferred on nodes whose copy is Ready; a mixture naming one cache twice mounts it once and is
    required there if any component requires it; the placement is part of what rolls workers."""
    p = pool(scorer={"name": "pickscore", "model": {"cache": {"name": "pick", "subPath": "clip"}}})
    _, pod = render(p)
    assert {"name": "rewardpool-model-0", "persistentVolumeClaim": {"claimName": "rewardpool-cache-pick",
                                                                    "readOnly": True}} in pod["spec"]["volumes"]
    assert {"name": "rewardpool-model-0", "mountPath": "/models/pickscore", "readOnly": True, "subPath": "clip"} \
        in pod["spec"]["containers"][0]["volumeMounts"]
    term = {"key": "cache.rewardpool.io/pick", "operator": "In", "values": ["Ready"]}
    assert pod["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"] == \
        {"nodeSelectorTerms": [{"matchExpressions": [term]}]}
    assert pod["spec"]["nodeSelector"] == p.spec.placement.rdmaNodeSelector  # still RDMA nodes too

    pref = pool(scorer={"name": "pickscore", "model": {"cache": {"name": "pick", "placement": "Preferred"}}})
    _, ppod = render(pref)
    assert "requiredDuringSchedulingIgnoredDuringExecution" not in ppod["spec"]["affinity"]["nodeAffinity"]
    assert ppod["spec"]["affinity"]["nodeAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"][0][
        "preference"] == {"matchExpressions": [term]}
    assert builders.template_hash(ppod) != builders.template_hash(pod)


def test_a_podtemplate_node_affinity_keeps_the_caches_placement():
    """A template that pins workers to a GPU kind by node affinity: its term and the cache's both hold (the
    template's merge replaces lists, so the cache's term is joined after it), its preference stays beside."""
    gpu = {"key": "gpu", "operator": "In", "values": ["h200"]}
    pick = {"key": "cache.rewardpool.io/pick", "operator": "In", "values": ["Ready"]}
    template = {"spec": {"affinity": {"nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{"matchExpressions": [gpu]}]},
        "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 5, "preference": {"matchExpressions": [gpu]}}]}}}}
    p = pool(scorer={"name": "pickscore", "model": {"cache": {"name": "pick"}}}, podTemplate=template)
    _, pod = render(p)
    node = pod["spec"]["affinity"]["nodeAffinity"]
    assert node["requiredDuringSchedulingIgnoredDuringExecution"] == {"nodeSelectorTerms": [
        {"matchExpressions": [gpu, pick]}]}
    assert node["preferredDuringSchedulingIgnoredDuringExecution"] == [
        {"weight": 5, "preference": {"matchExpressions": [gpu]}}]
    assert p.spec.podTemplate.spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"] \
        == {"nodeSelectorTerms": [{"matchExpressions": [gpu]}]}  # the spec itself untouched

    mix = pool(scorer={"batchSize": 4}, scorers=[
        {"name": "pickscore", "model": {"cache": {"name": "w", "subPath": "clip", "placement": "Preferred"}}},
        {"name": "hps", "model": {"cache": {"name": "w", "subPath": "hps"}}}])
    assert builders.model_caches(mix) == {"w": "Required"}
    _, mpod = render(mix)
    assert [v["name"] for v in mpod["spec"]["volumes"] if v["name"].startswith("rewardpool-model-")] == \
        ["rewardpool-model-0"]
    assert "affinity" not in render(pool(scorer={"name": "pickscore", "modelPath": "/m"}))[1]["spec"]
    with pytest.raises(ValueError, match="exactly one source"):
        pool(scorer={"name": "pickscore", "model": {"cache": {"name": "w"}, "pvc": {"claimName": "w"}}})


def test_the_scorer_version_follows_the_model_source():
    """Another image or claim is another model: the scorer version (and so a roll, with shadow scoring when asked)
    changes with the source's reference, not only with modelPath; pools without a source keep their version."""
    v = lambda **sc: builders.scorer_digest(pool(scorer={"name": "pickscore", **sc}))  # noqa: E731
    a = v(model={"image": {"reference": "reg/pickscore:v1"}})
    assert a == v(model={"image": {"reference": "reg/pickscore:v1", "pullPolicy": "Always"}})  # how, not what
    assert a != v(model={"image": {"reference": "reg/pickscore:v2"}})
    assert v(model={"pvc": {"claimName": "w"}}) != v(model={"pvc": {"claimName": "w", "subPath": "v2"}})
    assert v(model={"pvc": {"claimName": "w"}}) != v(model={"pvc": {"claimName": "w2"}})
    assert v(modelPath="/models/pickscore") != v(model={"pvc": {"claimName": "w"}})  # same path, not the same thing
    assert v(model={"cache": {"name": "w"}}) != v(model={"pvc": {"claimName": "w"}})
    assert v(model={"cache": {"name": "w"}}) != v(model={"cache": {"name": "w", "subPath": "v2"}})
    assert v(model={"cache": {"name": "w"}}) == v(model={"cache": {"name": "w", "placement": "Preferred"}})


def test_a_model_source_and_a_path_are_refused_together_and_template_cannot_take_its_volume():
    with pytest.raises(ValueError, match="not both"):
        pool(scorer={"name": "pickscore", "modelPath": "/m", "model": {"pvc": {"claimName": "w"}}})
    with pytest.raises(ValueError, match="exactly one source"):
        pool(scorer={"name": "pickscore", "model": {"pvc": {"claimName": "w"}, "image": {"reference": "r"}}})
    reasons = lambda p: [x.reason for x in validate.check(p.spec, render(p)[1])]  # noqa: E731
    src = {"name": "pickscore", "model": {"pvc": {"claimName": "w"}}}
    assert reasons(pool(scorer=src)) == []
    assert reasons(pool(scorer=src, podTemplate={"spec": {"volumes": [
        {"name": "rewardpool-model-0", "emptyDir": {}}]}})) == ["OwnedPodField"]
    assert reasons(pool(scorer=src, podTemplate={"spec": {"containers": [{"name": "worker", "volumeMounts": [
        {"name": "rewardpool-model-0", "mountPath": "/elsewhere"}]}]}})) == ["OwnedPodField"]


def test_model_sources_stay_within_restricted_pod_security():
    from rewardpool_operator.pool import podsecurity

    for source in ({"pvc": {"claimName": "w"}}, {"image": {"reference": "reg/m:1"}}, {"cache": {"name": "pick"}}):
        p = pool(podSecurity="restricted", scorer={"name": "pickscore", "model": source})
        _, pod = render(p)
        assert podsecurity.violations(pod, "restricted", {"worker": frozenset({"IPC_LOCK"})}) == [], source


def test_the_caches_current_copy_is_mounted_placed_and_rolls_the_pool():
    """The copy a cache names now ({cache: identity}, from its spec): the pods mount it (the identity's folder, then
    the subPath) and are placed where it is offered; another copy (the cache's source changed) is another pod
    template and another scorer version, so the pool rolls as for any change of weights; a pool that uses no cache
    keeps its template and version whatever copies are known."""
    p = pool(scorer={"name": "pickscore", "model": {"cache": {"name": "pick", "subPath": "clip"}}})
    s = sizing.compute(p.spec)
    a, b = builders.pod_template(p, s, {"pick": "id1"}), builders.pod_template(p, s, {"pick": "id2"})
    mount = lambda pod: next(m for m in pod["spec"]["containers"][0]["volumeMounts"]  # noqa: E731
                             if m["name"] == "rewardpool-model-0")
    assert mount(a)["subPath"] == "id1/clip" and mount(b)["subPath"] == "id2/clip"
    req = lambda pod: pod["spec"]["affinity"]["nodeAffinity"][  # noqa: E731
        "requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"][0]["matchExpressions"]
    assert req(a) == [{"key": "id1.copy.rewardpool.io/pick", "operator": "In", "values": ["Ready"]}]
    assert builders.template_hash(a) != builders.template_hash(b)
    version = lambda pod: pod["metadata"]["labels"]["rewardpool.io/scorer-version"]  # noqa: E731
    assert version(a) != version(b)
    cfg = lambda pod: WorkerConfig.from_json(next(  # noqa: E731
        e["value"] for e in pod["spec"]["containers"][0]["env"] if e["name"] == ENV_VAR))
    assert cfg(a).scorer_version == version(a) and cfg(b).scorer_version == version(b)
    # the same copy: the same template; with the copy not known yet (no cache), the phase label places it
    assert builders.template_hash(builders.pod_template(p, s, {"pick": "id1"})) == builders.template_hash(a)
    unknown = builders.pod_template(p, s)
    assert mount(unknown)["subPath"] == "clip"
    assert req(unknown) == [{"key": "cache.rewardpool.io/pick", "operator": "In", "values": ["Ready"]}]
    plain = pool()
    ps = sizing.compute(plain.spec)
    assert builders.pod_template(plain, ps, {"pick": "id1"}) == builders.pod_template(plain, ps)
    # a cache named by two components: one copy for both, at their own subPaths
    mix = pool(scorer={"batchSize": 4}, scorers=[
        {"name": "pickscore", "model": {"cache": {"name": "w", "subPath": "clip"}}},
        {"name": "hps", "model": {"cache": {"name": "w"}}}])
    mpod = builders.pod_template(mix, sizing.compute(mix.spec), {"w": "id9"})
    assert [m.get("subPath") for m in mpod["spec"]["containers"][0]["volumeMounts"]
            if m["name"] == "rewardpool-model-0"] == ["id9/clip", "id9"]
