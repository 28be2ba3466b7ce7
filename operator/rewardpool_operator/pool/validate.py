"""Semantic checks the CRD's schema and CEL rules cannot express, of a pool's spec and of the worker pod it
renders to, and whether its workers fit any node. Each is a finding (`findings.py`): a condition and an event
on the pool; blocking findings stop worker creation until fixed."""
from __future__ import annotations

from rewardpool_worker.contract import BUILTIN_SCORERS

from ..api import reasons as R
from ..api.findings import Problem
from ..api.spec import COMPONENT_LABEL, HASH_LABEL, POOL_LABEL, WORKER_CONTAINER, PoolSpec
from . import podsecurity
from .builders import CONTRACT_ENV, IPC_LOCK, MODEL_VOLUME_PREFIX, OWNED_VOLUMES, OWNED_WORKER_FIELDS
from .placement import nodes_that_fit
from .sizing import SizingResult

# Labels the operator selects and tells pods apart by: a podTemplate must not set them (a pod relabelled to
# another pool is never seen again, and the operator would create pods without end).
RESERVED_LABELS = (POOL_LABEL, HASH_LABEL, COMPONENT_LABEL)
# Pod fields the operator owns (identity, placement, restarts, the drain budget): a podTemplate may repeat the
# operator's value but not change it.
OWNED_POD_FIELDS = {
    "serviceAccountName": (None, "workers run with no Kubernetes identity"),
    "serviceAccount": (None, "workers run with no Kubernetes identity"),
    "automountServiceAccountToken": (False, "workers get no API token"),
    "nodeName": (None, "placement goes through the scheduler (placement.rdmaNodeSelector, tolerations)"),
    "restartPolicy": ("Always", "a worker that exits is restarted in place"),
    "terminationGracePeriodSeconds": (None, "it follows spec.drainTimeoutSeconds, so a drain is never cut short"),
    "subdomain": (None, "workers are named under the pool's headless service"),
    "ephemeralContainers": (None, "ephemeral containers are added to running pods (kubectl debug), not created"),
    "os": ({"name": "linux"}, "workers run on Linux"),
}
PRIVILEGE_HINT = {"capabilities_baseline": " (the worker gets IPC_LOCK and nothing more)",
                  "capabilities_restricted": " (restricted allows NET_BIND_SERVICE; the worker also gets IPC_LOCK)",
                  "hostPathVolumes": " (RDMA devices come from the device plugin resource)",
                  "hostNamespaces": " (workers use the pod network and the RoCE attachment)"}


def _named_items(tpl: dict, key: str) -> list[Problem]:
    """Containers and volumes merge by name: one without a name would replace the operator's whole list."""
    return [Problem(R.OWNED_POD_FIELD, f"podTemplate.spec.{key}[{i}] needs a name: {key} merge into the worker pod "
                    "by name", True)
            for i, item in enumerate(tpl.get(key) or []) if not (isinstance(item, dict) and item.get("name"))]


def owned_fields(spec: PoolSpec) -> list[Problem]:
    """A podTemplate may add to the worker pod but not replace what the operator owns in it (builders.py)."""
    tpl, problems = spec.podTemplate.spec, []
    bad = lambda field, why: problems.append(Problem(  # noqa: E731
        R.OWNED_POD_FIELD, f"podTemplate.spec.{field} cannot be set: {why}", True))
    for key, (ours, why) in OWNED_POD_FIELDS.items():
        if key in tpl and tpl[key] != ours:
            bad(key, why)
    for key in ("containers", "initContainers", "volumes"):
        problems += _named_items(tpl, key)
    for i, v in enumerate(tpl.get("volumes") or []):
        v = v if isinstance(v, dict) else {}
        if v.get("name") in OWNED_VOLUMES or str(v.get("name") or "").startswith(MODEL_VOLUME_PREFIX):
            bad(f"volumes[{i}] ({v['name']})", "the operator owns the worker's volumes "
                f"{', '.join(OWNED_VOLUMES)} and {MODEL_VOLUME_PREFIX}*; name yours differently")
        sources = ((v.get("projected") or {}).get("sources") or []) if isinstance(v.get("projected"), dict) else []
        if any(isinstance(x, dict) and "serviceAccountToken" in x for x in sources):
            bad(f"volumes[{i}] ({v.get('name')}).projected.sources[].serviceAccountToken", "workers get no API token")
    for i, c in enumerate(tpl.get("initContainers") or []):
        if isinstance(c, dict) and c.get("name") == WORKER_CONTAINER:
            bad(f"initContainers[{i}].name", f"{WORKER_CONTAINER!r} is the worker container's name")
    for i, c in enumerate(tpl.get("containers") or []):
        if not (isinstance(c, dict) and c.get("name") == WORKER_CONTAINER):
            continue
        at = f"containers[{i}] ({WORKER_CONTAINER})"
        for key in OWNED_WORKER_FIELDS:
            if key in c:
                bad(f"{at}.{key}", "the worker's image, command, args, ports, probes and resources come from the "
                    "pool spec")
        for e in c.get("env") or []:
            if isinstance(e, dict) and e.get("name") in CONTRACT_ENV:
                bad(f"{at}.env {e['name']}", f"the worker's contract environment ({', '.join(CONTRACT_ENV)}) is "
                    "the operator's")
        for m in c.get("volumeMounts") or []:
            m = m if isinstance(m, dict) else {}
            if (m.get("name") in OWNED_VOLUMES or m.get("mountPath") in OWNED_VOLUMES.values()
                    or str(m.get("name") or "").startswith(MODEL_VOLUME_PREFIX)):
                bad(f"{at}.volumeMounts {m.get('name')} at {m.get('mountPath')}", "the operator mounts "
                    + ", ".join(f"{k} at {v}" for k, v in OWNED_VOLUMES.items()))
        caps = ((c.get("securityContext") or {}).get("capabilities") or {}) if isinstance(
            c.get("securityContext"), dict) else {}
        if isinstance(caps, dict) and IPC_LOCK in (caps.get("drop") or []):
            bad(f"{at}.securityContext.capabilities.drop IPC_LOCK", "the store pins its segment with it")
    return problems


