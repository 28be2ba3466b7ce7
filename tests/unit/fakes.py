"""Fakes of what a reconcile talks to, for unit tests of a whole pass: the Kubernetes API as `Kube` offers it
(objects kept in a dict, every write recorded) and the workers' HTTP as `WorkerClient` offers it (answers set
by the test). They do only what the real ones are documented to do; what the API server itself decides
(admission, defaulting, garbage collection) is left to the integration tests."""
from __future__ import annotations

import base64
import copy
import itertools

from rewardpool_operator.cluster.kube import NadCrdMissing
from rewardpool_operator.pool.observed import Signals


class FakeKube:
    """`Kube`'s methods over an in-memory store. `writes` lists (verb, kind, name) in order, `events` (type,
    reason, message), `statuses` each status written."""

    def __init__(self, namespace_labels: dict[str, str] | None = None, nad_crd: bool = True):
        self.objects: dict[tuple[str, str, str], dict] = {}  # (kind, namespace, name) -> object
        self.writes: list[tuple[str, str, str]] = []
        self.events: list[tuple[str, str, str]] = []
        self.statuses: list[dict] = []
        self.namespace_labels = namespace_labels or {}
        self.nad_crd = nad_crd
        self._rv = itertools.count(100)

    def _stamp(self, obj: dict) -> dict:
        obj["metadata"]["resourceVersion"] = str(next(self._rv))
        return copy.deepcopy(obj)

    def put(self, obj: dict) -> dict:
        """Store an object as someone else wrote it (no write recorded)."""
        meta = obj["metadata"]
        key = (obj["kind"], meta.get("namespace", ""), meta["name"])
        self.objects[key] = copy.deepcopy(obj)
        return self._stamp(self.objects[key])

    def get(self, kind: str, namespace: str, name: str) -> dict | None:
        obj = self.objects.get((kind, namespace, name))
        return copy.deepcopy(obj) if obj is not None else None

    def kinds(self, verb: str | None = None) -> list[str]:
        return [k for v, k, _ in self.writes if verb is None or v == verb]

    # owned objects
    async def get_owned(self, kind: str, namespace: str, name: str) -> dict | None:
        if kind == "NetworkAttachmentDefinition" and not self.nad_crd:
            raise NadCrdMissing()
        return self.get(kind, namespace, name)

    async def apply(self, obj: dict) -> dict:
        """Server-side apply, as far as these objects need it: the fields set replace the live ones."""
        meta = obj["metadata"]
        key = (obj["kind"], meta.get("namespace", ""), meta["name"])
        self.writes.append(("apply", obj["kind"], meta["name"]))
        live = self.objects.get(key) or {}
        merged = {**live, **copy.deepcopy(obj), "metadata": {**live.get("metadata", {}), **copy.deepcopy(meta)}}
        self.objects[key] = merged
        return self._stamp(merged)

    # model caches (cluster-scoped: namespace "")
    async def get_cache(self, name: str) -> dict | None:
        return self.get("RewardModelCache", "", name)

    async def delete_volume(self, name: str) -> None:
        self.writes.append(("delete", "PersistentVolume", name))
        self.objects.pop(("PersistentVolume", "", name), None)

    async def get_nad(self, namespace: str, name: str) -> dict | None:
        return await self.get_owned("NetworkAttachmentDefinition", namespace, name)

    # secrets
    async def get_secret(self, namespace: str, name: str) -> dict | None:
        return self.get("Secret", namespace, name)

    async def create_secret(self, secret: dict) -> dict:
        self.writes.append(("create", "Secret", secret["metadata"]["name"]))
        return self.put(secret)

    async def get_pvc(self, namespace: str, name: str) -> dict | None:
        return self.get("PersistentVolumeClaim", namespace, name)

    def token(self, namespace: str, name: str) -> str:
        return base64.b64decode(self.objects[("Secret", namespace, name)]["data"]["token"]).decode()

    # namespaces
    async def get_namespace_labels(self, name: str) -> dict[str, str] | None:
        return dict(self.namespace_labels)

    # pods
    async def create_pod(self, namespace: str, pod: dict) -> dict:
        self.writes.append(("create", "Pod", pod["metadata"]["name"]))
        return self.put({**copy.deepcopy(pod), "kind": "Pod",
                         "metadata": {**pod["metadata"], "namespace": namespace}})

    async def annotate_pod(self, namespace: str, name: str, annotations: dict[str, str]) -> None:
        self.writes.append(("annotate", "Pod", name))
        meta = self.objects[("Pod", namespace, name)]["metadata"]
        meta["annotations"] = {**(meta.get("annotations") or {}), **annotations}
        self._stamp(self.objects[("Pod", namespace, name)])

    async def delete_pod(self, namespace: str, name: str) -> None:
        self.writes.append(("delete", "Pod", name))
        self.objects.pop(("Pod", namespace, name), None)

    def pods(self, namespace: str = "ns") -> list[dict]:
        return [copy.deepcopy(o) for (k, ns, _), o in sorted(self.objects.items()) if k == "Pod" and ns == namespace]

    # pools
    async def patch_pool_status(self, namespace: str, name: str, status: dict,
                                resource_version: str | None = None) -> dict:
        self.writes.append(("status", "RewardPool", name))
        self.statuses.append(copy.deepcopy(status))
        return {"metadata": {"namespace": namespace, "name": name, "resourceVersion": str(next(self._rv))},
                "status": copy.deepcopy(status)}

    async def patch_pool_scale(self, namespace: str, name: str, replicas: int,
                               resource_version: str | None = None) -> None:
        self.writes.append(("scale", "RewardPool", name))

    async def event(self, pool: dict, type_: str, reason: str, message: str) -> None:
        self.events.append((type_, reason, message))


