"""What `rewardpool status` prints, pure: a pool object, its pods, its events and each worker's /healthz (None
where it could not be read) at a given time become text. No I/O here (statusfetch.py reads the cluster), so
every case can be rendered in a unit test."""
from __future__ import annotations

from collections.abc import Mapping

from rewardpool_worker.contract import DRAIN_ANNOTATION, WorkerHealth

from ..api.conditions import epoch
from ..api.quantity import human
from ..api.reasons import unhealthy
from ..api.spec import POOL_LABEL, Sizing

EVENTS_SHOWN = 5
MESSAGE_WIDTH = 160  # one terminal line or so; the full text stays in `kubectl describe`


# ---- small formatting helpers ----------------------------------------------------------------------------------
def age(seconds: float | None) -> str:
    """kubectl's AGE (its HumanDuration): precise while recent, coarser as it grows (42s, 5m12s, 47m, 5h3m,
    30h, 3d4h, 12d)."""
    if seconds is None:
        return "-"
    s = max(int(seconds), 0)
    m, h, d = s // 60, s // 3600, s // 86400
    if s < 120:
        return f"{s}s"
    if m < 10:
        return f"{m}m{s % 60}s" if s % 60 else f"{m}m"
    if h < 3:
        return f"{m}m"
    if h < 8:
        return f"{h}h{m % 60}m" if m % 60 else f"{h}h"
    if h < 48:
        return f"{h}h"
    if h < 192:
        return f"{d}d{h % 24}h" if h % 24 else f"{d}d"
    return f"{d}d"


def ago(text: str | None, now: float) -> str:
    t = epoch(text)
    return "-" if t is None else age(now - t)


def one_line(text: str | None, width: int = MESSAGE_WIDTH) -> str:
    text = " ".join((text or "").split())
    return text if len(text) <= width else text[:width - 3] + "..."


def table(headers: list[str], rows: list[list[str]]) -> list[str]:
    """Left-aligned columns two spaces apart, like kubectl get."""
    widths = [max(len(str(r[i])) for r in [headers, *rows]) for i in range(len(headers))]
    return ["  ".join(str(c).ljust(w) for c, w in zip(r, widths)).rstrip() for r in [headers, *rows]]


# ---- what the objects say ----------------------------------------------------------------------------------------
def pod_ready(pod: dict) -> bool:
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in (pod.get("status") or {}).get("conditions") or [])


def pod_phase(pod: dict) -> str:
    if pod["metadata"].get("deletionTimestamp"):
        return "Terminating"
    return (pod.get("status") or {}).get("phase") or "Unknown"


def drain_started(pod: dict) -> str | None:
    """When the operator asked this worker to drain (the annotation's value is the time it wrote it)."""
    return (pod["metadata"].get("annotations") or {}).get(DRAIN_ANNOTATION)


def unhappy(status: dict) -> list[dict]:
    """Conditions not in their healthy status (reasons.CONDITIONS), shown with what they say. Progressing=True
    is normal during a rollout or a scale, but it is shown too: it says what the pool is busy with."""
    return [c for c in status.get("conditions") or [] if unhealthy(c)]


def watermark(pool: dict) -> float:
    return float(((pool.get("spec") or {}).get("sizing") or {}).get("highWatermark") or Sizing.model_fields["highWatermark"].default)


def fill_text(pool: dict) -> str:
    fill, mark = (pool.get("status") or {}).get("storeFill"), watermark(pool)
    if fill is None:
        return f"unknown (no store metrics: set spec.store.metricsAddress); eviction watermark {mark:.0%}"
    warn = "  ABOVE the watermark: the store evicts unread outputs" if fill >= mark else ""
    return f"{fill:.1%} of the store, eviction watermark {mark:.0%}{warn}"


def last_scale_text(scale: dict | None, now: float) -> str:
    if not scale:
        return "none"
    return (f"{scale.get('from', '?')} -> {scale.get('to', '?')}, {ago(scale.get('time'), now)} ago: "
            f"{scale.get('reason', '?')}: {one_line(scale.get('message'))}")


# ---- one pool ------------------------------------------------------------------------------------------------
def _replicas_line(pool: dict) -> str:
    spec, st = pool.get("spec") or {}, pool.get("status") or {}
    line = f"{st.get('readyReplicas', 0)}/{spec.get('replicas', '?')} ready"
    if st.get("desiredReplicas") is not None:
        line += f", autoscaler wants {st['desiredReplicas']}"
    if st.get("drainingReplicas"):
        line += f", {st['drainingReplicas']} draining"
    return line


