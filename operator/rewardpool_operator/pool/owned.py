"""What a pool owns besides its pods, built and decided: its ipvlan attachment, its headless and scoring
Services, its PodDisruptionBudget (`owned_objects`) and its control Secret (`control_secret`); everything one look
at them reads (`reads`, from the pool alone), and from what it found (`decide`) the writes and what they mean for
the workers: the network, the control token, the problems that keep workers from starting, each model cache's
current copy, and the events that tell it. Pure; controller/owned.py reads, then writes what is decided here.
`desired_objects` is everything `rewardpool render` prints: these and the workers.

Service, budget, attachment and a model cache's volume and claim are written by server-side apply, and only when
one is needed (`needs_apply`): the object is missing, what the operator wants of it changed since its last apply,
or someone changed it since and it no longer holds what the operator wants. A steady pool costs one read per
object per look and no write. The control Secret is created when it is missing and never written again: its token
is drawn once, and deleting the Secret is how a user rotates it."""
from __future__ import annotations

import base64
import copy
import json
from dataclasses import dataclass, field

from rewardpool_worker.contract import CONTROL_SECRET_KEY, HTTP_PORT, SCORE_PORT_NAME, Tenants, control_secret_name
from rewardpool_worker.contract import score_service_name as service_for

from ..api import reasons as R
from ..api.findings import Problem
from ..api.spec import COMPONENT_LABEL, Pool
from ..modelcache.layout import CACHE_LABEL, cache_problem, local_claim, local_volume, source_identity
from . import tenants as tenants_mod
from .builders import attachment_ref, model_caches, model_source, nad_name, pod_template, pool_labels, service_name
from .observed import Network
from .rollout import disruptions
from .sizing import SizingResult

PSA_ENFORCE = "pod-security.kubernetes.io/enforce"
Ref = tuple[str, str, str]  # (kind, namespace, name); "" for a cluster-scoped object
NAD = "NetworkAttachmentDefinition"
NO_NAD_CRD = Network(False, R.NETWORK_ATTACHMENT_CRD_MISSING,
                     "the cluster has no NetworkAttachmentDefinition CRD (k8s.cni.cncf.io/v1): install Multus; "
                     "worker pods are not created until the RoCE network can be attached")


NAD_API_VERSION = "k8s.cni.cncf.io/v1"


def _meta(pool: Pool, name: str, component: str) -> dict:
    return {"name": name, "namespace": pool.namespace, "labels": pool_labels(pool, component),
            "ownerReferences": [pool.owner_reference()]}


def ipvlan_cni_config(pool: Pool) -> dict:
    ipv = pool.spec.network.ipvlan
    assert ipv is not None
    cfg = {"cniVersion": "0.3.1", "name": nad_name(pool), "type": "ipvlan", "master": ipv.master,
           "mode": ipv.mode, "ipam": ipv.ipam}
    if ipv.mtu is not None:
        cfg["mtu"] = ipv.mtu
    return cfg


def network_attachment(pool: Pool) -> dict | None:
    """The ipvlan attachment on the node's RoCE bond, when the pool asks the operator to manage one."""
    if pool.spec.network.ipvlan is None:
        return None
    return {"apiVersion": NAD_API_VERSION, "kind": "NetworkAttachmentDefinition",
            "metadata": _meta(pool, nad_name(pool), "network"),
            "spec": {"config": json.dumps(ipvlan_cni_config(pool), sort_keys=True)}}


def headless_service(pool: Pool) -> dict:
    return {"apiVersion": "v1", "kind": "Service", "metadata": _meta(pool, service_name(pool), "workers"),
            "spec": {"clusterIP": "None", "selector": {**pool.selector, COMPONENT_LABEL: "worker"},
                     "publishNotReadyAddresses": True,
                     "ports": [{"name": SCORE_PORT_NAME, "port": HTTP_PORT, "targetPort": "http"}]}}


def score_service_name(pool: Pool) -> str:
    return service_for(pool.name)


