"""The objects a pool owns besides its pods, ensured: the ipvlan NetworkAttachmentDefinition (when the pool asks
for one), the headless Service, the PodDisruptionBudget and the control-token Secret; and what decides whether
workers may be created at all (an external attachment exists, the namespace's Pod Security level allows
IPC_LOCK, the control Secret is ours).

Service, budget and attachment are written by server-side apply (`Kube.apply`: field manager
rewardpool-operator, forced), and only when one is needed (`needs_apply`): the object is missing, what the
operator wants of it changed since its last apply, or someone changed it since and it no longer holds what the
operator wants. A steady pool costs one read per object per look and no write. The Secret is created when it
is missing and never written again: its token is drawn once, and deleting the Secret is how a user rotates it."""
from __future__ import annotations

import secrets
import time
from dataclasses import dataclass, field

from rewardpool_worker.contract import control_secret_name

from ..api import reasons as R
from ..api.findings import Problem
from ..api.spec import Pool
from ..cluster.kube import Kube, NadCrdMissing
from ..modelcache.layout import cache_problem, local_claim, local_volume, source_identity
from ..pool.builders import (attachment_ref, control_secret, control_token, model_caches, model_source, owned_objects,
                             score_service_name)
from ..pool.observed import Network

PSA_ENFORCE = "pod-security.kubernetes.io/enforce"


@dataclass
class Owned:
    """What ensuring the owned objects found, kept until they are looked at again."""
    network: Network
    token: str | None
    problems: list[Problem]
    generation: int
    at: float
    copies: dict[str, str] = field(default_factory=dict)  # each model cache's current copy {cache: identity}


@dataclass(frozen=True)
class Applied:
    """What the operator last applied to one object, and the object's resourceVersion after it (or after the
    last look that found it as wanted)."""
    desired: dict
    resource_version: str


def _contains(have, want) -> bool:
    """Does `have` hold everything in `want`? Fields the API server fills in (a port's protocol, say) are not
    differences: without this, every look would write again."""
    if isinstance(want, dict):
        return isinstance(have, dict) and all(_contains(have.get(k), v) for k, v in want.items())
    if isinstance(want, list):
        return isinstance(have, list) and len(have) == len(want) and all(map(_contains, have, want))
    return have == want


def holds(live: dict, desired: dict) -> bool:
    """Does the live object show everything the operator sets in it? What others add to it (a label, another
    owner reference) is no difference: an apply would not remove it, so it would be applied again and again."""
    meta, want = live.get("metadata") or {}, desired["metadata"]
    refs = meta.get("ownerReferences") or []
    body = {k: v for k, v in desired.items() if k not in ("apiVersion", "kind", "metadata")}  # spec, config...
    return (all(_contains(meta.get(k), v) for k, v in want.items() if k != "ownerReferences")
            and all(any(_contains(r, w) for r in refs) for w in want.get("ownerReferences") or [])
            and _contains(live, body))


def needs_apply(desired: dict, live: dict | None, last: Applied | None) -> bool:
    """Whether to apply `desired` over `live` (None: missing), given what this operator last applied to it."""
    if live is None:
        return True  # never made, or deleted by someone
    if last is not None and last.desired != desired:
        return True  # the operator wants something else now (the apply also drops fields it no longer sets)
    if last is not None and last.resource_version == live["metadata"].get("resourceVersion"):
        return False  # untouched since
    return not holds(live, desired)  # changed since (a controller's status, a user), or first seen after a restart


async def ensure(kube: Kube, obj: dict, applied: dict[str, Applied]) -> str:
    """Apply one owned object if it needs it; "created", "updated" or "unchanged". `applied` is the pool's
    record of its last applies (PoolMemory.applied), updated here."""
    meta = obj["metadata"]
    key = f"{obj['kind']}/{meta.get('namespace', '')}/{meta['name']}"
    live = await kube.get_owned(obj["kind"], meta.get("namespace", ""), meta["name"])
    if not needs_apply(obj, live, applied.get(key)):
        applied[key] = Applied(obj, live["metadata"].get("resourceVersion", ""))
        return "unchanged"
    done = await kube.apply(obj)
    applied[key] = Applied(obj, done["metadata"].get("resourceVersion", ""))
    return "created" if live is None else "updated"


