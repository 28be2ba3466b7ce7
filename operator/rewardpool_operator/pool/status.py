"""The pool's status, pure: conditions from the findings, the network, the plan and what applying it met;
which of them are new enough to be told as events (once per change, not on every resync)."""
from __future__ import annotations

import time

from ..api import conditions as C
from ..api import reasons as R
from ..api.findings import Problem
from ..api.quantity import format_bytes
from ..api.spec import Pool
from .observed import Network, Signals
from .plan import Plan
from .roll import SHADOW
from .sizing import SizingResult


def _progress(p: Plan, old: dict | None, now: float) -> dict:
    """When the workers last changed (created, Ready, replaced, drained): the clock of the progress deadline."""
    key = f"{p.want_hash}/{p.active}/{p.ready}/{p.stale}/{p.draining}/{p.lost}"
    if old and old.get("key") == key and old.get("time"):
        return old
    return {"key": key, "time": C.now(now)}


def compute(pool: Pool, sizing: SizingResult, problems: list[Problem], network: Network, p: Plan,
            signals: Signals, failures: list[tuple[str, str]], old: dict, generation: int, network_ref: str,
            now: float | None = None) -> dict:
    """failures: (reason, API message) of the writes the API server refused in this reconcile."""
    replicas = pool.spec.replicas
    blocking = [x for x in problems if x.blocking]
    spec_blocking = [x for x in blocking if x.reason != R.WORKERS_DO_NOT_FIT]
    degraded = sorted((x for x in problems + p.problems if x not in spec_blocking), key=lambda x: not x.blocking)
    now = time.time() if now is None else now
    progress = _progress(p, old.get("progress"), now)
    conds = [
        C.cond(R.INVALID_SPEC, bool(spec_blocking), spec_blocking[0].reason if spec_blocking else R.SPEC_VALID,
               "; ".join(x.message for x in spec_blocking) or "spec accepted"),
        C.cond(R.NETWORK_READY, network.ok, network.reason, network.message),
        C.cond(R.DEGRADED, bool(degraded), degraded[0].reason if degraded else R.AS_EXPECTED,
               "; ".join(x.message for x in degraded) or "no problems found"),
        C.cond(R.REPLICA_FAILURE, bool(failures), failures[0][0] if failures else R.NO_FAILURES,
               "; ".join(m for _, m in failures) or "every pod write the operator made was accepted"),
    ]
    if not p.managed:
        cause = blocking[0].reason if blocking else network.reason
        conds.append(C.cond(R.PROGRESSING, False, R.BLOCKED, f"worker pods are not managed until {cause} is fixed"))
        not_ready = R.BLOCKED
    elif p.stale or p.active != replicas or p.ready < replicas or p.lost:
        reason = (R.ROLLING_UPDATE if p.stale else R.REPLACING_LOST_WORKERS if p.lost
                  else R.SCALING if p.active != replicas else R.WAITING_FOR_READY)
        message = f"{p.ready}/{replicas} ready, {p.stale} to replace, {p.active} present"
        if p.lost:
            message += f", {p.lost} lost"
        if p.unschedulable:  # say why instead of leaving the pods silently Pending
            reason, message = R.UNSCHEDULABLE, f"{message}; {p.unschedulable}"
        stalled = now - (C.epoch(progress["time"]) or now)
        if p.shadow_state == "disagrees":  # held for the user: not progressing, and said (Degraded)
            conds.append(C.cond(R.PROGRESSING, False, R.SHADOW_DISAGREES, f"{message}; {p.shadow_message}"))
        elif p.shadow_state == "stalled":  # no sample within the deadline: said, with why
            conds.append(C.cond(R.PROGRESSING, False, R.SHADOW_STALLED, f"{message}; {p.shadow_message}"))
        elif p.shadow_state == "scoring":  # waiting on purpose, for the shadow's samples
            conds.append(C.cond(R.PROGRESSING, True, R.SHADOW_SCORING, f"{message}; {p.shadow_message}"))
        elif p.held:  # waiting on purpose, bounded by maxVersionSkewSeconds: not a stalled roll
            conds.append(C.cond(R.PROGRESSING, True, R.WAITING_FOR_PINNED_GROUPS, f"{message}; {p.held}"))
        elif stalled > pool.spec.progressDeadlineSeconds:  # as a Deployment says it: the roll stopped, and why
            conds.append(C.cond(R.PROGRESSING, False, R.PROGRESS_DEADLINE_EXCEEDED,
                                f"no progress for {stalled:.0f}s (progressDeadlineSeconds "
                                f"{pool.spec.progressDeadlineSeconds}): {message}"))
        else:
            conds.append(C.cond(R.PROGRESSING, True, reason, message))
        not_ready = R.WORKERS_NOT_READY
    else:
        conds.append(C.cond(R.PROGRESSING, False, R.STABLE, f"{replicas} worker(s) up to date"))
        not_ready = R.WORKERS_NOT_READY
    if p.scale is not None:
        conds.append(C.cond(R.SCALING_ACTIVE, p.scale.reason != R.METRICS_UNAVAILABLE, p.scale.reason,
                            p.scale.message))
    # In the shadow phase the old version serves every call: a pool whose serving workers are all Ready can
    # score (a job that waits for Ready before it sends traffic must not wait on a shadow that needs traffic).
    all_ready = p.managed and p.ready == replicas and (not p.stale or p.phase == SHADOW) and not failures
    ready_reason = R.ALL_WORKERS_READY if all_ready else (R.REPLICA_FAILURE if failures and p.managed else not_ready)
    conds.append(C.cond(R.READY, all_ready, ready_reason, f"{p.ready}/{replicas} workers ready"))

    scaling: dict = {}
    if p.scale is not None:
        d = p.scale
        scaling = {"desiredReplicas": d.desired, "lastScale": old.get("lastScale")}
        if d.desired != replicas:
            scaling["lastScale"] = {"time": C.now(), "from": replicas, "to": d.desired, "reason": d.reason,
                                    "message": d.message}
    return {
        "observedGeneration": generation, "replicas": p.active, "readyReplicas": p.ready,
        "drainingReplicas": p.draining, "selector": pool.selector_string,
        "queueDepth": signals.queue_depth if signals.queue_depth is not None else old.get("queueDepth", 0),
        "pendingBytes": signals.pending_bytes if signals.pending_bytes is not None else old.get("pendingBytes", 0),
        "storeFill": round(signals.store_fill, 4) if signals.store_fill is not None else old.get("storeFill"),
        "demandHint": p.hint,
        **scaling,
        "segment": sizing.status(), "memoryPerWorker": format_bytes(sizing.memory_bytes),
        "memoryFormula": sizing.memory_formula, "networkAttachment": network_ref, "progress": progress,
        "scorerVersions": p.versions,
        "roll": roll_patch(p.roll, old.get("roll")),  # None deletes it (a merge patch) once the roll is over
        "shadow": _as_patch(p.shadow, old.get("shadow")),
        "conditions": C.merge(old.get("conditions"), conds, generation),
    }


