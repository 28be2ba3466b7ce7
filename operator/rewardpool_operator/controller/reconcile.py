"""One level-based reconcile of one pool, in named steps: read the pool -> ensure the owned objects (network
attachment, Service, disruption budget, control token: `owned.py`) -> observe (nodes and pods from the
watches' caches; signals and draining workers through a `WorkerClient`) -> plan (pure, `plan.py`) -> apply
the plan's writes -> status (pure, `status.py`). Safe to run any number of times; writes nothing when nothing
changed. Pods are created by the operator itself so that it, not a ReplicaSet, chooses which worker goes. API
errors on pod writes are folded into a ReplicaFailure condition instead of aborting the pass.

What a reconcile reads is sized for thousands of pools: pods and nodes come from watches (`podcache.py`,
`watches.py`), never a LIST; the owned objects are read and ensured when the pool itself changed, on an
attachment event and every OWNED_RESYNC_SECONDS, not on each pod event."""
from __future__ import annotations

import logging
import re
import secrets
import time
from dataclasses import dataclass, field

from pydantic import ValidationError

from rewardpool_worker.contract import DRAIN_ANNOTATION, SHADOW_ANNOTATION

from ..api import conditions as C
from ..api import reasons as R
from ..api.findings import blocks_workers
from ..api.spec import Pool
from ..cluster.kube import ApiException, Kube, api_message
from ..cluster.podcache import CREATE, DELETE, DRAIN, PodCache
from ..pool import datapath, podstatus
from ..pool import sizing as sizing_mod
from ..pool import status as status_mod
from ..pool import validate
from ..pool.builders import pod_template, template_hash
from ..pool.observed import History, Observed, Signals
from ..pool.owned import attachment_ref
from ..pool.plan import Plan, plan
from ..pool.rollout import is_ready, pod_ip
from . import metrics as pool_metrics
from . import tenants as tenants_ctl
from .owned import Applied, Owned, ensure_owned, refresh_tenants
from .workers import WorkerClient

log = logging.getLogger("rewardpool.operator")
OWNED_RESYNC_SECONDS = 60.0
# Workers' /metrics are read at most this often per pool (and on every full reconcile): a burst of pod
# events must not become a burst of scrapes, and at 10,000 workers reading each every few seconds cost the
# operator more than everything else. An autoscaled pool is read under the autoscaler's 5 s period, so each
# of its passes decides on a fresh read; another pool only reports its demand (status, the
# rewardpool_pool_queue_depth a KEDA trigger polls every 30 s by default), read as often as Prometheus's
# usual scrape interval.
SIGNALS_MAX_AGE = 4.0
PASSIVE_SIGNALS_MAX_AGE = 15.0
NAME_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"  # k8s.io/apimachinery/pkg/util/rand: no vowels, no look-alikes


@dataclass
class PoolMemory:
    """What the operator remembers between reconciles of a pool (lost on restart, which only makes it more
    careful): when a draining worker went silent, the store name each worker reported, the autoscaler's
    history, what the owned objects looked like and what was last applied to them, the last signals read, and the
    scorer versions caller groups were last seen pinned to."""
    silent_since: dict[str, float] = field(default_factory=dict)
    store_hostname: dict[str, str] = field(default_factory=dict)
    autoscaler: History = field(default_factory=History)
    owned: Owned | None = None
    applied: dict[str, Applied] = field(default_factory=dict)
    signals: Signals | None = None
    signals_at: float = 0.0
    pins: dict[str, float] = field(default_factory=dict)  # scorer versions with caller groups pinned (plan.Plan.pins)
    reads: datapath.Samples = field(default_factory=dict)  # each worker's read counters per scrape, in the window
    tenants_sent: dict[str, str] = field(default_factory=dict)  # pod/restarts -> the tenants version it took
    tenants_said: str = ""  # the tenants version the last TenantsSent event told


