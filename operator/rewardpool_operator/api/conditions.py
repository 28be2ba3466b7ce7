"""Kubernetes-style conditions (type/status/reason/message/observedGeneration/lastTransitionTime), pure."""
from __future__ import annotations

import time
from datetime import datetime, timezone

_FORMAT = "%Y-%m-%dT%H:%M:%SZ"


def now(ts: float | None = None) -> str:
    """RFC 3339 UTC, as Kubernetes writes times (now, or the given epoch seconds)."""
    return datetime.fromtimestamp(time.time() if ts is None else ts, timezone.utc).strftime(_FORMAT)


def epoch(text: str | None) -> float | None:
    """RFC 3339 as the API writes it (with or without fractional seconds, as events' eventTime has them);
    None when absent or malformed (an annotation anyone can edit must not crash a reconcile)."""
    if not text:
        return None
    try:
        t = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    return (t if t.tzinfo else t.replace(tzinfo=timezone.utc)).timestamp()


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