def _as_patch(new: dict | None, old: dict | None) -> dict | None:
    """`new` as a merge patch over `old` writes it: a null stored is a key deleted, so nulls are left out, and
    a key of `old` that `new` lacks is sent as null. Equal to `old` once written (no write on every pass)."""
    if new is None:
        return None
    out = {k: v for k, v in new.items() if v is not None}
    out.update({k: None for k in old or {} if k not in out})
    return out


def roll_patch(new: dict | None, old: dict | None) -> dict | None:
    """status.roll as a merge patch over the one stored: keys it no longer has (pins of a version no longer
    pinned, the phase's own fields) are nulled, so a roll's record is exactly what the plan decided."""
    if new is None:
        return None
    out = _as_patch(new, old)
    if out is not None and isinstance(new.get("pins"), dict):
        out["pins"] = _as_patch(new["pins"], (old or {}).get("pins") if isinstance((old or {}).get("pins"), dict)
                                else None)
    return out


def roll_first(p: Plan, old: dict) -> dict | None:
    """The status to write before the plan acts, when its roll changed phase (a roll begun or ended, a shadow
    promoted): a decision is recorded before anything acts on it, so a refused write leaves nothing done that the
    status does not know, and the next pass decides again from what is stored."""
    if not p.managed or not p.phase_changed:
        return None
    return {"roll": roll_patch(p.roll, old.get("roll")), "shadow": _as_patch(p.shadow, old.get("shadow"))}


def warnings(old: dict, new: dict) -> list[tuple[str, str, str]]:
    """Warning events for problems that are new or changed reason since the last status (not every resync)."""
    before = {c["type"]: c for c in old.get("conditions") or []}
    out = []
    for c in new.get("conditions") or []:
        was = before.get(c["type"], {})
        if R.warns(c) and (was.get("status") != c["status"] or was.get("reason") != c["reason"]
                    or (c["type"] == R.REPLICA_FAILURE and was.get("message") != c["message"])):
            out.append(("Warning", c["reason"], c["message"]))
    return out


def invalid(message: str, old: dict, generation: int) -> dict:
    """Status of a pool whose spec cannot even be parsed (admission should have caught it)."""
    conds = [C.cond(R.INVALID_SPEC, True, R.SPEC_NOT_UNDERSTOOD, message),
             C.cond(R.READY, False, R.INVALID_SPEC, "the spec cannot be used: " + message)]
    return {"observedGeneration": generation, "conditions": C.merge(old.get("conditions"), conds, generation)}
