"""The node-local model cache (RewardModelCache): names, the node layout, and the pure builders and plans that the
node agent (cacheagent.py), the copy pod (cachecopy.py) and the pool's reconcile (owned.py, builders.py) share.

A cache names a source (a PersistentVolumeClaim in the operator's namespace, or an OCI image) and the nodes that
should hold it. The source's identity (`source_identity`: the claim and path or the image, and the expected digest)
names each copy. On each such node the agent keeps the copy of the current identity under
ROOT/<cache>/data/<identity>: a copy pod (in the operator's namespace, the only place a hostPath is allowed) copies
the source into ROOT/<cache>/partial, verifies it (size and a digest) and renames it into place whole; the agent
reports the node's phase in the cache's status and as the node's label NODE_LABEL_PREFIX<cache> (Pending,
Downloading, Ready, Failed), and labels each verified copy it offers with copy_label(cache, identity).

A pool whose scorer.model is `cache:` mounts the copies' folder through a local PersistentVolume (one per cache and
namespace, bound to the claim CLAIM_PREFIX<cache> in the pool's namespace) at the subPath of the identity its pod
template names, and is placed on nodes labelled with that copy (required, or preferred). The identity is part of
the pod template, so a cache whose source changes rolls its pools like any other change of weights; a copy that a
pod on the node still mounts is kept (and offered, so a replacement of an old worker is placed where it is) until
no pod mounts it (`plan_copies`)."""
from __future__ import annotations

import copy
import hashlib
from dataclasses import dataclass, field

from rewardpool_worker.contract import GROUP, VERSION

KIND, PLURAL = "RewardModelCache", "rewardmodelcaches"
API_VERSION = f"{GROUP}/{VERSION}"
ROOT = "/var/lib/rewardpool/models"  # on the node (the agent's hostPath)
NODE_LABEL_PREFIX = "cache.rewardpool.io/"  # + cache name = the node's phase (READY: its copy is verified)
COPY_LABEL_DOMAIN = "copy.rewardpool.io"  # <identity>.COPY_LABEL_DOMAIN/<cache> = READY: the node offers that copy
READY = "Ready"
AGENT_MARKER = ".rewardpool-agent"  # in each cache folder the agent made: the only folders it ever removes
CACHE_LABEL = "rewardpool.io/model-cache"  # on the PVs, claims and copy pods of a cache: its name
CLAIM_PREFIX = "rewardpool-cache-"
STORAGE_CLASS = "rewardpool-model-cache"  # no provisioner: the operator makes each volume and its claim
NOMINAL_SIZE = "1Ki"  # a local PV's capacity only has to cover its claim's request; the copy's bytes are in status
PHASES = ("Pending", "Downloading", "Ready", "Failed")
COPY_CONTAINER = "copy"
SOURCE_MOUNT = "/source"  # in the copy pod
NODE_MOUNT = "/cache"  # in the agent and the copy pod: ROOT


def node_label(cache: str) -> str:
    return NODE_LABEL_PREFIX + cache


def claim_name(cache: str) -> str:
    return CLAIM_PREFIX + cache


def volume_name(cache: str, namespace: str) -> str:
    return f"{CLAIM_PREFIX}{cache}-{namespace}"


def copy_label(cache: str, identity: str) -> str:
    return f"{identity}.{COPY_LABEL_DOMAIN}/{cache}"


def parse_copy_label(key: str) -> tuple[str, str] | None:
    """(cache, identity) of a copy label, or None."""
    prefix, sep, cache = key.partition("/")
    identity, dot, domain = prefix.partition(".")
    return (cache, identity) if sep and dot and domain == COPY_LABEL_DOMAIN and identity and cache else None


# The layout of one cache on a node (relative to the root)
def data_dir(cache: str) -> str:
    """The folder of the cache's copies, one per source identity (the local volume's path)."""
    return f"{cache}/data"


def copy_dir(cache: str, identity: str) -> str:
    return f"{cache}/data/{identity}"


def partial_dir(cache: str) -> str:
    return f"{cache}/partial"


