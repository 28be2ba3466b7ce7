"""The reconcile's decision, pure: what the operator observed in, the writes to make out. No I/O here, so
every branch people change (lost pods, rolls, scale-ins, drains, blocking findings) is a table test.

A plan is a list of named steps (STEPS, at the end), each a function over one `_Pass` (what was observed, sorted
once; the serving workers not yet marked to leave; the hold; the plan being made):
1. sort the pods: terminating, lost, draining, shadows, stale;
2. the roll's phase (`roll.step`): none, Shadow or Replacing, what that phase may do (`roll.ALLOWED`), what serves
   in it, the versions with pinned caller groups, and the one hold (`roll.Hold`);
3. lost workers (Failed, Succeeded/evicted, on a node gone or NotReady past NODE_LOST_SECONDS) are deleted and
   replaced (a pinned version's last one by a copy of itself); they never count as workers;
4. a worker whose store reads fail while its peers' succeed (`datapath.broken`) is marked for draining;
5. a surplus of serving workers is marked for draining, in `rollout.removal_order`;
6. missing workers are created: of the wanted template (in a roll, serving workers within replicas +
   spec.rollout.maxSurge: as a Deployment's, draining ones are not counted), or in the Shadow phase copies of
   an old worker;
7. stale workers (another template) are marked for draining, when the phase allows: the ones not Ready at
   once, the Ready ones while replicas - maxUnavailable stay Ready;
8. workers already draining are deleted when `drain.verdict` says nothing is lost;
9. what status counts; then the built-in autoscaler's new size, if any, written through /scale.
Every removal of a serving worker (4, 5, 7, and the replacement in 3) asks the one hold, so none removes the last
worker of a version that caller groups are pinned to. While a blocking finding stands or the RoCE network is
missing only the steps marked `while_blocked` run: the pods sorted, the roll's record kept, lost workers cleaned
up, the counts."""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from rewardpool_worker.contract import (DRAIN_ANNOTATION, EXPECTED_OUTPUTS_ANNOTATION, SCORER_VERSION_LABEL,
                                        SHADOW_ANNOTATION, Agreement, parse_expected_outputs, version_label)

from ..api import conditions as C
from ..api import reasons as R
from ..api.findings import Problem
from ..api.spec import HASH_LABEL, Pool
from . import autoscaler, datapath
from . import drain as drain_mod
from . import roll as roll_mod
from .autoscaler import Decision
from .builders import copy_of
from .observed import Network, Observed
from .rollout import Budget, budget, is_ready, pod_ip, removal_order
from .sizing import SizingResult

NODE_LOST_SECONDS = 60.0  # a node NotReady or Unknown this long: its workers are replaced


@dataclass
class Plan:
    template: dict
    want_hash: str
    delete: list[tuple[str, str, str, str]] = field(default_factory=list)  # (pod, event type, reason, message)
    drain: list[tuple[str, str]] = field(default_factory=list)  # (pod, why)
    create: int = 0
    create_like: list[dict] = field(default_factory=list)  # pods to create as they are (copies of old workers)
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
    roll: dict | None = None  # status.roll: the roll in progress, its phase and since when, pinned versions
    phase: str | None = None  # roll.SHADOW, roll.REPLACING or None
    phase_changed: bool = False  # the phase record is new this pass: written to status before anything acts on it
    pins: dict[str, float] = field(default_factory=dict)  # versions with groups pinned (the operator remembers them)
    held: str = ""  # why the roll waits for groups pinned to an old scorer version (empty: it does not)
    # shadow scoring (spec.rollout.shadow)
    shadow: dict | None = None  # status.shadow: the last shadow of a new scorer version, and how it agreed
    shadow_state: str = ""  # "scoring" (the roll waits for the shadow), "disagrees" (held), "stalled", ""
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


