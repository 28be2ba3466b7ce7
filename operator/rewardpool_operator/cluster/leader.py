"""Leader election on a coordination.k8s.io Lease, so that of several operator replicas exactly one writes.
The leader renews the Lease every RENEW seconds; a standby takes it over once the holder's renewals have
stopped for the lease's duration, judged by its own clock from when it last saw the Lease change (as
client-go does, so clocks need not agree). A leader that cannot renew for the duration steps down before
anyone may take over."""
from __future__ import annotations

import asyncio
import logging
import time
from datetime import datetime, timezone
from typing import Awaitable, Callable

from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

log = logging.getLogger("rewardpool.operator")
LEASE_SECONDS = 15
RENEW_SECONDS = 3


def _micro_now() -> str:
    return _micro(datetime.now(timezone.utc))


def _micro(t):
    """MicroTime as the API server parses it (always six fractional digits)."""
    return t.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ") if isinstance(t, datetime) else t


class LeaderElector:
    def __init__(self, api: client.ApiClient, namespace: str, name: str, identity: str,
                 lease_seconds: int = LEASE_SECONDS, renew_seconds: float = RENEW_SECONDS):
        self.coord = client.CoordinationV1Api(api)
        self.namespace, self.name, self.identity = namespace, name, identity
        self.lease_seconds, self.renew_seconds = lease_seconds, renew_seconds
        self.is_leader = False
        self._seen: tuple | None = None  # (holder, renewTime) last observed
        self._seen_at = 0.0
        self._renewed_at = 0.0

    async def run(self, on_start: Callable[[], Awaitable[None] | None],
                  on_stop: Callable[[], Awaitable[None] | None]) -> None:
        while True:
            try:
                leading = await self._try()
            except asyncio.CancelledError:
                raise
            except Exception as e:  # the API is unreachable: keep leading only while the lease is surely ours
                log.warning("leader election: %s", e)
                leading = self.is_leader and time.monotonic() - self._renewed_at < self.lease_seconds - self.renew_seconds
            if leading != self.is_leader:
                self.is_leader = leading
                log.info("leader election: %s the lease %s/%s", "acquired" if leading else "lost",
                         self.namespace, self.name)
                res = (on_start if leading else on_stop)()
                if asyncio.iscoroutine(res):
                    await res
            await asyncio.sleep(self.renew_seconds)

    async def _try(self) -> bool:
        now = _micro_now()
        try:
            lease = await self.coord.read_namespaced_lease(self.name, self.namespace)
        except ApiException as e:
            if e.status != 404:
                raise
            body = client.V1Lease(metadata=client.V1ObjectMeta(name=self.name, namespace=self.namespace),
                                  spec=client.V1LeaseSpec(holder_identity=self.identity,
                                                          lease_duration_seconds=self.lease_seconds,
                                                          acquire_time=now, renew_time=now, lease_transitions=0))
            try:
                await self.coord.create_namespaced_lease(self.namespace, body)
            except ApiException as e2:
                if e2.status == 409:
                    return False
                raise
            self._renewed_at = time.monotonic()
            return True
        spec = lease.spec
        seen = (spec.holder_identity, spec.renew_time)
        if seen != self._seen:
            self._seen, self._seen_at = seen, time.monotonic()
        duration = spec.lease_duration_seconds or self.lease_seconds
        mine = spec.holder_identity == self.identity
        expired = not spec.holder_identity or time.monotonic() - self._seen_at >= duration
        if not mine and not expired:
            return False
        spec.acquire_time = _micro(spec.acquire_time)
        if not mine:
            spec.acquire_time = now
            spec.lease_transitions = (spec.lease_transitions or 0) + 1
            spec.holder_identity = self.identity
        spec.renew_time = now
        spec.lease_duration_seconds = self.lease_seconds
        try:
            await self.coord.replace_namespaced_lease(self.name, self.namespace, lease)  # resourceVersion: CAS
        except ApiException as e:
            if e.status == 409:  # someone else wrote first
                return False
            raise
        self._renewed_at = time.monotonic()
        return True

    async def release(self) -> None:
        """On a clean shutdown, hand the lease over at once instead of after its duration."""
        if not self.is_leader:
            return
        try:
            lease = await self.coord.read_namespaced_lease(self.name, self.namespace)
            if lease.spec.holder_identity == self.identity:
                lease.spec.holder_identity = None
                lease.spec.acquire_time = _micro(lease.spec.acquire_time)
                lease.spec.renew_time = _micro_now()
                await self.coord.replace_namespaced_lease(self.name, self.namespace, lease)
        except ApiException as e:
            log.warning("leader election: lease not released: %s", e.status)
        self.is_leader = False
