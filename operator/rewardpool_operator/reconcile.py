"""One level-based reconcile of one pool: read what exists, compare with the builders' desired state, make
the smallest set of writes, report status. Safe to run any number of times; writes nothing when nothing
changed. Pods are created by the operator itself so that it, not a ReplicaSet, chooses which pod goes."""
from __future__ import annotations

import logging
import secrets
import time

from pydantic import ValidationError

from rewardpool_worker.config import DRAIN_ANNOTATION, control_secret_name

from . import conditions as C
from . import drain as drain_mod
from . import signals as signals_mod
from . import sizing as sizing_mod
from . import validate
from .autoscaler import decide
from .builders import (attachment_ref, control_secret, control_token, disruption_budget, headless_service,
                       network_attachment, pod_template, template_hash)
from .kube import Kube, NadCrdMissing
from .rollout import is_ready as _is_ready
from .rollout import pod_ip as _ip
from .rollout import removal_order, roll_allowance
from .quantity import format_bytes
from .sizing import Problem
from .spec import HASH_LABEL, Pool

log = logging.getLogger("rewardpool.operator")


def _terminating(pod: dict) -> bool:
    return bool(pod["metadata"].get("deletionTimestamp"))


async def _ensure_control_token(kube: Kube, pool: Pool, events: list) -> tuple[str | None, Problem | None]:
    """The pool's control token, creating its Secret (with a fresh random token) when it is missing: deleting
    the Secret is how a user rotates the token. A same-named Secret that is not ours is left alone."""
    name = control_secret_name(pool.name)
    current = await kube.get_secret(pool.namespace, name)
    if current is None:
        current = await kube.create_secret(control_secret(pool, secrets.token_urlsafe(32)))
        events.append(("Normal", "ControlTokenCreated", f"created Secret {name} with a new control token"))
    token = control_token(current)
    if token is None:
        return None, Problem("ControlSecretConflict", f"Secret {name} exists but is not this pool's control "
                             "token (no control-token label or no token key); rename or delete it", True)
    return token, None


async def _start_drain(kube: Kube, pod: dict, why: str, events: list, token: str) -> None:
    name = pod["metadata"]["name"]
    # The annotation is the request (the worker also reads it); the HTTP call makes it immediate.
    await kube.annotate_pod(pod["metadata"]["namespace"], name, {DRAIN_ANNOTATION: C.now()})
    pod["metadata"].setdefault("annotations", {})[DRAIN_ANNOTATION] = C.now()
    if _ip(pod):
        await signals_mod.request_drain(_ip(pod), token)
    events.append(("Normal", "WorkerDraining", f"draining worker pod {name} ({why}): no new batches"))


async def _drain_verdict(pool: Pool, pod: dict, segment_lent: bool, token: str | None) -> drain_mod.Verdict:
    ip = _ip(pod)
    health = await signals_mod.worker_health(ip) if ip else None
    if health is not None and health.get("phase") == "ready" and token:
        await signals_mod.request_drain(ip, token)  # asked before an operator restart, or the request was lost
    used = None
    if segment_lent and health and health.get("store_hostname") and pool.spec.store.metricsAddress:
        used = await signals_mod.segment_used_bytes(pool.spec.store.metricsAddress, health["store_hostname"])
    waited = time.time() - (C.epoch(pod["metadata"]["annotations"][DRAIN_ANNOTATION]) or time.time())
    return drain_mod.verdict(pod["metadata"]["name"], health, segment_lent, used, waited,
                             pool.spec.drainTimeoutSeconds)


