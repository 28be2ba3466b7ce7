"""The CRD on the real API server: invalid manifests are rejected at admission with a message that names the
field and the problem; valid ones get their defaults; `kubectl explain` describes the fields."""
from __future__ import annotations

import copy
import json

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from rewardpool_devcluster.stack import kubectl

VALID = {
    "apiVersion": "rewardpool.io/v1alpha1", "kind": "RewardPool", "metadata": {"name": "v"},
    "spec": {"image": "w:1", "scorer": {"name": "mean-intensity"}, "store": {"master": "mc:50051", "protocol": "tcp"},
             "sizing": {"samplesPerRollout": 8, "outputBytesPerSample": "10Mi"}},
}


def with_spec(path: str, value, drop: bool = False) -> dict:
    obj = copy.deepcopy(VALID)
    *parents, leaf = path.split(".")
    node = obj["spec"]
    for p in parents:
        node = node.setdefault(p, {})
    if drop:
        node.pop(leaf, None)
    else:
        node[leaf] = value
    return obj


def mixture(*components) -> dict:
    obj = with_spec("scorer", {"batchSize": 8})
    obj["spec"]["scorers"] = list(components)
    return obj


def rdma_without_device() -> dict:
    obj = with_spec("store.protocol", "rdma")
    obj["spec"]["placement"] = {"rdmaResource": {"count": 0}}
    return obj