def scorer_versions(pods: list[dict], reported: dict[str, str] | None = None) -> list[dict]:
    """The scorer versions these pods serve: what each worker reports (pod IP -> its full version, with its model
    files' digest), else its pod's label ("unknown" for pods made before there was one). `label`: the label's part
    (two versions under one label are one template whose model files differ)."""
    reported = reported or {}
    seen: dict[str, list[int]] = {}
    for pod in pods:
        v = reported.get(pod_ip(pod) or "") or (pod["metadata"].get("labels") or {}).get(SCORER_VERSION_LABEL, "unknown")
        counts = seen.setdefault(v, [0, 0])
        counts[0] += 1
        counts[1] += is_ready(pod)
    return [{"version": v, "label": version_label(v) if v in reported.values() else v, "workers": n, "ready": r}
            for v, (n, r) in sorted(seen.items())]


def differing_models(pods: list[dict], reported: dict[str, str]) -> Problem | None:
    """Workers of one template that report different scorer versions read different model files at start (a new
    checkpoint written at the same path): a second reward, served silently unless said."""
    by_template: dict[str, set[str]] = {}
    for pod in pods:
        if (v := reported.get(pod_ip(pod) or "")) is not None:
            by_template.setdefault(_hash(pod) or "", set()).add(v)
    split = {t: vs for t, vs in by_template.items() if len(vs) > 1}
    if not split:
        return None
    vs = sorted(next(iter(split.values())))
    return Problem(R.MODEL_FILES_DIFFER,
                   f"workers of one template serve {len(vs)} scorer versions ({', '.join(vs)}): their model files "
                   "differ (a new checkpoint at the same path?); calls and groups each stay on one version, but "
                   "the pool gives two rewards until the workers are replaced (change the spec to roll them)")


def _name(pod: dict) -> str:
    return pod["metadata"]["name"]


def _version(pod: dict) -> str:
    return (pod["metadata"].get("labels") or {}).get(SCORER_VERSION_LABEL, "unknown")


def _marked(pod: dict) -> bool:
    return SHADOW_ANNOTATION in (pod["metadata"].get("annotations") or {})


def _hash(pod: dict) -> str | None:
    return (pod["metadata"].get("labels") or {}).get(HASH_LABEL)


def _fmt(x: float | None, spec: str = ".3f") -> str:
    return "n/a" if x is None else format(x, spec)


@dataclass
class _Pass:
    """One plan's working state: what was observed, sorted once by the first step; the serving workers not yet
    marked to leave and the hold every removal asks (set by the roll's step); and the plan being made."""
    pool: Pool
    sizing: SizingResult
    template: dict
    want_hash: str
    observed: Observed
    old_status: dict
    p: Plan
    lost: list[tuple[dict, str]] = field(default_factory=list)  # (pod, why)
    draining: list[dict] = field(default_factory=list)
    started_at: dict[str, float] = field(default_factory=dict)  # draining pod -> when its drain began
    want_version: str = "unknown"
    mine: list[dict] = field(default_factory=list)  # shadows of the wanted template
    old_shadows: list[dict] = field(default_factory=list)  # shadows of another: they serve nothing
    stale: list[dict] = field(default_factory=list)  # unmarked workers of another template
    against: list[str] = field(default_factory=list)  # the versions a roll compares with
    acting: str | None = None  # the phase this pass acts in
    allowed: roll_mod.Allowed | None = None
    serving: list[dict] = field(default_factory=list)
    hold: roll_mod.Hold | None = None
    budget: Budget = Budget(surge=1, unavailable=0)  # spec.rollout's, resolved against replicas

    def left(self, version: str) -> int:
        return sum(1 for x in self.serving if _version(x) == version)

    def remove(self, pod: dict, why: str) -> bool:
        """Mark a serving worker to drain, unless the hold keeps it; whether it was marked."""
        if self.hold.keeps(_version(pod), self.left(_version(pod)), _name(pod)):
            return False
        self.p.drain.append((_name(pod), why))
        self.serving = [x for x in self.serving if x is not pod]
        return True


def _agreement(shadows: list[dict], health: dict, against: list[str]) -> Agreement:
    """The shadow workers' agreement with the versions they shadow; keyed by the serving workers' full versions
    (their label's digest, then their model files'), matched to the labels by `version_label`."""
    total = Agreement()
    for x in shadows:
        for v, sums in ((health.get(_name(x)) or {}).get("agreement") or {}).items():
            if version_label(v) in against:
                total = total + Agreement(**sums)
    return total