async def reconcile(kube: Kube, cached: dict) -> dict | None:
    """Reconcile one pool; returns the status it wrote (or would have written). It reads the pool afresh:
    the watch's copy can lag behind this operator's own last status write."""
    body = await kube.get_pool(cached["metadata"]["namespace"], cached["metadata"]["name"])
    if body is None or body["metadata"].get("deletionTimestamp"):
        return None
    meta = body["metadata"]
    ns, name, gen = meta["namespace"], meta["name"], meta.get("generation", 0)
    old_status = body.get("status") or {}
    events: list[tuple[str, str, str]] = []

    try:
        pool = Pool.from_object(body)
        sizing = sizing_mod.compute(pool.spec)
    except (ValidationError, ValueError) as e:  # should be caught at admission; never crash
        msg = str(e).replace("\n", "; ")
        conds = [C.cond("InvalidSpec", True, "SpecNotUnderstood", msg),
                 C.cond("Ready", False, "InvalidSpec", "the spec cannot be used: " + msg)]
        status = {"observedGeneration": gen,
                  "conditions": C.merge(old_status.get("conditions"), conds, gen)}
        await _write_status(kube, body, old_status, status, [("Warning", "InvalidSpec", msg)])
        return status

    # ---- network -------------------------------------------------------------------------------------------
    ref = attachment_ref(pool)
    net_ok, net_reason, net_msg = True, "PodNetworkOnly", "no RoCE attachment requested"
    if ref is not None:
        nad = network_attachment(pool)
        try:
            if nad is not None:
                action = await kube.ensure_nad(nad)
                if action != "unchanged":
                    events.append(("Normal", f"NetworkAttachment{action.capitalize()}",
                                   f"{action} ipvlan attachment {ref[0]}/{ref[1]} on {pool.spec.network.ipvlan.master}"))
                net_reason, net_msg = "AttachmentReady", f"ipvlan on {pool.spec.network.ipvlan.master} ({ref[0]}/{ref[1]})"
            elif await kube.get_nad(*ref) is None:
                net_ok, net_reason = False, "AttachmentNotFound"
                net_msg = f"NetworkAttachmentDefinition {ref[0]}/{ref[1]} named in network.attachment does not exist"
            else:
                net_reason, net_msg = "AttachmentReady", f"existing attachment {ref[0]}/{ref[1]}"
        except NadCrdMissing:
            net_ok, net_reason = False, "NetworkAttachmentCRDMissing"
            net_msg = ("the cluster has no NetworkAttachmentDefinition CRD (k8s.cni.cncf.io/v1): install Multus; "
                       "worker pods are not created until the RoCE network can be attached")

    action = await kube.ensure_service(headless_service(pool))
    if action == "created":
        events.append(("Normal", "ServiceCreated", f"created headless service {name}-workers"))
    action = await kube.ensure_pdb(disruption_budget(pool))
    if action == "created":
        events.append(("Normal", "DisruptionBudgetCreated", f"created PodDisruptionBudget {name}"))

    # ---- findings: sizing, spec, placement, the control token ----------------------------------------------------
    nodes = await kube.list_nodes(",".join(f"{k}={v}" for k, v in pool.spec.placement.rdmaNodeSelector.items()))
    problems: list[Problem] = validate.findings(pool.spec, sizing, nodes)
    token, token_problem = await _ensure_control_token(kube, pool, events)
    if token_problem is not None:
        problems.append(token_problem)

    blocking = [p for p in problems if p.blocking]
    spec_blocking = [p for p in blocking if p.reason != "WorkersDoNotFit"]

    # ---- pods --------------------------------------------------------------------------------------------------
    pods = await kube.list_pods(ns, pool.selector_string)
    active = [p for p in pods if not _terminating(p)]
    template = pod_template(pool, sizing)
    want_hash = template_hash(template)
    replicas = pool.spec.replicas
    sig = await signals_mod.read([_ip(p) for p in active if _is_ready(p) and _ip(p)], pool.spec.store.metricsAddress)
    draining = [p for p in active if DRAIN_ANNOTATION in (p["metadata"].get("annotations") or {})]
    serving = [p for p in active if p not in draining]
    stuck: list[Problem] = []
    if net_ok and not blocking:
        surplus = len(serving) - replicas
        for pod in removal_order(serving, want_hash, sig.per_worker)[:max(surplus, 0)]:
            await _start_drain(kube, pod, "scale in", events, token)
            serving.remove(pod)
            draining.append(pod)
        for _ in range(replicas - len(serving)):
            created = await kube.create_pod(ns, template)
            serving.append(created)
            events.append(("Normal", "WorkerCreated", f"created worker pod {created['metadata']['name']}"))
        # Roll stale pods, keeping at most the budget (a quarter of the pool, at least one) unavailable at a time.
        stale = [p for p in serving if p["metadata"]["labels"].get(HASH_LABEL) != want_hash]
        unavailable = sum(1 for p in serving if not _is_ready(p)) + len(draining) + sum(1 for p in pods if _terminating(p))
        for pod in removal_order(stale, want_hash, sig.per_worker)[:roll_allowance(replicas, unavailable)]:
            await _start_drain(kube, pod, "spec changed", events, token)
            serving.remove(pod)
            draining.append(pod)
    for pod in list(draining):
        v = await _drain_verdict(pool, pod, sizing.per_worker_bytes > 0, token)
        if v.action == "delete":
            await kube.delete_pod(ns, pod["metadata"]["name"])
            draining.remove(pod)
            events.append(("Normal" if v.reason == "Drained" else "Warning", "WorkerDeleted",
                           f"deleted worker pod {pod['metadata']['name']} ({v.reason}): {v.message}"))
        elif v.action == "stuck":
            stuck.append(Problem(v.reason, v.message))
    problems += stuck
    active = serving
    stale_left = sum(1 for p in active if p["metadata"]["labels"].get(HASH_LABEL) != want_hash)
    ready = sum(1 for p in active if _is_ready(p))

    # ---- signals and the built-in autoscaler ---------------------------------------------------------------------
    auto = pool.spec.autoscaling
    scaling: dict = {}
    scaling_cond = None
    if auto is not None and auto.enabled and net_ok and not blocking:
        hw = pool.spec.sizing.highWatermark if pool.spec.sizing else 0.9
        dec = decide(auto, replicas, sig, hw, sizing.min_replicas_for_registration,
                     C.epoch(old_status.get("scaleDownPendingSince")), time.time())
        scaling_cond = C.cond("ScalingActive", dec.reason != "MetricsUnavailable", dec.reason, dec.message)
        scaling = {"desiredReplicas": dec.desired,
                   "scaleDownPendingSince": C.now(dec.below_since) if dec.below_since is not None else None,
                   "lastScale": old_status.get("lastScale")}
        if dec.desired != replicas:
            await kube.patch_pool_scale(ns, name, dec.desired)
            events.append(("Normal", "Scaled", f"replicas {replicas} -> {dec.desired} ({dec.reason}): {dec.message}"))
            scaling["lastScale"] = {"time": C.now(), "from": replicas, "to": dec.desired, "reason": dec.reason,
                                    "message": dec.message}

    # ---- status ------------------------------------------------------------------------------------------------
    # Blocking problems first: the condition's reason names what stops the pool.
    degraded = sorted((p for p in problems if p not in spec_blocking), key=lambda p: not p.blocking)
    conds = [
        C.cond("InvalidSpec", bool(spec_blocking), spec_blocking[0].reason if spec_blocking else "SpecValid",
               "; ".join(p.message for p in spec_blocking) or "spec accepted"),
        C.cond("NetworkReady", net_ok, net_reason, net_msg),
        C.cond("Degraded", bool(degraded), degraded[0].reason if degraded else "AsExpected",
               "; ".join(p.message for p in degraded) or "no problems found"),
    ]
    if not net_ok or blocking:
        cause = (blocking[0].reason if blocking else net_reason)
        conds.append(C.cond("Progressing", False, "Blocked", f"worker pods are not managed until {cause} is fixed"))
        not_ready_reason = "Blocked"
    elif stale_left or len(active) != replicas or ready < replicas:
        reason = "RollingUpdate" if stale_left else ("Scaling" if len(active) != replicas else "WaitingForReady")
        message = f"{ready}/{replicas} ready, {stale_left} to replace, {len(active)} present"
        unschedulable = [c for p in active for c in (p.get("status") or {}).get("conditions") or []
                         if c.get("type") == "PodScheduled" and c.get("reason") == "Unschedulable"]
        if unschedulable:  # say why instead of leaving the pods silently Pending
            reason = "Unschedulable"
            message += f"; {len(unschedulable)} pod(s) unschedulable: {unschedulable[0].get('message', '')}"
        conds.append(C.cond("Progressing", True, reason, message))
        not_ready_reason = "WorkersNotReady"
    else:
        conds.append(C.cond("Progressing", False, "Stable", f"{replicas} worker(s) up to date"))
        not_ready_reason = "WorkersNotReady"
    if scaling_cond is not None:
        conds.append(scaling_cond)
    all_ready = net_ok and not blocking and ready == replicas and not stale_left
    conds.append(C.cond("Ready", all_ready,
                        "AllWorkersReady" if all_ready else not_ready_reason,
                        f"{ready}/{replicas} workers ready"))
    status = {
        "observedGeneration": gen, "replicas": len(active), "readyReplicas": ready, "drainingReplicas": len(draining),
        "selector": pool.selector_string,
        "queueDepth": sig.queue_depth if sig.queue_depth is not None else old_status.get("queueDepth", 0),
        "pendingBytes": sig.pending_bytes if sig.pending_bytes is not None else old_status.get("pendingBytes", 0),
        "storeFill": round(sig.store_fill, 4) if sig.store_fill is not None else old_status.get("storeFill"),
        **scaling,
        "segment": sizing.status(), "memoryPerWorker": format_bytes(sizing.memory_bytes),
        "memoryFormula": sizing.memory_formula,
        "networkAttachment": f"{ref[0]}/{ref[1]}" if ref else "",
        "conditions": C.merge(old_status.get("conditions"), conds, gen),
    }
    # Warn once per new problem (when its condition first turns True), not on every resync.
    before = {c["type"]: c for c in old_status.get("conditions") or []}
    for c in status["conditions"]:
        was = before.get(c["type"], {})
        bad = (c["type"] in ("InvalidSpec", "Degraded") and c["status"] == "True") or \
              (c["type"] in ("NetworkReady", "ScalingActive") and c["status"] == "False")
        if bad and (was.get("status") != c["status"] or was.get("reason") != c["reason"]):
            events.append(("Warning", c["reason"], c["message"]))
    await _write_status(kube, body, old_status, status, events)
    return status


async def _write_status(kube: Kube, body: dict, old: dict, new: dict, events) -> None:
    meta = body["metadata"]
    for type_, reason, message in events:
        log.info("pool %s/%s: %s %s", meta["namespace"], meta["name"], reason, message)
        await kube.event(body, type_, reason, message)
    if any(old.get(k) != v for k, v in new.items()):
        await kube.patch_pool_status(meta["namespace"], meta["name"], new)
