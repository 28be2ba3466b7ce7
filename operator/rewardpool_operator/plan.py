"""The reconcile's decision, pure: what the operator observed in, the writes to make out. No I/O here, so
every branch people change (lost pods, rolls, scale-ins, drains, blocking findings) is a table test.

Order of a plan, as `apply` carries it out:
1. lost workers (Failed, Succeeded/evicted, on a node gone or NotReady past NODE_LOST_SECONDS) are deleted
   and replaced; they never count as workers;
2. a surplus of serving workers is marked for draining, in `rollout.removal_order`;
3. missing workers are created;
4. stale workers (another template) are marked for draining: the ones not Ready at once, the Ready ones
   while the unavailability budget allows;
5. workers already draining are deleted when `drain.verdict` says nothing is lost;
6. the built-in autoscaler's new size, if any, is written through /scale.
Nothing but 6 happens while a blocking finding stands or the RoCE network is missing.

With spec.rollout.shadow, a roll to another scorer version first runs one worker of the new template in
shadow (SHADOW_ANNOTATION, one worker beyond replicas): while it lasts nothing old is drained and nothing else
is created; once its agreement with the serving version has shadowSamples pairs (and shadowMinCorrelation
holds), the annotation is removed and the roll above goes on (the promoted worker is a surplus, so an old one
drains first)."""
from __future__ import annotations

from dataclasses import dataclass, field

from rewardpool_worker.contract import (DRAIN_ANNOTATION, EXPECTED_OUTPUTS_ANNOTATION, SCORER_VERSION_LABEL,
                                        SHADOW_ANNOTATION, Agreement, parse_expected_outputs, version_label)

from . import conditions as C
from . import drain as drain_mod
from . import autoscaler
from . import reasons as R
from .autoscaler import Decision
from .observed import Network, Observed
from .rollout import is_ready, pod_ip, removal_order, roll_allowance
from .findings import Problem
from .sizing import SizingResult
from .spec import HASH_LABEL, Pool

NODE_LOST_SECONDS = 60.0  # a node NotReady or Unknown this long: its workers are replaced
STUCK_TERMINATING_SECONDS = 30.0  # past its grace period, a terminating pod no longer holds up a roll


@dataclass
class Plan:
    template: dict
    want_hash: str
    delete: list[tuple[str, str, str, str]] = field(default_factory=list)  # (pod, event type, reason, message)
    drain: list[tuple[str, str]] = field(default_factory=list)  # (pod, why)
    create: int = 0
    scale: Decision | None = None
    hint: int = 0  # outputs a client said are coming
    problems: list[Problem] = field(default_factory=list)  # found while planning (stuck drains)
    managed: bool = True  # False: blocked, pods left as they are
    # what status reports
    active: int = 0
    ready: int = 0
    draining: int = 0
    oldest_drain_seconds: float = 0.0  # age of the oldest drain in progress (a metric, not status)
    stale: int = 0
    lost: int = 0
    unschedulable: str = ""
    versions: list[dict] = field(default_factory=list)  # scorer versions serving: version, workers, ready
    roll: dict | None = None  # the roll in progress: the template it rolls to, and since when (status.roll)
    held: str = ""  # why the roll waits for groups pinned to an old scorer version (empty: it does not)
    # shadow scoring (spec.rollout.shadow)
    shadow: dict | None = None  # status.shadow: the last shadow of a new scorer version, and how it agreed
    shadow_state: str = ""  # "scoring" (the roll waits for the shadow), "disagrees" (held), "" (none now)
    shadow_message: str = ""
    create_shadow: int = 0  # workers of the new template to create in shadow
    promote: list[str] = field(default_factory=list)  # shadow workers whose version takes traffic now
    promoted_now: bool = False  # this pass decided the promotion (its event is said once)


def _node_not_ready_since(node: dict) -> float | None:
    for c in (node.get("status") or {}).get("conditions") or []:
        if c.get("type") == "Ready":
            return None if c.get("status") == "True" else (C.epoch(c.get("lastTransitionTime")) or 0.0)
    return 0.0  # no Ready condition at all: never reported in


def lost_reason(pod: dict, nodes: dict[str, dict], now: float) -> str | None:
    """Why a pod no longer counts as a worker, or None if it still does."""
    status = pod.get("status") or {}
    phase = status.get("phase")
    if phase == "Failed":
        why = status.get("reason") or "Error"
        return f"failed ({why}{': ' + status['message'] if status.get('message') else ''})"
    if phase == "Succeeded":
        return "exited (Succeeded): a worker should run until it is drained"
    node_name = (pod.get("spec") or {}).get("nodeName")
    if node_name:
        node = nodes.get(node_name)
        if node is None:
            return f"its node {node_name} no longer exists"
        since = _node_not_ready_since(node)
        if since is not None and now - since >= NODE_LOST_SECONDS:
            return f"its node {node_name} has not been Ready for {now - since:.0f}s"
    return None