def _reported_groups(serving: list[dict], groups: dict[str, int]) -> dict[str, int]:
    """Caller groups per scorer version, as its workers report them this pass (pod IP -> groups)."""
    reported: dict[str, int] = {}
    for x in serving:
        reported[_version(x)] = reported.get(_version(x), 0) + groups.get(pod_ip(x) or "", 0)
    return reported


def _pins(recorded: dict, remembered: dict[str, float], reported: dict[str, int], now: float) -> dict[str, float]:
    """Versions with caller groups pinned: reported now by their workers, or remembered (the last roll's record,
    whatever its target: a roll begun over another keeps its pins; and the operator's own memory, which a refused
    status write does not lose)."""
    old = {v: t for v, s in (recorded.get("pins") or {}).items() if (t := C.epoch(s)) is not None}
    for v, t in remembered.items():
        old[v] = max(t, old.get(v, t))
    return roll_mod.seen_pins(old, reported, now)


def _copy_source(pods: list[dict], want_hash: str, versions: list[str]) -> dict | None:
    """The worker to copy for a replacement of the serving version: a Ready one, else any, else a lost or
    terminating one (the spec is all that is needed)."""
    old = [x for x in pods if _hash(x) != want_hash and not _marked(x) and _version(x) in versions]
    ranked = sorted(old, key=lambda x: (bool(x["metadata"].get("deletionTimestamp")), not is_ready(x)))
    return ranked[0] if ranked else None


def _shadow_report(pool: Pool, p: Plan, st: roll_mod.Step, mine: list[dict], stale: list[dict],
                   against: list[str], agreement: Agreement, want_hash: str, want_version: str, old_status: dict,
                   now: float) -> None:
    """status.shadow, the shadow state and message, what to promote, and a stalled phase's why."""
    cfg = pool.spec.rollout
    last = old_status.get("shadow") or {}
    ours = last.get("to") == want_hash
    r, diff = agreement.correlation, agreement.mean_difference
    since = last["since"] if ours and last.get("since") else (p.roll or {}).get("phaseSince") or C.now(now)
    report = {"to": want_hash, "version": want_version, "against": against, "workers": [_name(x) for x in mine],
              "samples": agreement.n, "correlation": None if r is None else round(r, 4),
              "meanDifference": None if diff is None else round(diff, 6), "since": since, "promoted": None}
    if p.phase != roll_mod.SHADOW:
        if mine and p.phase == roll_mod.REPLACING:  # promoted: this pass, or the annotation is not gone yet
            p.promote = [_name(x) for x in mine]
            p.promoted_now = st.promote or not (ours and last.get("promoted"))
            p.shadow_message = st.why or f"scorer version {want_version} takes traffic: " + (
                "spec.rollout.shadow was turned off" if not cfg.shadow else "its roll was promoted")
        if st.promote:  # the report the gate passed on, stamped
            p.shadow = {**report, "promoted": p.roll["phaseSince"] if p.roll else C.now(now)}
        else:
            stamp = (p.roll or {}).get("phaseSince") or C.now(now)
            p.shadow = {**last, "promoted": last.get("promoted") or stamp} if mine and ours else (last or None)
        return
    p.shadow = report
    said = (f"scorer version {want_version} in shadow of {', '.join(against) or 'nothing'}: "
            f"{agreement.n}/{cfg.shadowSamples} samples, correlation {_fmt(r)}, mean difference {_fmt(diff, '+.4g')}")
    p.shadow_state, p.shadow_message = "scoring", f"{said}; the old version serves until then"
    if not mine:
        p.shadow_message = f"starting a worker of scorer version {want_version} in shadow of {', '.join(against)}"
    if st.disagrees:
        p.shadow_state = "disagrees"
        p.shadow_message = f"{said}: {st.why}; the roll holds and the old version serves until the spec changes"
        p.problems.append(Problem(R.SHADOW_DISAGREES, p.shadow_message))
        return
    age = now - (C.epoch(since) or now)
    if agreement.n or age <= pool.spec.progressDeadlineSeconds:
        return
    # no sample within the deadline: say why, rather than wait silently
    not_ready = [x for x in mine if not is_ready(x)]
    unsched = [c.get("message", "") for x in not_ready for c in (x.get("status") or {}).get("conditions") or []
               if c.get("type") == "PodScheduled" and c.get("reason") == "Unschedulable"]
    if not stale:
        why = ("no worker of the serving version is left to compare with; set spec.rollout.shadow to false to "
               "promote it, or revert the spec")
    elif not mine:
        why = "its shadow worker could not be created"
    elif unsched:
        why = f"its shadow worker cannot be scheduled: {unsched[0]}"
    elif not_ready:
        why = f"its shadow worker {_name(not_ready[0])} is not Ready"
    else:
        why = "no call has reached it: the pool had no traffic (the old version serves until it has the samples)"
    p.shadow_state = "stalled"
    p.shadow_message = f"{said}; no sample in {age:.0f}s (progressDeadlineSeconds " \
                       f"{pool.spec.progressDeadlineSeconds}): {why}"
    if not stale or not mine or not_ready:  # a fault, not a quiet pool
        p.problems.append(Problem(R.SHADOW_STALLED, p.shadow_message))


