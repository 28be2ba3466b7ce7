"""Desired-state builders of a pool's workers: pure functions from a pool (and its sizing) to its pod template,
the worker's config and the identity that decides a roll, with what the other objects share (labels, the names
of the attachment and Service) and the scorers' model volumes. The other objects a pool owns are built in
owned.py."""
from __future__ import annotations

import copy
import hashlib
import json

from rewardpool_worker.contract import (ANNOTATIONS_FILE, CONTROL_SECRET_KEY, CONTROL_TOKEN_DIR, ENV_VAR, HEALTH_PATH,
                                        HTTP_PORT, MODELS_ROOT, READY_PATH, ROCE_INTERFACE, SCORER_VERSION_LABEL,
                                        EngineLink, RayConfig, ScorerConfig, StoreConfig, WorkerConfig, api_key_env,
                                        control_secret_name, termination_grace_seconds)

from ..api.quantity import format_bytes
from ..api.spec import COMPONENT_LABEL, HASH_LABEL, MANAGED_BY, WORKER_CONTAINER, ModelSource, Pool
from ..modelcache.layout import claim_name, pool_affinity
from . import engine as engines
from .podsecurity import RESTRICTED
from .sizing import SizingResult

NETWORKS_ANNOTATION = "k8s.v1.cni.cncf.io/networks"
IPC_LOCK = "IPC_LOCK"  # the one capability a worker has: the store pins its segment and read buffer with it
# The uid a restricted pool's pods run as (the images' nonroot user). Kubernetes grants a non-root container
# no ambient capabilities, so IPC_LOCK is then in its bounding set only: validate.py says what that costs.
NONROOT_UID = 65532

# What the operator owns in a worker pod; a podTemplate that would replace any of it is refused (validate.py).
OWNED_VOLUMES = {"dshm": "/dev/shm", "podinfo": ANNOTATIONS_FILE.rsplit("/", 1)[0], "control": CONTROL_TOKEN_DIR}
CONTRACT_ENV = (ENV_VAR, "POD_NAME", "POD_NAMESPACE", "POD_IP", "NODE_NAME")
OWNED_WORKER_FIELDS = ("image", "command", "args", "ports", "startupProbe", "livenessProbe", "readinessProbe",
                       "resources")


# ---- worker ----------------------------------------------------------------------------------------------------


def pool_labels(pool: Pool, component: str) -> dict[str, str]:
    return {**pool.selector, "app.kubernetes.io/name": "rewardpool-worker", "app.kubernetes.io/instance": pool.name,
            COMPONENT_LABEL: component, **MANAGED_BY}


def nad_name(pool: Pool) -> str:
    return f"{pool.name}-roce"


def attachment_ref(pool: Pool) -> tuple[str, str] | None:
    """(namespace, name) of the NetworkAttachmentDefinition the workers use, or None for the pod network only."""
    net = pool.spec.network
    if net.ipvlan is not None:
        return pool.namespace, nad_name(pool)
    if net.attachment:
        ns, _, name = net.attachment.rpartition("/")
        return ns or pool.namespace, name
    return None


def service_name(pool: Pool) -> str:
    return f"{pool.name}-workers"


# ---- the scorers' weights ----------------------------------------------------------------------------------
MODEL_VOLUME_PREFIX = "rewardpool-model-"  # the volumes of scorers' model sources: rewardpool-model-<n>


def model_source(component, shared):
    """(the component's model source or None, its plain modelPath or None): its own when it sets either, else what
    the shared scorer sets (a mixture's components inherit the weights' location together, never half of it). A
    judge the pool hosts an engine for has the engine's weights (mounted in the engine's container, not the
    worker's)."""
    if getattr(component, "engine", None) is not None:
        return component.engine.model, None
    if component.model is not None or component.modelPath:
        return component.model, component.modelPath
    return shared.model, shared.modelPath


def model_mount_path(component) -> str:
    return f"{MODELS_ROOT}/{component.component}"


def model_volume(source: ModelSource, name: str) -> dict:
    """The pod volume of a scorer's weights: the claim named, the claim the operator binds to a cache's local
    volume in this namespace, or an image volume."""
    if source.pvc is not None:
        return {"name": name, "persistentVolumeClaim": {"claimName": source.pvc.claimName, "readOnly": True}}
    if source.cache is not None:
        return {"name": name, "persistentVolumeClaim": {"claimName": claim_name(source.cache.name), "readOnly": True}}
    image = {"reference": source.image.reference, **({"pullPolicy": source.image.pullPolicy}
                                                     if source.image.pullPolicy else {})}
    return {"name": name, "image": image}


