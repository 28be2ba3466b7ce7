"""The pool's tenants as its workers must hold them, pure: who they are, each one's share and the SHA-256 of its
token (read from its Secret; never the token itself), and which workers still need them. The operator sends them
to each worker (controller/tenants.py) instead of mounting them, so adding, removing or rotating a tenant takes
effect within seconds and rolls nothing."""
from __future__ import annotations

import base64
import binascii
import hashlib

from rewardpool_worker.contract import Tenant, Tenants

from ..api import reasons as R
from ..api.findings import Problem
from ..api.spec import Pool
from .rollout import pod_ip

Ref = tuple[str, str, str]


def _token(secret: dict | None, key: str) -> str | None:
    if secret is None:
        return None
    raw = (secret.get("data") or {}).get(key)
    if raw is not None:
        try:
            return base64.b64decode(raw).decode().strip() or None
        except (binascii.Error, UnicodeDecodeError):
            return None
    return ((secret.get("stringData") or {}).get(key) or "").strip() or None


def secret_refs(pool: Pool) -> list[Ref]:
    """The tenants' Secrets, each once."""
    return list(dict.fromkeys(("Secret", pool.namespace, t.tokenSecret.name) for t in pool.spec.access.tenants))


def wanted(pool: Pool, live: dict[Ref, dict | None]) -> tuple[Tenants | None, Problem | None]:
    """The tenants to send (None: the pool lists none, its HTTP scoring is open), and what is wrong with them: a
    tenant whose Secret or key is missing or empty gets no token (no call is its), the others are not affected."""
    if not pool.spec.access.tenants:
        return None, None
    out, missing = [], []
    for t in pool.spec.access.tenants:
        secret = live.get(("Secret", pool.namespace, t.tokenSecret.name))
        token = _token(secret, t.tokenSecret.key)
        if token is None:
            missing.append(f"{t.name}: Secret {t.tokenSecret.name} " + (
                "not found" if secret is None else f"has no (non-empty) key {t.tokenSecret.key}"))
        out.append(Tenant(name=t.name, weight=t.weight,
                          sha256=hashlib.sha256(token.encode()).hexdigest() if token else None))
    problem = None if not missing else Problem(
        R.TENANT_TOKEN_MISSING, "spec.access.tenants: " + "; ".join(missing) + f" (create it in namespace "
        f"{pool.namespace}: until then no call is that tenant's; the other tenants score as before)")
    return Tenants(tenants=out), problem


def sent_key(pod: dict) -> str:
    """What a sent set is remembered by: the pod and its container's restarts (a restarted worker knows no one)."""
    restarts = sum(cs.get("restartCount", 0) for cs in (pod.get("status") or {}).get("containerStatuses") or [])
    return f"{pod['metadata']['name']}/{restarts}"


def to_send(pods: list[dict], sent: dict[str, str], tenants: Tenants, health: dict[str, dict | None]) -> list[dict]:
    """The live workers that do not hold `tenants` yet: never sent this version (since their last restart), or
    saying another one on /healthz (a worker restarted before its pod's status says so)."""
    out = []
    for pod in pods:
        if pod["metadata"].get("deletionTimestamp") or not pod_ip(pod):
            continue
        said = (health.get(pod["metadata"]["name"]) or {}).get("tenants", tenants.version)
        if sent.get(sent_key(pod)) != tenants.version or said != tenants.version:
            out.append(pod)
    return out
