"""Read slots shared fairly by the jobs (tenants) that call one worker.

Batches wait for a read slot before they read (slots.py); which waiting batch gets a freed slot is decided here:
by smooth weighted round robin over the tenants that have batches waiting (each tenant's weight from the pool's
spec.access; 1 unless said), so a large job cannot starve a small one: with two tenants waiting, each gets slots
in proportion to its weight however many batches the other queued. Within a tenant, `eval` batches go before
`train` ones, and each priority is first come, first served. A tenant with nothing waiting banks no credit."""
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
        self._credit: dict[str, float] = {}
        self._seq = itertools.count()
        self.served: Counter[str] = Counter()  # batches handed a slot, per tenant
        self.waits: list[tuple[str, float]] = []  # (tenant, seconds waited) since the last take_waits()

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
            self._waiting.setdefault(tenant, {p: deque() for p in PRIORITIES})[priority].append(t)
            self._dispatch()
        while not t.ready.wait(POLL_SECONDS):
            if cancelled():
                with self._lock:
                    if t.slot is None:
                        self._waiting[tenant][priority].remove(t)
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
        """Smooth weighted round robin (each waiting tenant gains its weight; the richest goes and pays the
        total): over any window, slots in proportion to the weights, interleaved, never a long run of one."""
        active = [k for k, qs in self._waiting.items() if any(qs.values())]
        if not active:
            return None
        total = sum(self.weight(k) for k in active)
        for k in active:
            self._credit[k] = self._credit.get(k, 0.0) + self.weight(k)
        best = max(active, key=lambda k: (self._credit[k], -min(q[0].seq for q in self._waiting[k].values() if q)))
        self._credit[best] -= total
        return best

    def _forget_idle(self, tenant: str) -> None:
        if not any(self._waiting[tenant].values()):
            del self._waiting[tenant]
            self._credit.pop(tenant, None)  # an idle tenant banks nothing