def model_mounts(pool: Pool, copies: dict[str, str] | None = None) -> tuple[list[dict], dict[str, list[dict]]]:
    """(volumes, {component: its volumeMounts}) of the scorers whose weights come from a source: one volume per
    claim or image (components sharing one mount it once each, at their own subPath), each mounted read-only at
    MODELS_ROOT/<component>; a cache's at its copy of the identity `copies` names ({cache: identity})."""
    volumes: dict[str, dict] = {}  # the volume's source, as JSON -> the volume
    mounts: dict[str, list[dict]] = {}
    for c in pool.spec.components:
        source, _ = model_source(c, pool.spec.scorer)
        if source is None:
            continue
        key = json.dumps(model_volume(source, ""), sort_keys=True)
        volume = volumes.setdefault(key, model_volume(source, f"{MODEL_VOLUME_PREFIX}{len(volumes)}"))
        sub = source.sub_path
        if source.cache is not None and (copies or {}).get(source.cache.name):
            sub = "/".join(x for x in (copies[source.cache.name], sub) if x)
        mounts.setdefault(c.component, []).append({"name": volume["name"], "mountPath": model_mount_path(c),
                                                   "readOnly": True, **({"subPath": sub} if sub else {})})
    return list(volumes.values()), mounts


def model_caches(pool: Pool) -> dict[str, str]:
    """{cache name: placement} of the scorers whose weights come from a RewardModelCache (Required wins when two
    components name one cache differently)."""
    out: dict[str, str] = {}
    for c in pool.spec.components:
        source, _ = model_source(c, pool.spec.scorer)
        if source is not None and source.cache is not None:
            name, mode = source.cache.name, source.cache.placement
            out[name] = "Required" if "Required" in (mode, out.get(name)) else mode
    return out


def scorer_config(component, shared, index: int = 0, engine: EngineLink | None = None) -> ScorerConfig:
    """One scorer as the worker builds it: a component's unset fields come from `spec.scorer`. `index`: its place
    in the mixture (0 for the single scorer), which names the variable holding its API key; `engine`: how it
    reaches the engine the pool hosts for it (its weights are the engine's: it loads none itself)."""
    pick = lambda own, common: common if own is None else own  # noqa: E731
    source, model_path = model_source(component, shared)
    if engine is not None:
        source = model_path = None
    return ScorerConfig(name=component.name, cls=component.cls, weight=getattr(component, "weight", 1.0),
                        args=dict(component.args),
                        api_key_env=api_key_env(index) if component.apiKeySecret else None,
                        key=getattr(component, "key", None), required=getattr(component, "required", True),
                        num_frames=pick(component.numFrames, shared.numFrames),
                        model_path=model_mount_path(component) if source is not None else model_path,
                        processor_path=pick(component.processorPath, shared.processorPath),
                        frames_per_forward=pick(component.framesPerForward, shared.framesPerForward),
                        batch_size=shared.batchSize, device=shared.device, gpus=shared.gpus, dtype=shared.dtype,
                        engine=engine)


def scorer_digest(pool: Pool, copies: dict[str, str] | None = None) -> str:
    """The part of a pool's identity that decides its scores (the pod label and the worker's version prefix):
    the image, each scorer as the worker builds it (name or class, args, numFrames, model and processor paths,
    weight, the source of its weights and, for a cache, which copy: `copies`; a hosted judge's engine:
    engine.identity) and the dtype. Not batchSize, framesPerForward, device or GPUs: they change speed and float
    rounding, not what is scored."""
    sc = pool.spec.scorer
    parts = [(scorer_config(c, sc), model_source(c, sc)[0], getattr(c, "engine", None), c)
             for c in pool.spec.components]
    seen = {"image": pool.spec.image, "dtype": sc.dtype, "mixture": bool(pool.spec.scorers),
            "scorers": [{"ref": p.ref, "args": p.args, "numFrames": p.num_frames, "model": p.model_path,
                         "processor": p.processor_path or p.model_path, "weight": p.weight,
                         # what a result looks like (its keys, an optional component's NaN) and where the weights
                         # come from (another image is another model): only when set, so pools that set none of
                         # them keep their version
                         **({"key": p.key} if p.key else {}), **({} if p.required else {"required": False}),
                         **({"source": _source_identity(source, copies)} if source is not None else {}),
                         **({"engine": engines.identity(e, c)} if e is not None else {})}
                        for p, source, e, c in parts]}
    return hashlib.sha256(json.dumps(seen, sort_keys=True).encode()).hexdigest()[:10]