async def ensure_owned(kube: Kube, pool: Pool, generation: int, applied: dict[str, Applied],
                       events: list) -> Owned:
    """Ensure every owned object, each built, read, decided and written in one pass; the events to tell are
    appended to `events` (type, reason, message)."""
    nad_crd_missing = False
    for obj in owned_objects(pool):
        try:
            action = await ensure(kube, obj, applied)
        except NadCrdMissing:
            nad_crd_missing = True
            continue
        if (said := _said(pool, obj, action)) is not None:
            events.append(said)
    network = NO_NAD_CRD if nad_crd_missing else await _network(kube, pool)
    token, token_problem = await _ensure_control_token(kube, pool, events)
    cache_problem_, copies = await _model_caches(kube, pool, applied, events)
    problems = [x for x in (token_problem, await _pod_security(kube, pool), await _tenant_tokens(kube, pool),
                            await _model_claims(kube, pool), cache_problem_)
                if x is not None]
    return Owned(network, token, problems, generation, time.monotonic(), copies)


def _said(pool: Pool, obj: dict, action: str) -> tuple[str, str, str] | None:
    """The event an apply is told by: each object's creation, and an attachment's update too."""
    kind, name = obj["kind"], obj["metadata"]["name"]
    if kind == "NetworkAttachmentDefinition" and action != "unchanged":
        reason = R.NETWORK_ATTACHMENT_CREATED if action == "created" else R.NETWORK_ATTACHMENT_UPDATED
        master = pool.spec.network.ipvlan.master
        return "Normal", reason, f"{action} ipvlan attachment {pool.namespace}/{name} on {master}"
    if action != "created":
        return None
    if kind == "PodDisruptionBudget":
        return "Normal", R.DISRUPTION_BUDGET_CREATED, f"created PodDisruptionBudget {name}"
    if name == score_service_name(pool):
        return "Normal", R.SERVICE_CREATED, f"created scoring service {name} (HTTP POST /v1/score on its Ready workers)"
    return "Normal", R.SERVICE_CREATED, f"created headless service {name}"


NO_NAD_CRD = Network(False, R.NETWORK_ATTACHMENT_CRD_MISSING,
                     "the cluster has no NetworkAttachmentDefinition CRD (k8s.cni.cncf.io/v1): install Multus; "
                     "worker pods are not created until the RoCE network can be attached")


async def _network(kube: Kube, pool: Pool) -> Network:
    """The RoCE network: none asked for, the operator's own attachment (applied above), or one the pool names."""
    ref = attachment_ref(pool)
    if ref is None:
        return Network(True, R.POD_NETWORK_ONLY, "no RoCE attachment requested")
    if pool.spec.network.ipvlan is not None:
        return Network(True, R.ATTACHMENT_READY, f"ipvlan on {pool.spec.network.ipvlan.master} ({ref[0]}/{ref[1]})")
    try:
        if await kube.get_nad(*ref) is None:
            return Network(False, R.ATTACHMENT_NOT_FOUND,
                           f"NetworkAttachmentDefinition {ref[0]}/{ref[1]} named in network.attachment does not exist")
    except NadCrdMissing:
        return NO_NAD_CRD
    return Network(True, R.ATTACHMENT_READY, f"existing attachment {ref[0]}/{ref[1]}")


async def _ensure_control_token(kube: Kube, pool: Pool, events: list) -> tuple[str | None, Problem | None]:
    """The pool's control token, creating its Secret (with a fresh random token) when it is missing. A
    same-named Secret that is not ours is left alone."""
    name = control_secret_name(pool.name)
    current = await kube.get_secret(pool.namespace, name)
    if current is None:
        current = await kube.create_secret(control_secret(pool, secrets.token_urlsafe(32)))
        events.append(("Normal", R.CONTROL_TOKEN_CREATED, f"created Secret {name} with a new control token"))
    token = control_token(current)
    if token is None:
        return None, Problem(R.CONTROL_SECRET_CONFLICT, f"Secret {name} exists but is not this pool's control "
                             "token (no control-token label or no token key); rename or delete it", True)
    return token, None


