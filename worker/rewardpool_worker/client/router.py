"""`Router`: the pool's live workers (from a membership source, refreshed as the pool scales: named actors in
Ray, `RayActors`; or the ready endpoints of the pool's Service, `endpoints.EndpointSlices`) and the choice of a
worker for each batch.

Routing. For each batch the router prices every eligible worker at (its outstanding batches + 1) x its
batch time (a moving average of this client's batch round trips there, each divided by the batches it had
queued there at dispatch; a time within `spread` (2x) of the median of
all workers' times counts as the median, so noise does not break ties), takes the workers within `slack` of
the cheapest (plus any not used for a while, so a price cannot go stale), and of those the one it used least
recently. New workers start in random order, so separate clients begin on different workers. The effect:
least outstanding work when batches pile up, a slower worker (a smaller GPU, a busy node) gets fewer, and a
caller that scores one batch at a time goes round the pool instead of always to the same worker. A worker
is used once it has answered ready() (a worker still loading its model gets no batch to wait on); one
that answered Draining is skipped until it leaves the pool; one that was unreachable or Overloaded, or that
held a batch past its caller's deadline (a hung model), is skipped for a while unless no other is left;
none of these costs the batch an attempt."""
from __future__ import annotations

import logging
import random
import statistics
import threading
import time
from collections import Counter
from dataclasses import dataclass

import ray
from ..contract import ClientMetricNames

log = logging.getLogger("rewardpool.client")
BATCH_RETRIES = ClientMetricNames.BATCH_RETRIES.make()
EWMA_ALPHA = 0.3
ANY = object()  # pick(): a worker of any scorer version
UNREACHABLE_COOLDOWN_SECONDS = 5.0  # a worker unreachable mid-batch is skipped this long
SUSPECT_SECONDS = 30.0  # one that held a batch past its caller's deadline (a hung model), this long


@dataclass
class Member:
    name: str
    handle: object
    outstanding: int = 0  # this client's batches sent to it, not finished
    batch_seconds: float | None = None  # moving average of this client's batch times there
    last_used: float = 0.0  # order of use (random below 1 until first used)
    excluded_until: float = 0.0
    draining: bool = False
    ready: bool = True  # answered ready(): constructed (store, buffers, model, warm-up); new members start False
    frames: list[int] | None = None  # its scorers' num_frames when all pick frames (ready()): what to send it
    version: str | None = None  # its scorer version (ready()): a call's batches all go to one version
    shadow: bool = False  # it shadows the serving version (ready()): only shadow batches go to it
    probed_at: float = 0.0  # when its ready() last answered (a shadow worker is asked again: promoted yet?)
    probing: bool = False