def score_service(pool: Pool) -> dict:
    """The pool's front door: HTTP scoring (POST /v1/score, flow-GRPO's POST /) on its Ready workers, load-balanced
    by the cluster (a draining or shadow worker is not Ready, so it gets none)."""
    return {"apiVersion": "v1", "kind": "Service", "metadata": _meta(pool, score_service_name(pool), "score"),
            "spec": {"type": "ClusterIP", "selector": {**pool.selector, COMPONENT_LABEL: "worker"},
                     "ports": [{"name": SCORE_PORT_NAME, "port": HTTP_PORT, "targetPort": "http"}]}}


def disruption_budget(pool: Pool) -> dict:
    """Voluntary evictions (`kubectl drain`, cluster autoscaler) get the roll's maxUnavailable (at least one), so
    a node drain takes workers away one budget at a time while replacements start elsewhere."""
    return {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": _meta(pool, pool.name, "workers"),
            "spec": {"maxUnavailable": disruptions(pool.spec.rollout, pool.spec.replicas),
                     "selector": {"matchLabels": {**pool.selector, COMPONENT_LABEL: "worker"}}}}


def owned_objects(pool: Pool) -> list[dict]:
    """What a pool owns besides its pods and its control Secret, all applied alike (server-side apply): its ipvlan
    attachment (when it asks the operator for one), its headless and scoring Services, its PodDisruptionBudget."""
    return [o for o in (network_attachment(pool), headless_service(pool), score_service(pool), disruption_budget(pool))
            if o is not None]


CONTROL_COMPONENT = "control-token"


def control_secret(pool: Pool, token: str) -> dict:
    """The pool's control token (the caller draws it at random): only its holder may drain a worker."""
    return {"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
            "metadata": _meta(pool, control_secret_name(pool.name), CONTROL_COMPONENT),
            "data": {CONTROL_SECRET_KEY: base64.b64encode(token.encode()).decode()}}


def control_token(secret: dict) -> str | None:
    """The token in a control Secret, or None if the Secret is not one of ours (a name clash)."""
    labels = secret.get("metadata", {}).get("labels") or {}
    raw = (secret.get("data") or {}).get(CONTROL_SECRET_KEY)
    if labels.get(COMPONENT_LABEL) != CONTROL_COMPONENT or not raw:
        return None
    return base64.b64decode(raw).decode()


def ref(obj: dict) -> Ref:
    return obj["kind"], obj["metadata"].get("namespace", ""), obj["metadata"]["name"]


def applied_key(obj: dict) -> str:
    return "/".join(ref(obj))


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


@dataclass
class Found:
    """What one look read: each object by its Ref (None: missing; a Namespace as its labels, None when it may
    not be read), and whether the cluster lacks the attachment CRD."""
    live: dict[Ref, dict | None]
    nad_crd_missing: bool = False


@dataclass
class OwnedPlan:
    network: Network
    token: str | None
    problems: list[Problem] = field(default_factory=list)
    copies: dict[str, str] = field(default_factory=dict)  # each model cache's current copy {cache: identity}
    delete_volumes: list[str] = field(default_factory=list)  # Released cache volumes: deleted, then made again
    apply: list[dict] = field(default_factory=list)  # to apply, in order
    kept: list[tuple[dict, str]] = field(default_factory=list)  # holding what is wanted: (desired, resourceVersion)
    create_secret: dict | None = None
    events: list[tuple[str, str, str]] = field(default_factory=list)  # (type, reason, message)
    tenants: Tenants | None = None  # what the workers must hold (pool/tenants.py); None: HTTP scoring is open


def _cache_objects(pool: Pool) -> list[tuple[str, dict, dict]]:
    """(cache, its local volume, its claim in the pool's namespace) of each cache a scorer's model comes from."""
    return [(name, local_volume(name, pool.namespace), local_claim(name, pool.namespace))
            for name in sorted(model_caches(pool))]


def _claims(pool: Pool) -> list[str]:
    return sorted({m.pvc.claimName for c in pool.spec.components
                   if (m := model_source(c, pool.spec.scorer)[0]) is not None and m.pvc is not None})


