"""Drain-aware removal of a worker, pure. A worker leaving the pool is first asked to drain (it takes no new
batches and finishes the ones it has); the operator deletes its pod only when that loses no stored output:

- the worker reports `drained` (nothing in flight), and
- the segment it lends holds nothing (the master's per-segment usage), because outputs other workers still
  have to read may sit there; they leave it as they are scored and released.

The request is an annotation on the pod (the worker reads it too), so an operator restart resumes the drain
where it was. A worker that does not answer is not taken for dead on one failed probe: only after
UNREACHABLE_SECONDS of silence, and then only if its pod is not Ready or its segment is known to be empty
(or it lends none). A worker that is Ready but unreachable from here (a network policy mistake, say) is
waited for until the drain timeout, like a slow one. Past the timeout a worker is deleted if its segment is
empty, or unknown without store.metricsAddress (a batch it still holds is retried on another worker by the
client, its outputs being still stored); one whose segment still holds outputs, or whose usage the master named
in store.metricsAddress did not report (a standby after a failover), is kept and reported, never deleted
silently."""
from __future__ import annotations

from dataclasses import dataclass

from ..api import reasons as R

UNREACHABLE_SECONDS = 10.0


@dataclass(frozen=True)
class Verdict:
    action: str  # delete | wait | stuck
    reason: str
    message: str


def verdict(pod: str, health: dict | None, segment_lent: bool, used_bytes: int | None, waited: float,
            timeout: float, unreachable_for: float = 0.0, pod_ready: bool = True,
            usage_watched: bool = False) -> Verdict:
    """`usage_watched`: the pool names the master's metrics (store.metricsAddress), so an unknown usage means the
    master did not answer (a standby after a failover, a slow master), not that nobody looks: a live worker
    whose segment may still hold outputs is then waited for, and past the timeout kept and reported."""
    holds = segment_lent and bool(used_bytes)
    unknown = segment_lent and used_bytes is None and usage_watched
    if health is not None and health.get("phase") == "drained" and not holds and not unknown:
        checked = "" if not segment_lent or used_bytes is not None else \
            " (its segment was not checked: set store.metricsAddress to protect outputs stored there)"
        return Verdict("delete", R.DRAINED, f"{pod} drained{checked}")
    if waited >= timeout:
        if holds:
            return Verdict("stuck", R.DRAIN_STUCK,
                           f"{pod} has drained for {waited:.0f}s but its segment still holds {used_bytes} bytes of "
                           "outputs; it is kept so they are not lost (delete the pod by hand to give them up)")
        if unknown and (health is not None or pod_ready):
            return Verdict("stuck", R.DRAIN_STUCK,
                           f"{pod} has drained for {waited:.0f}s but its segment's usage could not be read from the "
                           "master (store.metricsAddress); it is kept so outputs stored there are not lost (delete "
                           "the pod by hand to give them up)")
        state = "empty" if used_bytes == 0 or not segment_lent else "not known to hold outputs"
        return Verdict("delete", R.DRAIN_TIMED_OUT,
                       f"{pod} did not finish within {timeout:.0f}s; deleted (its segment is {state}, and the "
                       "client retries its unfinished batch elsewhere from the store)")
    if health is None:
        if unreachable_for >= UNREACHABLE_SECONDS and not holds and (not pod_ready or not segment_lent
                                                                     or used_bytes == 0):
            why = "is not Ready" if not pod_ready else "its segment holds nothing"
            return Verdict("delete", R.WORKER_UNREACHABLE,
                           f"{pod} has not answered for {unreachable_for:.0f}s and {why}: nothing can be lost")
        what = (f"{used_bytes} bytes of outputs still in its segment" if holds else
                f"not answering for {unreachable_for:.0f}s")
    elif holds:
        what = f"{used_bytes} bytes of outputs still in its segment"
    elif unknown:
        what = "its segment's usage could not be read from the master (store.metricsAddress)"
    else:
        what = f"{health.get('in_flight', '?')} batch(es) in flight"
    return Verdict("wait", R.DRAINING, f"{pod} draining: {what} ({waited:.0f}s of {timeout:.0f}s)")