async def reconcile(kube: Kube, workers: WorkerClient, body: dict, nodes: dict[str, dict], pods: PodCache,
                    memory: PoolMemory, full: bool = True) -> tuple[dict | None, dict | None]:
    """Reconcile one pool from the newest copy the controller holds; returns the status it computed and the
    pool as its status write returned it (None when nothing was written). A copy that turns out stale
    makes the status write fail with 409 (it is written over the resourceVersion read), and the controller
    reads the pool again. `full` asks for the owned objects to be ensured now."""
    if body["metadata"].get("deletionTimestamp"):
        return None, None
    old = body.get("status") or {}
    gen = body["metadata"].get("generation", 0)
    try:
        pool = Pool.from_object(body)
        sizing = sizing_mod.compute(pool.spec, basis=sizing_mod.recorded_basis(pool.spec, old))
    except (ValidationError, ValueError) as e:  # admission should have caught it; never crash
        new = status_mod.invalid(str(e).replace("\n", "; "), old, gen)
        return new, await _write(kube, body, old, new, status_mod.warnings(old, new))

    events: list[tuple[str, str, str]] = []
    owned = memory.owned
    if full or owned is None or owned.generation != gen or time.monotonic() - owned.at > OWNED_RESYNC_SECONDS:
        owned = memory.owned = await ensure_owned(kube, pool, gen, memory.applied, events)
    elif pool.spec.access.tenants:  # a rotated token within a pass (the Secrets are not watched)
        await refresh_tenants(kube, pool, owned)
    for event in events:  # said before any pod write, so `kubectl describe` reads in the order things happened
        await _say(kube, body, *event)

    waiting = pods.unsettled(pool.namespace, pool.name)
    if waiting:
        # The cache does not show this operator's own last pod writes yet, so a plan or a status made from it
        # would be stale: write neither; the watch event that shows them wakes the pool again.
        log.debug("pool %s/%s waits to see its writes to %s", pool.namespace, pool.name, ", ".join(waiting))
        return old, None

    template = pod_template(pool, sizing, owned.copies)
    problems = validate.findings(pool.spec, sizing, _rdma_nodes(pool, nodes), template) + owned.problems
    observed = await _observe(workers, pool, nodes, pods, memory, full)
    observed.annotations = body["metadata"].get("annotations") or {}
    observed.pins = memory.pins
    if owned.tenants is not None and owned.token:  # who may score over HTTP, to the workers that lack it
        took = await tenants_ctl.send(workers, observed.pods, observed.health, owned.tenants, owned.token,
                                      memory.tenants_sent)
        if took and memory.tenants_said != owned.tenants.version:
            memory.tenants_said = owned.tenants.version
            names = ", ".join(t.name for t in owned.tenants.tenants)
            await _say(kube, body, "Normal", R.TENANTS_SENT, f"tenants {names} (version {owned.tenants.version}) "
                       f"sent to {len(took)} worker(s); no worker is replaced")
    problems += podstatus.container_problems(observed.pods)  # image pulls, crash loops: said, not silent
    problems += podstatus.unready_problems(observed.pods, observed.health)  # Ray or store outages: said too

    p = plan(pool, sizing, template, template_hash(template), observed, blocks_workers(problems),
             owned.network, old)
    memory.pins = p.pins
    first = status_mod.roll_first(p, old)
    if first is not None:  # a new phase is recorded before anything acts on it
        try:
            written = await kube.patch_pool_status(pool.namespace, pool.name, first,
                                                   body["metadata"].get("resourceVersion"))
        except ApiException as e:  # not recorded, so not acted on: the next pass decides again
            log.info("pool %s/%s: the roll's phase %s was not recorded (%s); nothing done this pass",
                     pool.namespace, pool.name, (p.roll or {}).get("phase"), api_message(e))
            return old, None
        body, old = written, written.get("status") or {}
    failures, scaled = await _apply(kube, workers, body, pool, p, observed, pods, owned.token)
    if p.scale is not None:
        memory.autoscaler = p.scale.history

    ref = attachment_ref(pool)
    new = status_mod.compute(pool, sizing, problems, owned.network, p, observed.signals, failures, old, gen,
                             f"{ref[0]}/{ref[1]}" if ref else "")
    # our own /scale write moved the resourceVersion: the status goes over it unchecked
    written = await _write(kube, body, old, new, status_mod.warnings(old, new), check_version=not scaled)
    pool_metrics.record(pool.namespace, pool.name, new, pool.spec.replicas, sizing_mod.high_watermark(pool.spec),
                        p.oldest_drain_seconds)
    return new, written


# ---- observe ---------------------------------------------------------------------------------------------------
def _rdma_nodes(pool: Pool, nodes: dict[str, dict]) -> list[dict]:
    sel = pool.spec.placement.rdmaNodeSelector
    return [n for n in nodes.values() if all((n["metadata"].get("labels") or {}).get(k) == v for k, v in sel.items())]