def _phase_key(record: dict | None) -> tuple:
    r = record or {}
    return r.get("to"), r.get("phase"), r.get("phaseSince")


@dataclass(frozen=True)
class PlanStep:
    name: str
    run: Callable[[_Pass], None]
    while_blocked: bool = False  # also runs while a blocking finding stands or the network is missing


def plan(pool: Pool, sizing: SizingResult, template: dict, want_hash: str, observed: Observed,
         blocking: bool, network: Network, old_status: dict) -> Plan:
    p = Plan(template=template, want_hash=want_hash, managed=network.ok and not blocking)
    pas = _Pass(pool=pool, sizing=sizing, template=template, want_hash=want_hash, observed=observed,
                old_status=old_status, p=p, budget=budget(pool.spec.rollout, pool.spec.replicas))
    for step in STEPS:
        if p.managed or step.while_blocked:
            step.run(pas)
    return p


def _sort_pods(pas: _Pass) -> None:
    """The pods by what they are: terminating (left out: they serve nothing and hold up nothing), lost, draining,
    shadows (of the wanted template or another), stale."""
    p, observed, want_hash, now = pas.p, pas.observed, pas.want_hash, pas.observed.now
    p.hint = parse_expected_outputs(observed.annotations.get(EXPECTED_OUTPUTS_ANNOTATION), now)
    live = [x for x in observed.pods if not x["metadata"].get("deletionTimestamp")]
    pas.lost = lost = [(x, why) for x in live if (why := lost_reason(x, observed.nodes, now))]
    lost_names = {_name(x) for x, _ in lost}
    active = [x for x in live if _name(x) not in lost_names]
    pas.draining = draining = [x for x in active if DRAIN_ANNOTATION in (x["metadata"].get("annotations") or {})]
    pas.started_at = {_name(x): C.epoch(x["metadata"]["annotations"][DRAIN_ANNOTATION]) or now for x in draining}
    p.oldest_drain_seconds = max((now - t for t in pas.started_at.values()), default=0.0)
    pas.want_version = (pas.template["metadata"].get("labels") or {}).get(SCORER_VERSION_LABEL, "unknown")
    up = [x for x in active if x not in draining]
    pas.mine = [x for x in up if _marked(x) and _hash(x) == want_hash]
    pas.old_shadows = [x for x in up if _marked(x) and _hash(x) != want_hash]  # serve nothing: they go at once
    pas.serving = unmarked = [x for x in up if not _marked(x)]
    pas.stale = [x for x in unmarked if _hash(x) != want_hash]


