"""What the dev cluster runs on its real node besides the operator: the Mooncake master and a Ray head as pods
with Services (from the worker image), and RewardPool manifests that land on the real node.

Choice: devcluster objects, not chart components. The chart installs the operator a user runs against their
own store and Ray; a store master and a Ray head are cluster infrastructure with their own lifecycles (and
usually their own charts). The dev cluster creates them here, from the worker image (which carries
`mooncake_master` and `ray`), so the demo and the tests use the images the project builds.
"""
from __future__ import annotations

import copy
import json

from rewardpool_worker.contract import RAY_GCS_RECONNECT_ENV

from .realnode_config import NODE_LABEL, NODE_NAME, TOLERATION

INFRA_NS = "rewardpool"
MASTER_PORT, MASTER_METRICS_PORT = 50051, 9003
RAY_PORT = 6379
# what is not a pool's worker (the store master, the Ray head, a training job) runs on the first real node: with a
# second one, the tests take that one away (drain, loss) under the pool, as a cluster's own services would not be
ON_REAL_NODE = {"nodeSelector": {NODE_LABEL: "real", "kubernetes.io/hostname": NODE_NAME}, "tolerations": [TOLERATION]}
FIRST_REAL_NODE = ON_REAL_NODE["nodeSelector"]


def _deployment(name: str, ns: str, image: str, command: list[str], ports: list[dict], memory: str,
                readiness: dict) -> dict:
    labels = {"app.kubernetes.io/name": name, "app.kubernetes.io/part-of": "rewardpool-devcluster"}
    return {
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "namespace": ns, "labels": labels},
        "spec": {"replicas": 1, "strategy": {"type": "Recreate"}, "selector": {"matchLabels": labels},
                 "template": {"metadata": {"labels": labels}, "spec": {
                     **copy.deepcopy(ON_REAL_NODE),
                     "enableServiceLinks": False, "automountServiceAccountToken": False,
                     "terminationGracePeriodSeconds": 5,
                     "containers": [{
                         "name": name, "image": image, "imagePullPolicy": "IfNotPresent", "command": command,
                         "env": [{"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}],
                         "ports": ports, "readinessProbe": readiness,
                         "resources": {"requests": {"cpu": "50m", "memory": memory}, "limits": {"memory": memory}},
                         "volumeMounts": [{"name": "dshm", "mountPath": "/dev/shm"}]}],
                     "volumes": [{"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "512Mi"}}]}}}}


def _service(name: str, ns: str, ports: list[dict]) -> dict:
    return {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name, "namespace": ns},
            "spec": {"selector": {"app.kubernetes.io/name": name},
                     "ports": [{"name": p["name"], "port": p["containerPort"], "targetPort": p["name"]}
                               for p in ports]}}


def infra_objects(worker_image: str, ns: str = INFRA_NS, ray_attachment: str | None = None) -> list[dict]:
    """Namespace, mooncake-master (Deployment + Service) and ray-head (Deployment + Service); `ray_attachment`:
    see ray_head_objects."""
    mports = [{"name": "rpc", "containerPort": MASTER_PORT}, {"name": "metrics", "containerPort": MASTER_METRICS_PORT}]
    master = _deployment(
        "mooncake-master", ns, worker_image,
        ["mooncake_master", "--rpc_address=0.0.0.0", f"--rpc_port={MASTER_PORT}",
         "--enable_http_metadata_server=false", "--metrics_host=0.0.0.0", f"--metrics_port={MASTER_METRICS_PORT}",
         "--default_kv_lease_ttl=10000", "--client_ttl=5"],
        mports, "512Mi", {"httpGet": {"path": "/health", "port": "metrics"}, "periodSeconds": 1})
    return [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}},
            master, _service("mooncake-master", ns, mports),
            *ray_head_objects("ray-head", worker_image, ns, attachment=ray_attachment)]


def ray_head_objects(name: str, worker_image: str, ns: str = INFRA_NS, redis: str | None = None,
                     attachment: str | None = None) -> list[dict]:
    """A Ray head (Deployment + Service). With `redis` (host:port) its GCS is fault tolerant, as KubeRay's
    gcsFaultToleranceOptions makes it: the GCS keeps its tables in that Redis, under a namespace that stays the
    same across restarts, so a new head pod reloads the actors, their names and the nodes.
    `attachment` (namespace/name): the head on the workers' secondary network too. Workers give Ray their
    store address, and the GCS health-checks each raylet there: from a pod without that network the check
    reaches a worker on another node through the bridge, but the worker answers through its node's pod network,
    whose conntrack never saw the SYN (INVALID: kube-proxy drops it) and the GCS marks the node dead."""
    rports = [{"name": "gcs", "containerPort": RAY_PORT}]
    head = _deployment(
        name, ns, worker_image,
        ["sh", "-c", f"exec ray start --head --block --port={RAY_PORT} --node-ip-address=$POD_IP --num-cpus=0 "
                     "--include-dashboard=false --disable-usage-stats --object-store-memory=134217728"],
        rports, "1536Mi", {"tcpSocket": {"port": "gcs"}, "periodSeconds": 1})
    if attachment:
        head["spec"]["template"]["metadata"]["annotations"] = {"k8s.v1.cni.cncf.io/networks": attachment}
    if redis:
        head["spec"]["template"]["spec"]["containers"][0]["env"] += [
            {"name": "RAY_REDIS_ADDRESS", "value": redis},
            {"name": "RAY_external_storage_namespace", "value": f"{ns}-{name}"}]
    return [head, _service(name, ns, rports)]




def real_node_pool(name: str, namespace: str, image: str, *, replicas: int = 2, attachment: str | None = None,
                   infra_ns: str = INFRA_NS, samples: int = 8, output_bytes: str = "4M",
                   drain_timeout: int = 120, cpu: str = "500m", scorer: dict | None = None,
                   scorers: list[dict] | None = None,
                   frames_per_sample: int | None = None,
                   ray_head: str = "ray-head", gcs_reconnect: int | None = None,
                   tenants: list[dict] | None = None) -> dict:
    """A RewardPool whose workers run on the real node: selected by its label, tolerating its taint, tcp store
    (the node is labelled RDMA-capable for placement but has no RDMA device); the mean-intensity scorer unless
    `scorer` says otherwise (or `scorers`: a mixture, `scorer` then holding what they share; a model from a claim
    or an image through scorer.model).
    `gcs_reconnect`: the Ray head's GCS is fault tolerant (spec.ray.gcsFaultTolerance with this timeout)."""
    spec = {
        "replicas": replicas, "image": image,
        "scorer": scorer or {"name": "mean-intensity", "numFrames": 4, "batchSize": 4, "modelMemory": "64Mi"},
        "store": {"master": f"mooncake-master.{infra_ns}.svc.cluster.local:{MASTER_PORT}",
                  "metricsAddress": f"mooncake-master.{infra_ns}.svc.cluster.local:{MASTER_METRICS_PORT}",
                  "metadataServer": "P2PHANDSHAKE", "protocol": "tcp", "segmentSize": "auto",
                  "localBufferSize": "64Mi"},
        "sizing": {"samplesPerRollout": samples, "outputBytesPerSample": output_bytes, "latentRollouts": 0,
                   "highWatermark": 0.9},
        "placement": {"rdmaNodeSelector": {"feature.node.kubernetes.io/rdma.capable": "true", NODE_LABEL: "real"},
                      "rdmaResource": {"count": 0}, "tolerations": [TOLERATION]},
        "ray": {"address": f"{ray_head}.{infra_ns}.svc.cluster.local:{RAY_PORT}", "namespace": "rewardpool",
                **({"gcsFaultTolerance": {"reconnectTimeoutSeconds": gcs_reconnect}} if gcs_reconnect else {})},
        "drainTimeoutSeconds": drain_timeout,
        # two workers and the infrastructure share a 2-core node: half a core each (the request is also the
        # container's CPU weight under contention: 100m made `ray start` take a minute), no CPU limit
        "resources": {"requests": {"cpu": cpu}},
        "podTemplate": {"spec": {"containers": [{"name": "worker", "imagePullPolicy": "IfNotPresent",
                                                 "env": [{"name": "REWARDPOOL_RAY_CPUS", "value": "1"}]}]}},
    }
    if scorers:  # a mixture: `scorer` holds what the components share
        spec["scorers"] = scorers
    if tenants:  # spec.access.tenants: who may score over HTTP
        spec["access"] = {"tenants": tenants}
    if attachment:
        spec["network"] = {"attachment": attachment}
    if frames_per_sample:
        spec["sizing"]["framesPerSample"] = frames_per_sample
    return {"apiVersion": "rewardpool.io/v1alpha1", "kind": "RewardPool",
            "metadata": {"name": name, "namespace": namespace}, "spec": spec}


def rollout_job_objects(name: str, namespace: str, image: str, pool: str, *, samples: int = 16, frames: int = 9,
                        height: int = 64, width: int = 96, batch: int = 4, rounds: int = 1, pause: float = 0.0,
                        attachment: str | None = None, infra_ns: str = INFRA_NS, scale: float = 1.0,
                        pattern: str = "uniform", hold: float = 0.0, ray_head: str = "ray-head",
                        gcs_reconnect: int | None = None, group: str | None = None,
                        stop_file: str | None = None, prompt: str | None = None) -> list[dict]:
    """A ConfigMap holding rollout_job.py and a Job running it on the real node (a training job's reward step).
    `gcs_reconnect`: its Ray node and driver wait that long for an unreachable GCS (a fault-tolerant head)."""
    from pathlib import Path

    script = (Path(__file__).with_name("rollout_job.py")).read_text()
    args = [pool, namespace, f"--master=mooncake-master.{infra_ns}.svc.cluster.local:{MASTER_PORT}",
            f"--ray={ray_head}.{infra_ns}.svc.cluster.local:{RAY_PORT}", f"--samples={samples}",
            f"--frames={frames}", f"--height={height}", f"--width={width}", f"--batch={batch}",
            f"--rounds={rounds}", f"--pause={pause}", f"--scale={scale}", f"--pattern={pattern}", f"--hold={hold}",
            *([f"--group={group}"] if group else []), *([f"--stop-file={stop_file}"] if stop_file else []),
            *([f"--prompt={prompt}"] if prompt else [])]
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": f"{name}-script", "namespace": namespace},
          "data": {"rollout_job.py": script}}
    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name, "namespace": namespace},
           "spec": {"backoffLimit": 0, "ttlSecondsAfterFinished": 600, "template": {
               "metadata": {"annotations": {"k8s.v1.cni.cncf.io/networks": attachment} if attachment else {}},
               "spec": {
               **copy.deepcopy(ON_REAL_NODE), "restartPolicy": "Never", "enableServiceLinks": False,
               "automountServiceAccountToken": False,
               "containers": [{"name": "rollout", "image": image, "imagePullPolicy": "IfNotPresent",
                               "command": ["python3", "/job/rollout_job.py", *args],
                               "env": [{"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
                                       *([{"name": RAY_GCS_RECONNECT_ENV, "value": str(gcs_reconnect)}]
                                         if gcs_reconnect else [])],
                               "resources": {"requests": {"cpu": "100m", "memory": "1536Mi"},
                                             "limits": {"memory": "1536Mi"}},
                               "volumeMounts": [{"name": "script", "mountPath": "/job"},
                                                {"name": "dshm", "mountPath": "/dev/shm"}]}],
               "volumes": [{"name": "script", "configMap": {"name": f"{name}-script"}},
                           {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "512Mi"}}]}}}}
    return [cm, job]


def http_job_objects(name: str, namespace: str, image: str, pool: str, pool_namespace: str, token: str,
                     wrong_token: str, *, infra_ns: str = INFRA_NS, frames: int = 5) -> list[dict]:
    """A ConfigMap holding http_job.py and a Job running it on the real node: a trainer in `namespace` that scores
    over HTTP through the pool's Service with its tenant token, with no Ray."""
    from pathlib import Path

    script = (Path(__file__).with_name("http_job.py")).read_text()
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": f"{name}-script", "namespace": namespace},
          "data": {"http_job.py": script}}
    args = [pool, pool_namespace, f"--master=mooncake-master.{infra_ns}.svc.cluster.local:{MASTER_PORT}",
            f"--frames={frames}"]
    # the job's service account may list the pool's EndpointSlices (its client routes over the workers itself)
    sa = {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": name, "namespace": namespace}}
    role = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
            "metadata": {"name": f"{name}-endpoints", "namespace": pool_namespace},
            "rules": [{"apiGroups": ["discovery.k8s.io"], "resources": ["endpointslices"], "verbs": ["list"]}]}
    binding = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
               "metadata": {"name": f"{name}-endpoints", "namespace": pool_namespace},
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": f"{name}-endpoints"},
               "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": namespace}]}
    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name, "namespace": namespace},
           "spec": {"backoffLimit": 0, "ttlSecondsAfterFinished": 600, "template": {"spec": {
               **copy.deepcopy(ON_REAL_NODE), "restartPolicy": "Never", "enableServiceLinks": False,
               "serviceAccountName": name, "automountServiceAccountToken": True,
               "containers": [{"name": "http", "image": image, "imagePullPolicy": "IfNotPresent",
                               "command": ["python3", "/job/http_job.py", *args],
                               "env": [{"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
                                       {"name": "TENANT_TOKEN", "value": token},
                                       {"name": "WRONG_TOKEN", "value": wrong_token}],
                               "resources": {"requests": {"cpu": "100m", "memory": "1Gi"},
                                             "limits": {"memory": "1Gi"}},
                               "volumeMounts": [{"name": "script", "mountPath": "/job"}]}],
               "volumes": [{"name": "script", "configMap": {"name": f"{name}-script"}}]}}}}
    return [cm, sa, role, binding, job]