def pod_security(spec: PoolSpec, pod: dict) -> list[Problem]:
    """The finished worker pod judged by the Pod Security Standards at the pool's level, IPC_LOCK on the
    worker container excepted: whatever the podTemplate merge produced is what is judged."""
    found = podsecurity.violations(pod, spec.podSecurity, {WORKER_CONTAINER: frozenset({IPC_LOCK})})
    return [Problem(R.FORBIDDEN_POD_SETTING, f"the worker pod would violate Pod Security {spec.podSecurity!r} "
                    f"({v.check}): {v.where} sets {v.field}{PRIVILEGE_HINT.get(v.check, '')}", True)
            for v in found]


def check(spec: PoolSpec, pod: dict) -> list[Problem]:
    """What is wrong with a pool's spec and with the worker pod it renders to (`pod`: builders.pod_template)."""
    problems = owned_fields(spec) + pod_security(spec, pod)
    where = "scorers[].name" if spec.scorers else "scorer.name"
    for c in spec.components:
        if c.name is not None and c.name not in BUILTIN_SCORERS:
            problems.append(Problem(R.UNKNOWN_SCORER, f"{where} {c.name!r} is not a built-in scorer "
                                    f"({', '.join(BUILTIN_SCORERS)}); use class for a custom one", True))
    keys = [c.component for c in spec.components]
    twice = sorted({k for k in keys if keys.count(k) > 1})
    if twice:  # also a CEL rule at admission, worded alike: one component's scores would overwrite the other's
        problems.append(Problem(R.DUPLICATE_SCORER, f"spec.scorers names the reward key {', '.join(twice)} twice: "
                                "each component needs its own key (set key on one of them)", True))
    sc = spec.scorer
    # Also CEL rules at admission; repeated here for `rewardpool render`, which no API server checks.
    if sc.device == "cuda" and sc.gpus == 0:
        problems.append(Problem(R.NO_GPU_REQUESTED, "scorer.device cuda needs scorer.gpus >= 1: a container that "
                                f"requests no {spec.placement.gpuResource} sees no GPU", True))
    if sc.dtype != "float32" and sc.device == "cpu":
        problems.append(Problem(R.HALF_PRECISION_ON_CPU, f"scorer.dtype {sc.dtype} is for GPUs; on cpu use float32",
                                True))
    for kind in ("labels", "annotations"):
        for key in spec.podTemplate.metadata.get(kind, {}):
            if key in RESERVED_LABELS or key.startswith("rewardpool.io/"):
                problems.append(Problem(R.RESERVED_LABEL if kind == "labels" else R.RESERVED_ANNOTATION,
                                        f"podTemplate.metadata.{kind}.{key} is reserved: the "
                                        "operator selects and tells its pods apart by it", True))
    if spec.podSecurity == "restricted" and spec.store.protocol == "rdma":
        problems.append(Problem(R.RESTRICTED_CANNOT_PIN_MEMORY, "podSecurity restricted runs workers as a non-root "
                                "user, and Kubernetes gives non-root containers no effective capabilities: "
                                "IPC_LOCK does not apply, so RDMA registration is bounded by the container "
                                "runtime's memlock limit (often 8MiB); use baseline for rdma, or a node runtime "
                                "whose memlock limit is unlimited"))
    if spec.store.protocol == "rdma" and spec.network.ipvlan is None and not spec.network.attachment:
        problems.append(Problem(R.NO_ROCE_NETWORK, "store.protocol is rdma but no network is attached: RoCE "
                                "needs network.ipvlan or network.attachment (the pod network cannot carry it)"))
    return problems


def findings(spec: PoolSpec, sizing: SizingResult, nodes: list[dict], pod: dict) -> list[Problem]:
    """Everything wrong with a pool before any pod is touched: sizing, spec, the pod and placement. Any
    blocking one stops worker creation (see `findings.blocks_workers`)."""
    problems = list(sizing.problems) + check(spec, pod)
    fit, why = nodes_that_fit(spec, sizing.memory_bytes, nodes)
    if not fit:
        problems.append(Problem(R.WORKERS_DO_NOT_FIT, why, blocking=True))
    return problems
