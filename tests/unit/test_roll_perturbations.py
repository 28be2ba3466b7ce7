"""Rolls under generated perturbations: a small world of pods (they become Ready a pass after they are created,
drain in one pass, blip, get lost) driven by the real plan and status code, pass after pass, while hypothesis
draws what the world does between passes: readiness blips, a store failover (nothing Ready), scale changes, lost
workers, spec changes, refused status writes, operator restarts, shadow samples that agree or not, groups pinned
and unpinned, shadow turned off. After every pass the invariants are checked:

- no promotion below the gate: a version that went through a shadow phase serves only once its samples passed
  the gate or shadow was turned off;
- a version groups are pinned to keeps a worker until its window ends (every removal path asks the hold);
- the operator never takes the Ready serving workers below replicas - maxUnavailable (both drawn), and a roll
  starts new workers only while every worker present (draining ones too) fits in replicas + maxSurge;
- a shadow phase with no sample past its deadline says why (ShadowStalled);
- Ready is never said while fewer serving workers than replicas are Ready; at most one shadow worker."""
from __future__ import annotations

import copy
from dataclasses import dataclass, field

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from rewardpool_operator.pool import builders, sizing as sizing_mod, status as status_mod
from rewardpool_operator.api.conditions import epoch, now as rfc3339
from rewardpool_operator.pool.observed import Observed, Signals
from rewardpool_operator.pool.plan import plan
from rewardpool_operator.pool.rollout import budget
from rewardpool_worker.contract import (DRAIN_ANNOTATION, GROUP_ACTIVE_SECONDS, SCORER_VERSION_LABEL,
                                        SHADOW_ANNOTATION, Agreement)
from tests.factories import NET, NOW, pool, ready_node
from rewardpool_operator.api.spec import HASH_LABEL

SAMPLES, MIN_R, SKEW, DEADLINE, TICK = 20, 0.5, 60, 100, 5.0


