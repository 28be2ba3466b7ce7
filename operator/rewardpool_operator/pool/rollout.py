"""Rollout arithmetic, pure: the roll's surge and unavailability (spec.rollout.maxSurge and maxUnavailable,
resolved as a Deployment resolves them), and which workers leave first. The same unavailability drives the
pool's PodDisruptionBudget."""
from __future__ import annotations

import math
from dataclasses import dataclass

from ..api.spec import HASH_LABEL, IntOrPercent, Rollout


def resolve(value: IntOrPercent, replicas: int, round_up: bool) -> int:
    """A count as it is; a percentage of replicas, rounded up (surge) or down (unavailable)."""
    if isinstance(value, int):
        return value
    share = int(value.rstrip("%")) * replicas / 100
    return math.ceil(share) if round_up else math.floor(share)


@dataclass(frozen=True)
class Budget:
    surge: int  # workers a roll may run beyond replicas
    unavailable: int  # Ready workers a roll may take below replicas

    def floor(self, replicas: int) -> int:
        """Ready workers a roll keeps serving."""
        return max(replicas - self.unavailable, 0)


def budget(rollout: Rollout, replicas: int) -> Budget:
    """As a Deployment's rolling update: both resolving to 0 (a small pool, two percentages) lets one go."""
    surge = resolve(rollout.maxSurge, replicas, round_up=True)
    unavailable = resolve(rollout.maxUnavailable, replicas, round_up=False)
    if surge == 0 and unavailable == 0:
        unavailable = 1
    return Budget(surge, unavailable)


def disruptions(rollout: Rollout, replicas: int) -> int:
    """The PodDisruptionBudget's maxUnavailable: the roll's, at least one, so a node drain never waits forever on
    a pool the operator would refill anyway (an evicted worker is replaced at once)."""
    return max(budget(rollout, replicas).unavailable, 1)


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