def reads(pool: Pool) -> list[Ref]:
    """Everything one look reads, each once: the owned objects, a named attachment, the control and tenants'
    Secrets, the models' claims, each cache with its volume and claim, the namespace."""
    out = [ref(o) for o in owned_objects(pool)]
    if (att := attachment_ref(pool)) is not None and pool.spec.network.ipvlan is None:
        out.append((NAD, *att))
    out.append(("Secret", pool.namespace, control_secret_name(pool.name)))
    out += tenants_mod.secret_refs(pool)
    out += [("PersistentVolumeClaim", pool.namespace, c) for c in _claims(pool)]
    for name, volume, claim in _cache_objects(pool):
        out += [("RewardModelCache", "", name), ref(volume), ref(claim)]
    out.append(("Namespace", "", pool.namespace))
    return list(dict.fromkeys(out))


def decide(pool: Pool, found: Found, applied: dict[str, Applied], new_token: str) -> OwnedPlan:
    """The writes one look makes, from what it read and the pool's record of its last applies; `new_token` is
    the control token a missing Secret is created with (drawn by the caller)."""
    live = found.live
    p = OwnedPlan(network=_network(pool, found), token=None)
    for obj in owned_objects(pool):
        if obj["kind"] == NAD and found.nad_crd_missing:
            continue
        _want(pool, p, obj, live.get(ref(obj)), applied.get(applied_key(obj)))
    token_problem = _control_token(pool, p, live.get(("Secret", pool.namespace, control_secret_name(pool.name))),
                                   new_token)
    cache_problem_ = _model_caches(pool, p, live, applied)
    p.tenants, tenant_problem = tenants_mod.wanted(pool, live)
    p.problems = [x for x in (token_problem, _pod_security(pool, live), tenant_problem,
                              _model_claims(pool, live), cache_problem_) if x is not None]
    return p


def _want(pool: Pool, p: OwnedPlan, obj: dict, live: dict | None, last: Applied | None,
          forget: bool = False) -> None:
    """One object decided: applied (and told) when it needs it, else kept as it is."""
    if forget or needs_apply(obj, live, last):
        p.apply.append(obj)
        if (said := _said(pool, obj, "created" if live is None or forget else "updated")) is not None:
            p.events.append(said)
    else:
        p.kept.append((obj, live["metadata"].get("resourceVersion", "")))


def _said(pool: Pool, obj: dict, action: str) -> tuple[str, str, str] | None:
    """The event an apply is told by: each object's creation, and an attachment's update too."""
    kind, name = obj["kind"], obj["metadata"]["name"]
    if kind == NAD:
        reason = R.NETWORK_ATTACHMENT_CREATED if action == "created" else R.NETWORK_ATTACHMENT_UPDATED
        master = pool.spec.network.ipvlan.master
        return "Normal", reason, f"{action} ipvlan attachment {pool.namespace}/{name} on {master}"
    if action != "created":
        return None
    component = (obj["metadata"].get("labels") or {}).get(COMPONENT_LABEL)
    if kind == "PodDisruptionBudget":
        return "Normal", R.DISRUPTION_BUDGET_CREATED, f"created PodDisruptionBudget {name}"
    if kind == "Service" and component == "score":
        return "Normal", R.SERVICE_CREATED, f"created scoring service {name} (HTTP POST /v1/score on its Ready workers)"
    if kind == "Service":
        return "Normal", R.SERVICE_CREATED, f"created headless service {name}"
    if kind == "PersistentVolume":
        cache = obj["metadata"]["labels"].get(CACHE_LABEL, "")
        return "Normal", R.MODEL_CACHE_BOUND, f"created local volume {name} of RewardModelCache {cache}"
    return None


def _network(pool: Pool, found: Found) -> Network:
    """The RoCE network: none asked for, the operator's own attachment (applied in this look), or one named."""
    att = attachment_ref(pool)
    if att is None:
        return Network(True, R.POD_NETWORK_ONLY, "no RoCE attachment requested")
    if found.nad_crd_missing:
        return NO_NAD_CRD
    if pool.spec.network.ipvlan is not None:
        return Network(True, R.ATTACHMENT_READY, f"ipvlan on {pool.spec.network.ipvlan.master} ({att[0]}/{att[1]})")
    if found.live.get((NAD, *att)) is None:
        return Network(False, R.ATTACHMENT_NOT_FOUND,
                       f"NetworkAttachmentDefinition {att[0]}/{att[1]} named in network.attachment does not exist")
    return Network(True, R.ATTACHMENT_READY, f"existing attachment {att[0]}/{att[1]}")


