"""The objects a pool owns besides its pods, ensured in one pass: everything the look needs is read (the reads
are pool/owned.py's `reads`), decided there (`decide`: pure), then written here, and what it found is kept until
the next look (`Owned`). Writes: Released cache volumes deleted, then the applies (server-side, `Kube.apply`:
field manager rewardpool-operator, forced), then a missing control Secret created; each apply recorded in the
pool's `applied` (PoolMemory.applied), so an object is written again only when it needs it. Between looks,
a pool with tenants has its tenants' Secrets read again every pass (`refresh_tenants`)."""
from __future__ import annotations

import secrets
import time
from dataclasses import dataclass, field

from rewardpool_worker.contract import Tenants

from ..api import reasons as R
from ..api.findings import Problem
from ..api.spec import Pool
from ..cluster.kube import Kube, NadCrdMissing
from ..pool import tenants as tenants_mod
from ..pool.observed import Network
from ..pool.owned import Applied, Found, Ref, applied_key, decide, reads


@dataclass
class Owned:
    """What ensuring the owned objects found, kept until they are looked at again."""
    network: Network
    token: str | None
    problems: list[Problem]
    generation: int
    at: float
    copies: dict[str, str] = field(default_factory=dict)  # each model cache's current copy {cache: identity}
    tenants: Tenants | None = None  # what the workers must hold; None: the pool's HTTP scoring is open


# How each kind is read (None: missing); a Namespace as its labels.
READ = {
    "Secret": lambda kube, ns, name: kube.get_secret(ns, name),
    "RewardModelCache": lambda kube, _ns, name: kube.get_cache(name),
    "Namespace": lambda kube, _ns, name: kube.get_namespace_labels(name),
}


async def read(kube: Kube, refs: list[Ref]) -> Found:
    found = Found(live={})
    for kind, ns, name in refs:
        reader = READ.get(kind) or (lambda kube, ns, name, kind=kind: kube.get_owned(kind, ns, name))
        try:
            found.live[(kind, ns, name)] = await reader(kube, ns, name)
        except NadCrdMissing:
            found.live[(kind, ns, name)], found.nad_crd_missing = None, True
    return found


async def ensure_owned(kube: Kube, pool: Pool, generation: int, applied: dict[str, Applied],
                       events: list) -> Owned:
    """Read, decide, write; the events to tell are appended to `events` (type, reason, message)."""
    p = decide(pool, await read(kube, reads(pool)), applied, secrets.token_urlsafe(32))
    for obj, resource_version in p.kept:
        applied[applied_key(obj)] = Applied(obj, resource_version)
    for name in p.delete_volumes:
        await kube.delete_volume(name)
    for obj in p.apply:
        done = await kube.apply(obj)
        applied[applied_key(obj)] = Applied(obj, done["metadata"].get("resourceVersion", ""))
    if p.create_secret is not None:
        await kube.create_secret(p.create_secret)
    events += p.events
    return Owned(p.network, p.token, p.problems, generation, time.monotonic(), p.copies, p.tenants)


async def refresh_tenants(kube: Kube, pool: Pool, owned: Owned) -> None:
    """The tenants' Secrets read again between the owned objects' looks (every pass of a pool with tenants), so a
    rotated token reaches the workers within a pass, not a resync: the Secrets are the users' and not watched."""
    refs = tenants_mod.secret_refs(pool)
    tenants, problem = tenants_mod.wanted(pool, (await read(kube, refs)).live)
    owned.tenants = tenants
    owned.problems = [x for x in owned.problems if x.reason != R.TENANT_TOKEN_MISSING] + ([problem] if problem else [])