def ready_file(cache: str, identity: str) -> str:
    """The manifest of a verified copy, written last."""
    return f"{cache}/ready/{identity}.json"


def progress_file(cache: str) -> str:
    return f"{cache}/progress.json"


def source_identity(spec: dict) -> str:
    """What decides the bytes a copy holds: the source (claim and path, or image reference) and the expected
    digest. A copy made from another identity is stale and made again."""
    src = spec.get("source") or {}
    if "pvc" in src:
        key = f"pvc:{src['pvc'].get('claimName')}:{(src['pvc'].get('subPath') or '').strip('/')}"
    else:
        key = f"image:{(src.get('image') or {}).get('reference')}"
    return hashlib.sha256(f"{key}|{spec.get('digest') or ''}".encode()).hexdigest()[:16]


def node_selector(spec: dict, default: dict[str, str]) -> dict[str, str]:
    """The labels a node must carry to hold the copy (default: the RDMA nodes' label)."""
    sel = spec.get("nodeSelector")
    return dict(default if sel is None else sel)


def selects(selector: dict[str, str], node_labels: dict[str, str]) -> bool:
    return all(node_labels.get(k) == v for k, v in selector.items())


# The agent's decision for one cache on its node: a table of cases (tests/unit/test_modelcache.py).
@dataclass(frozen=True)
class DiskState:
    """What the node's directory says: the verified copy's manifest (ready.json) if any, and a copy in progress."""
    ready: dict | None = None  # {"identity", "digest", "bytes", "files", "seconds"}
    ready_intact: bool = True  # every file of the manifest is there with its size
    partial_bytes: int = 0
    total_bytes: int | None = None  # from progress.json, once the copy pod has measured the source


@dataclass(frozen=True)
class CopyPod:
    """The copy pod for this cache on this node, as the agent sees it."""
    identity: str  # the source identity it copies
    phase: str  # Pending, Running, Succeeded, Failed
    reason: str = ""  # a waiting reason (ErrImagePull...) or the terminated container's reason
    message: str = ""  # its termination message or the waiting message
    finished_age: float = 0.0  # seconds since it ended


@dataclass
class NodePlan:
    entry: dict  # the node's entry in status.nodes
    create_pod: bool = False
    delete_pod: bool = False
    actions: list[str] = field(default_factory=list)


# What a copy pod's termination message may start with ("<reason>: <message>", cachecopy.CopyError)
COPY_REASONS = {"SourceNotFound", "SourceEmpty", "OutOfDisk", "CopyFailed", "VerifyFailed", "DigestMismatch"}
RETRY_SECONDS = 60.0  # a failed copy is tried again this long after it ended
# Waiting reasons of a copy pod's container that will not resolve by themselves
STUCK_WAITING = {"ErrImagePull", "ImagePullBackOff", "InvalidImageName", "CreateContainerConfigError",
                 "CreateContainerError"}


