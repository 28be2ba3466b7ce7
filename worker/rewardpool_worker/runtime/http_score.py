"""Scoring over HTTP on a worker (httpapi.py's API): the entrypoint's HTTP server hands `POST /v1/score` and
flow-GRPO's `POST /` here, and they reach this pod's actor as a Ray caller's batches do (the same reads through
registered memory, the same queue, the same scorer version).

A request is split by the worker's batchSize and its batches queued on the actor at once. What HTTP says:
- 200 with a score per item, or an error for the items that could not be scored (a scorer's refusal, an output
  the store no longer holds): the others keep theirs;
- 400 naming the field of a malformed request; 411 without a Content-Length or chunked encoding; 413 past
  MAX_BODY_BYTES (a body whose length says so is not read; a chunked one is read no further than the bound);
- 429 with Retry-After when the worker's queue is full (the load balancer or client tries again or elsewhere);
- 503 while the worker is not Ready to score (starting, draining, shadowing, the store master not answering):
  the Service routes Ready workers only, so a caller sees this only in the moment a worker leaves;
- 504 past the request's deadline: its batches still waiting are dropped before they read."""
from __future__ import annotations

import json
import logging
import time
import uuid
from dataclasses import dataclass, field

from .. import httpapi
from ..contract import COMPONENT_ERRORS_KEY
from ..errors import Cancelled, Draining, EngineUnavailable, Overloaded, ScorerError, Shadowing, unwrap
from ..store import MasterUnreachable
from .fairslots import DEFAULT_TENANT
from .tenants import TenantAuth

log = logging.getLogger("rewardpool.worker.http")
RETRY_AFTER_SECONDS = 1
DEFAULT_DEADLINE_SECONDS = 600.0


@dataclass
class Answer:
    status: int
    body: bytes
    content_type: str = "application/json"
    headers: dict[str, str] = field(default_factory=dict)


def _error(status: int, message: str, reason: str | None = None, **headers: str) -> Answer:
    return Answer(status, json.dumps({"error": message, **({"reason": reason} if reason else {})}).encode(),
                  headers=headers)


class Unavailable(Exception):
    def __init__(self, answer: Answer):
        self.answer = answer


def ray_get(ref, timeout: float):
    """ray.get, its timeout as TimeoutError."""
    import ray

    try:
        return ray.get(ref, timeout=timeout)
    except ray.exceptions.GetTimeoutError:
        raise TimeoutError from None


class Scoring:
    """This pod's actor, as HTTP requests reach it (`get`: how a call's result is awaited, ray_get)."""

    def __init__(self, actor, ready: dict, get=ray_get, auth: TenantAuth | None = None, depth=lambda: 0):
        self.actor, self.get = actor, get
        self.auth = auth or TenantAuth(False)  # who may call (spec.access.tenants); none listed: anyone
        self.depth = depth  # batches the worker holds now (its last stats)
        self.described = {k: ready.get(k) for k in ("components", "num_frames", "scorers", "args", "batch_size",
                                                     "version")}
        self.batch_size = int(ready.get("batch_size") or 1)
        self.version = ready.get("version")

    def score(self, outputs: list, prompts: list[str], group: str | None, deadline: float,
              tenant: str = DEFAULT_TENANT, priority: str = "train") -> tuple[list, list[httpapi.ItemError], dict]:
        """(score or None per item, item errors, component errors by item) from the actor, or Unavailable. A batch
        that fails whole (an output the store no longer holds) is scored again one item at a time, so the failing
        item fails alone, as for a Ray caller."""
        scores: list = [None] * len(outputs)
        errors: list[httpapi.ItemError] = []
        components: dict = {}
        failed = self._score(list(range(len(outputs))), self.batch_size, outputs, prompts, group, deadline, tenant,
                             priority, scores, errors, components)
        for start, size, cause in failed:
            if size == 1:
                errors.append(httpapi.ItemError(index=start, reason=type(cause).__name__, message=str(cause)))
                continue
            again = self._score(list(range(start, start + size)), 1, outputs, prompts, group, deadline, tenant,
                                priority, scores, errors, components)
            errors += [httpapi.ItemError(index=i, reason=type(c).__name__, message=str(c)) for i, _, c in again]
        errors.sort(key=lambda e: e.index)
        return scores, errors, components

    def _score(self, indices: list[int], n: int, outputs: list, prompts: list[str], group, deadline: float, tenant,
               priority, scores: list, errors: list, components: dict) -> list[tuple[int, int, BaseException]]:
        """Send these items in batches of n at once; fill in what came back; return the batches that failed whole
        as (first index, size, cause)."""
        sent = []
        for k in range(0, len(indices), n):
            i, bid = indices[k], uuid.uuid4().hex
            size = min(n, len(indices) - k)
            sent.append((i, size, bid, self.actor.score_batch.remote(
                outputs[i:i + size], prompts[i:i + size], bid, group=group, tenant=tenant, priority=priority)))
        failed = []
        try:
            for start, size, _, ref in sent:
                remaining = deadline - time.monotonic()
                try:
                    got = self.get(ref, max(0.0, remaining))
                except TimeoutError:
                    raise Unavailable(_error(504, "the request's deadline passed before it was scored; its batches "
                                                  "still waiting were dropped")) from None
                except Exception as e:  # noqa: BLE001 (sorted below: the worker's refusals, or the batch's failure)
                    cause = unwrap(e)
                    unavailable = refusal(cause)
                    if unavailable is not None:
                        raise Unavailable(unavailable) from None
                    failed.append((start, size, cause))
                    continue
                for k, s in enumerate(got):
                    if isinstance(s, ScorerError):
                        errors.append(httpapi.ItemError(index=start + k, reason=s.kind or "ScorerError",
                                                        message=str(s)))
                        continue
                    if isinstance(s, dict) and COMPONENT_ERRORS_KEY in s:
                        s = dict(s)
                        components[start + k] = s.pop(COMPONENT_ERRORS_KEY)
                    scores[start + k] = s
        except Unavailable:
            self.actor.cancel.remote([bid for _, _, bid, _ in sent])  # those still waiting read nothing
            raise
        return failed