# (manifest, substrings the rejection must contain: the field and the problem)
INVALID = [
    (with_spec("replicas", -1), ["spec.replicas", "greater than or equal to 0"]),
    (with_spec("image", None, drop=True), ["spec.image", "Required"]),
    (with_spec("scorer.class", "pkg.mod:Cls"), ["scorer", "exactly one of scorer.name"]),
    (with_spec("scorer.name", None, drop=True), ["scorer", "exactly one of scorer.name"]),
    (with_spec("scorer.class", "not-an-import-path"), ["spec.scorer.class", "should match"]),
    (with_spec("scorer.numFrames", 0), ["spec.scorer.numFrames", "greater than or equal to 1"]),
    (with_spec("store.protocol", "udp"), ["spec.store.protocol", "Unsupported value", "rdma", "tcp"]),
    (with_spec("store.master", None, drop=True), ["spec.store.master", "Required"]),
    (with_spec("store.master", "no-port"), ["spec.store.master", "should match"]),
    (with_spec("store.master", "etcd://"), ["spec.store.master", "should match"]),
    (with_spec("store.master", "etcd://e1:2379;"), ["spec.store.master", "should match"]),
    (with_spec("store.master", "http://mc:50051"), ["spec.store.master", "should match"]),
    (with_spec("ray.gcsFaultTolerance", True), ["spec.ray.gcsFaultTolerance", "must be of type object"]),
    (with_spec("store.segmentSize", "lots"), ["spec.store.segmentSize", "should match"]),
    (with_spec("store.localBufferSize", "1 GB"), ["spec.store.localBufferSize", "should match"]),
    (with_spec("sizing", None, drop=True), ["spec.store.segmentSize", "computed from spec.sizing"]),
    (with_spec("sizing.highWatermark", 1.5), ["spec.sizing.highWatermark", "less than or equal to 1"]),
    (with_spec("sizing.samplesPerRollout", 0), ["spec.sizing.samplesPerRollout", "greater than or equal to 1"]),
    (with_spec("autoscaling", {"enabled": True, "minReplicas": 5, "maxReplicas": 2}),
     ["spec.autoscaling", "minReplicas must not exceed autoscaling.maxReplicas"]),
    (with_spec("autoscaling", {"enabled": True, "minReplicas": 2, "maxReplicas": 4}),
     ["spec.replicas", "within [autoscaling.minReplicas, autoscaling.maxReplicas]"]),
    (with_spec("network", {"ipvlan": {"ipam": {"type": "whereabouts"}}}), ["spec.network.ipvlan.master", "Required"]),
    (with_spec("network", {"ipvlan": {"master": "bond0", "mode": "l4", "ipam": {}}}),
     ["spec.network.ipvlan.mode", "Unsupported value"]),
    (with_spec("network", {"ipvlan": {"master": "bond0", "ipam": {}}, "attachment": "roce"}),
     ["network", "at most one of network.ipvlan"]),
    (with_spec("network", {"ipvlan": {"master": "bond0", "mtu": 100, "ipam": {}}}),
     ["spec.network.ipvlan.mtu", "greater than or equal to 576"]),
    (rdma_without_device(), ["spec.store.protocol", "rdma needs an RDMA device"]),
    (with_spec("autoscaling", {"targetQueueDepth": 0}), ["spec.autoscaling.targetQueueDepth", "greater than or equal to 1"]),
    # fields a worker cannot start without, and values it could never use
    (with_spec("scorer", {"name": "pickscore"}), ["spec.scorer.modelPath", "pickscore needs scorer.model (a pvc or image"]),
    (with_spec("scorer", {"name": "pickscore", "modelPath": ""}), ["spec.scorer.modelPath", "or scorer.modelPath"]),
    (with_spec("network", {"ipvlan": {"master": "bond0", "ipam": {"type": "whereabouts", "range": "192.168.1.0"}}}),
     ["spec.network.ipvlan.ipam.range", "must be a CIDR"]),
    (with_spec("network", {"ipvlan": {"master": "bond0", "ipam": {"type": "host-local", "subnet": "10.0.0.0/33"}}}),
     ["spec.network.ipvlan.ipam.subnet", "must be a CIDR"]),
    # privilege a podTemplate may not ask for (the rest are refused by the operator: tests/integration/test_blocking.py)
    (with_spec("podTemplate", {"spec": {"hostNetwork": True}}), ["spec.podTemplate.spec", "hostNetwork is not allowed"]),
    (with_spec("podTemplate", {"spec": {"hostPID": True}}), ["spec.podTemplate.spec", "hostPID is not allowed"]),
    (with_spec("podTemplate", {"spec": {"hostIPC": True}}), ["spec.podTemplate.spec", "hostIPC is not allowed"]),
    (with_spec("podTemplate", {"spec": {"nodeName": "n1"}}), ["spec.podTemplate.spec", "nodeName is not allowed"]),
    (with_spec("podTemplate", {"spec": {"serviceAccountName": "admin"}}),
     ["spec.podTemplate.spec", "serviceAccountName is not allowed"]),
    (with_spec("podTemplate", {"spec": {"automountServiceAccountToken": True}}),
     ["spec.podTemplate.spec", "automountServiceAccountToken is not allowed"]),
    (with_spec("podTemplate", {"metadata": {"labels": {"rewardpool.io/pool": "other"}}}),
     ["spec.podTemplate.metadata.labels", "cannot set rewardpool.io/*"]),
    (with_spec("podTemplate", {"metadata": {"annotations": {"rewardpool.io/drain-requested-at": "x"}}}),
     ["spec.podTemplate.metadata.annotations", "cannot set rewardpool.io/*"]),
    (with_spec("scorer.device", "tpu"), ["spec.scorer.device", "Unsupported value"]),
    (with_spec("scorer.device", "cuda"), ["spec.scorer.gpus", "device cuda needs scorer.gpus >= 1"]),
    (with_spec("scorer", {"name": "pickscore", "device": "cpu", "dtype": "float16"}),
     ["spec.scorer.dtype", "float16 and bfloat16 are for GPUs"]),
    (with_spec("scorer.gpus", -1), ["spec.scorer.gpus", "greater than or equal to 0"]),
    (with_spec("scorer.framesPerForward", 0), ["spec.scorer.framesPerForward", "greater than or equal to 1"]),
    (with_spec("scorers", [{"name": "pickscore"}]), ["spec.scorer", "with spec.scorers set neither"]),
    (with_spec("scorers", [{"weight": 1}]), ["spec.scorers[0]", "exactly one of name"]),
    (with_spec("scorers", []), ["spec.scorers", "at least 1 item"]),
    # a reward key named twice: one component's scores would overwrite the other's
    (mixture({"name": "mean-intensity"}, {"name": "mean-intensity", "weight": 2}),
     ["spec.scorers", "names the reward key mean-intensity twice"]),
    (mixture({"name": "mean-intensity", "key": "ocr"}, {"class": "rm.ocr:Ocr", "key": "ocr"}),
     ["spec.scorers", "names the reward key ocr twice"]),
    (mixture({"name": "mean-intensity"}, {"class": "rm.b:Bright", "key": "mean-intensity"}),
     ["spec.scorers", "names the reward key mean-intensity twice"]),
    (with_spec("placement", {"gpuResource": "nvidia com/gpu"}), ["spec.placement.gpuResource", "should match"]),
]