def _source_identity(source, copies: dict[str, str] | None) -> dict:
    """A model source's identity, with the copy of its cache when one is known (a cache whose source changes is
    another model)."""
    if source.cache is not None and (copies or {}).get(source.cache.name):
        return {**source.identity, "copy": copies[source.cache.name]}
    return source.identity


def worker_config(pool: Pool, sizing: SizingResult, copies: dict[str, str] | None = None) -> WorkerConfig:
    s, sc = pool.spec.store, pool.spec.scorer
    ref = attachment_ref(pool)
    return WorkerConfig(
        pool=pool.name, namespace=pool.namespace,
        store=StoreConfig(master=s.master, metadata_server=s.metadataServer, protocol=s.protocol,
                          devices=list(s.devices), segment_bytes=sizing.per_worker_bytes,
                          local_buffer_bytes=sizing.local_buffer_bytes, metrics_address=s.metricsAddress),
        scorer=scorer_config(sc, sc, engine=engines.link(pool, sc)),
        scorers=[scorer_config(c, sc, i, engines.link(pool, c)) for i, c in enumerate(pool.spec.scorers or [])],
        ray=RayConfig(address=pool.spec.ray.address, namespace=pool.spec.ray.namespace,
                      gcs_reconnect_seconds=ft.reconnectTimeoutSeconds if (ft := pool.spec.ray.gcsFaultTolerance)
                      else None),
        # Registered up front (the registration is the slow part of an RDMA read) and never past the cap.
        read_buffer_bytes=sizing.read_buffer_bytes,
        read_buffer_max_bytes=sizing.read_buffer_bytes,
        network_attachment=f"{ref[0]}/{ref[1]}" if ref else None,
        drain_timeout_seconds=pool.spec.drainTimeoutSeconds,
        # Whether HTTP scoring needs a tenant's token; who the tenants are is sent to the running workers
        # (controller/tenants.py), so adding, removing or rotating one rolls nothing.
        tenant_auth=bool(pool.spec.access.tenants),
        scorer_version=scorer_digest(pool, copies),
    )


def _resources(pool: Pool, sizing: SizingResult) -> dict:
    user = copy.deepcopy(pool.spec.resources)
    requests, limits = dict(user.get("requests") or {}), dict(user.get("limits") or {})
    memory = format_bytes(sizing.memory_bytes)
    # Requests equal limits for memory: a pinned segment must not be overcommitted.
    limits.setdefault("memory", memory)
    requests["memory"] = limits["memory"]
    # A CPU limit asks for Guaranteed QoS (CPU manager, topology manager alignment with the GPU and NIC):
    # requests must then equal limits, so an unset CPU request follows the limit instead of defaulting to 1.
    requests.setdefault("cpu", limits.get("cpu", "1"))
    gpus = pool.spec.scorer.gpus
    if gpus > 0:  # extended resources: request and limit must be equal
        limits[pool.spec.placement.gpuResource] = str(gpus)
        requests[pool.spec.placement.gpuResource] = str(gpus)
    rr = pool.spec.placement.rdmaResource
    if pool.spec.store.protocol == "rdma" and rr.count > 0:
        limits[rr.name] = str(rr.count)
        requests[rr.name] = str(rr.count)
    return {**user, "requests": requests, "limits": limits}


def _env(pool: Pool, sizing: SizingResult, copies: dict[str, str] | None) -> list[dict]:
    field = lambda path: {"valueFrom": {"fieldRef": {"fieldPath": path}}}  # noqa: E731
    config, name, namespace, ip, node = CONTRACT_ENV
    return [{"name": config, "value": worker_config(pool, sizing, copies).to_json()},
            {"name": name, **field("metadata.name")},
            {"name": namespace, **field("metadata.namespace")},
            {"name": ip, **field("status.podIP")},
            {"name": node, **field("spec.nodeName")},
            # each scorer's API key from the Secret the pool names: the key itself is never in the pod's spec
            *({"name": api_key_env(i), "valueFrom": {"secretKeyRef": {"name": c.apiKeySecret.name,
                                                                        "key": c.apiKeySecret.key}}}
              for i, c in enumerate(pool.spec.components) if c.apiKeySecret)]