def plan_node(node: str, identity: str, digest: str | None, disk: DiskState, pod: CopyPod | None,
              source_missing: str | None = None) -> NodePlan:
    """What the agent does for a cache its node should hold, and the node's status entry. `source_missing`: why
    the source cannot be read at all (its claim does not exist), checked before a copy pod would wait on it."""
    ready = disk.ready
    if ready is not None and ready.get("identity") == identity and disk.ready_intact \
            and (digest is None or ready.get("digest") == digest):
        return NodePlan({"node": node, "phase": "Ready", "bytes": ready.get("bytes", 0),
                         "totalBytes": ready.get("bytes", 0), "digest": ready.get("digest"), "reason": "Verified",
                         "message": f"{ready.get('files', 0)} files verified in {ready.get('seconds', 0):.1f} s"},
                        delete_pod=pod is not None and pod.phase in ("Succeeded", "Failed"))
    stale = pod is not None and pod.identity != identity
    if source_missing is not None:
        return NodePlan({"node": node, "phase": "Failed", "reason": "SourceNotFound", "message": source_missing},
                        delete_pod=pod is not None)
    if pod is None or stale:
        return NodePlan({"node": node, "phase": "Pending", "reason": "CopyStarting",
                         "message": "a copy pod is being created on the node"}, create_pod=not stale,
                        delete_pod=stale)
    if pod.phase == "Failed" or (pod.phase == "Succeeded"):  # succeeded without a valid copy: failed verification
        reason = pod.reason or ("CopyFailed" if pod.phase == "Failed" else "NotVerified")
        message = pod.message or "the copy pod ended without a verified copy"
        retry = pod.finished_age >= RETRY_SECONDS
        return NodePlan({"node": node, "phase": "Failed", "reason": reason, "message": message},
                        delete_pod=retry)
    if pod.reason in STUCK_WAITING:
        return NodePlan({"node": node, "phase": "Failed", "reason": pod.reason,
                         "message": pod.message or "the copy pod cannot start"}, delete_pod=False)
    if pod.phase == "Running" or disk.partial_bytes:
        total = disk.total_bytes
        entry = {"node": node, "phase": "Downloading", "bytes": disk.partial_bytes, "reason": "Copying",
                 "message": f"{disk.partial_bytes} of {total if total is not None else '?'} bytes"}
        if total is not None:
            entry["totalBytes"] = total
        return NodePlan(entry)
    return NodePlan({"node": node, "phase": "Pending", "reason": pod.reason or "CopyStarting",
                     "message": pod.message or "the copy pod is starting"})


# Which copies the agent keeps, offers and removes on its node: a table of cases (tests/unit/test_modelcache.py).
@dataclass(frozen=True)
class Copies:
    """A cache's copies on a node as one agent pass sees them."""
    on_disk: frozenset[str] = frozenset()  # identities with a folder under data/
    verified: frozenset[str] = frozenset()  # of those, the intact verified copies
    offered: frozenset[str] = frozenset()  # identities the node's copy labels offered when the pass began


@dataclass(frozen=True)
class CopiesPlan:
    offer: frozenset[str]  # the copy labels the node should carry
    remove: frozenset[str]  # copies to delete now


ANY_COPY = "*"  # in use: a pod mounts the whole copies folder (no identity subPath): nothing is removed


def plan_copies(wanted: str | None, copies: Copies, in_use: set[str]) -> CopiesPlan:
    """`wanted`: the identity the cache names now (None: the node no longer keeps the cache); `in_use`: the
    identities pods on the node mount. A copy is offered while verified and wanted or mounted (a pool rolling
    away from it still places replacements of its old workers there). One that is neither is first no longer
    offered, and removed only in a later pass that finds it still unused and unoffered: a pod the scheduler
    placed by the label just before it went is bound, and so seen, by then."""
    keep = ({wanted} if wanted else set()) | set(in_use)
    offer = frozenset(i for i in copies.verified if i in keep)
    if ANY_COPY in in_use:
        return CopiesPlan(offer | (copies.verified & copies.offered), frozenset())
    remove = frozenset(i for i in copies.on_disk if i not in keep and i not in copies.offered)
    return CopiesPlan(offer, remove)