def _versions_line(status: dict) -> str:
    """The scorer versions serving (two or more during a roll), each with its workers and how many are Ready."""
    vs = status.get("scorerVersions") or []
    if not vs:
        return "none reported yet"
    parts = [f"{v.get('version', '?')} ({v.get('ready', 0)}/{v.get('workers', 0)} ready)" for v in vs]
    return ", ".join(parts) + ("   two versions serving: a roll is in progress" if len(vs) > 1 else "")


def _shadow_line(status: dict) -> str | None:
    """The last shadow scoring (spec.rollout.shadow): the version, its agreement, and whether it took traffic."""
    sh = status.get("shadow")
    if not sh:
        return None
    r, d = sh.get("correlation"), sh.get("meanDifference")
    agree = (f"{sh.get('samples', 0)} samples, correlation {'n/a' if r is None else f'{r:.3f}'}, mean difference "
             f"{'n/a' if d is None else f'{d:+.4g}'}")
    state = f"took traffic {sh['promoted']}" if sh.get("promoted") else "in shadow, the old version serves"
    return f"{sh.get('version', '?')} against {', '.join(sh.get('against') or [])}: {agree}; {state}"


def _demand_line(status: dict) -> str:
    return (f"queue {status.get('queueDepth', 0)}, pending {human(int(status.get('pendingBytes') or 0))}, "
            f"hint {status.get('demandHint') or 0} outputs")


def _worker_row(pod: dict, h: WorkerHealth | None) -> list[str]:
    meta, spec = pod["metadata"], pod.get("spec") or {}
    if h is None:
        worker = queue = in_flight = last = "-"
    else:
        worker = h.phase if h.live else f"{h.phase} (not live)"
        queue, in_flight = str(h.queue_depth), str(h.in_flight)
        last = "never" if h.last_batch_seconds_ago is None else f"{age(h.last_batch_seconds_ago)} ago"
    return [meta["name"], pod_phase(pod), "True" if pod_ready(pod) else "False", spec.get("nodeName") or "-",
            worker, queue, in_flight, last]


def workers_lines(pods: list[dict], health: Mapping[str, WorkerHealth | None]) -> list[str]:
    if not pods:
        return ["  (no worker pods)"]
    rows = [_worker_row(p, health.get(p["metadata"]["name"])) for p in pods]
    head = ["NAME", "PHASE", "READY", "NODE", "WORKER", "QUEUE", "IN FLIGHT", "LAST BATCH"]
    return ["  " + line for line in table(head, rows)]


def health_note(pods: list[dict], health: Mapping[str, WorkerHealth | None],
                errors: Mapping[str, str]) -> list[str]:
    """Once below the table: why the health columns show "-", grouped by cause, and which workers are not live."""
    missing = [p["metadata"]["name"] for p in pods if health.get(p["metadata"]["name"]) is None]
    out = []
    if missing:
        causes: dict[str, int] = {}
        for name in missing:
            why = errors.get(name) or "not read"
            causes[why] = causes.get(why, 0) + 1
        told = "; ".join(f"{one_line(why, 200)}" + (f" ({n} workers)" if n > 1 else "")
                         for why, n in sorted(causes.items(), key=lambda x: -x[1])[:3])
        out.append(f"  -: no /healthz from {len(missing)} of {len(pods)} workers through the API server's pod "
                   f"proxy: {told}")
    for name, h in sorted(health.items()):
        if h is not None and not h.live:
            out.append(f"  {name} is not live: {one_line(h.reason)}")
    return out


def drains_lines(pods: list[dict], health: Mapping[str, WorkerHealth | None], timeout: object,
                 now: float) -> list[str]:
    out = []
    for pod in pods:
        started = drain_started(pod)
        if started is None:
            continue
        name, h = pod["metadata"]["name"], health.get(pod["metadata"]["name"])
        what = f"worker {h.phase}, {h.in_flight} in flight" if h else "worker not reachable"
        if pod["metadata"].get("deletionTimestamp"):
            what += ", pod terminating"
        out.append(f"  {name}  draining for {ago(started, now)} of {timeout}s ({what})")
    return out or ["  none"]


def conditions_lines(status: dict) -> list[str]:
    """The conditions' lines, heading included: only those not as expected are listed."""
    bad = unhappy(status)
    if not status.get("conditions"):
        return ["Conditions:  none reported yet (has the operator seen this pool?)"]
    if not bad:
        return ["Conditions:  all as expected"]
    return ["Conditions not as expected:", *("  " + line for line in table(
        ["TYPE", "STATUS", "REASON", "MESSAGE"],
        [[c.get("type", "?"), c.get("status", "?"), c.get("reason", ""), one_line(c.get("message"))] for c in bad]))]


def _event_time(ev: dict) -> float:
    return epoch(ev.get("lastTimestamp") or ev.get("eventTime") or ev["metadata"].get("creationTimestamp")) or 0.0