def _merge(base, override):
    """podTemplate merge: dicts merge deeply; lists of named items (containers, volumes, env, ports) merge
    by name; any other value in the template replaces the builder's."""
    if isinstance(base, dict) and isinstance(override, dict):
        out = dict(base)
        for k, v in override.items():
            out[k] = _merge(base[k], v) if k in base else copy.deepcopy(v)
        return out
    if (isinstance(base, list) and isinstance(override, list) and base
            and all(isinstance(i, dict) and "name" in i for i in base + override)):
        by_name = {i["name"]: i for i in base}
        out = [_merge(by_name[i["name"]], i) if i["name"] in by_name else copy.deepcopy(i) for i in override]
        seen = {i["name"] for i in override}
        return [i for i in base if i["name"] not in seen] + out
    return copy.deepcopy(override)


def pod_template(pool: Pool, sizing: SizingResult, copies: dict[str, str] | None = None) -> dict:
    """The worker pod without its name, with the template-hash label that tells stale pods apart. `copies`: the
    identity of each model cache's current copy ({cache: identity}, from the caches' specs): the pods mount and are
    placed by it, so a cache whose source changes rolls the pool."""
    spec = pool.spec
    annotations: dict[str, str] = {}
    ref = attachment_ref(pool)
    if ref is not None:
        annotations[NETWORKS_ANNOTATION] = json.dumps(
            [{"name": ref[1], "namespace": ref[0], "interface": ROCE_INTERFACE}])
    container = {
        "name": WORKER_CONTAINER, "image": spec.image,
        "env": _env(pool, sizing, copies),
        "ports": [{"name": "http", "containerPort": HTTP_PORT, "protocol": "TCP"}],
        "resources": _resources(pool, sizing),
        "startupProbe": {"httpGet": {"path": HEALTH_PATH, "port": "http"}, "periodSeconds": 5,
                         "failureThreshold": 120},
        "livenessProbe": {"httpGet": {"path": HEALTH_PATH, "port": "http"}, "periodSeconds": 10,
                          "failureThreshold": 3},
        "readinessProbe": {"httpGet": {"path": READY_PATH, "port": "http"}, "periodSeconds": 5,
                           "failureThreshold": 2},
        # IPC_LOCK lets the store pin its segment and registered buffers (memlock); nothing privileged.
        "securityContext": {"privileged": False, "allowPrivilegeEscalation": False,
                            "capabilities": {"drop": ["ALL"], "add": [IPC_LOCK]}},
        "volumeMounts": [{"name": "dshm", "mountPath": OWNED_VOLUMES["dshm"]},
                         {"name": "podinfo", "mountPath": OWNED_VOLUMES["podinfo"], "readOnly": True},
                         {"name": "control", "mountPath": OWNED_VOLUMES["control"], "readOnly": True}],
    }
    pod = {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"generateName": f"{pool.name}-", "namespace": pool.namespace,
                     "labels": {**pool_labels(pool, "worker"), **spec.podTemplate.metadata.get("labels", {})},
                     "annotations": {**annotations, **spec.podTemplate.metadata.get("annotations", {})},
                     "ownerReferences": [pool.owner_reference()]},
        "spec": {
            "nodeSelector": dict(spec.placement.rdmaNodeSelector),
            "tolerations": list(spec.placement.tolerations),
            "topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "kubernetes.io/hostname",
                                           "whenUnsatisfiable": "ScheduleAnyway",
                                           "labelSelector": {"matchLabels": pool.selector}}],
            "subdomain": service_name(pool),
            "enableServiceLinks": False,
            "automountServiceAccountToken": False,
            "hostNetwork": False,
            "restartPolicy": "Always",
            "terminationGracePeriodSeconds": termination_grace_seconds(spec.drainTimeoutSeconds),
            "securityContext": _pod_security_context(spec.podSecurity),
            "containers": [container],
            "volumes": [
                {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": format_bytes(sizing.shm_bytes)}},
                {"name": "podinfo", "downwardAPI": {"items": [
                    {"path": ANNOTATIONS_FILE.rsplit("/", 1)[1], "fieldRef": {"fieldPath": "metadata.annotations"}},
                    {"path": "labels", "fieldRef": {"fieldPath": "metadata.labels"}}]}},
                # Not a subPath mount: the kubelet then refreshes the file when the Secret is rotated.
                {"name": "control", "secret": {"secretName": control_secret_name(pool.name), "defaultMode": 0o440,
                                               "items": [{"key": CONTROL_SECRET_KEY, "path": CONTROL_SECRET_KEY}]}},
            ],
        },
    }
    volumes, mounts = model_mounts(pool, copies)  # the scorers' model sources, read-only
    pod["spec"]["volumes"] += volumes + engines.volumes(pool)
    judges = {c.component for _, c, _ in engines.hosted(pool)}  # their weights are their engines'
    container["volumeMounts"] += [m for name, ms in mounts.items() if name not in judges for m in ms]
    pod["spec"]["containers"] += engines.containers(pool, mounts)
    pod["spec"] = _merge(pod["spec"], spec.podTemplate.spec)
    if caches := model_caches(pool):  # to the nodes that hold the caches' copies, whatever the template asks too
        pod["spec"]["affinity"] = pool_affinity(caches, pod["spec"].get("affinity"), copies)
    _keep_ipc_lock(pod["spec"])
    pod["metadata"]["labels"][HASH_LABEL] = worker_identity(pool, sizing, copies)
    pod["metadata"]["labels"][SCORER_VERSION_LABEL] = scorer_digest(pool, copies)
    return pod