async def _tenant_tokens(kube: Kube, pool: Pool) -> Problem | None:
    """Every tenant's token Secret and key exist: a worker pod whose projected Secret is missing never starts."""
    missing = []
    for t in pool.spec.access.tenants:
        secret = await kube.get_secret(pool.namespace, t.tokenSecret.name)
        if secret is None:
            missing.append(f"{t.name}: Secret {t.tokenSecret.name} not found")
        elif t.tokenSecret.key not in (secret.get("data") or {}) and t.tokenSecret.key not in (secret.get("stringData")
                                                                                             or {}):
            missing.append(f"{t.name}: Secret {t.tokenSecret.name} has no key {t.tokenSecret.key}")
    if not missing:
        return None
    return Problem(R.TENANT_TOKEN_MISSING, "spec.access.tenants: " + "; ".join(missing) + " (create it in namespace "
                   f"{pool.namespace}; no worker starts without every tenant's token)", True)


async def _model_claims(kube: Kube, pool: Pool) -> Problem | None:
    """Every claim a scorer's model comes from (scorer.model.pvc) exists: a pod naming a missing claim waits
    Pending in silence. Not blocking: the pods start once the claim is created."""
    claims = sorted({m.pvc.claimName for c in pool.spec.components
                     if (m := model_source(c, pool.spec.scorer)[0]) is not None and m.pvc is not None})
    missing = [c for c in claims if await kube.get_pvc(pool.namespace, c) is None]
    if not missing:
        return None
    return Problem(R.MODEL_UNAVAILABLE, f"scorer.model.pvc: PersistentVolumeClaim {', '.join(missing)} not found in "
                   f"namespace {pool.namespace}: the worker pods wait Pending until it exists")


async def _model_caches(kube: Kube, pool: Pool, applied: dict[str, Applied],
                        events: list) -> tuple[Problem | None, dict[str, str]]:
    """For each RewardModelCache a scorer's model comes from: its local volume and the claim bound to it in the
    pool's namespace, whether some node holds a Ready copy, and the identity of its current copy (what the pods
    mount and are placed by). Not blocking: the pods are placed on the nodes whose copy is Ready (Required: they
    wait Pending until one is)."""
    said, copies = [], {}
    for name in sorted(model_caches(pool)):
        cache = await kube.get_cache(name)
        if (why := cache_problem(name, cache)) is not None:
            said.append(why)
        if cache is not None:  # also while it is being deleted (held while pools use it): the pods stay as they are
            copies[name] = source_identity(cache.get("spec") or {})
        if cache is None or cache["metadata"].get("deletionTimestamp"):
            continue
        volume = local_volume(name, pool.namespace)
        live = await kube.get_owned("PersistentVolume", "", volume["metadata"]["name"])
        if live is not None and (live.get("status") or {}).get("phase") == "Released":
            await kube.delete_volume(volume["metadata"]["name"])  # its claim was deleted: make both again
            applied.pop(f"PersistentVolume//{volume['metadata']['name']}", None)
        if await ensure(kube, volume, applied) == "created":
            events.append(("Normal", R.MODEL_CACHE_BOUND, f"created local volume {volume['metadata']['name']} of "
                           f"RewardModelCache {name}"))
        await ensure(kube, local_claim(name, pool.namespace), applied)
    if not said:
        return None, copies
    return Problem(R.MODEL_UNAVAILABLE, "scorer.model.cache: " + "; ".join(said)), copies


async def _pod_security(kube: Kube, pool: Pool) -> Problem | None:
    """IPC_LOCK is outside Pod Security's baseline and restricted levels: say so before any create fails."""
    level = ((await kube.get_namespace_labels(pool.namespace)) or {}).get(PSA_ENFORCE)
    if level in ("baseline", "restricted"):
        return Problem(R.POD_SECURITY_FORBIDS_IPC_LOCK,
                       f"namespace {pool.namespace} enforces Pod Security level {level!r}, which forbids the "
                       f"IPC_LOCK capability workers need to pin store memory; label the namespace "
                       f"{PSA_ENFORCE}=privileged (the operator still adds nothing beyond IPC_LOCK)", True)
    return None