async def _observe(workers: WorkerClient, pool: Pool, nodes: dict[str, dict], cache: PodCache, memory: PoolMemory,
                   full: bool) -> Observed:
    pods = [x for x in cache.pods(pool.namespace, pool.name)
            if any(o.get("controller") and o.get("uid") == pool.uid for o in x["metadata"].get("ownerReferences") or [])
            or not pool.uid]
    live = [x for x in pods if not x["metadata"].get("deletionTimestamp")]
    ips = [pod_ip(x) for x in live if is_ready(x) and pod_ip(x)]
    now = time.time()
    auto = pool.spec.autoscaling
    max_age = SIGNALS_MAX_AGE if auto is not None and auto.enabled else PASSIVE_SIGNALS_MAX_AGE
    if full or memory.signals is None or now - memory.signals_at >= max_age:
        memory.signals, memory.signals_at = await workers.signals(ips, pool.spec.store.metricsAddress), now
        datapath.remember(memory.reads, memory.signals.reads, now)
    signals = memory.signals
    obs = Observed(pods=pods, nodes=nodes, signals=signals, history=memory.autoscaler, now=now,
                   reads=datapath.window(memory.reads))
    names = {x["metadata"]["name"] for x in pods}
    for gone in set(memory.silent_since) - names:
        memory.silent_since.pop(gone, None)
        memory.store_hostname.pop(gone, None)
    for pod in live:
        if DRAIN_ANNOTATION not in (pod["metadata"].get("annotations") or {}):
            if SHADOW_ANNOTATION in (pod["metadata"].get("annotations") or {}) and pod_ip(pod):
                obs.health[pod["metadata"]["name"]] = await workers.health(pod_ip(pod))  # its agreement
            elif not is_ready(pod) and _started(pod) and pod_ip(pod):  # why not Ready, if the cause is outside
                obs.health[pod["metadata"]["name"]] = await workers.health(pod_ip(pod))
            continue
        name, ip = pod["metadata"]["name"], pod_ip(pod)
        health = await workers.health(ip) if ip else None
        obs.health[name] = health
        if health is None:
            obs.unreachable_for[name] = now - memory.silent_since.setdefault(name, now)
        else:
            memory.silent_since.pop(name, None)
            if health.get("store_hostname"):
                memory.store_hostname[name] = health["store_hostname"]
        host = memory.store_hostname.get(name)
        if host and pool.spec.store.metricsAddress:
            obs.segment_used[name] = await workers.segment_used_bytes(pool.spec.store.metricsAddress, host)
    return obs


def _started(pod: dict) -> bool:
    """Its worker container runs (not waiting for an image, not crash-looping): it can say why it is not Ready."""
    return any("running" in (cs.get("state") or {}) for cs in (pod.get("status") or {}).get("containerStatuses") or [])