def _roll_phase(pas: _Pass) -> None:
    """The roll's phase (`roll.step`), what serves in it, the versions with pinned groups and the one hold."""
    p, spec, observed, old_status = pas.p, pas.pool.spec, pas.observed, pas.old_status
    want_hash, want_version, stale, mine, now = pas.want_hash, pas.want_version, pas.stale, pas.mine, observed.now
    unmarked = pas.serving
    # a lost old worker keeps the roll open for its pass: a pinned version's last one is replaced by a copy, and
    # a shadow phase still has its version to compare against (the copy), so losing every old worker never
    # skips the shadow gate
    lost_stale = [x for x, _ in pas.lost if _hash(x) != want_hash and not _marked(x)]
    old = roll_mod.recorded(old_status, want_hash)
    against = list((old or {}).get("from") or sorted({_version(x) for x in stale + lost_stale} - {want_version}))
    agreement = _agreement(mine, observed.health, against)
    facts = roll_mod.Facts(want_hash=want_hash, want_version=want_version,
                           stale_versions=sorted({_version(x) for x in stale + lost_stale}),
                           new_serves=any(_hash(x) == want_hash for x in unmarked),
                           shadow_on=spec.rollout.shadow, samples_wanted=spec.rollout.shadowSamples,
                           min_correlation=spec.rollout.shadowMinCorrelation, agreement=agreement)
    st = roll_mod.step(old, facts, rolling=bool(stale or mine or lost_stale), now=now)
    if p.managed:
        p.phase, p.roll = st.phase, (dict(st.record) if st.record else None)
        p.phase_changed = _phase_key(p.roll) != _phase_key(old_status.get("roll"))
    else:  # blocked: nothing moves, so the roll's record stays as it was
        p.roll, p.shadow = old_status.get("roll"), old_status.get("shadow")
    # The pass that promotes does only that (its next pass acts in the new phase); a promoted shadow serves (its
    # annotation may not be gone from the cache yet).
    acting = roll_mod.SHADOW if st.promote else p.phase
    serving = unmarked + (mine if acting == roll_mod.REPLACING else [])
    p.versions = scorer_versions(serving, observed.signals.versions)
    if (differ := differing_models(serving, observed.signals.versions)) is not None:
        p.problems.append(differ)
    window = C.epoch((p.roll or {}).get("phaseSince")) if acting == roll_mod.REPLACING else None
    pins: dict[str, float] = {}
    reported = _reported_groups(serving, observed.signals.groups)
    if p.roll is not None and spec.rollout.maxVersionSkewSeconds is not None:
        pins = _pins(old_status.get("roll") or {}, observed.pins, reported, now)
    if p.roll is not None:
        p.roll.pop("pins", None)
        if pins:
            p.roll["pins"] = {v: C.now(t) for v, t in sorted(pins.items())}
    p.pins = pins
    pas.against, pas.acting, pas.allowed, pas.serving = against, acting, roll_mod.ALLOWED[acting], list(serving)
    pas.hold = roll_mod.Hold(spec.rollout.maxVersionSkewSeconds, window, pins, now, counts=reported)
    if p.managed:
        _shadow_report(pas.pool, p, st, mine, stale, against, agreement, want_hash, want_version, old_status, now)


def _lost_workers(pas: _Pass) -> None:
    """Lost workers are dead either way: deleted even while the pool is blocked (and not replaced then)."""
    p = pas.p
    for pod, why in pas.lost:
        p.delete.append((_name(pod), "Warning", R.WORKER_LOST, f"worker pod {_name(pod)} {why}"
                         + ("; replacing it" if p.managed else "")))


def _pinned_lost_copied(pas: _Pass) -> None:
    """A pinned version's lost last worker is replaced by a copy of itself (the others by step 'missing')."""
    p, want_hash, template, allowed = pas.p, pas.want_hash, pas.template, pas.allowed
    for pod, _ in pas.lost:
        v = _version(pod)
        if _hash(pod) != want_hash and not _marked(pod) and allowed.create_from == "new" \
                and pas.hold.keeps(v, pas.left(v) + 1, _name(pod)):
            p.create_like.append(copy_of(pod, template))