def _pod_security_context(level: str) -> dict:
    # Both levels want a seccomp profile. Restricted also wants non-root: the worker image runs as root (so
    # that IPC_LOCK is effective), and the kubelet refuses runAsNonRoot for a root image unless a uid is given.
    # fsGroup: the control token's Secret volume (0440) is group-owned by it, so the non-root worker can read
    # its own token (root:root 0440 left every /drain and /promote refused with 403).
    ctx: dict = {"seccompProfile": {"type": "RuntimeDefault"}}
    if level == RESTRICTED:
        ctx.update(runAsNonRoot=True, runAsUser=NONROOT_UID, runAsGroup=NONROOT_UID, fsGroup=NONROOT_UID)
    return ctx


def _keep_ipc_lock(pod_spec: dict) -> None:
    """A podTemplate's capabilities.add for the worker adds to IPC_LOCK instead of replacing it (a list of
    strings would otherwise replace the builder's): the store cannot pin its segment without it."""
    for c in pod_spec.get("containers") or []:
        if not (isinstance(c, dict) and c.get("name") == WORKER_CONTAINER):
            continue
        sc = c["securityContext"] = c["securityContext"] if isinstance(c.get("securityContext"), dict) else {}
        caps = sc["capabilities"] = sc["capabilities"] if isinstance(sc.get("capabilities"), dict) else {}
        add = caps.get("add") if isinstance(caps.get("add"), list) else []
        caps["add"] = add if IPC_LOCK in add else [IPC_LOCK, *add]


# What a worker sees, and so what rolls a pool when it changes. Not replicas, autoscaling or the drain
# timeout (they change no running worker), and not how this operator version renders a pod (an operator
# upgrade rolls nothing; new rendering reaches workers as they are replaced).
IDENTITY_FIELDS = {"image", "scorer", "scorers", "store", "network", "resources", "podTemplate", "placement", "ray",
                   "podSecurity"}


def worker_identity(pool: Pool, sizing: SizingResult, copies: dict[str, str] | None = None) -> str:
    seen = {"spec": pool.spec.model_dump(mode="json", by_alias=True, include=IDENTITY_FIELDS),
            "sizing": {"segment": sizing.per_worker_bytes, "memory": sizing.memory_bytes,
                       "localBuffer": sizing.local_buffer_bytes, "readBuffer": sizing.read_buffer_bytes,
                       "shm": sizing.shm_bytes}}
    if used := {n: copies[n] for n in model_caches(pool) if (copies or {}).get(n)}:  # only then: others keep theirs
        seen["copies"] = used
    if pool.spec.access.tenants:  # open <-> tenants changes who may score on a worker; who the tenants are does not
        seen["tenantAuth"] = True
    return hashlib.sha256(json.dumps(seen, sort_keys=True).encode()).hexdigest()[:10]


def template_hash(pod: dict) -> str:
    return pod["metadata"]["labels"][HASH_LABEL]


def copy_of(worker: dict, template: dict) -> dict:
    """A new worker pod like `worker`, a worker of an older template that still serves (its spec is the only
    copy of that template): its labels, its values of the annotations the builder sets, its spec without the
    node it ran on. A roll replaces the serving version's workers with these while the new version is in
    shadow, or while groups are pinned to the old one, so the pool keeps its size without a change of reward."""
    keep = set(template["metadata"].get("annotations") or {})
    meta = worker["metadata"]
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {**{k: v for k, v in template["metadata"].items() if k not in ("labels", "annotations")},
                     "labels": dict(meta.get("labels") or {}),
                     "annotations": {k: v for k, v in (meta.get("annotations") or {}).items() if k in keep}},
        "spec": {k: v for k, v in worker["spec"].items() if k != "nodeName"},
    }