class Router:
    def __init__(self, prefix: str, ray_namespace: str = "rewardpool", refresh_seconds: float = 5.0,
                 slack: float = 0.5, spread: float = 2.0, seed: int | None = None, source=None):
        self.prefix, self.ray_namespace, self.refresh_seconds = prefix, ray_namespace, refresh_seconds
        # where members come from: the pool's named actors in Ray, or (HTTP) its Service's EndpointSlices
        self.source = source or RayActors(prefix, ray_namespace)
        self.slack, self.spread = slack, spread
        self.max_outstanding: int | None = None
        self._members: dict[str, Member] = {}
        self._dead: set[str | None] = set()  # actor ids of workers that died under a batch
        self._lock = threading.Lock()
        self._rng = random.Random(seed)
        self._seq = 1.0
        self._refreshed = 0.0
        self.served: Counter[str] = Counter()  # batches scored, per worker
        self.retries = 0
        self.store_outages = 0  # batches that waited out a store master that did not answer
        self.gcs_unanswered = 0  # refreshes the Ray GCS did not answer (the known workers were kept)

    # membership -----------------------------------------------------------------------------------------------
    def due(self) -> bool:
        return time.monotonic() - self._refreshed > self.refresh_seconds or not self._members

    def refresh(self) -> list[str]:
        try:
            names = sorted(self.source.names())
        except Exception as e:  # noqa: BLE001 (RPC errors: the GCS or the API server does not answer)
            # The workers known keep answering (calls go to them, not through the listing), so they stay members
            # until the listing answers again; none known is none (PoolUnavailable).
            log.warning("cannot list the pool's workers (%s: %s); keeping the %d known",
                        type(e).__name__, str(e)[:200], len(self._members))
            self.gcs_unanswered += 1
            with self._lock:
                self._refreshed = time.monotonic()
                return sorted(self._members)
        found = {}
        for name in names:
            if name not in self._members:
                try:
                    handle = self.source.handle(name)
                except LookupError:  # gone between the listing and the lookup
                    continue
                if _actor_id(handle) is None or _actor_id(handle) not in self._dead:  # still listed a moment after it died: not again
                    found[name] = handle
        with self._lock:
            for gone in set(self._members) - set(names):
                del self._members[gone]
            for name, handle in found.items():
                self._members[name] = Member(name, handle, last_used=self._rng.random(), ready=False)
            self._refreshed = time.monotonic()
            return sorted(self._members)

    def members(self) -> list[str]:
        if self.due():
            self.refresh()
        with self._lock:
            return sorted(self._members)

    def describe(self) -> str:
        with self._lock:
            return ", ".join(f"{m.name}{' (draining)' if m.draining else ''}" for m in self._members.values()) or "none"

    # choice ---------------------------------------------------------------------------------------------------
    def _eligible(self, exclude: set[str], now: float, version=ANY) -> list[Member]:
        """Not draining, not excluded by the caller, of the scorer version asked for; skipped for a while
        (unreachable, overloaded, past a deadline) only while some other worker is not."""
        base = [m for m in self._members.values() if m.ready and not m.draining and not m.shadow
                and m.name not in exclude and (version is ANY or m.version == version)]
        return [m for m in base if m.excluded_until <= now] or base

    def eligible(self, exclude: set[str], version=ANY) -> bool:
        with self._lock:
            return bool(self._eligible(exclude, time.monotonic(), version))

    def versions(self) -> Counter:
        """Ready, not draining, serving (not shadow) workers per scorer version."""
        with self._lock:
            return Counter(m.version for m in self._members.values() if m.ready and not m.draining and not m.shadow)

    def shadows(self) -> list[Member]:
        with self._lock:
            return [m for m in self._members.values() if m.ready and m.shadow]

    def pick_shadow(self, serving_version) -> Member | None:
        """A shadow worker of another version than `serving_version` that has no batch of this client (a
        shadow batch never queues: the sample is what the shadow workers keep up with), its outstanding taken."""
        with self._lock:
            now = time.monotonic()
            idle = [m for m in self._members.values() if m.ready and m.shadow and not m.draining
                    and m.version != serving_version and m.outstanding == 0 and m.excluded_until <= now]
            if not idle:
                return None
            m = min(idle, key=lambda m: m.last_used)
            m.outstanding += 1
            self._seq += 1
            m.last_used = self._seq
            return m

    def pick(self, exclude: set[str] = frozenset(), version=ANY) -> Member | None:
        """The worker for the next batch (its outstanding count taken), of `version` when one is given, or None
        when no eligible worker has room (`eligible()` tells full from none)."""
        with self._lock:
            live = [m for m in self._eligible(exclude, time.monotonic(), version)
                    if self.max_outstanding is None or m.outstanding < self.max_outstanding]
            if not live:
                return None
            known = [m.batch_seconds for m in live if m.batch_seconds is not None]
            median = statistics.median(known) if known else 1.0

            def seconds(m: Member) -> float:
                # Within a factor of the median is noise (a shared machine, a busy moment): priced the same,
                # so ties stay ties. Only a clearly slower (or faster) worker is priced apart.
                t = m.batch_seconds
                if t is None or median / self.spread <= t <= median * self.spread:
                    return median
                return t

            def cost(m: Member) -> float:
                return (m.outstanding + 1) * seconds(m)
            best = min(cost(m) for m in live)
            stale = 4 * len(self._members)  # a worker not used for this many picks is tried again (its price
            near = [m for m in live if cost(m) <= best * (1 + self.slack)  # may be out of date)
                    or self._seq - m.last_used > stale]
            m = min(near, key=lambda m: m.last_used)
            m.outstanding += 1
            self._seq += 1
            m.last_used = self._seq
            return m

    def done(self, m: Member, seconds: float | None) -> None:
        with self._lock:
            m.outstanding -= 1
            if seconds is not None:
                m.batch_seconds = seconds if m.batch_seconds is None else \
                    (1 - EWMA_ALPHA) * m.batch_seconds + EWMA_ALPHA * seconds

    def unready(self) -> list[Member]:
        """Listed in Ray but not yet known to be constructed (a worker still loading its model)."""
        with self._lock:
            return [m for m in self._members.values() if not m.ready]

    def snapshot(self) -> list[Member]:
        with self._lock:
            return list(self._members.values())

    def mark_shadow(self, name: str) -> None:
        with self._lock:
            if name in self._members:
                self._members[name].shadow = True

    def mark_draining(self, name: str) -> None:
        with self._lock:
            if name in self._members:
                self._members[name].draining = True

    def exclude(self, name: str, seconds: float) -> None:
        with self._lock:
            if name in self._members:
                self._members[name].excluded_until = time.monotonic() + seconds

    def drop(self, name: str) -> None:
        """The worker died: forget it, and never take this actor back (a restarted pod is a new actor)."""
        with self._lock:
            m = self._members.pop(name, None)
            if m is not None:
                self._dead.add(_actor_id(m.handle))


class RayActors:
    """The pool's workers as Ray lists them: named actors under the pool's prefix in the workers' Ray namespace."""

    def __init__(self, prefix: str, ray_namespace: str):
        self.prefix, self.ray_namespace = prefix, ray_namespace

    def names(self) -> list[str]:
        listed = ray.util.list_named_actors(all_namespaces=True)
        return [n["name"] for n in listed if n["namespace"] == self.ray_namespace and n["name"].startswith(self.prefix)]

    def handle(self, name: str):
        try:
            return ray.get_actor(name, namespace=self.ray_namespace)
        except ValueError:  # died between the listing and the lookup
            raise LookupError(name) from None


def cancel_remote(member: Member, ref, batch_id: str) -> None:
    """The caller gave up: drop the batch on its worker (queued in Ray or waiting for a read slot)."""
    try:
        ray.cancel(ref)
    except Exception as e:  # best effort: the worker's own cancel below covers a started call
        log.debug("ray.cancel of %s: %s", batch_id, e)
    try:
        member.handle.cancel.remote([batch_id])
    except Exception as e:
        log.debug("cancel on %s: %s", member.name, e)


def _actor_id(handle) -> str | None:
    actor_id = getattr(handle, "_actor_id", None)
    return actor_id.hex() if actor_id is not None else None