def _broken_data_paths(pas: _Pass) -> None:
    """A worker whose store reads fail while its peers' succeed: its data path is broken; it drains and is
    replaced (step 'missing'), unless the hold keeps it (the last worker of a pinned version)."""
    p = pas.p
    by_ip = {pod_ip(x): x for x in pas.serving if pod_ip(x)}
    for ip, why in sorted(datapath.broken(pas.observed.reads).items()):
        pod = by_ip.get(ip)
        if pod is None:
            continue
        kept = not pas.remove(pod, f"its data path is broken: {why}")
        p.problems.append(Problem(R.DATA_PATH_BROKEN, f"worker {_name(pod)}: {why}; "
                                  + ("the roll's hold keeps it for now" if kept else "draining it and starting a "
                                     "replacement")))


def _surplus(pas: _Pass) -> None:
    """Shadows of a template no longer wanted, and serving workers past spec.replicas, in removal order."""
    p, replicas, want_hash = pas.p, pas.pool.spec.replicas, pas.want_hash
    for pod in pas.old_shadows:
        p.drain.append((_name(pod), "a shadow of a template no longer wanted"))
    if replicas == 0:  # a pool scaled to zero keeps no shadow either
        p.drain += [(_name(x), "scale in") for x in pas.mine if x not in pas.serving]
    surplus = len(pas.serving) + len(p.create_like) - _serving_limit(pas)
    for pod in removal_order(pas.serving, want_hash, pas.observed.signals.per_worker):
        if surplus <= 0:
            break
        surplus -= pas.remove(pod, "scale in")


def _serving_limit(pas: _Pass) -> int:
    """Serving workers past this are a surplus: replicas; in a roll's Replacing phase replicas and the surge (the
    new workers started before the old leave); in the Shadow phase with no surge, one fewer (the shadow takes an
    old worker's place), but never the last one: the shadow needs a serving worker to be compared with."""
    replicas, surge = pas.pool.spec.replicas, pas.budget.surge
    if pas.acting == roll_mod.SHADOW:
        return replicas if surge else max(replicas - 1, min(replicas, 1))
    if pas.stale or pas.p.create_like:
        return replicas + surge
    return replicas


def _missing_workers(pas: _Pass) -> None:
    """Missing workers: of the wanted template (in a roll, within the surge), or in the Shadow phase copies of the
    serving version's; and the shadow worker of a roll that wants one, within the surge (or in an old worker's
    place)."""
    p, replicas, want_hash, allowed = pas.p, pas.pool.spec.replicas, pas.want_hash, pas.allowed
    missing = max(min(replicas, _serving_limit(pas)) - len(pas.serving) - len(p.create_like), 0)
    if allowed.create_from == "new":
        if pas.stale or p.create_like:  # a roll: new workers up to replicas, the serving ones within the surge
            new = sum(1 for x in pas.serving if _hash(x) == want_hash)
            serving = len(pas.serving) + len(p.create_like)
            p.create = max(min(replicas - new, replicas + pas.budget.surge - serving), 0)
        else:
            p.create = missing
    elif missing:
        source = _copy_source(pas.observed.pods, want_hash, pas.against)
        if source is not None:
            p.create_like += [copy_of(source, pas.template) for _ in range(missing)]
        else:
            p.problems.append(Problem(R.SHADOW_STALLED, f"{missing} worker(s) missing and no worker of the serving "
                                      f"version {', '.join(pas.against)} left to copy; set spec.rollout.shadow to "
                                      "false to promote the new version, or revert the spec"))
    room = pas.budget.surge > 0 or len(pas.serving) + len(p.create_like) <= _serving_limit(pas)
    if allowed.shadow and not pas.mine and replicas > 0 and room:
        p.create_shadow = 1


def _roll_drains(pas: _Pass) -> None:
    """The roll's drains of stale workers, when the phase allows them: the Ready ones only while the Ready
    serving workers stay at or above replicas - maxUnavailable (new workers count once they are Ready)."""
    p, replicas, want_hash, observed = pas.p, pas.pool.spec.replicas, pas.want_hash, pas.observed
    if pas.allowed.drain_stale:
        # Stale workers that serve nothing (image pull failures, crash loops, unschedulable) go first and outside
        # the budget, as a Deployment scales down its unavailable old pods: a rollback from a bad template never
        # waits on pods that cannot become Ready. Taking them takes no Ready worker away.
        for pod in [x for x in pas.serving if _hash(x) != want_hash and not is_ready(x)]:
            pas.remove(pod, "spec changed; it was not Ready")
        allowance = sum(1 for x in pas.serving if is_ready(x)) - pas.budget.floor(replicas)
        for pod in removal_order([x for x in pas.serving if _hash(x) != want_hash and is_ready(x)], want_hash,
                                 observed.signals.per_worker):
            if allowance <= 0:
                break
            allowance -= pas.remove(pod, "spec changed")
    p.held = "; ".join(dict.fromkeys(pas.hold.said))


