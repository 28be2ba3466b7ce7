"""Drain-aware scale-in. A worker leaving the pool is first asked to drain (it takes no new batches and
finishes the ones it has); the operator deletes its pod only when that loses no stored output:

- the worker reports `drained` (nothing in flight), and
- the segment it lends holds nothing (the master's per-segment usage), because outputs other workers still
  have to read may sit there; they leave it as they are scored and released.

The request is an annotation on the pod, so an operator restart resumes the drain where it was. A worker
that does not answer at all is deleted at once: nothing in flight can finish there, and a dead client's
segment is unreadable anyway. A worker that cannot finish within the timeout is deleted if its segment is
empty (a batch it still holds is retried on another worker by the client, its outputs being still stored);
one whose segment still holds outputs is kept and reported, never deleted silently."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Verdict:
    action: str  # delete | wait | stuck
    reason: str
    message: str


def verdict(pod: str, health: dict | None, segment_lent: bool, used_bytes: int | None, waited: float,
            timeout: float) -> Verdict:
    if health is None:
        return Verdict("delete", "WorkerUnreachable",
                       f"{pod} did not answer while draining: nothing in flight can finish there")
    drained = health.get("phase") == "drained"
    holds = segment_lent and bool(used_bytes)
    if drained and not holds:
        checked = "" if not segment_lent or used_bytes is not None else \
            " (its segment was not checked: set store.metricsAddress to protect outputs stored there)"
        return Verdict("delete", "Drained", f"{pod} drained{checked}")
    if waited < timeout:
        what = f"{used_bytes} bytes of outputs still in its segment" if holds else \
            f"{health.get('in_flight', '?')} batch(es) in flight"
        return Verdict("wait", "Draining", f"{pod} draining: {what} ({waited:.0f}s of {timeout:.0f}s)")
    if not holds:
        return Verdict("delete", "DrainTimedOut",
                       f"{pod} did not finish within {timeout:.0f}s; deleted (its segment is empty, and the "
                       "client retries its unfinished batch elsewhere from the store)")
    return Verdict("stuck", "DrainStuck",
                   f"{pod} has drained for {waited:.0f}s but its segment still holds {used_bytes} bytes of "
                   "outputs; it is kept so they are not lost (delete the pod by hand to give them up)")
