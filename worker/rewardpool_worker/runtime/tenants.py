"""Who is scoring over HTTP: one of the pool's tenants (spec.access.tenants), known by its bearer token. The operator
sends the tenants (names, shares, their tokens' SHA-256) to POST TENANTS_PATH, at start and on every change, so a
tenant added, removed or rotated takes effect here within seconds and no worker is replaced. A presented token is
hashed and compared with every tenant's digest in constant time. A pool with no tenants is open (tenant
DEFAULT_TENANT): the network decides who reaches it, as for the Ray path; one with tenants refuses every call until
it has received them (fail closed: a restarted worker knows no one)."""
from __future__ import annotations

import hashlib
import hmac
import logging
import threading

from ..contract import CONTROL_SCHEME, Tenants
from .fairslots import DEFAULT_TENANT

log = logging.getLogger("rewardpool.worker.tenants")


class TenantAuth:
    def __init__(self, required: bool):
        self.required = required  # spec.access lists tenants (WorkerConfig.tenant_auth)
        self._tenants: Tenants | None = None
        self._lock = threading.Lock()

    @property
    def tenants(self) -> Tenants | None:
        return self._tenants

    @property
    def version(self) -> str | None:
        return self._tenants.version if self._tenants is not None else None

    @property
    def known(self) -> bool:
        """Can this worker tell who calls: an open pool always, one with tenants once it received them."""
        return not self.required or self._tenants is not None

    def update(self, tenants: Tenants) -> bool:
        """The pool's tenants as they are now; whether they changed."""
        with self._lock:
            changed = self.version != tenants.version
            self._tenants = tenants
        if changed:
            log.info("tenants now %s (version %s)", ", ".join(
                f"{t.name} x{t.weight}{'' if t.sha256 else ' (no token)'}" for t in tenants.tenants) or "none",
                tenants.version)
        return changed

    def identify(self, header: str | None) -> tuple[int, str]:
        """(200, tenant) for a tenant's token, or for anyone when the pool has no tenants; (401, why) when no token
        is presented; (403, why) when it is no tenant's; (503, why) before the operator sent the tenants."""
        if not self.required:
            return 200, DEFAULT_TENANT
        scheme, _, presented = (header or "").partition(" ")
        presented = presented.strip()
        if scheme != CONTROL_SCHEME or not presented:
            return 401, f"scoring needs '{CONTROL_SCHEME} <tenant token>' (this pool lists its tenants in spec.access)"
        tenants = self._tenants
        if tenants is None:
            return 503, "this worker has not received its pool's tenants from the operator yet; retry"
        digest = hashlib.sha256(presented.encode()).hexdigest()
        found = None
        for t in tenants.tenants:  # every digest compared, so the time does not say which matched
            if t.sha256 is not None and hmac.compare_digest(digest, t.sha256):
                found = t.name
        if found is None:
            return 403, "no tenant of this pool has this token"
        return 200, found
