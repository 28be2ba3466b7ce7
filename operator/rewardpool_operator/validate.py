"""Semantic checks the CRD's schema and CEL rules cannot express. Each finding becomes a condition and an
event on the pool; blocking findings stop worker creation until fixed."""
from __future__ import annotations

from rewardpool_worker.config import BUILTIN_SCORERS

from .placement import nodes_that_fit
from .sizing import Problem, SizingResult
from .spec import COMPONENT_LABEL, HASH_LABEL, POOL_LABEL, WORKER_CONTAINER, PoolSpec

# Labels the operator selects and tells pods apart by: a podTemplate must not set them (a pod relabelled to
# another pool is never seen again, and the operator would create pods without end).
RESERVED_LABELS = (POOL_LABEL, HASH_LABEL, COMPONENT_LABEL)
# What a podTemplate may set: an allow-list, so a pod field added to Kubernetes tomorrow cannot be used to
# escalate before someone has looked at it. Containers merge by name into the worker container (only the
# fields in WORKER_CONTAINER_FIELDS) or add sidecars (any field, no privilege: see the walk in `check`).
ALLOWED_POD_FIELDS = {"containers", "initContainers", "volumes", "tolerations", "affinity", "nodeSelector",
                      "topologySpreadConstraints", "priorityClassName", "runtimeClassName", "schedulerName",
                      "imagePullSecrets", "dnsPolicy", "dnsConfig", "securityContext"}
WORKER_CONTAINER_FIELDS = {"name", "env", "envFrom", "volumeMounts", "securityContext", "imagePullPolicy"}
# Pod fields a podTemplate may not set: they change who the pod runs as or where, outside the operator's say.
FORBIDDEN_POD_FIELDS = {
    "serviceAccountName": "workers run with no Kubernetes identity",
    "serviceAccount": "workers run with no Kubernetes identity",
    "automountServiceAccountToken": "workers get no API token",
    "nodeName": "placement goes through the scheduler (placement.rdmaNodeSelector, tolerations)",
    "shareProcessNamespace": "workers do not share process namespaces",
}


def _walk(obj, path=""):
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield f"{path}.{k}", k, v
            yield from _walk(v, f"{path}.{k}")
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            yield from _walk(v, f"{path}[{i}]")