@pytest.mark.parametrize("manifest,expected", INVALID, ids=[f"{i:02d}-{e[0]}" for i, (_, e) in enumerate(INVALID)])
def test_invalid_manifest_is_rejected_with_a_clear_message(chart, api, manifest, expected):
    with pytest.raises(ApiException) as exc:
        client.CustomObjectsApi(api).create_namespaced_custom_object(
            "rewardpool.io", "v1alpha1", "default", "rewardpools", manifest)
    assert exc.value.status == 422, exc.value.body
    message = json.loads(exc.value.body)["message"]
    for part in expected:
        assert part in message, f"{part!r} not in: {message}"


def test_kubectl_apply_shows_the_rejection_to_a_person(chart, tmp_path):
    bad = with_spec("store.protocol", "udp")
    res = kubectl(chart, "apply", "-f", "-", input=json.dumps(bad), check=False)
    assert res.returncode != 0
    assert 'spec.store.protocol: Unsupported value: "udp"' in res.stderr


def test_valid_manifest_gets_defaults(chart, api, ns):
    obj = client.CustomObjectsApi(api).create_namespaced_custom_object(
        "rewardpool.io", "v1alpha1", ns, "rewardpools", copy.deepcopy(VALID))
    spec = obj["spec"]
    assert spec["replicas"] == 1 and spec["store"]["segmentSize"] == "auto"
    assert spec["store"]["metadataServer"] == "P2PHANDSHAKE" and spec["sizing"]["highWatermark"] == 0.9
    assert spec["placement"]["rdmaNodeSelector"] == {"feature.node.kubernetes.io/rdma.capable": "true"}
    assert spec["placement"]["rdmaResource"] == {"name": "rdma/rdma_shared_device_a", "count": 1}


@pytest.mark.parametrize("master", ["mc.store.svc:50051", "etcd://etcd-0.etcd:2379;etcd-1.etcd:2379;10.0.0.3:2379"])
def test_a_plain_or_highly_available_store_master_is_admitted(chart, api, ns, master):
    obj = copy.deepcopy(VALID)
    obj["metadata"] = {"name": "ha" if master.startswith("etcd") else "plain"}
    obj["spec"]["store"]["master"] = master
    made = client.CustomObjectsApi(api).create_namespaced_custom_object(
        "rewardpool.io", "v1alpha1", ns, "rewardpools", obj)
    assert made["spec"]["store"]["master"] == master


def test_gcs_fault_tolerance_is_admitted_with_kuberays_default_timeout(chart, api, ns):
    obj = copy.deepcopy(VALID)
    obj["metadata"] = {"name": "gcs-ft"}
    obj["spec"]["ray"] = {"address": "ray-head.ray.svc:6379", "gcsFaultTolerance": {}}
    made = client.CustomObjectsApi(api).create_namespaced_custom_object(
        "rewardpool.io", "v1alpha1", ns, "rewardpools", obj)
    assert made["spec"]["ray"]["gcsFaultTolerance"] == {"reconnectTimeoutSeconds": 600}
    assert "gcsFaultTolerance" not in client.CustomObjectsApi(api).create_namespaced_custom_object(
        "rewardpool.io", "v1alpha1", ns, "rewardpools", {**copy.deepcopy(VALID), "metadata": {"name": "no-ft"}}
    )["spec"]["ray"]


def test_kubectl_explain_describes_the_store(chart):
    out = kubectl(chart, "explain", "rewardpool.spec.store").stdout
    assert "Mooncake store" in out and "segmentSize" in out and "protocol" in out
    out = kubectl(chart, "explain", "rewardpool.spec.store.segmentSize").stdout
    assert "auto" in out and "pure readers" in out