def copies_in_use(pods: list[dict]) -> dict[str, set[str]]:
    """{cache: identities} that the node's pods mount (their subPath's first part under a cache's claim; ANY_COPY
    when a pod mounts a cache's claim without one). A pod that ended has nothing mounted."""
    out: dict[str, set[str]] = {}
    for p in pods:
        if (p.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
            continue
        spec = p.get("spec") or {}
        claims = {v["name"]: c[len(CLAIM_PREFIX):] for v in spec.get("volumes") or []
                  if (c := (v.get("persistentVolumeClaim") or {}).get("claimName", "")).startswith(CLAIM_PREFIX)}
        for container in (spec.get("containers") or []) + (spec.get("initContainers") or []):
            for m in container.get("volumeMounts") or []:
                if m.get("name") in claims:
                    first = (m.get("subPath") or "").strip("/").split("/")[0]
                    out.setdefault(claims[m["name"]], set()).add(first or ANY_COPY)
    return out


# Objects the agent and the operator write
def copy_pod(cache: dict, node: str, namespace: str, image: str, root: str, identity: str) -> dict:
    """The pod that copies a cache's source onto one node: pinned to the node (nodeName, no scheduling), the
    source mounted read-only, the node's cache root from a hostPath. Never restarted: the agent reads its end."""
    name = cache["metadata"]["name"]
    spec = cache.get("spec") or {}
    src = spec.get("source") or {}
    if "pvc" in src:
        source = {"persistentVolumeClaim": {"claimName": src["pvc"]["claimName"], "readOnly": True}}
        sub = (src["pvc"].get("subPath") or "").strip("/")
    else:
        image_src = {"reference": src["image"]["reference"]}
        if src["image"].get("pullPolicy"):
            image_src["pullPolicy"] = src["image"]["pullPolicy"]
        source, sub = {"image": image_src}, ""
    args = ["cache-copy", "--cache", name, "--root", NODE_MOUNT, "--source", SOURCE_MOUNT, "--identity", identity,
            "--node", node]
    if spec.get("digest"):
        args += ["--digest", spec["digest"]]
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": copy_pod_name(name, node), "namespace": namespace,
                     "labels": {CACHE_LABEL: name, "app.kubernetes.io/component": "model-cache-copy",
                                "app.kubernetes.io/managed-by": "rewardpool-agent"},
                     "annotations": {"rewardpool.io/cache-identity": identity, "rewardpool.io/cache-node": node}},
        "spec": {
            "nodeName": node, "restartPolicy": "Never", "automountServiceAccountToken": False,
            "enableServiceLinks": False,
            # root without capabilities: the node's cache directory is root's (made by the kubelet or the agent)
            "securityContext": {"runAsUser": 0, "runAsNonRoot": False, "seccompProfile": {"type": "RuntimeDefault"}},
            "tolerations": [{"operator": "Exists"}],  # it goes where the agent runs
            "containers": [{
                "name": COPY_CONTAINER, "image": image, "args": args,
                "terminationMessagePolicy": "FallbackToLogsOnError",
                "securityContext": {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True,
                                    "capabilities": {"drop": ["ALL"]}},
                "volumeMounts": [{"name": "source", "mountPath": SOURCE_MOUNT, "readOnly": True,
                                  **({"subPath": sub} if sub else {})},
                                 {"name": "cache", "mountPath": NODE_MOUNT}],
            }],
            "volumes": [{"name": "source", **source},
                        {"name": "cache", "hostPath": {"path": root, "type": "DirectoryOrCreate"}}],
        },
    }


def copy_pod_name(cache: str, node: str) -> str:
    """Unique per cache and node (two long cache names sharing a prefix must not share a pod)."""
    return f"rewardpool-copy-{cache[:30]}-{hashlib.sha256(f'{cache}/{node}'.encode()).hexdigest()[:8]}"


def local_volume(name: str, namespace: str, root: str = ROOT) -> dict:
    """The local PersistentVolume of a cache's copy for the pools of one namespace, pre-bound to its claim there.
    It may be used on the nodes whose agent keeps the cache (they carry its label, whatever the phase, and its
    directory); which of them hold a Ready copy is the pods' placement."""
    return {
        "apiVersion": "v1", "kind": "PersistentVolume",
        "metadata": {"name": volume_name(name, namespace),
                     "labels": {CACHE_LABEL: name, "app.kubernetes.io/managed-by": "rewardpool-operator"}},
        "spec": {
            "capacity": {"storage": NOMINAL_SIZE}, "accessModes": ["ReadOnlyMany"],
            "persistentVolumeReclaimPolicy": "Retain", "storageClassName": STORAGE_CLASS,
            "volumeMode": "Filesystem",
            "local": {"path": f"{root.rstrip('/')}/{data_dir(name)}"},
            "claimRef": {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "namespace": namespace,
                         "name": claim_name(name)},
            "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                {"key": node_label(name), "operator": "Exists"}]}]}},
        },
    }