def stuck_terminating(pod: dict, nodes: dict[str, dict], now: float) -> bool:
    """A terminating pod that will not go on its own (its node is lost, or it is far past its grace)."""
    meta = pod["metadata"]
    deleted_at = C.epoch(meta.get("deletionTimestamp"))
    if deleted_at is None:
        return False
    grace = meta.get("deletionGracePeriodSeconds") or 0
    node_name = (pod.get("spec") or {}).get("nodeName")
    node_lost = bool(node_name) and lost_reason({"spec": {"nodeName": node_name}}, nodes, now) is not None
    return node_lost or now - deleted_at > grace + STUCK_TERMINATING_SECONDS


def scorer_versions(pods: list[dict]) -> list[dict]:
    """The scorer versions these pods serve (their label; "unknown" for pods made before there was one)."""
    seen: dict[str, list[int]] = {}
    for pod in pods:
        v = (pod["metadata"].get("labels") or {}).get(SCORER_VERSION_LABEL, "unknown")
        counts = seen.setdefault(v, [0, 0])
        counts[0] += 1
        counts[1] += is_ready(pod)
    return [{"version": v, "workers": n, "ready": r} for v, (n, r) in sorted(seen.items())]


def _name(pod: dict) -> str:
    return pod["metadata"]["name"]


def _version(pod: dict) -> str:
    return (pod["metadata"].get("labels") or {}).get(SCORER_VERSION_LABEL, "unknown")


def _roll(old: dict | None, want_hash: str, now: float) -> dict:
    """The roll to `want_hash`: since the status first recorded it (a new target restarts the clock)."""
    if old and old.get("to") == want_hash and C.epoch(old.get("since")) is not None:
        return {"to": want_hash, "since": old["since"]}
    return {"to": want_hash, "since": C.now(now)}


def _hold_pinned(chosen: list[dict], serving: list[dict], max_skew: int | None, p: Plan, groups: dict[str, int],
                 now: float) -> list[dict]:
    """Of the Ready stale workers a roll would drain now, those it may: a scorer version's last Ready worker is
    kept while callers' groups are pinned to that version (its workers report them), so each group finishes on
    the version it began with, until the roll is `max_skew` seconds old (then the groups move, whole)."""
    if max_skew is None or p.roll is None:
        return chosen
    age = now - (C.epoch(p.roll["since"]) or now)
    if age >= max_skew:
        return chosen
    left: dict[str, list[dict]] = {}
    for pod in serving:
        if is_ready(pod):
            left.setdefault(_version(pod), []).append(pod)
    allowed = []
    for pod in chosen:
        v = _version(pod)
        pinned = sum(groups.get(pod_ip(x) or "", 0) for x in left.get(v, []))
        if len(left.get(v, [])) == 1 and pinned:
            p.held = (f"{pinned} caller group(s) pinned to scorer version {v}, whose last Ready worker {_name(pod)} "
                      f"is kept until they finish or for {max_skew - age:.0f}s more (maxVersionSkewSeconds "
                      f"{max_skew})")
            continue
        left[v] = [x for x in left.get(v, []) if x is not pod]
        allowed.append(pod)
    return allowed


def _marked(pod: dict) -> bool:
    return SHADOW_ANNOTATION in (pod["metadata"].get("annotations") or {})


def _fmt(x: float | None, spec: str = ".3f") -> str:
    return "n/a" if x is None else format(x, spec)