class FakeWorkers:
    """`WorkerClient` with answers the test sets: `queues` by pod IP (absent: silent), `healths` by pod IP,
    `segments` by segment name; every drain request is recorded in `drains` as (ip, token)."""

    def __init__(self):
        self.queues: dict[str, int] = {}
        self.groups: dict[str, int] = {}  # pinned caller groups by pod IP
        self.healths: dict[str, dict] = {}
        self.segments: dict[str, int] = {}
        self.drains: list[tuple[str, str]] = []
        self.promotes: list[tuple[str, str]] = []
        self.reads: dict[str, tuple[int, int]] = {}  # batch reads (ok, failed) since start by pod IP
        self.tenants: dict[str, object] = {}  # pod IP -> the Tenants it was last sent
        self.silent: set[str] = set()  # pod IPs that take no tenants (not answering yet)

    async def signals(self, pod_ips: list[str], master_metrics: str | None) -> Signals:
        answered = {ip: self.queues[ip] for ip in pod_ips if ip in self.queues}
        total = sum(answered.values()) if answered else None
        groups = {ip: self.groups[ip] for ip in pod_ips if ip in self.groups}
        reads = {ip: self.reads[ip] for ip in pod_ips if ip in self.reads}
        return Signals(total, 0 if answered else None, None, len(answered), answered, groups, reads=reads)

    async def health(self, pod_ip: str) -> dict | None:
        return self.healths.get(pod_ip)

    async def drain(self, pod_ip: str, token: str) -> bool:
        self.drains.append((pod_ip, token))
        return True

    async def promote(self, pod_ip: str, token: str) -> bool:
        self.promotes.append((pod_ip, token))
        return True

    async def send_tenants(self, pod_ip: str, token: str, tenants) -> bool:
        if pod_ip in self.silent:
            return False
        self.tenants[pod_ip] = tenants
        return True

    async def segment_used_bytes(self, master_metrics: str, segment: str) -> int | None:
        return self.segments.get(segment)


# ---- a pool's Ray actors, for the client's pure logic -------------------------------------------------------------
class FakeRef:
    """What `handle.method.remote(...)` returns: `future()` is a concurrent future, resolved `delay` seconds later
    (from a timer thread, as Ray's own completes off the event loop)."""

    def __init__(self, value=None, error: BaseException | None = None, delay: float = 0.0):
        import concurrent.futures
        import threading

        self._future = concurrent.futures.Future()

        def finish():
            if not self._future.set_running_or_notify_cancel():
                return  # the caller cancelled it (a deadline): as Ray's, it just never answers
            if error is not None:
                self._future.set_exception(error)
            else:
                self._future.set_result(value)
        threading.Timer(delay, finish).start() if delay else finish()

    def future(self):
        return self._future


class FakeWorkerHandle:
    """A worker actor's handle: `ready()` says its version and batch size; `score_batch` answers after `delay`
    with `score` per output (or raises `error`), and records what it was sent as (batch_id, n, group)."""

    def __init__(self, version: str, batch_size: int = 4, delay: float = 0.02, score: float = 1.0,
                 max_queue: int = 8):
        self.version, self.batch_size, self.delay, self.score, self.max_queue = \
            version, batch_size, delay, score, max_queue
        self.error: BaseException | None = None
        self.calls: list[tuple[str, int, str | None]] = []
        outer = self

        class _M:
            def __init__(self, fn):
                self.remote = fn
        self.ready = _M(lambda: FakeRef({"batch_size": outer.batch_size, "max_queue": outer.max_queue,
                                         "version": outer.version, "shadow": False, "draining": False}))
        self.score_batch = _M(self._score)
        self.cancel = _M(lambda ids: FakeRef(None))
        self.shadow_batch = _M(lambda *a, **k: FakeRef([]))
        self.record_agreement = _M(lambda *a, **k: FakeRef(None))

    def _score(self, outputs, prompts, batch_id, group=None):
        self.calls.append((batch_id, len(outputs), group))
        if self.error is not None:
            return FakeRef(error=self.error, delay=self.delay)
        return FakeRef([self.score] * len(outputs), delay=self.delay)


def client_over(handles: dict, **kw):
    """An AsyncRewardPoolClient whose router knows these workers (name -> FakeWorkerHandle), Ready, and never
    lists Ray (its refresh is far off)."""
    import time as _time

    from rewardpool_worker.client.async_client import AsyncRewardPoolClient
    from rewardpool_worker.client.router import Member

    client = AsyncRewardPoolClient("p", "ns", refresh_seconds=3600.0, **kw)
    for i, (name, h) in enumerate(handles.items()):
        client.router._members[name] = Member(name, h, last_used=i * 0.1, ready=True, version=h.version)
    client.router._refreshed = _time.monotonic()
    return client
