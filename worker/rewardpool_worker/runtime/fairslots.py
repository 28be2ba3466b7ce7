"""Read slots shared fairly by the jobs (tenants) that call one worker.

Batches wait for a read slot before they read (slots.py); which waiting batch gets a freed slot is decided here,
by the Fair Sojourn Protocol (Friedman and Henderson, SIGMETRICS 2003) over tenants: the worker keeps a virtual
schedule of weighted fair sharing (each tenant with work served at a rate in proportion to its weight, as weighted
round robin would, the weights from the pool's spec.access; 1 unless said) and hands each slot to the tenant that
would finish its waiting work first in it. So no tenant finishes later than it would under weighted fair sharing
(a large job cannot starve a small one, nor a small one a large), and a small job beside a large one is not held
to half the worker: it finishes about as fast as alone, and the large one no later than under fair sharing. A
tenant that keeps sending more than its share builds a virtual backlog and waits for the others, so long-run shares
follow the weights. Within a tenant, `eval` batches go before `train` ones, and each priority is first come,
first served. A tenant with nothing waiting banks no credit (its virtual backlog is zero at most)."""
from __future__ import annotations

import itertools
import threading
import time
from collections import Counter, deque
from dataclasses import dataclass, field
from typing import Callable

from ..errors import Cancelled

DEFAULT_TENANT = "default"
PRIORITIES = ("eval", "train")  # served in this order within a tenant
POLL_SECONDS = 0.2  # how often a waiting batch looks whether its caller gave up
EPSILON = 1e-9


@dataclass
class _Ticket:
    tenant: str
    priority: str
    seq: int
    since: float
    slot: object = None
    ready: threading.Event = field(default_factory=threading.Event)


class FairSlots:
    def __init__(self, slots: list, weights: dict[str, int] | None = None):
        self._free = list(slots)
        self.weights = dict(weights or {})
        self._lock = threading.Lock()
        self._waiting: dict[str, dict[str, deque[_Ticket]]] = {}  # tenant -> priority -> tickets
        self._virtual: dict[str, float] = {}  # tenant -> batches left in the virtual fair-sharing schedule
        self._seq = itertools.count()
        self.served: Counter[str] = Counter()  # batches handed a slot, per tenant
        self.waits: list[tuple[str, float]] = []  # (tenant, seconds waited) since the last take_waits()

    def set_weights(self, weights: dict[str, int]) -> None:
        """New shares (the pool's tenants changed): the next slot is handed by them."""
        with self._lock:
            self.weights = dict(weights)

    def weight(self, tenant: str) -> int:
        return max(1, int(self.weights.get(tenant, 1)))

    def waiting(self) -> dict[str, int]:
        """Batches waiting for a slot, per tenant."""
        with self._lock:
            return {t: sum(len(q) for q in qs.values()) for t, qs in self._waiting.items() if any(qs.values())}

    def acquire(self, tenant: str = DEFAULT_TENANT, priority: str = "train",
                cancelled: Callable[[], bool] = lambda: False):
        """A free slot, in this tenant's fair turn; Cancelled when `cancelled()` says the caller gave up first."""
        if priority not in PRIORITIES:
            raise ValueError(f"priority {priority!r} is not one of {', '.join(PRIORITIES)}")
        t = _Ticket(tenant, priority, next(self._seq), time.monotonic())
        with self._lock:
            self._enqueue(t)
            self._dispatch()
        while not t.ready.wait(POLL_SECONDS):
            if cancelled():
                with self._lock:
                    if t.slot is None:
                        self._waiting[tenant][priority].remove(t)
                        left = self._virtual.get(tenant, 0.0) - 1.0  # its batch leaves the virtual schedule too
                        if left > EPSILON:
                            self._virtual[tenant] = left
                        else:
                            self._virtual.pop(tenant, None)
                        self._forget_idle(tenant)
                        raise Cancelled("cancelled by its caller while it waited for a read slot")
                break  # a slot came with the cancellation: the caller sees the cancellation and releases it
        return t.slot

    def release(self, slot) -> None:
        with self._lock:
            self._free.append(slot)
            self._dispatch()

    def take_waits(self) -> list[tuple[str, float]]:
        with self._lock:
            waits, self.waits = self.waits, []
        return waits

    # under the lock ------------------------------------------------------------------------------------------
    def _enqueue(self, t: _Ticket) -> None:
        self._waiting.setdefault(t.tenant, {p: deque() for p in PRIORITIES})[t.priority].append(t)
        self._virtual[t.tenant] = self._virtual.get(t.tenant, 0.0) + 1.0  # one batch more in the virtual schedule

    def _dispatch(self) -> None:
        while self._free:
            tenant = self._pick()
            if tenant is None:
                return
            queues = self._waiting[tenant]
            t = next(queues[p] for p in PRIORITIES if queues[p]).popleft()
            t.slot = self._free.pop()
            self.served[tenant] += 1
            self.waits.append((tenant, time.monotonic() - t.since))
            self._forget_idle(tenant)
            t.ready.set()

    def _pick(self) -> str | None:
        """The tenant with batches waiting that finishes first in the virtual schedule (its virtual backlog over its
        weight; ties: the oldest waiting batch); then the virtual schedule serves one batch's worth."""
        active = [k for k, qs in self._waiting.items() if any(qs.values())]
        if not active:
            return None
        best = min(active, key=lambda k: (self._virtual.get(k, 0.0) / self.weight(k),
                                          min(q[0].seq for q in self._waiting[k].values() if q)))
        self._advance(1.0)
        return best

    def _advance(self, units: float) -> None:
        """Weighted fair sharing, virtually: `units` batches of service shared by the tenants with virtual work in
        proportion to their weights (water-filling: what a finishing tenant does not need goes to the others)."""
        while units > EPSILON:
            busy = [k for k, v in self._virtual.items() if v > EPSILON]
            if not busy:
                break
            total = sum(self.weight(k) for k in busy)
            step = min(units, min(self._virtual[k] * total / self.weight(k) for k in busy))
            for k in busy:
                self._virtual[k] -= step * self.weight(k) / total
            units -= step
        for k in [k for k, v in self._virtual.items() if v <= EPSILON]:
            del self._virtual[k]

    def _forget_idle(self, tenant: str) -> None:
        if not any(self._waiting[tenant].values()):
            del self._waiting[tenant]
