"""`HttpRewardPoolClient`: score through a pool over HTTP (httpapi.py's API), with no Ray cluster of the pool's.
The same `score_detailed` / `describe` as the Ray client, so the miles hook takes either.

    # in a pod whose service account may list EndpointSlices in the pool's namespace: the workers themselves
    client = HttpRewardPoolClient(pool="pickscore", namespace="rl", token=open("/var/run/token").read())
    # anywhere the Service answers: the Service picks the worker
    client = HttpRewardPoolClient("http://pickscore-score.rl.svc:8000", token=...)
    report = await client.score_detailed(refs_or_tensors, prompts, timeout=600, group="rollout-3")

- **Workers from EndpointSlices** (`endpoints.EndpointSlices`, with `pool=`/`namespace=`): each Ready worker of the
  pool's `<pool>-score` Service is a member of the same `Router` as the Ray client's, learnt by `GET /v1/describe`
  on it (its scorer version). Requests go to the worker with the least outstanding work (weighted by its request
  time); a call's requests all go to one scorer version, and so do the calls of one `group` (`pins.GroupPins`);
  when that version leaves the pool mid-call (a roll), the call is scored again, whole, on another. When the
  listing cannot be read (no service account, no permission), the client says so once and uses `url`.
- **Through the Service** (`url` alone): the Service spreads the requests; during a roll one call's requests can
  reach two versions (`report.version` is then None and each sample's is in `report.versions`).
- **What a failed request means** is one table (`http_step`): 429 (full) tries another worker after a moment,
  503 (draining, shadowing, not Ready) skips that worker, 503 for the store master waits it out, a connection
  that fails (a worker gone) spends one of `attempts` and goes to another worker; 400/401/403/413 raise at once
  (the request itself is wrong); 504 and the call's deadline raise TimeoutError.

A call is split into requests of a few of the pool's batches each, sent at once. Stored outputs travel as refs
(the worker reads them through registered memory); tensors as safetensors, whole (the worker picks its frames).
The caller releases stored outputs, as with the Ray client."""
from __future__ import annotations

import asyncio
import base64
import json
import logging
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor

import torch

from .. import httpapi
from ..errors import PoolUnavailable, SampleError, ScorerError
from ..frames import inline_bytes
from ..records import OutputRef
from .async_client import STORE_RETRY_SECONDS, ScoreReport, patience
from .dispatch import Step
from .endpoints import EndpointSlices, FixedEndpoints
from .pins import GroupPins, Pin, VersionGone
from .router import ANY, UNREACHABLE_COOLDOWN_SECONDS, Member, Router

log = logging.getLogger("rewardpool.client.http")
BATCHES_PER_REQUEST = 2  # a request carries this many of the pool's batches: spread, yet few round trips
RETRY_SECONDS = 1.0
LEAVING_SKIP_SECONDS = 10.0  # a worker that answered 503 (draining, shadowing) is skipped this long
SERVICE = "service"  # the member name of a Service's URL (the Service picks the worker behind it)


class HttpStatusError(RuntimeError):
    def __init__(self, status: int, message: str, reason: str | None = None, retry_after: float | None = None):
        super().__init__(f"HTTP {status}: {message}")
        self.status, self.reason, self.retry_after = status, reason, retry_after


def http_step(e: BaseException, *, via_service: bool) -> Step:
    """What a request that raised `e` means for its items (dispatch.Step). `via_service`: the member is a Service's
    URL, so a refusal is the worker the Service picked this time, not the member's."""
    if isinstance(e, HttpStatusError):
        if e.status == 429:
            return Step.BACK_OFF
        if e.status == 503:
            if e.reason == httpapi.REFUSED_STORE:
                return Step.WAIT_STORE
            if e.reason == httpapi.REFUSED_ENGINE:  # back soon (the kubelet restarts it): as a full queue
                return Step.BACK_OFF
            return Step.BACK_OFF if via_service else Step.SKIP_DRAINING
        return Step.RAISE  # 400/401/403/411/413: the request is wrong; 500: the worker's own failure
    if isinstance(e, TimeoutError):  # a 504, or no answer by the call's deadline
        return Step.RAISE
    if isinstance(e, (urllib.error.URLError, ConnectionError, OSError)):  # refused, reset, no route: a worker gone
        return Step.LOST_UNREACHABLE
    return Step.RAISE