def refusal(cause: BaseException) -> Answer | None:
    """The worker refused the whole request for now (not the items' fault): the answer that says so."""
    if isinstance(cause, EngineUnavailable):  # before Overloaded, its base: another worker can take it now
        return _error(503, f"the worker's judge engine does not answer: {cause}", httpapi.REFUSED_ENGINE,
                      **{"Retry-After": str(RETRY_AFTER_SECONDS)})
    if isinstance(cause, Overloaded):
        return _error(429, f"the worker's queue is full: {cause}", httpapi.REFUSED_FULL,
                      **{"Retry-After": str(RETRY_AFTER_SECONDS)})
    if isinstance(cause, (Draining, Shadowing)):
        return _error(503, f"the worker takes no calls now: {cause}", httpapi.REFUSED_LEAVING,
                      **{"Retry-After": str(RETRY_AFTER_SECONDS)})
    if isinstance(cause, MasterUnreachable):
        return _error(503, f"the store master does not answer: {cause}", httpapi.REFUSED_STORE,
                      **{"Retry-After": str(RETRY_AFTER_SECONDS)})
    if isinstance(cause, Cancelled):
        return _error(504, "the request's deadline passed before it was scored")
    return None


def read_body(headers, rfile) -> bytes | Answer:
    """The request's body, or the answer that refuses it (no length, too large) without reading it. A chunked
    body (what proxies such as the API server's pod and service proxy forward) is read chunk by chunk, never past
    MAX_BODY_BYTES."""
    encoding = (headers.get("Transfer-Encoding") or "").strip().lower()
    if encoding == "chunked":
        return _read_chunked(rfile, httpapi.MAX_BODY_BYTES)
    if encoding:
        return _error(411, f"Transfer-Encoding {encoding!r} is not accepted: send a Content-Length or chunked body")
    try:
        length = int(headers.get("Content-Length", ""))
    except ValueError:
        return _error(411, "a Content-Length header is required")
    if length < 0:
        return _error(400, "Content-Length is negative")
    if length > httpapi.MAX_BODY_BYTES:
        return _too_large(length)
    return rfile.read(length)


def _too_large(length: int | str) -> Answer:
    return _error(413, f"the body has {length} bytes; at most {httpapi.MAX_BODY_BYTES} are accepted: send "
                       "fewer items per request, or stored outputs (refs) instead of inline media")


def _read_chunked(rfile, limit: int) -> bytes | Answer:
    """RFC 9112 chunked transfer coding: size lines (hex, extensions ignored), data, CRLF; a zero size, then
    trailers up to an empty line."""
    parts, total = [], 0
    while True:
        line = rfile.readline(1026)
        try:
            size = int(line.split(b";", 1)[0].strip(), 16)
        except ValueError:
            return _error(400, "a malformed chunk size in a chunked body")
        if size < 0:
            return _error(400, "a malformed chunk size in a chunked body")
        if size == 0:
            break
        total += size
        if total > limit:
            return _too_large(f"more than {limit}")
        data = rfile.read(size)
        if len(data) != size or rfile.read(2) != b"\r\n":
            return _error(400, "a chunked body ended early or without its CRLF")
        parts.append(data)
    for _ in range(64):  # trailers, up to the empty line
        if rfile.readline(8192) in (b"\r\n", b"\n", b""):
            break
    return b"".join(parts)


def unavailable() -> Answer:
    return _error(503, "the worker is not Ready to score (loading its model, or draining)", httpapi.REFUSED_LEAVING,
                  **{"Retry-After": str(RETRY_AFTER_SECONDS)})


def handle(path: str, body: bytes, scoring: Scoring | None, tenant: str = DEFAULT_TENANT) -> Answer:
    """One scoring request on this worker, from `tenant` (its token checked before the body was read)."""
    if scoring is None:
        return unavailable()
    try:
        if path == httpapi.SCORE_PATH:
            request = httpapi.parse_request(body)
            outputs, prompts = httpapi.to_outputs(request), request.prompts
            group, seconds, priority = request.group, request.deadline_seconds, request.priority
        else:
            outputs, prompts = httpapi.flow_grpo_request(httpapi.safe_loads(body))
            group, seconds, priority = None, None, "train"
    except httpapi.BadRequest as e:
        return _error(400, str(e))
    deadline = time.monotonic() + (seconds or DEFAULT_DEADLINE_SECONDS)
    depth = scoring.depth()
    try:
        scores, errors, components = scoring.score(outputs, prompts, group, deadline, tenant, priority)
    except Unavailable as u:
        return u.answer
    if path == httpapi.FLOW_GRPO_PATH:
        return Answer(200, httpapi.flow_grpo_reply(scores), "application/octet-stream")
    reply = httpapi.ScoreReply(scores=scores, version=scoring.version, errors=errors,
                               component_errors=components, queue_depth=depth)
    return Answer(200, reply.model_dump_json().encode())