# ---- apply -----------------------------------------------------------------------------------------------------
async def _apply(kube: Kube, workers: WorkerClient, body: dict, pool: Pool, p: Plan, observed: Observed,
                 cache: PodCache, token: str | None) -> tuple[list[tuple[str, str]], bool]:
    """Carry out the plan; returns the refusals (an API refusal stops that kind of write for this pass and
    is reported) and whether the pool was scaled. Each pod write is expected in the cache before it goes out
    (see podcache.py), and its event is posted as soon as it is made, so an operator stopped mid-pass
    leaves no write unannounced."""
    failures: list[tuple[str, str]] = []
    scaled = False
    ns, by_name = pool.namespace, {x["metadata"]["name"]: x for x in observed.pods}
    for name, type_, reason, message in p.delete:
        cache.expect(ns, pool.name, name, DELETE)
        try:
            await kube.delete_pod(ns, name)
        except ApiException as e:
            cache.settle(ns, pool.name, name)
            failures.append((R.FAILED_DELETE, f"deleting pod {name}: {api_message(e)}"))
            break
        await _say(kube, body, type_, reason, message)
    # Promotions before drains: the plan counts a promoted shadow as serving when it lets an old worker go, so it
    # takes traffic first; if one is refused, no worker is drained this pass (the next pass decides again).
    for name in p.promote:  # the annotation is the decision (the worker reads it); the call makes it immediate
        try:
            await kube.annotate_pod(ns, name, {SHADOW_ANNOTATION: None})
        except ApiException as e:
            failures.append((R.FAILED_PROMOTE, f"promoting shadow worker pod {name}: {api_message(e)}"))
            break
        ip = pod_ip(by_name[name]) if name in by_name else None
        if ip and token:
            await workers.promote(ip, token)
    if p.promote and p.promoted_now:
        await _say(kube, body, "Normal", R.SHADOW_PROMOTED, p.shadow_message)
    for name, why in p.drain if not any(r == R.FAILED_PROMOTE for r, _ in failures) else []:
        cache.expect(ns, pool.name, name, DRAIN)
        try:
            await kube.annotate_pod(ns, name, {DRAIN_ANNOTATION: C.now()})
        except ApiException as e:
            cache.settle(ns, pool.name, name)
            failures.append((R.FAILED_DRAIN, f"marking pod {name} for draining: {api_message(e)}"))
            break
        await _say(kube, body, "Normal", R.WORKER_DRAINING, f"draining worker pod {name} ({why}): no new batches")
        ip = pod_ip(by_name[name])
        if ip and token:  # the annotation is the request (the worker reads it too); the call makes it immediate
            await workers.drain(ip, token)
    created_names: list[str] = []
    # (pod to create, whether it is a shadow): the shadow first, then copies of old workers, then new ones
    todo = [(p.template, True)] * p.create_shadow + [(x, False) for x in p.create_like] + \
        [(p.template, False)] * p.create
    for source, shadow in todo:
        meta = {k: v for k, v in source["metadata"].items() if k != "generateName"}
        if shadow:
            meta = {**meta, "annotations": {**meta.get("annotations", {}), SHADOW_ANNOTATION: C.now()}}
        pod = {**source, "metadata": {**meta, "name": _new_name(source)}}
        cache.expect(ns, pool.name, pod["metadata"]["name"], CREATE)
        try:
            created = await kube.create_pod(ns, pod)
        except ApiException as e:
            if e.status != 504:  # a timeout may still have created it: the watch will say
                cache.settle(ns, pool.name, pod["metadata"]["name"])
            # Each pod has its own name: leave it out so one cause is one message.
            msg = re.sub(rf'"{re.escape(pool.name)}-[a-z0-9]{{5}}"', f'"{pool.name}-*"', api_message(e))
            failures.append((R.FAILED_CREATE, f"creating a worker pod: {msg}"))
            break
        created_names.append(created["metadata"]["name"])
        if shadow:
            await _say(kube, body, "Normal", R.SHADOW_STARTED, f"created worker pod {created_names[-1]} in shadow: "
                                                               f"{p.shadow_message}")
    if p.create_shadow:
        created_names = created_names[p.create_shadow:]
    if created_names:  # one event per pass, as a burst of creates is one decision
        await _say(kube, body, "Normal", R.WORKER_CREATED, _created_message(created_names))
    if p.scale is not None and p.scale.desired != pool.spec.replicas:
        try:
            await kube.patch_pool_scale(ns, pool.name, p.scale.desired, pool.resource_version)
            pool_metrics.scaled(ns, pool.name, pool.spec.replicas, p.scale.desired)
            scaled = True
            await _say(kube, body, "Normal", R.SCALED, f"replicas {pool.spec.replicas} -> {p.scale.desired} "
                                                       f"({p.scale.reason}): {p.scale.message}")
        except ApiException as e:
            if e.status != 409:  # a conflict: someone else scaled; the next reconcile decides again
                raise
    return failures, scaled


def _created_message(names: list[str], shown: int = 10) -> str:
    if len(names) == 1:
        return f"created worker pod {names[0]}"
    more = f" and {len(names) - shown} more" if len(names) > shown else ""
    return f"created {len(names)} worker pods: {', '.join(names[:shown])}{more}"


def _new_name(template: dict) -> str:
    """generateName's rule (the API server's: base cut to 58 characters, 5 random from its alphabet), drawn
    here so the name is known, and expected, before the create goes out."""
    base = template["metadata"]["generateName"][:58]
    return base + "".join(secrets.choice(NAME_ALPHABET) for _ in range(5))


async def _say(kube: Kube, body: dict, type_: str, reason: str, message: str) -> None:
    """An event on the pool, and the same line in the operator's log."""
    log.info("pool %s/%s: %s %s", body["metadata"]["namespace"], body["metadata"]["name"], reason, message)
    await kube.event(body, type_, reason, message)


# ---- status ----------------------------------------------------------------------------------------------------
async def _write(kube: Kube, body: dict, old: dict, new: dict, events, check_version: bool = False) -> dict | None:
    """Events, then the status if it changed; returns the pool as the write left it. With check_version the
    status is written only over the pool as it was read (a 409 means the pool moved on: the caller reads it
    again and reconciles again)."""
    meta = body["metadata"]
    for type_, reason, message in events:
        await _say(kube, body, type_, reason, message)
    if any(old.get(k) != v for k, v in new.items()):
        return await kube.patch_pool_status(meta["namespace"], meta["name"], new,
                                            meta.get("resourceVersion") if check_version else None)
    return None