class _OrService:
    """A membership source, or the Service's URL once the listing is refused (no permission to list
    EndpointSlices): said once, and the client scores through the Service from then on."""

    def __init__(self, source, client: "HttpRewardPoolClient"):
        self.source, self.client = source, client

    def names(self) -> list[str]:
        if self.client.via_service:
            return [SERVICE]
        try:
            return self.source.names()
        except PermissionError as e:
            if self.client.url is None:
                raise
            log.warning("%s: %s; scoring through %s instead", self.client.name, e, self.client.url)
            self.client.via_service = True
            return [SERVICE]

    def handle(self, name: str) -> str:
        return self.client.url if self.client.via_service else self.source.handle(name)


def _item(o) -> dict:
    if isinstance(o, OutputRef):
        return {"key": o.key, "shape": list(o.shape), "dtype": o.dtype, "nbytes": o.nbytes}
    if isinstance(o, torch.Tensor):
        from safetensors.torch import save

        return {"tensor": base64.b64encode(save({"output": o.contiguous()})).decode()}
    raise TypeError(f"an output is an OutputRef or a torch.Tensor, not {type(o).__name__}")


class HttpRewardPoolClient:
    def __init__(self, url: str | None = None, token: str | None = None, *, pool: str | None = None,
                 namespace: str | None = None, endpoints=None, timeout: float | None = None,
                 unavailable_seconds: float = 30.0, attempts: int = 4, max_requests: int = 64,
                 refresh_seconds: float = 5.0, seed: int | None = None):
        """`endpoints`: a membership source (`EndpointSlices`, `FixedEndpoints`); by default the pool's
        EndpointSlices when `pool` and `namespace` are given, else `url` (the Service)."""
        if url is None and endpoints is None and not (pool and namespace):
            raise ValueError("give the pool's Service URL, or pool= and namespace= to find its workers")
        self.url, self.token, self.timeout = (url or "").rstrip("/") or None, (token or "").strip() or None, timeout
        self.unavailable_seconds, self.attempts = unavailable_seconds, attempts
        self.name = f"{namespace}/{pool}" if pool else self.url
        if endpoints is None and pool and namespace:
            try:
                endpoints = EndpointSlices(pool, namespace)
            except LookupError as e:
                if self.url is None:
                    raise
                log.warning("%s: %s; scoring through %s", self.name, e, self.url)
        self.via_service = endpoints is None
        self.router = Router(self.name or "", refresh_seconds=refresh_seconds, seed=seed,
                             source=FixedEndpoints({SERVICE: self.url}) if endpoints is None
                             else _OrService(endpoints, self))
        self.groups = GroupPins(self.name or "")
        self.components: list[str] | None = None
        self.batch_size: int | None = None
        self.retries = 0
        # requests in flight at once, each blocking a thread of its own (asyncio's default pool has cpu + 4 threads:
        # a call's requests would queue behind each other there, and behind every other client's)
        self._pool = ThreadPoolExecutor(max_requests, thread_name_prefix="rewardpool-http")

    # one request to one member ---------------------------------------------------------------------------------
    def _request(self, base: str, method: str, path: str, body: bytes | None, deadline: float | None) -> bytes:
        headers = {"Content-Type": "application/json"}
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        left = None if deadline is None else deadline - time.monotonic()
        if left is not None and left <= 0:
            raise TimeoutError(f"{base}{path}: no answer within the call's deadline")
        req = urllib.request.Request(base + path, data=body, method=method, headers=headers)
        try:
            with urllib.request.urlopen(req, timeout=left if left is not None else 600) as r:
                return r.read()
        except urllib.error.HTTPError as e:
            text = e.read().decode(errors="replace")
            try:
                parsed = json.loads(text)
                message, reason = parsed.get("error", text), parsed.get("reason")
            except (ValueError, AttributeError):
                message, reason = text, None
            if e.code == 504:
                raise TimeoutError(f"{base}{path}: {message}") from None
            retry = e.headers.get("Retry-After")
            raise HttpStatusError(e.code, message, reason, float(retry) if retry else None) from None
        except urllib.error.URLError as e:
            if isinstance(e.reason, TimeoutError) and deadline is not None and time.monotonic() >= deadline:
                raise TimeoutError(f"{base}{path}: no answer within the call's deadline") from None
            raise

    async def _call(self, base: str, method: str, path: str, body: bytes | None, deadline: float | None) -> bytes:
        return await asyncio.get_running_loop().run_in_executor(self._pool, self._request, base, method, path, body,
                                                                deadline)

    # membership ----------------------------------------------------------------------------------------------
    async def _members(self) -> None:
        if self.router.due():
            await asyncio.to_thread(self.router.refresh)
        for m in self.router.unready():
            if not m.probing:
                m.probing = True
                asyncio.ensure_future(self._probe(m))

    async def _probe(self, m: Member) -> None:
        """A listed worker takes requests once it describes itself (its scorer version)."""
        try:
            desc = json.loads(await self._call(m.handle, "GET", httpapi.DESCRIBE_PATH, None,
                                               time.monotonic() + 10))
            self._learnt(desc)
            m.version = None if self.via_service else desc.get("version")  # behind a Service: any worker's
            m.probed_at, m.ready = time.monotonic(), True
        except Exception as e:  # noqa: BLE001 (not up yet, or gone: listed again at the next refresh)
            log.info("%s did not describe itself: %s", m.name, e)
            self.router.drop(m.name)
        finally:
            m.probing = False

    def _learnt(self, desc: dict) -> None:
        self.components = list(desc.get("components") or [])
        self.batch_size = int(desc.get("batch_size") or 1)

    async def _acquire(self, tried: set[str], deadline: float | None, pin: Pin) -> Member:
        """A worker for one request, of the call's scorer version once it has one."""
        none_since = None
        while True:
            await self._members()
            m = self.router.pick(tried, pin.version)
            if m is not None:
                if pin.version is ANY:  # the call's first pick decides its version (no await in between)
                    pin.version = m.version
                return m
            if deadline is not None and time.monotonic() >= deadline:
                raise TimeoutError(f"{self.name}: no worker answered within the call's deadline")
            serving = self.router.versions()
            if pin.version is not ANY and not serving[pin.version] and serving:
                raise VersionGone(pin.version)  # other versions serve, this one no longer does
            if tried:  # every worker was tried once: all are candidates again
                tried.clear()
                continue
            if self.router.unready():  # a worker is describing itself
                none_since = None
                await asyncio.sleep(0.05)
                continue
            none_since = none_since or time.monotonic()
            if time.monotonic() - none_since > patience(self.unavailable_seconds, none_since, deadline):
                raise PoolUnavailable(f"no Ready worker of {self.name} for {self.unavailable_seconds:.0f}s "
                                      f"({self.router.describe()})")
            await asyncio.to_thread(self.router.refresh)
            await asyncio.sleep(0.2)

    # a call --------------------------------------------------------------------------------------------------
    async def describe(self, timeout: float | None = None) -> dict:
        """What the pool scores with (a worker's answer): components, num_frames, scorers, args, batch_size."""
        deadline = None if timeout is None else time.monotonic() + timeout
        m = await self._acquire(set(), deadline, Pin())
        try:
            desc = json.loads(await self._call(m.handle, "GET", httpapi.DESCRIBE_PATH, None, deadline))
        finally:
            self.router.done(m, None)
        self._learnt(desc)
        return desc

    async def _send(self, items: list, prompts: list[str], group, priority, deadline, report: ScoreReport,
                    pin: Pin) -> httpapi.ScoreReply:
        """One request, to a worker of the call's version; sent elsewhere as `http_step` says."""
        tried: set[str] = set()
        lost, since = 0, None  # losses spent; since when no worker could be reached (or the store master)
        while True:
            m = await self._acquire(tried, deadline, pin)
            depth, t0, elapsed = m.outstanding, time.monotonic(), None
            report.max_queue_depth = max(report.max_queue_depth, depth - 1)
            body = json.dumps({"items": items, "prompts": prompts, "group": group, "priority": priority,
                               **({"deadline_seconds": max(0.001, deadline - time.monotonic())}
                                  if deadline is not None else {})}).encode()
            try:
                reply = httpapi.ScoreReply.model_validate_json(
                    await self._call(m.handle, "POST", httpapi.SCORE_PATH, body, deadline))
                elapsed = (time.monotonic() - t0) / depth
                report.workers[m.name] += 1
                self.router.served[m.name] += 1
                return reply
            except Exception as e:  # noqa: BLE001 (sorted by http_step)
                err, step = e, http_step(e, via_service=self.via_service)
            finally:
                self.router.done(m, elapsed)
            if step is Step.RAISE:
                raise err
            wait = getattr(err, "retry_after", None) or RETRY_SECONDS
            if step in (Step.BACK_OFF, Step.SKIP_DRAINING):
                # Skipped a while, not for good: a draining worker leaves the Ready endpoints within seconds, and
                # one that refused for a moment (a readiness blip) is used again. With no other worker, wait.
                if step is Step.SKIP_DRAINING:
                    log.info("%s takes no calls now (%s); the request goes elsewhere", m.name, err)
                self.router.exclude(m.name, wait if step is Step.BACK_OFF else LEAVING_SKIP_SECONDS)
                if self.via_service or not self.router.eligible(tried | {m.name}, pin.version):
                    await asyncio.sleep(wait)
            elif step in (Step.WAIT_STORE, Step.LOST_UNREACHABLE) and (step is Step.WAIT_STORE or self.via_service):
                # nothing this worker can help: the store master, or no worker behind the Service (a roll, a
                # scale from zero): wait, within the call's deadline
                since = since or time.monotonic()
                if time.monotonic() - since > patience(self.unavailable_seconds, since, deadline):
                    raise PoolUnavailable(f"{self.name}: no answer for {self.unavailable_seconds:.0f}s ({err})") \
                        from err
                await asyncio.sleep(STORE_RETRY_SECONDS if step is Step.WAIT_STORE else RETRY_SECONDS)
            elif step is Step.LOST_UNREACHABLE:
                log.warning("%s unreachable (%s); the request goes to another worker", m.name, err)
                self.router.exclude(m.name, UNREACHABLE_COOLDOWN_SECONDS)
                lost += 1
                if lost >= self.attempts:
                    raise PoolUnavailable(f"{self.name}: a request lost its worker {lost} times") from err
            tried.add(m.name)
            report.retries += 1
            self.retries += 1

    async def _score_once(self, outputs: list, prompts: list[str], group, priority, deadline,
                          pin: Pin) -> ScoreReport:
        n = max(1, (self.batch_size or 1) * BATCHES_PER_REQUEST)
        report = ScoreReport(results=[None] * len(outputs), versions=[None] * len(outputs))
        report.sent_bytes = sum(inline_bytes(o) for o in outputs)  # inline videos whole (the worker picks frames)

        async def one(start: int):
            items = [_item(o) for o in outputs[start:start + n]]
            try:
                return start, await self._send(items, list(prompts[start:start + n]), group, priority, deadline,
                                               report, pin)
            except PoolUnavailable as e:
                return start, e
        tasks = [asyncio.ensure_future(one(i)) for i in range(0, len(outputs), n)]
        try:
            replies = await asyncio.gather(*tasks)
        except BaseException:
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            raise
        for start, reply in replies:
            if isinstance(reply, PoolUnavailable):
                for i in range(start, min(start + n, len(outputs))):
                    report.results[i] = SampleError(i, reply)
                continue
            report.max_queue_depth = max(report.max_queue_depth, reply.queue_depth)
            errors = {e.index: e for e in reply.errors}
            for k, s in enumerate(reply.scores):
                i = start + k
                if k in errors:
                    e = errors[k]
                    report.results[i] = SampleError(i, ScorerError(e.message, e.reason))
                else:
                    report.results[i] = s
                    report.versions[i] = reply.version
                if k in reply.component_errors:
                    report.component_errors[i] = reply.component_errors[k]
        return report

    async def score_detailed(self, outputs: list, prompts: list[str], *, timeout: float | None = None,
                             raise_errors: bool = False, group: str | None = None,
                             priority: str = "train") -> ScoreReport:
        if len(outputs) != len(prompts):
            raise ValueError(f"{len(outputs)} outputs but {len(prompts)} prompts")
        if not outputs:
            return ScoreReport(results=[])
        timeout = self.timeout if timeout is None else timeout
        deadline = None if timeout is None else time.monotonic() + timeout
        if self.batch_size is None:
            await self.describe(timeout)
        pin, restarts = self.groups.pin(group, self.router.versions()), 0
        while True:
            try:
                report = await self._score_once(outputs, prompts, group, priority, deadline, pin)
                break
            except VersionGone as e:
                restarts += 1
                log.warning("%s: scorer version %s left the pool mid-call; scoring the call again on another "
                            "version (restart %d)", self.name, e, restarts)
                if restarts > self.attempts:
                    raise PoolUnavailable(f"{self.name}: the scorer version changed under the call {restarts} "
                                          "times") from None
                pin = self.groups.repin(group, pin, self.router.versions())
        report.restarts = restarts
        scored = {v for v, r in zip(report.versions, report.results) if not isinstance(r, SampleError)}
        report.version = scored.pop() if len(scored) == 1 else None
        if raise_errors and report.errors:
            raise report.errors[0].cause
        return report

    async def score(self, outputs: list, prompts: list[str], **kw) -> list:
        return (await self.score_detailed(outputs, prompts, **kw)).results