def _ts(s: str) -> float:
    from datetime import datetime
    s = s.rstrip("Z")
    if "." in s:
        head, frac = s.split(".", 1)
        s = f"{head}.{frac[:6]}"
        return datetime.strptime(s, "%Y-%m-%dT%H:%M:%S.%f").timestamp()
    return datetime.strptime(s, "%Y-%m-%dT%H:%M:%S").timestamp()


STARTUP_MARKS = [  # (phase name, a substring of the worker's log line that ends it)
    ("python + imports, network-status read", "store client and Ray node address"),
    ("ray start (a Ray node in the pod joins the head)", "Ray runtime started"),
    ("ray.init to the cluster", "Connected to Ray cluster"),
    ("actor: store client, registered buffer, scorer loaded", "worker ready:"),
]


def startup_breakdown(kubectl, namespace: str, pod: dict) -> list[tuple[str, float]]:
    """Seconds per start-up phase of one worker pod, from the pod's conditions and its log (kubectl logs
    --timestamps): scheduled -> container started -> the worker's own phases -> Ready (readiness probe)."""
    conds = {c["type"]: _ts(c["lastTransitionTime"]) for c in pod["status"].get("conditions", [])}
    created = _ts(pod["metadata"]["creationTimestamp"])
    started = _ts(pod["status"]["containerStatuses"][0]["state"]["running"]["startedAt"])
    logs = kubectl("logs", "-n", namespace, pod["metadata"]["name"], "--timestamps", check=False).stdout.splitlines()
    out, last = [("pod created -> container started (sandbox, CNI + Multus, volumes)", started - created)], started
    for name, mark in STARTUP_MARKS:
        line = next((ln for ln in logs if mark in ln), None)
        if line is None:
            continue
        t = _ts(line.split(" ", 1)[0])
        out.append((name, t - last))
        last = t
    if "Ready" in conds:
        out.append(("readiness probe sees /readyz 200 (period 5 s)", max(0.0, conds["Ready"] - last)))
        out.append(("total: pod created -> Ready", conds["Ready"] - created))
    return out


def job_result(logs: str) -> dict:
    """The rollout job's result line (`ROLLOUT_RESULT {...}`) from its log."""
    line = next((ln for ln in reversed(logs.splitlines()) if ln.startswith("ROLLOUT_RESULT ")), None)
    if line is None:
        raise ValueError(f"no ROLLOUT_RESULT line in the rollout job's log:\n{logs[-3000:]}")
    return json.loads(line.split(" ", 1)[1])
