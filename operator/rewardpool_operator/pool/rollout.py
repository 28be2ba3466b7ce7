"""Rollout arithmetic, pure: how many workers may be unavailable at once, and which workers leave first.
The same budget drives the operator's own rolls and scale-ins and the pool's PodDisruptionBudget."""
from __future__ import annotations

from ..api.spec import HASH_LABEL


def max_unavailable(replicas: int) -> int:
    """A quarter of the pool, at least one: a 2-worker pool rolls one worker at a time, 16 workers four."""
    return max(1, replicas // 4)


def is_ready(pod: dict) -> bool:
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in (pod.get("status") or {}).get("conditions") or [])


def pod_ip(pod: dict) -> str | None:
    return (pod.get("status") or {}).get("podIP")


def removal_order(pods: list[dict], want_hash: str, queue: dict[str, int]) -> list[dict]:
    """Who leaves first: a stale template, then not ready, then the least queued work, then the newest."""
    newest_first = sorted(pods, key=lambda p: (p["metadata"].get("creationTimestamp", ""), p["metadata"]["name"]),
                          reverse=True)
    return sorted(newest_first, key=lambda p: (p["metadata"]["labels"].get(HASH_LABEL) == want_hash, is_ready(p),
                                               queue.get(pod_ip(p) or "", 0)))


def roll_allowance(replicas: int, unavailable: int) -> int:
    """How many more stale workers may start draining now, with `unavailable` already out of service."""
    return max(max_unavailable(replicas) - unavailable, 0)