def merge_patch(target, patch):
    """RFC 7386, as the API server applies a status patch."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = dict(target) if isinstance(target, dict) else {}
    for k, v in patch.items():
        if v is None:
            out.pop(k, None)
        else:
            out[k] = merge_patch(out.get(k), v)
    return out


def agreement(n: int, good: bool) -> Agreement:
    a = Agreement()
    for i in range(n):
        x = float(i % 7)
        a.add(x, x + 0.01 if good else -x)
    return a


@dataclass
class World:
    replicas: int = 2
    shadow_on: bool = True
    max_surge: int | str = "25%"
    max_unavailable: int | str = "25%"
    spec_no: int = 1
    pods: dict = field(default_factory=dict)
    status: dict = field(default_factory=dict)
    now: float = NOW
    refuse: int = 0
    samples: dict = field(default_factory=dict)  # version -> (n, good)
    pinned: str | None = None
    counter: int = 0
    gen: int = 1
    memory_pins: dict = field(default_factory=dict)  # the operator's own memory (PoolMemory.pins): lost on restart
    # what the invariants remember
    shadowed: set = field(default_factory=set)  # versions that had a shadow phase
    turned_off: set = field(default_factory=set)  # versions whose roll saw shadow turned off
    promoted_at: dict = field(default_factory=dict)  # version -> when its Replacing phase was first decided
    reported_at: dict = field(default_factory=dict)  # version -> when a Ready worker last reported it pinned

    @property
    def version(self) -> str:
        return f"v{self.spec_no}"

    def pool(self):
        rollout = {"shadow": self.shadow_on, "shadowSamples": SAMPLES, "shadowMinCorrelation": MIN_R,
                   "maxVersionSkewSeconds": SKEW, "maxSurge": self.max_surge, "maxUnavailable": self.max_unavailable}
        return pool(replicas=self.replicas, drainTimeoutSeconds=600, progressDeadlineSeconds=DEADLINE,
                    rollout=rollout)

    def template(self, p, s):
        t = builders.pod_template(p, s)
        t["metadata"]["labels"][HASH_LABEL] = f"h{self.spec_no}"
        t["metadata"]["labels"][SCORER_VERSION_LABEL] = self.version
        return t

    def add(self, source: dict, shadow: bool = False) -> None:
        self.counter += 1
        name = f"w{self.counter}"
        meta = {"name": name, "labels": dict(source["metadata"]["labels"]), "annotations": {},
                "creationTimestamp": rfc3339(self.now)}
        if shadow:
            meta["annotations"][SHADOW_ANNOTATION] = rfc3339(self.now)
        self.pods[name] = {"metadata": meta, "spec": {"nodeName": "n0"},
                           "status": {"phase": "Running", "podIP": f"10.1.{self.counter // 250}.{self.counter % 250}",
                                      "conditions": [{"type": "Ready", "status": "False"}]}}


def ready(pod) -> bool:
    return pod["status"]["conditions"][0]["status"] == "True"


def serving(pod) -> bool:
    ann = pod["metadata"]["annotations"]
    return DRAIN_ANNOTATION not in ann and SHADOW_ANNOTATION not in ann and pod["status"]["phase"] == "Running"


def version(pod) -> str:
    return pod["metadata"]["labels"][SCORER_VERSION_LABEL]


def one_pass(w: World, not_ready: set[str]) -> None:
    p = w.pool()
    s = sizing_mod.compute(p.spec)
    template = w.template(p, s)
    want = template["metadata"]["labels"][HASH_LABEL]
    seen = copy.deepcopy(w.pods)
    for name in not_ready & set(seen):
        seen[name]["status"]["conditions"][0]["status"] = "False"
    groups = {x["status"]["podIP"]: 1 for x in seen.values()
              if w.pinned and version(x) == w.pinned and ready(x) and x["status"]["phase"] == "Running"}
    if groups:
        w.reported_at[w.pinned] = w.now
    health = {}
    for name, x in seen.items():
        if DRAIN_ANNOTATION in x["metadata"]["annotations"]:
            health[name] = {"phase": "drained", "in_flight": 0}
        elif SHADOW_ANNOTATION in x["metadata"]["annotations"] and version(x) in w.samples:
            n, good = w.samples[version(x)]
            sums = agreement(n, good).model_dump()
            health[name] = {"agreement": {f"{version(o)}-m0": sums for o in seen.values() if version(o) != version(x)}}
    obs = Observed(pods=list(seen.values()), nodes={"n0": ready_node()}, signals=Signals(0, 0, None, len(seen),
                   groups=groups), health=health, now=w.now, pins=w.memory_pins)
    pl = plan(p, s, template, want, obs, False, NET, w.status)
    w.memory_pins = pl.pins
    before = {n for n, x in seen.items() if serving(x) and ready(x)}
    n_ready_serving = len(before)

    # ---- the plan's own invariants, before it is applied
    if pl.phase == "Shadow":
        w.shadowed.add(w.version)
    if pl.phase == "Replacing" and w.version not in w.promoted_at:
        w.promoted_at[w.version] = w.now
    leaving = {n for n, _ in pl.drain} | {n for n, *_ in pl.delete}
    # a shadow promoted this pass serves from this pass on (the operator promotes before it drains)
    after = (before | {n for n in pl.promote if n in seen and ready(seen[n])}) - leaving
    b = budget(p.spec.rollout, w.replicas)
    budget_floor = min(n_ready_serving, b.floor(w.replicas))
    assert len(after) >= budget_floor, (f"the operator took Ready serving workers from {n_ready_serving} to "
                                        f"{len(after)} (replicas {w.replicas}, {b}): {pl.drain} {pl.delete}")

    first = status_mod.roll_first(pl, w.status)
    if first is not None:
        if w.refuse:
            w.refuse -= 1
            return  # not recorded: nothing acted on
        w.status = merge_patch(w.status, first)
    # ---- apply
    for name, *_ in pl.delete:
        w.pods.pop(name, None)
    for name, _ in pl.drain:
        w.pods[name]["metadata"]["annotations"][DRAIN_ANNOTATION] = rfc3339(w.now)
    for name in pl.promote:
        w.pods[name]["metadata"]["annotations"].pop(SHADOW_ANNOTATION, None)
    for _ in range(pl.create_shadow):
        w.add(template, shadow=True)
    for x in pl.create_like:
        w.add(x)
    for _ in range(pl.create):
        w.add(template)
    if pl.phase == "Replacing" and pl.create:  # as a Deployment counts: draining workers are not
        present = [x for x in w.pods.values() if DRAIN_ANNOTATION not in x["metadata"]["annotations"]]
        assert len(present) <= w.replicas + b.surge, (f"{len(present)} workers present after creating {pl.create} "
                                                      f"(replicas {w.replicas}, {b})")
    new = status_mod.compute(p, s, [], NET, pl, obs.signals, [], w.status, w.gen, "", now=w.now)
    if w.refuse:
        w.refuse -= 1
    else:
        w.status = merge_patch(w.status, new)

    # ---- the world's invariants, after it was applied
    v = w.version
    n, good = w.samples.get(v, (0, True))
    gate_open = v in w.turned_off or (n >= SAMPLES and good)
    if v in w.shadowed and not gate_open:
        assert not any(serving(x) and version(x) == v for x in w.pods.values()), \
            f"{v} serves without passing its shadow gate ({n} samples, agreeing: {good})"
    shadows = [x for x in w.pods.values() if SHADOW_ANNOTATION in x["metadata"]["annotations"]
               and DRAIN_ANNOTATION not in x["metadata"]["annotations"] and version(x) == v]
    assert len(shadows) <= 1
    pinned = w.pinned
    if pinned and pinned != v and pl.phase == "Replacing" and v in w.promoted_at:
        in_window = w.now < w.promoted_at[v] + SKEW - TICK
        told = w.now - w.reported_at.get(pinned, float("-inf")) < GROUP_ACTIVE_SECONDS - TICK
        had = any(version(x) == pinned for x in seen.values() if serving(x))
        if in_window and told and had and w.replicas > 0:
            assert any(serving(x) and version(x) == pinned for x in w.pods.values()) or \
                any(version(x) == pinned for x in pl.create_like), \
                f"the last worker of pinned {pinned} was removed inside its window: {pl.drain} {pl.delete}"
    sh = new.get("shadow") or {}
    if pl.promoted_now and v not in w.turned_off:  # the status says what the gate passed on
        assert (sh.get("samples") or 0) >= SAMPLES and sh.get("promoted"), sh
    cond = {c["type"]: c for c in new["conditions"]}
    if pl.phase == "Shadow" and pl.roll and pl.shadow and not pl.shadow.get("samples"):
        age = w.now - (epoch(pl.roll["phaseSince"]) or w.now)
        if age > DEADLINE + TICK:
            assert cond["Progressing"]["reason"] in ("ShadowStalled", "ShadowDisagrees"), cond["Progressing"]
    if cond["Ready"]["status"] == "True":
        assert sum(1 for x in seen.values() if serving(x) and ready(x)) >= w.replicas, cond["Ready"]


PERTURBATION = st.one_of(
    st.just(("tick",)),
    st.tuples(st.just("blip"), st.integers(0, 7)),
    st.just(("failover",)),
    st.tuples(st.just("scale"), st.integers(1, 4)),
    st.tuples(st.just("lost"), st.integers(0, 7)),
    st.just(("spec",)),
    st.tuples(st.just("refuse"), st.integers(1, 3)),
    st.tuples(st.just("samples"), st.booleans(), st.integers(1, 25)),
    st.tuples(st.just("pin"), st.booleans()),
    st.just(("shadow_off",)),
    st.just(("restart",)),
)


BUDGETS = st.tuples(st.sampled_from([0, 1, 2, "25%", "50%", "100%"]),
                    st.sampled_from([0, 1, 2, "0%", "25%", "50%", "100%"])).filter(
    lambda b: not (str(b[0]).rstrip("%") == "0" and str(b[1]).rstrip("%") == "0"))


def run(steps, rollout_budget=("25%", "25%")) -> World:
    w = World(max_surge=rollout_budget[0], max_unavailable=rollout_budget[1])
    for _ in range(3):  # a settled pool to start from
        one_pass(w, set())
        for x in w.pods.values():
            x["status"]["conditions"][0]["status"] = "True"
        w.now += TICK
    for step in steps:
        not_ready: set[str] = set()
        names = sorted(w.pods)
        kind = step[0]
        if kind == "blip" and names:
            not_ready.add(names[step[1] % len(names)])
        elif kind == "failover":
            not_ready = set(names)
        elif kind == "scale":
            w.replicas = step[1]
        elif kind == "lost" and names:
            w.pods[names[step[1] % len(names)]]["status"]["phase"] = "Failed"
        elif kind == "spec":
            w.spec_no += 1
        elif kind == "refuse":
            w.refuse = step[1]
        elif kind == "samples":
            n, good = w.samples.get(w.version, (0, step[1]))
            w.samples[w.version] = (n + step[2], good)
        elif kind == "pin":
            olds = sorted({version(x) for x in w.pods.values() if serving(x) and version(x) != w.version})
            w.pinned = olds[0] if step[1] and olds else None
        elif kind == "restart":  # the operator's memory is gone; what it recorded in status is what it knows
            w.memory_pins = {}
            recorded = {v: epoch(t) for v, t in ((w.status.get("roll") or {}).get("pins") or {}).items()}
            w.reported_at = {v: t for v, t in recorded.items() if t is not None}
        elif kind == "shadow_off":
            w.shadow_on = False
            w.turned_off.add(w.version)
        one_pass(w, not_ready)
        for x in w.pods.values():  # created last pass: Ready now
            x["status"]["conditions"][0]["status"] = "True"
        w.now += TICK
    return w


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(PERTURBATION, min_size=1, max_size=40), BUDGETS)
# found by a fresh run (2026-12-03): the roll's first record refused, then the one old worker lost: with no live
# old worker the phase went straight to Replacing and the new version served without its shadow gate
@example(steps=[("scale", 1), ("refuse", 2), ("spec",), ("lost", 0)], rollout_budget=("25%", "25%"))
# found by CI's run (2026-12-07): a shadow lost after its promotion was refused, its successor promoted in the pass
# that drained the one old worker: counted as serving by the plan, so the operator must promote before it drains
@example(steps=[("spec",), ("scale", 1), ("refuse", 3), ("tick",), ("shadow_off",), ("lost", 1), ("tick",)],
         rollout_budget=(1, 0))
@example(steps=[("spec",), ("refuse", 2), ("spec",), ("shadow_off",)], rollout_budget=(0, 1))
# found by a seeded run (2026-12-07): with no surge the shadow took the place of a 1-replica pool's last old
# worker (nothing left to compare with), then was lost, and the new version served without its gate
@example(steps=[("spec",), ("scale", 1), ("lost", 1)], rollout_budget=(0, 1))
def test_rolls_hold_their_invariants_under_perturbations(steps, rollout_budget):
    run(steps, rollout_budget)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(PERTURBATION, max_size=20), BUDGETS)
def test_after_the_perturbations_a_quiet_world_finishes_its_roll_or_says_why(steps, rollout_budget):
    """Every phase ends or reports why: once the world stops perturbing (the shadow gets agreeing samples, nothing
    is pinned), the roll completes within its deadline."""
    w = run(steps, rollout_budget)
    w.pinned, w.refuse = None, 0
    n, _ = w.samples.get(w.version, (0, True))
    w.samples[w.version] = (max(n, 0) + SAMPLES, True)
    for _ in range(int(DEADLINE / TICK)):
        one_pass(w, set())
        for x in w.pods.values():
            x["status"]["conditions"][0]["status"] = "True"
        w.now += TICK
    versions = {version(x) for x in w.pods.values() if serving(x)}
    assert versions == {w.version} and "roll" not in w.status, (versions, w.status.get("roll"))
    assert sum(1 for x in w.pods.values() if serving(x)) == w.replicas


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(1, 6), BUDGETS, st.booleans(), st.integers(1, 3))
@example(replicas=1, rollout_budget=("25%", "25%"), shadow=False, rolls=1)  # the demo's pool: never zero
@example(replicas=1, rollout_budget=("25%", "25%"), shadow=True, rolls=2)
def test_ready_workers_never_fall_below_replicas_less_max_unavailable_while_the_cluster_has_room(
        replicas, rollout_budget, shadow, rolls):
    """The issue's invariant as the world sees it: a settled pool rolls (once, or again mid-roll), its new workers
    become Ready a pass after they are created (the cluster has room), nothing else happens; at every moment the
    Ready serving workers are at least replicas - maxUnavailable, and every roll finishes."""
    w = World(replicas=replicas, shadow_on=shadow, max_surge=rollout_budget[0], max_unavailable=rollout_budget[1])
    floor = budget(w.pool().spec.rollout, replicas).floor(replicas)
    for _ in range(3):
        one_pass(w, set())
        for x in w.pods.values():
            x["status"]["conditions"][0]["status"] = "True"
        w.now += TICK
    seen = []
    for i in range(rolls * 40):
        if i % 40 == 0 or (rolls > 1 and i == 43):  # a roll; the third case rolls again mid-way
            w.spec_no += 1
        w.samples[w.version] = (SAMPLES, True)
        one_pass(w, set())
        ready_serving = sum(1 for x in w.pods.values() if serving(x) and ready(x))
        seen.append(ready_serving)
        assert ready_serving >= floor, f"Ready serving workers went {seen} (replicas {replicas}, floor {floor})"
        for x in w.pods.values():
            x["status"]["conditions"][0]["status"] = "True"
        w.now += TICK
    assert {version(x) for x in w.pods.values() if serving(x)} == {w.version} and "roll" not in w.status