def _event_order(ev: dict) -> tuple[float, int]:
    """Oldest first. Event times have one-second resolution and a pool's first reconcile writes several in one
    second: those go in the order the API server stored them (their resourceVersion; the API lists by name)."""
    rv = ev["metadata"].get("resourceVersion") or ""
    return _event_time(ev), int(rv) if rv.isdigit() else 0


def pool_events(pool: dict, events: list[dict]) -> list[dict]:
    """This pool's events, oldest first; those of an earlier pool of the same name (another uid) left out."""
    uid = pool["metadata"].get("uid")
    mine = [e for e in events if not uid or (e.get("involvedObject") or {}).get("uid") in (None, uid)]
    return sorted(mine, key=_event_order)


def events_lines(pool: dict, events: list[dict], now: float) -> list[str]:
    shown = pool_events(pool, events)[-EVENTS_SHOWN:]
    if not shown:
        return ["  none"]
    rows = [[age(now - _event_time(e)), e.get("type", ""), e.get("reason", ""),
             one_line(e.get("message")) + (f" (x{e['count']})" if (e.get("count") or 1) > 1 else "")]
            for e in shown]
    return ["  " + line for line in table(["AGE", "TYPE", "REASON", "MESSAGE"], rows)]


def render_pool(pool: dict, pods: list[dict], events: list[dict], health: Mapping[str, WorkerHealth | None],
                now: float, errors: Mapping[str, str] | None = None) -> str:
    """The full view of one pool. errors: why a pod's /healthz could not be read, by pod name."""
    meta, spec, st = pool["metadata"], pool.get("spec") or {}, pool.get("status") or {}
    pods = sorted(pods, key=lambda p: p["metadata"]["name"])
    lines = [f"RewardPool {meta.get('namespace', '?')}/{meta['name']}   age {ago(meta.get('creationTimestamp'), now)}",
             f"Replicas:    {_replicas_line(pool)}",
             f"Versions:    {_versions_line(st)}",
             *([f"Shadow:      {_shadow_line(st)}"] if _shadow_line(st) else []),
             f"Demand:      {_demand_line(st)}",
             f"Store fill:  {fill_text(pool)}",
             f"Last scale:  {last_scale_text(st.get('lastScale'), now)}",
             *conditions_lines(st),
             "Draining:", *drains_lines(pods, health, spec.get("drainTimeoutSeconds", 600), now),
             f"Workers ({len(pods)}):", *workers_lines(pods, health), *health_note(pods, health, errors or {}),
             f"Events (last {EVENTS_SHOWN}):", *events_lines(pool, events, now)]
    return "\n".join(lines) + "\n"


# ---- all pools of a namespace ------------------------------------------------------------------------------------
def _problems(status: dict) -> str:
    return ",".join(f"{c.get('type')}({c.get('reason', '')})" for c in unhappy(status)) or "-"


def _pool_row(pool: dict, now: float, with_namespace: bool) -> list[str]:
    meta, spec, st = pool["metadata"], pool.get("spec") or {}, pool.get("status") or {}
    scale = st.get("lastScale")
    row = [meta["name"], f"{st.get('readyReplicas', 0)}/{spec.get('replicas', '?')}",
           str(st.get("desiredReplicas", "-")), str(st.get("drainingReplicas") or 0), str(st.get("queueDepth", 0)),
           human(int(st.get("pendingBytes") or 0)),
           "-" if st.get("storeFill") is None else f"{st['storeFill']:.0%}/{watermark(pool):.0%}",
           f"{scale.get('from')}->{scale.get('to')} {ago(scale.get('time'), now)} ago" if scale else "-",
           _problems(st), ago(meta.get("creationTimestamp"), now)]
    return [meta.get("namespace", "?"), *row] if with_namespace else row


def render_pools(pools: list[dict], now: float, namespace: str | None = None) -> str:
    """The compact table of several pools; namespace None: all namespaces (a NAMESPACE column)."""
    if not pools:
        return ("No RewardPools in any namespace.\n" if namespace is None
                else f"No RewardPools in namespace {namespace}.\n")
    head = ["NAME", "READY", "WANTS", "DRAINING", "QUEUE", "PENDING", "FILL/MARK", "LAST SCALE", "NOT OK", "AGE"]
    if namespace is None:
        head = ["NAMESPACE", *head]
    pools = sorted(pools, key=lambda p: (p["metadata"].get("namespace", ""), p["metadata"]["name"]))
    return "\n".join(table(head, [_pool_row(p, now, namespace is None) for p in pools])) + "\n"


def pod_selector(pool_name: str) -> str:
    return f"{POOL_LABEL}={pool_name}"
