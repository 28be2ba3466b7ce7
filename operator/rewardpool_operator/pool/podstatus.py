"""Worker containers that cannot start, read from the pods' container statuses: an image the node cannot pull
(not in a registry it reaches, not present on the node), a crash loop, a bad container config. They become
non-blocking problems (the Degraded condition and a warning event), so a stuck rollout says why instead of
sitting Pending or ContainerCreating in silence. Pure."""
from __future__ import annotations

from rewardpool_worker.contract import EXIT_REJOIN

from ..api import reasons as R
from ..api.findings import Problem
from .engine import ENGINE_CONTAINER_PREFIX

PULL_REASONS = {"ErrImagePull", "ImagePullBackOff", "InvalidImageName", "ErrImageNeverPull"}
ENGINE_WORDS = 400  # how much of an engine's last words the condition quotes (the kubelet keeps 4 KB at most)
START_REASONS = {"CrashLoopBackOff", "CreateContainerConfigError", "CreateContainerError", "RunContainerError"}


def unready_problems(pods: list[dict], health: dict[str, dict | None]) -> list[Problem]:
    """Live workers kept out of Ready by something outside them, as their /healthz says: their scorers' model is
    missing or does not load (a volume not mounted, an empty claim, a wrong image), a hosted judge's engine cannot
    judge yet (loading, restarting, serving another model), their actor cannot be found in
    Ray (a Ray head restarted, a GCS that does not answer) or the store master does not answer. The pool then
    says why it is not Ready (Degraded, a warning event) instead of only counting."""
    kinds = {"model": (R.MODEL_UNAVAILABLE, "cannot load their model"),
             "engine": (R.ENGINE_STARTING, "wait for their judge's engine"),
             "ray": (R.WORKERS_NOT_FOUND_IN_RAY, "cannot be found in Ray"),
             "store": (R.WORKERS_CANNOT_REACH_STORE, "cannot reach the store master")}
    found: dict[str, list[str]] = {}
    for pod in pods:
        h = health.get(pod["metadata"]["name"]) or {}
        if pod["metadata"].get("deletionTimestamp"):
            continue
        if h.get("unready_cause") in kinds:
            found.setdefault(h["unready_cause"], []).append(f"{pod['metadata']['name']}: {h.get('unready_reason')}")
        elif not _ready(pod) and _rejoined(pod):  # until it is Ready again: the exit, the restart, the start
            found.setdefault("ray", []).append(
                f"{pod['metadata']['name']}: restarted to rejoin the Ray cluster (its actor's name was gone: the "
                "Ray head restarted)")
    return [Problem(kinds[c][0], f"{len(items)} worker pod(s) {kinds[c][1]}: {'; '.join(sorted(items)[:2])}")
            for c, items in sorted(found.items())]


def _ready(pod: dict) -> bool:
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in (pod.get("status") or {}).get("conditions") or [])


def _rejoined(pod: dict) -> bool:
    """Its worker's last exit was the one to rejoin Ray (EXIT_REJOIN), not a crash."""
    for cs in (pod.get("status") or {}).get("containerStatuses") or []:
        last = cs.get("lastState") or {}
        now = cs.get("state") or {}
        for term in (last.get("terminated"), now.get("terminated")):
            if term and term.get("exitCode") == EXIT_REJOIN:
                return True
    return False


def container_problems(pods: list[dict]) -> list[Problem]:
    found: dict[tuple[str, str], list[str]] = {}
    engines: list[str] = []
    for pod in pods:
        if pod.get("metadata", {}).get("deletionTimestamp"):
            continue
        st = pod.get("status") or {}
        for cs in (st.get("initContainerStatuses") or []) + (st.get("containerStatuses") or []):
            waiting = (cs.get("state") or {}).get("waiting") or {}
            reason = waiting.get("reason")
            if str(cs.get("name", "")).startswith(ENGINE_CONTAINER_PREFIX + "-") and reason not in PULL_REASONS:
                if said := _engine_exit(cs):
                    engines.append(f"{pod['metadata']['name']}: {said}")
                continue
            if reason == "CrashLoopBackOff" and _rejoined(pod):  # the back-off after a rejoin: said as that
                continue
            if reason in PULL_REASONS or reason in START_REASONS:
                kind = R.WORKER_IMAGE_PULL_FAILED if reason in PULL_REASONS else R.WORKER_CONTAINER_FAILING
                msg = (waiting.get("message") or "").strip().replace("\n", " ")
                found.setdefault((kind, reason), []).append(
                    f"{pod['metadata']['name']} (image {cs.get('image', '?')}){': ' + msg[:300] if msg else ''}")
    out = [Problem(kind, f"{len(items)} worker pod(s) {reason}: {'; '.join(sorted(items)[:3])}")
           for (kind, reason), items in sorted(found.items())]
    if engines:
        out.append(Problem(R.ENGINE_FAILED, f"{len(engines)} judge engine(s) exited: {'; '.join(sorted(engines)[:2])}"))
    return out


def _engine_exit(cs: dict) -> str | None:
    """How a hosted judge's engine container last ended, while it is not running Ready again: the kubelet's
    reason (OOMKilled, Error, a failed liveness probe's restart), the exit code, and its last words (its
    termination message: the tail of its log, FallbackToLogsOnError). None while it has not failed."""
    now, last = cs.get("state") or {}, (cs.get("lastState") or {}).get("terminated")
    term = now.get("terminated") or last
    if term is None or ("running" in now and cs.get("ready")):
        return None
    words = " ".join((term.get("message") or "").split())[-ENGINE_WORDS:]
    return (f"{cs['name']} {term.get('reason') or 'exited'} (exit code {term.get('exitCode')}, restarts "
            f"{cs.get('restartCount', 0)}){': ' + words if words else ''}")