def _shadow(pool: Pool, serving: list[dict], want_hash: str, want_version: str, health: dict, old: dict,
            now: float, p: Plan) -> bool:
    """Whether the roll is in its shadow phase now; fills in p.shadow (status), p.shadow_state and message,
    p.create_shadow and p.promote. The phase lasts while a Ready worker of another scorer version serves and
    the shadow of this template has not been promoted (status.shadow remembers it)."""
    cfg = pool.spec.rollout
    against = sorted({_version(x) for x in serving
                      if not _marked(x) and is_ready(x) and x["metadata"]["labels"].get(HASH_LABEL) != want_hash}
                     - {want_version})
    last = old.get("shadow") or {}
    mine = [x for x in serving if _marked(x) and x["metadata"]["labels"].get(HASH_LABEL) == want_hash]
    # a worker of this template without the mark serves already (promoted, and the status write did not land;
    # or shadow was turned on mid-roll): no shadow phase then
    serves = any(not _marked(x) and x["metadata"]["labels"].get(HASH_LABEL) == want_hash for x in serving)
    ours = last.get("to") == want_hash
    if not (cfg.shadow and against and not serves and not (ours and last.get("promoted"))):
        # no shadow phase (off, nothing else serves, or promoted already): a marked worker of this template
        # serves (shadow turned off mid-way, or its promotion was not seen yet)
        p.promote = [_name(x) for x in mine]
        p.promoted_now = bool(mine) and not (ours and last.get("promoted"))
        if p.promoted_now:
            p.shadow_message = (f"scorer version {want_version} takes traffic: "
                                + ("spec.rollout.shadow was turned off" if not cfg.shadow else
                                   "no other scorer version serves any more"))
        p.shadow = {**last, "promoted": last.get("promoted") or C.now(now)} if mine and ours else (last or None)
        return False
    agreement = Agreement()
    for x in mine:
        # keyed by the serving workers' full versions (their label's digest, then their model files')
        for v, sums in ((health.get(_name(x)) or {}).get("agreement") or {}).items():
            if version_label(v) in against:
                agreement = agreement + Agreement(**sums)
    r, diff = agreement.correlation, agreement.mean_difference
    p.shadow = {"to": want_hash, "version": want_version, "against": against, "workers": [_name(x) for x in mine],
                "samples": agreement.n, "correlation": None if r is None else round(r, 4),
                "meanDifference": None if diff is None else round(diff, 6),
                "since": last["since"] if ours and last.get("since") else C.now(now), "promoted": None}
    said = (f"scorer version {want_version} in shadow of {', '.join(against)}: {agreement.n}/{cfg.shadowSamples} "
            f"samples, correlation {_fmt(r)}, mean difference {_fmt(diff, '+.4g')}")
    p.shadow_state, p.shadow_message = "scoring", said
    if not mine:
        p.create_shadow = 1
        p.shadow_message = f"starting a worker of scorer version {want_version} in shadow of {', '.join(against)}"
    elif agreement.n < cfg.shadowSamples:
        p.shadow_message = f"{said}; the old version serves until then"
    elif cfg.shadowMinCorrelation is not None and (r is None or r < cfg.shadowMinCorrelation):
        p.shadow_state = "disagrees"
        p.shadow_message = (f"{said}: below shadowMinCorrelation {cfg.shadowMinCorrelation}; the roll holds and "
                            "the old version serves until the spec changes")
        p.problems.append(Problem(R.SHADOW_DISAGREES, p.shadow_message))
    else:
        p.promote, p.promoted_now = [_name(x) for x in mine], True
        p.shadow["promoted"] = C.now(now)
        p.shadow_message = f"{said}: it takes traffic"
    return True


