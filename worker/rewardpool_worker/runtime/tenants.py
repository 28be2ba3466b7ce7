"""Who is scoring over HTTP: one of the pool's tenants (spec.access.tenants), known by its bearer token. Each token
is a file (TENANTS_DIR/<tenant>, the tenant's Secret key projected read-only), read on every request so a rotation
needs no restart; compared in constant time. A pool with no tenants is open (tenant DEFAULT_TENANT): the network
decides who reaches it, as for the Ray path."""
from __future__ import annotations

import hmac
import logging
from pathlib import Path

from ..contract import CONTROL_SCHEME, TENANTS_DIR, TenantConfig
from .fairslots import DEFAULT_TENANT

log = logging.getLogger("rewardpool.worker.tenants")


class TenantAuth:
    def __init__(self, tenants: list[TenantConfig], directory: str | Path = TENANTS_DIR):
        self.names = [t.name for t in tenants]
        self.directory = Path(directory)

    def _token(self, name: str) -> str | None:
        try:
            return (self.directory / name).read_text().strip() or None
        except OSError as e:
            log.warning("tenant %s has no readable token (%s)", name, type(e).__name__)
            return None

    def identify(self, header: str | None) -> tuple[int, str]:
        """(200, tenant) for a tenant's token, or for anyone when the pool has no tenants; (401, why) when no token
        is presented; (403, why) when it is no tenant's."""
        if not self.names:
            return 200, DEFAULT_TENANT
        scheme, _, presented = (header or "").partition(" ")
        presented = presented.strip()
        if scheme != CONTROL_SCHEME or not presented:
            return 401, f"scoring needs '{CONTROL_SCHEME} <tenant token>' (this pool lists its tenants in spec.access)"
        found = None
        for name in self.names:  # every token compared, so the time does not say which matched
            token = self._token(name)
            if token is not None and hmac.compare_digest(presented.encode(), token.encode()):
                found = name
        if found is None:
            return 403, "no tenant of this pool has this token"
        return 200, found
