"""The pool's tenants sent to its workers (pool/tenants.py decides who needs them): each live worker gets the set
with the control token, and what each accepted is remembered (PoolMemory.tenants_sent), so a pass sends only to a
worker that is new, restarted, or holds an older set. A worker that does not answer yet (starting) is sent to again
on the next pass; until it holds them it is not Ready and takes no HTTP scoring."""
from __future__ import annotations

import logging

from rewardpool_worker.contract import Tenants

from ..pool.rollout import pod_ip
from ..pool.tenants import sent_key, to_send
from .workers import WorkerClient

log = logging.getLogger("rewardpool.operator")


async def send(workers: WorkerClient, pods: list[dict], health: dict[str, dict | None], tenants: Tenants,
               token: str, sent: dict[str, str]) -> list[str]:
    """Send `tenants` to the workers that need them; returns the pods that took them now. `sent` is updated (and
    forgets pods that are gone)."""
    live = {sent_key(x) for x in pods}
    for key in set(sent) - live:
        sent.pop(key)
    took = []
    for pod in to_send(pods, sent, tenants, health):
        if await workers.send_tenants(pod_ip(pod), token, tenants):
            sent[sent_key(pod)] = tenants.version
            took.append(pod["metadata"]["name"])
    if took:
        log.info("sent tenants version %s (%s) to %s", tenants.version,
                 ", ".join(t.name for t in tenants.tenants), ", ".join(took))
    return took