def plan(pool: Pool, sizing: SizingResult, template: dict, want_hash: str, observed: Observed,
         blocking: bool, network: Network, old_status: dict) -> Plan:
    p = Plan(template=template, want_hash=want_hash, managed=network.ok and not blocking)
    spec, now = pool.spec, observed.now
    replicas = spec.replicas
    terminating = [x for x in observed.pods if x["metadata"].get("deletionTimestamp")]
    live = [x for x in observed.pods if not x["metadata"].get("deletionTimestamp")]
    lost = [(x, why) for x in live if (why := lost_reason(x, observed.nodes, now))]
    lost_names = {_name(x) for x, _ in lost}
    active = [x for x in live if _name(x) not in lost_names]
    draining = [x for x in active if DRAIN_ANNOTATION in (x["metadata"].get("annotations") or {})]
    serving = [x for x in active if x not in draining]
    started_at = {_name(x): C.epoch(x["metadata"]["annotations"][DRAIN_ANNOTATION]) or now for x in draining}
    p.oldest_drain_seconds = max((now - t for t in started_at.values()), default=0.0)
    per_worker = observed.signals.per_worker
    want_version = (template["metadata"].get("labels") or {}).get(SCORER_VERSION_LABEL, "unknown")
    # shadow workers of a template no longer wanted serve nothing: they go at once
    old_shadows = [x for x in serving if _marked(x) and x["metadata"]["labels"].get(HASH_LABEL) != want_hash]
    serving = [x for x in serving if x not in old_shadows]
    in_shadow = p.managed and _shadow(pool, serving, want_hash, want_version, observed.health, old_status, now, p)
    if in_shadow:  # the shadow workers count for nothing below: not replicas, not versions serving
        serving = [x for x in serving if not _marked(x)]
    p.versions = scorer_versions(serving)

    for pod, why in lost:  # dead either way: cleaned up even while the pool is blocked (not replaced then)
        p.delete.append((_name(pod), "Warning", R.WORKER_LOST, f"worker pod {_name(pod)} {why}"
                         + ("; replacing it" if p.managed else "")))
    if p.managed:
        for pod in old_shadows:
            p.drain.append((_name(pod), "a shadow of a template no longer wanted"))
        surplus = len(serving) - replicas
        for pod in removal_order(serving, want_hash, per_worker)[:max(surplus, 0)]:
            p.drain.append((_name(pod), "scale in"))
        marked = {n for n, _ in p.drain}
        serving = [x for x in serving if _name(x) not in marked]
        # in the shadow phase the new template's workers would take traffic: lost ones are replaced after it
        p.create = 0 if in_shadow else max(replicas - len(serving), 0)
        stale = [x for x in serving if x["metadata"]["labels"].get(HASH_LABEL) != want_hash]
        holding = [x for x in terminating if not stuck_terminating(x, observed.nodes, now)]
        # Workers about to be created count as unavailable: a roll never outruns its replacements.
        unavailable = (sum(1 for x in serving if not is_ready(x)) + len(draining) + len(marked) + len(holding)
                       + p.create)
        # Stale workers that serve nothing (image pull failures, crash loops, unschedulable) go first and outside
        # the budget, as a Deployment scales down its unavailable old pods: a rollback from a bad template never
        # waits on pods that cannot become Ready. They still count as unavailable for the Ready ones.
        for pod in [x for x in stale if not is_ready(x)]:
            p.drain.append((_name(pod), "spec changed; it was not Ready"))
        ready_stale = [x for x in stale if is_ready(x)]
        p.roll = _roll(old_status.get("roll"), want_hash, now) if stale else None
        chosen = [] if in_shadow else \
            removal_order(ready_stale, want_hash, per_worker)[:roll_allowance(replicas, unavailable)]
        for pod in _hold_pinned(chosen, serving, spec.rollout.maxVersionSkewSeconds, p, observed.signals.groups,
                                now):
            p.drain.append((_name(pod), "spec changed"))
        marked = {n for n, _ in p.drain}
        serving = [x for x in serving if _name(x) not in marked]

        for pod in draining:
            name = _name(pod)
            v = drain_mod.verdict(name, observed.health.get(name), sizing.per_worker_bytes > 0,
                                  observed.segment_used.get(name), now - started_at[name], spec.drainTimeoutSeconds,
                                  observed.unreachable_for.get(name, 0.0), is_ready(pod))
            if v.action == "delete":
                p.delete.append((name, "Normal" if v.reason == R.DRAINED else "Warning", R.WORKER_DELETED,
                                 f"deleted worker pod {name} ({v.reason}): {v.message}"))
            elif v.action == "stuck":
                p.problems.append(Problem(v.reason, v.message))
        draining_left = len(draining) - sum(1 for n, *_ in p.delete if n in {_name(x) for x in draining})
        p.draining = draining_left + len(marked)
    else:
        p.draining = len(draining)

    p.active = len(serving) + (p.create if p.managed else 0)
    p.ready = sum(1 for x in serving if is_ready(x))
    p.stale = sum(1 for x in serving if x["metadata"]["labels"].get(HASH_LABEL) != want_hash)
    p.lost = len(lost)
    unsched = [c for x in serving for c in (x.get("status") or {}).get("conditions") or []
               if c.get("type") == "PodScheduled" and c.get("reason") == "Unschedulable"]
    if unsched:
        p.unschedulable = f"{len(unsched)} pod(s) unschedulable: {unsched[0].get('message', '')}"

    p.hint = parse_expected_outputs(observed.annotations.get(EXPECTED_OUTPUTS_ANNOTATION), now)
    auto = spec.autoscaling
    if auto is not None and auto.enabled and p.managed:
        starting = sum(1 for x in serving if not is_ready(x)) + p.create
        obs = autoscaler.ScalingInputs(replicas=replicas, counted=p.active, starting=starting, hint=p.hint,
                                  sizing_min=sizing.min_replicas_for_registration,
                                  high_watermark=spec.sizing.highWatermark if spec.sizing else 0.9)
        p.scale = autoscaler.decide(auto, obs, observed.signals, observed.history, now)
    return p
