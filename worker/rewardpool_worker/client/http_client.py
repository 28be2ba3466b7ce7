"""`HttpRewardPoolClient`: score through a pool's `<pool>-score` Service over HTTP, with no Ray cluster of the
pool's (httpapi.py's API). The same `score_detailed` / `describe` as the Ray client, so the miles hook takes either.

    client = HttpRewardPoolClient("http://pickscore-score.rl.svc:8000", token=open("/var/run/token").read())
    report = await client.score_detailed(refs_or_tensors, prompts, timeout=600, group="rollout-3")

A call is split into requests of a few of the pool's batches each, sent at once (each on its own connection, so
the Service spreads them over the workers); a request the worker refuses for now (429 full, 503 draining or not
Ready) or that found no worker (a connection error) is sent again after `Retry-After`, within the call's deadline;
400/401/403/413 raise at once (the request itself is wrong). Stored outputs travel as refs (the worker reads them
through registered memory); tensors as safetensors, whole. The caller releases stored outputs, as with the Ray
client. Not (yet) as the Ray client: the Service picks the worker, so during a roll the requests of one call can
reach two scorer versions (`report.version` is then None and each sample's is in `report.versions`)."""
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
from .async_client import ScoreReport

log = logging.getLogger("rewardpool.client.http")
BATCHES_PER_REQUEST = 2  # a request carries this many of the pool's batches: spread, yet few round trips
RETRY_SECONDS = 1.0


class HttpStatusError(RuntimeError):
    def __init__(self, status: int, message: str):
        super().__init__(f"HTTP {status}: {message}")
        self.status = status


def _item(o) -> dict:
    if isinstance(o, OutputRef):
        return {"key": o.key, "shape": list(o.shape), "dtype": o.dtype, "nbytes": o.nbytes}
    if isinstance(o, torch.Tensor):
        from safetensors.torch import save

        return {"tensor": base64.b64encode(save({"output": o.contiguous()})).decode()}
    raise TypeError(f"an output is an OutputRef or a torch.Tensor, not {type(o).__name__}")


class HttpRewardPoolClient:
    def __init__(self, url: str, token: str | None = None, *, timeout: float | None = None,
                 unavailable_seconds: float = 30.0, max_requests: int = 64):
        self.url, self.token, self.timeout = url.rstrip("/"), (token or "").strip() or None, timeout
        self.unavailable_seconds = unavailable_seconds
        self.components: list[str] | None = None
        self.batch_size: int | None = None
        self.retries = 0
        # requests in flight at once, each blocking a thread of its own (asyncio's default pool has cpu + 4 threads:
        # a call's requests would queue behind each other there, and behind every other client's)
        self._pool = ThreadPoolExecutor(max_requests, thread_name_prefix="rewardpool-http")

    async def _call(self, *args):
        return await asyncio.get_running_loop().run_in_executor(self._pool, self._request, *args)

    # one request ---------------------------------------------------------------------------------------------
    def _request(self, method: str, path: str, body: bytes | None, deadline: float | None) -> bytes:
        headers = {"Content-Type": "application/json"}
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        first_failure = None
        while True:
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                raise TimeoutError(f"{self.url}{path}: no answer within the call's deadline")
            req = urllib.request.Request(self.url + path, data=body, method=method, headers=headers)
            try:
                with urllib.request.urlopen(req, timeout=left if left is not None else 600) as r:
                    return r.read()
            except urllib.error.HTTPError as e:
                text = e.read().decode(errors="replace")
                try:
                    message = json.loads(text).get("error", text)
                except ValueError:
                    message = text
                if e.code == 504:
                    raise TimeoutError(f"{self.url}{path}: {message}") from None
                if e.code not in (429, 503):
                    raise HttpStatusError(e.code, message) from None
                wait = float(e.headers.get("Retry-After") or RETRY_SECONDS)
            except (urllib.error.URLError, ConnectionError, TimeoutError, OSError) as e:
                # no worker behind the Service right now (a roll, a scale from zero), or one that went away
                first_failure = first_failure or time.monotonic()
                if deadline is None and time.monotonic() - first_failure > self.unavailable_seconds:
                    raise PoolUnavailable(f"{self.url}: no answer for {self.unavailable_seconds:.0f}s ({e})") from e
                wait = RETRY_SECONDS
            self.retries += 1
            time.sleep(wait if left is None else min(wait, max(left, 0.0)))

    async def describe(self, timeout: float | None = None) -> dict:
        """What the pool scores with (a worker's answer): components, num_frames, scorers, args, batch_size."""
        deadline = None if timeout is None else time.monotonic() + timeout
        desc = json.loads(await self._call("GET", httpapi.DESCRIBE_PATH, None, deadline))
        self.components = list(desc.get("components") or [])
        self.batch_size = int(desc.get("batch_size") or 1)
        return desc

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
        n = max(1, (self.batch_size or 1) * BATCHES_PER_REQUEST)
        report = ScoreReport(results=[None] * len(outputs), versions=[None] * len(outputs))
        sent = outputs  # inline videos whole (the worker picks its frames)
        report.sent_bytes = sum(inline_bytes(o) for o in sent)

        async def one(start: int):
            body = json.dumps({"items": [_item(o) for o in sent[start:start + n]],
                               "prompts": list(prompts[start:start + n]), "group": group, "priority": priority,
                               **({"deadline_seconds": max(0.001, deadline - time.monotonic())}
                                  if deadline is not None else {})}).encode()
            raw = await self._call("POST", httpapi.SCORE_PATH, body, deadline)
            return start, httpapi.ScoreReply.model_validate_json(raw)
        replies = await asyncio.gather(*(one(i) for i in range(0, len(outputs), n)))
        versions = set()
        for start, reply in replies:
            versions.add(reply.version)
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
        report.version = versions.pop() if len(versions) == 1 else None
        if raise_errors and report.errors:
            raise report.errors[0].cause
        return report

    async def score(self, outputs: list, prompts: list[str], **kw) -> list:
        return (await self.score_detailed(outputs, prompts, **kw)).results