def test_gpu_and_mixture_fields_get_defaults_and_are_explained(chart, api, ns):
    mixture = copy.deepcopy(VALID)
    mixture["spec"]["scorer"] = {"gpus": 1, "device": "cuda"}
    mixture["spec"]["scorers"] = [{"name": "pickscore"}, {"class": "rm.ocr:Ocr", "key": "ocr", "weight": 0.5,
                                                             "args": {"k": [1]}}]
    spec = client.CustomObjectsApi(api).create_namespaced_custom_object(
        "rewardpool.io", "v1alpha1", ns, "rewardpools", mixture)["spec"]
    assert spec["scorer"] == {"gpus": 1, "device": "cuda", "dtype": "float32", "framesPerForward": 32, "batchSize": 8}
    assert spec["scorers"][0]["weight"] == 1 and spec["scorers"][1]["args"] == {"k": [1]}
    assert spec["scorers"][0]["required"] is True  # a component is required unless it says otherwise
    assert spec["placement"]["gpuResource"] == "nvidia.com/gpu"
    single = client.CustomObjectsApi(api).create_namespaced_custom_object(
        "rewardpool.io", "v1alpha1", ns, "rewardpools", {**copy.deepcopy(VALID), "metadata": {"name": "single"}})
    assert single["spec"]["scorer"]["device"] == "auto" and single["spec"]["scorer"]["gpus"] == 0
    out = kubectl(chart, "explain", "rewardpool.spec.scorer.gpus").stdout
    assert "num_gpus" in out and "gpuResource" in out
    out = kubectl(chart, "explain", "rewardpool.spec.scorers").stdout
    assert "weighted" in out and "read once" in out


def test_one_scorer_twice_under_two_keys_is_admitted(chart, api, ns):
    """The key-twice rule judges keys, not scorers: the same built-in twice, one renamed, is a valid mixture."""
    obj = mixture({"name": "mean-intensity"}, {"name": "mean-intensity", "key": "brightness", "weight": 0.5})
    spec = client.CustomObjectsApi(api).create_namespaced_custom_object(
        "rewardpool.io", "v1alpha1", ns, "rewardpools", {**obj, "metadata": {"name": "two-keys"}})["spec"]
    assert [c.get("key") for c in spec["scorers"]] == [None, "brightness"]


def test_the_hosted_judge_example_is_admitted_with_its_engines_defaults_and_explained(chart, api, ns):
    """examples/hosted-judge-pool.yaml as a user applies it: admitted, the engine's defaults filled in, and what the
    API server stored renders to a pod whose engine container is the example's (the typed spec agrees with it)."""
    from pathlib import Path

    import yaml

    from rewardpool_operator.api.spec import Pool
    from rewardpool_operator.pool import builders, sizing

    example = yaml.safe_load((Path(__file__).resolve().parents[2] / "examples" / "hosted-judge-pool.yaml").read_text())
    made = client.CustomObjectsApi(api).create_namespaced_custom_object(
        "rewardpool.io", "v1alpha1", ns, "rewardpools", example)
    engine = made["spec"]["scorer"]["engine"]
    assert engine["kind"] == "vllm" and engine["gpus"] == 1 and engine["startupSeconds"] == 1200
    pool = Pool.from_object(made)
    pod = builders.pod_template(pool, sizing.compute(pool.spec))
    (e,) = [c for c in pod["spec"]["containers"] if c["name"] == "engine-0"]
    assert e["command"][:3] == ["vllm", "serve", "/models/openai-judge"]
    assert e["command"][-3:] == ["--enable-prefix-caching", "--limit-mm-per-prompt", '{"image": 1}']
    assert e["resources"]["limits"] == {"memory": "48Gi", "nvidia.com/gpu": "1"}
    defaulted = client.CustomObjectsApi(api).create_namespaced_custom_object("rewardpool.io", "v1alpha1", ns, "rewardpools", {
        **copy.deepcopy(VALID), "metadata": {"name": "tiny-judge"},
        "spec": {**copy.deepcopy(VALID["spec"]), "scorer": {"name": "openai-judge", "engine": {
            "kind": "llamacpp", "model": {"pvc": {"claimName": "w"}}, "modelFile": "j.gguf"}}}})
    assert {k: defaulted["spec"]["scorer"]["engine"][k] for k in ("gpus", "memory", "cpu", "shmSize", "startupSeconds")} \
        == {"gpus": 0, "memory": "8Gi", "cpu": "2", "shmSize": "1Gi", "startupSeconds": 1800}
    out = kubectl(chart, "explain", "rewardpool.spec.scorer.engine").stdout
    assert "inference engine the pool runs beside each worker" in out and "servedModelName" in out