def local_claim(cache_name: str, namespace: str) -> dict:
    return {
        "apiVersion": "v1", "kind": "PersistentVolumeClaim",
        "metadata": {"name": claim_name(cache_name), "namespace": namespace,
                     "labels": {CACHE_LABEL: cache_name, "app.kubernetes.io/managed-by": "rewardpool-operator"}},
        "spec": {"accessModes": ["ReadOnlyMany"], "storageClassName": STORAGE_CLASS,
                 "volumeName": volume_name(cache_name, namespace), "volumeMode": "Filesystem",
                 "resources": {"requests": {"storage": NOMINAL_SIZE}}},
    }


def placement_term(cache_name: str, identity: str | None = None) -> dict:
    """Nodes offering the copy of `identity`; with none known (the cache does not exist yet), nodes whose copy is
    Ready."""
    key = copy_label(cache_name, identity) if identity else node_label(cache_name)
    return {"key": key, "operator": "In", "values": [READY]}


def pool_affinity(caches: dict[str, str], template: dict | None = None, copies: dict[str, str] | None = None) -> dict:
    """Node affinity of a pool's pods for its caches {name: Required|Preferred} (each for the copy `copies` names,
    {cache: identity}), joined with the podTemplate's own `template` affinity: each required cache is ANDed into
    every required term (the template's terms are ORed: whichever a node matches, it must also hold the copies),
    each preferred cache a weighted preference beside the template's. The template's other affinities (pod, anti)
    stay as they are."""
    out = copy.deepcopy(template or {})
    copies = copies or {}
    required = [placement_term(n, copies.get(n)) for n, mode in sorted(caches.items()) if mode == "Required"]
    preferred = [{"weight": 100, "preference": {"matchExpressions": [placement_term(n, copies.get(n))]}}
                 for n, mode in sorted(caches.items()) if mode != "Required"]
    if not (required or preferred):
        return out
    node = out.setdefault("nodeAffinity", {})
    if required:
        sel = node.setdefault("requiredDuringSchedulingIgnoredDuringExecution", {})
        terms = sel.get("nodeSelectorTerms") or [{}]
        for term in terms:
            have = term.setdefault("matchExpressions", [])
            have += [t for t in required if t not in have]
        sel["nodeSelectorTerms"] = terms
    if preferred:
        have = node.setdefault("preferredDuringSchedulingIgnoredDuringExecution", [])
        have += [p for p in preferred if p not in have]
    return out


def cache_problem(name: str, cache: dict | None) -> str | None:
    """Why a pool using cache `name` cannot have its model on any node yet, or None (a Ready copy exists)."""
    if cache is None:
        return f"RewardModelCache {name} not found: create it (the worker pods wait Pending until a node holds it)"
    if cache.get("metadata", {}).get("deletionTimestamp"):
        return f"RewardModelCache {name} is being deleted"
    entries = (cache.get("status") or {}).get("nodes") or []
    if any(e.get("phase") == "Ready" for e in entries):
        return None
    if not entries:
        return f"RewardModelCache {name}: no node has reported yet (is the node agent running on the cache's nodes?)"
    said = "; ".join(f"{e.get('node')}: {e.get('phase')} {e.get('reason', '')}: {e.get('message', '')}".strip()
                     for e in entries[:4])
    return f"RewardModelCache {name} is Ready on no node ({said})"


def caches_named(pool_spec: dict) -> set[str]:
    """The caches a pool's spec (as stored) names in scorer.model or a component's model."""
    models = [((pool_spec.get("scorer") or {}).get("model") or {})]
    models += [(s or {}).get("model") or {} for s in pool_spec.get("scorers") or []]
    return {m["cache"]["name"] for m in models if isinstance(m.get("cache"), dict) and m["cache"].get("name")}


def cache_summary(entries: list[dict], users: list[str]) -> dict:
    """The status fields the operator keeps on a cache: Ready nodes of those reporting, the Ready copies' digest
    (when they agree; "mixed" when not) and the pools using it."""
    digests = {e.get("digest") for e in entries if e.get("phase") == "Ready"}
    ready = f"{sum(1 for e in entries if e.get('phase') == 'Ready')}/{len(entries)}"  # the READY column
    return {"ready": ready, "digest": digests.pop() if len(digests) == 1 else ("mixed" if digests else None),
            "usedBy": ", ".join(users) or None}