def _control_token(pool: Pool, p: OwnedPlan, current: dict | None, new_token: str) -> Problem | None:
    """The pool's control token, its Secret created (with `new_token`) when missing. A same-named Secret that is
    not ours is left alone, and said."""
    name = control_secret_name(pool.name)
    if current is None:
        current = p.create_secret = control_secret(pool, new_token)
        p.events.append(("Normal", R.CONTROL_TOKEN_CREATED, f"created Secret {name} with a new control token"))
    p.token = control_token(current)
    if p.token is not None:
        return None
    return Problem(R.CONTROL_SECRET_CONFLICT, f"Secret {name} exists but is not this pool's control token (no "
                   "control-token label or no token key); rename or delete it", True)


def _model_caches(pool: Pool, p: OwnedPlan, live: dict[Ref, dict | None],
                  applied: dict[str, Applied]) -> Problem | None:
    """For each RewardModelCache a scorer's model comes from: its local volume and the claim bound to it in the
    pool's namespace, whether some node holds a Ready copy, and the identity of its current copy (what the pods
    mount and are placed by). Not blocking: the pods are placed on the nodes whose copy is Ready (Required: they
    wait Pending until one is)."""
    said = []
    for name, volume, claim in _cache_objects(pool):
        cache = live.get(("RewardModelCache", "", name))
        if (why := cache_problem(name, cache)) is not None:
            said.append(why)
        if cache is not None:  # also while it is being deleted (held while pools use it): the pods stay as they are
            p.copies[name] = source_identity(cache.get("spec") or {})
        if cache is None or cache["metadata"].get("deletionTimestamp"):
            continue
        have = live.get(ref(volume))
        released = have is not None and (have.get("status") or {}).get("phase") == "Released"
        if released:  # its claim was deleted: make both again
            p.delete_volumes.append(volume["metadata"]["name"])
        _want(pool, p, volume, have, applied.get(applied_key(volume)), forget=released)
        _want(pool, p, claim, live.get(ref(claim)), applied.get(applied_key(claim)))
    return Problem(R.MODEL_UNAVAILABLE, "scorer.model.cache: " + "; ".join(said)) if said else None


def _model_claims(pool: Pool, live: dict[Ref, dict | None]) -> Problem | None:
    """Every claim a scorer's model comes from (scorer.model.pvc) exists: a pod naming a missing claim waits
    Pending in silence. Not blocking: the pods start once the claim is created."""
    missing = [c for c in _claims(pool) if live.get(("PersistentVolumeClaim", pool.namespace, c)) is None]
    if not missing:
        return None
    return Problem(R.MODEL_UNAVAILABLE, f"scorer.model.pvc: PersistentVolumeClaim {', '.join(missing)} not found in "
                   f"namespace {pool.namespace}: the worker pods wait Pending until it exists")


def _pod_security(pool: Pool, live: dict[Ref, dict | None]) -> Problem | None:
    """IPC_LOCK is outside Pod Security's baseline and restricted levels: say so before any create fails."""
    level = (live.get(("Namespace", "", pool.namespace)) or {}).get(PSA_ENFORCE)
    if level in ("baseline", "restricted"):
        return Problem(R.POD_SECURITY_FORBIDS_IPC_LOCK,
                       f"namespace {pool.namespace} enforces Pod Security level {level!r}, which forbids the "
                       f"IPC_LOCK capability workers need to pin store memory; label the namespace "
                       f"{PSA_ENFORCE}=privileged (the operator still adds nothing beyond IPC_LOCK)", True)
    return None


def desired_objects(pool: Pool, sizing: SizingResult) -> list[dict]:
    """Everything the operator creates for a pool, workers named as the API server would name them; not the
    control Secret, whose token the operator draws at random when it creates it."""
    objs = owned_objects(pool)
    template = pod_template(pool, sizing)
    for i in range(pool.spec.replicas):
        pod = copy.deepcopy(template)
        pod["metadata"]["name"] = f"{pool.name}-<generated-{i}>"
        objs.append(pod)
    return objs