def check(spec: PoolSpec) -> list[Problem]:
    problems = []
    where = "scorers[].name" if spec.scorers else "scorer.name"
    for c in spec.components:
        if c.name is not None and c.name not in BUILTIN_SCORERS:
            problems.append(Problem("UnknownScorer", f"{where} {c.name!r} is not a built-in scorer "
                                    f"({', '.join(BUILTIN_SCORERS)}); use class for a custom one", True))
    keys = [c.component for c in spec.components]
    if len(set(keys)) != len(keys):
        problems.append(Problem("DuplicateScorer", f"spec.scorers names a component twice ({', '.join(keys)}): "
                                "each component's score is reported under its name, so they must differ", True))
    sc = spec.scorer
    # Also CEL rules at admission; repeated here for `rewardpool render`, which no API server checks.
    if sc.device == "cuda" and sc.gpus == 0:
        problems.append(Problem("NoGpuRequested", "scorer.device cuda needs scorer.gpus >= 1: a container that "
                                f"requests no {spec.placement.gpuResource} sees no GPU", True))
    if sc.dtype != "float32" and sc.device == "cpu":
        problems.append(Problem("HalfPrecisionOnCpu", f"scorer.dtype {sc.dtype} is for GPUs; on cpu use float32",
                                True))
    # Workers get IPC_LOCK and nothing more: no privileged, host network or host paths, even via podTemplate.
    for path, key, value in _walk(spec.podTemplate.spec, "podTemplate.spec"):
        if key in ("privileged", "hostNetwork", "hostPID", "hostIPC", "allowPrivilegeEscalation") and value is True:
            problems.append(Problem("ForbiddenPodSetting", f"{path} must not be true: workers need only the "
                                    "IPC_LOCK capability and the ipvlan RoCE network", True))
        if key == "hostPath":
            problems.append(Problem("ForbiddenPodSetting", f"{path}: hostPath volumes are not allowed in "
                                    "worker pods (RDMA devices come from the device plugin resource)", True))
        if key == "add" and path.endswith(".capabilities.add") and set(value or []) - {"IPC_LOCK"}:
            extra = ", ".join(sorted(set(value or []) - {"IPC_LOCK"}))
            problems.append(Problem("ForbiddenPodSetting", f"{path}: capabilities {extra} are not allowed "
                                    "(workers get IPC_LOCK and nothing more)", True))
        if key == "procMount" and value != "Default":
            problems.append(Problem("ForbiddenPodSetting", f"{path} must be Default", True))
    # The worker container (merged by name) keeps IPC_LOCK: the store pins its segment with it.
    for i, c in enumerate(spec.podTemplate.spec.get("containers") or []):
        caps = ((c or {}).get("securityContext") or {}).get("capabilities") or {}
        if c.get("name") == WORKER_CONTAINER and (("add" in caps and "IPC_LOCK" not in (caps["add"] or []))
                                                  or "IPC_LOCK" in (caps.get("drop") or [])):
            problems.append(Problem("ForbiddenPodSetting", f"podTemplate.spec.containers[{i}] ({WORKER_CONTAINER}) "
                                    "must keep the IPC_LOCK capability: the store pins its segment with it", True))
    for key, why in FORBIDDEN_POD_FIELDS.items():
        if key in spec.podTemplate.spec:
            problems.append(Problem("ForbiddenPodSetting", f"podTemplate.spec.{key} cannot be set: {why}", True))
    for key in sorted(set(spec.podTemplate.spec) - ALLOWED_POD_FIELDS - set(FORBIDDEN_POD_FIELDS)):
        if key not in ("hostNetwork", "hostPID", "hostIPC"):  # true is reported above; false is harmless
            problems.append(Problem("ForbiddenPodSetting", f"podTemplate.spec.{key} is not one of the fields a "
                                    f"podTemplate may set ({', '.join(sorted(ALLOWED_POD_FIELDS))})", True))
    for i, c in enumerate(spec.podTemplate.spec.get("containers") or []):
        extra = sorted(set(c or {}) - WORKER_CONTAINER_FIELDS) if (c or {}).get("name") == WORKER_CONTAINER else []
        if extra:
            problems.append(Problem("ForbiddenPodSetting", f"podTemplate.spec.containers[{i}] (the worker) cannot "
                                    f"set {', '.join(extra)}: image, resources and probes come from the pool spec "
                                    f"(allowed: {', '.join(sorted(WORKER_CONTAINER_FIELDS - {'name'}))})", True))
    if (spec.podTemplate.spec.get("securityContext") or {}).get("sysctls"):
        problems.append(Problem("ForbiddenPodSetting", "podTemplate.spec.securityContext.sysctls is not allowed",
                                True))
    for kind in ("labels", "annotations"):
        for key in spec.podTemplate.metadata.get(kind, {}):
            if key in RESERVED_LABELS or key.startswith("rewardpool.io/"):
                problems.append(Problem("ReservedLabel" if kind == "labels" else "ReservedAnnotation",
                                        f"podTemplate.metadata.{kind}.{key} is reserved: the "
                                        "operator selects and tells its pods apart by it", True))
    if spec.store.protocol == "rdma" and spec.network.ipvlan is None and not spec.network.attachment:
        problems.append(Problem("NoRoceNetwork", "store.protocol is rdma but no network is attached: RoCE "
                                "needs network.ipvlan or network.attachment (the pod network cannot carry it)"))
    return problems


def findings(spec: PoolSpec, sizing: SizingResult, nodes: list[dict]) -> list[Problem]:
    """Everything wrong with a pool before any pod is touched: sizing, spec and placement. Any blocking one
    stops worker creation (see `blocks_workers`)."""
    problems = list(sizing.problems) + check(spec)
    fit, why = nodes_that_fit(spec, sizing.memory_bytes, nodes)
    if not fit:
        problems.append(Problem("WorkersDoNotFit", why, blocking=True))
    return problems


def blocks_workers(problems: list[Problem]) -> bool:
    return any(p.blocking for p in problems)