def _ended_drains(pas: _Pass) -> None:
    """Workers already draining are deleted when `drain.verdict` says nothing is lost; a stuck drain is said."""
    p, spec, observed, now = pas.p, pas.pool.spec, pas.observed, pas.observed.now
    for pod in pas.draining:
        name = _name(pod)
        v = drain_mod.verdict(name, observed.health.get(name), pas.sizing.per_worker_bytes > 0,
                              observed.segment_used.get(name), now - pas.started_at[name], spec.drainTimeoutSeconds,
                              observed.unreachable_for.get(name, 0.0), is_ready(pod),
                              usage_watched=spec.store.metricsAddress is not None)
        if v.action == "delete":
            p.delete.append((name, "Normal" if v.reason == R.DRAINED else "Warning", R.WORKER_DELETED,
                             f"deleted worker pod {name} ({v.reason}): {v.message}"))
        elif v.action == "stuck":
            p.problems.append(Problem(v.reason, v.message))


def _counts(pas: _Pass) -> None:
    """What status reports of the workers that stay (and those about to be created)."""
    p, serving, want_hash = pas.p, pas.serving, pas.want_hash
    deleted = {n for n, *_ in p.delete}
    p.draining = sum(1 for x in pas.draining if _name(x) not in deleted) + len(p.drain)
    p.active = len(serving) + (p.create + len(p.create_like) if p.managed else 0)
    p.ready = sum(1 for x in serving if is_ready(x))
    p.stale = sum(1 for x in serving if _hash(x) != want_hash) + len(p.create_like)
    p.lost = sum(1 for n, _, reason, _ in p.delete if reason == R.WORKER_LOST)
    unsched = [c for x in serving for c in (x.get("status") or {}).get("conditions") or []
               if c.get("type") == "PodScheduled" and c.get("reason") == "Unschedulable"]
    if unsched:
        p.unschedulable = f"{len(unsched)} pod(s) unschedulable: {unsched[0].get('message', '')}"


def _autoscale(pas: _Pass) -> None:
    """The built-in autoscaler's new size, if any (written through /scale)."""
    p, spec, sizing = pas.p, pas.pool.spec, pas.sizing
    auto = spec.autoscaling
    if auto is not None and auto.enabled:
        starting = sum(1 for x in pas.serving if not is_ready(x)) + p.create + len(p.create_like)
        obs = autoscaler.ScalingInputs(replicas=spec.replicas, counted=p.active, starting=starting, hint=p.hint,
                                       sizing_min=sizing.min_replicas_for_registration,
                                       high_watermark=spec.sizing.highWatermark if spec.sizing else 0.9)
        p.scale = autoscaler.decide(auto, obs, pas.observed.signals, pas.observed.history, pas.observed.now)


# The plan, in order. Each step reads what the ones before it left in the pass; every removal of a serving worker
# asks the hold the roll's step made.
STEPS = (
    PlanStep("sort the pods", _sort_pods, while_blocked=True),
    PlanStep("the roll's phase", _roll_phase, while_blocked=True),
    PlanStep("lost workers", _lost_workers, while_blocked=True),
    PlanStep("a pinned version's lost worker copied", _pinned_lost_copied),
    PlanStep("broken data paths", _broken_data_paths),
    PlanStep("surplus", _surplus),
    PlanStep("missing workers", _missing_workers),
    PlanStep("the roll's drains", _roll_drains),
    PlanStep("ended drains", _ended_drains),
    PlanStep("counts", _counts, while_blocked=True),
    PlanStep("the autoscaler", _autoscale),
)
