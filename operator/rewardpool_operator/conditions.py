"""Kubernetes-style conditions (type/status/reason/message/observedGeneration/lastTransitionTime), pure."""
from __future__ import annotations

from datetime import datetime, timezone

TYPES = ("Ready", "Progressing", "Degraded", "InvalidSpec", "NetworkReady")


def now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def cond(type_: str, status: bool, reason: str, message: str) -> dict:
    return {"type": type_, "status": "True" if status else "False", "reason": reason, "message": message}


def merge(old: list[dict] | None, new: list[dict], generation: int, at: str | None = None) -> list[dict]:
    """Stamp observedGeneration; keep lastTransitionTime unless the status flipped, so an unchanged pool
    produces byte-identical conditions (and no status write)."""
    previous = {c["type"]: c for c in old or []}
    out = []
    for c in new:
        c = {**c, "observedGeneration": generation}
        before = previous.get(c["type"])
        keep = before is not None and before.get("status") == c["status"] and before.get("lastTransitionTime")
        c["lastTransitionTime"] = before["lastTransitionTime"] if keep else (at or now())
        out.append(c)
    return out
