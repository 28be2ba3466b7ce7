"""`AsyncRewardPoolClient`: what an asyncio training loop awaits to score outputs through a RewardPool.

    client = AsyncRewardPoolClient("pickscore", namespace="rl")
    scores = await client.score(refs_or_tensors, prompts, timeout=600)

- **Split and spread.** A call is split into batches of the pool's scorer.batchSize (learned from a worker),
  dispatched at once and routed by `router.Router` (least outstanding work weighted by each worker's batch
  time; ties go to the least recently used worker, so even a caller scoring one batch at a time spreads).
  Results come back in input order.
- **Backpressure, not a hidden cap.** Every batch is sent as soon as some worker has room (a worker takes up
  to its advertised `max_queue` batches; past that it refuses with Overloaded). So the workers' queue depth,
  which the autoscaler reads, carries the caller's whole demand; only what no worker has room for waits
  here (`client.waiting`). While batches are out, the client follows the pool's membership and moves
  batches still waiting in a long queue to workers with room (one that joined after they were sent, or a
  faster one): the worker drops them before reading, and they are sent again (`client.moved`). So a
  scale-up helps the backlog already sent, and a draining worker's queue moves off it.
- **Per-sample results.** A sample that cannot be scored is a `SampleError` in its slot; the others are
  scored (a batch that fails for a non-transient reason is rescored one sample at a time, so one bad output
  does not take its batch down). `raise_errors=True` raises the first error instead.
- **Deadline.** `timeout` bounds the whole call: when it passes, the batches still out are cancelled on
  their workers (`ray.cancel`, and the worker drops any that has not started reading) and the call raises
  `TimeoutError` saying how many samples were left. Cancelling the awaiting task does the same.
- **Failures by type.** Draining and Overloaded workers are skipped without spending an attempt; a worker
  that could not read a batch's outputs (TransferFailed: its data path may be broken) is skipped for a while
  and another worker tries once; a worker whose batchSize is smaller than the split (a roll lowered it) has
  the batch split again by its size, and the client splits by that from then on; a worker
  that dies mid-batch is dropped and the batch goes to another (the outputs are still stored); after
  `attempts` such losses the batch's samples fail with PoolUnavailable. A pool with no eligible worker for
  `unavailable_seconds` fails the same way, or, when the call has a longer deadline, one with none until
  then (a recovering pool is waited for).

- **Dispatch** (`dispatch.Dispatcher`): one batch to one worker, accounted for in one try/finally; what a failed
  try means for its batch is one table (`dispatch.next_step`).
- **Shadow scoring.** While the pool shadows a new scorer version, each batch also goes to an idle shadow
  worker, and the call waits for it before it returns (`shadow.ShadowFanOut`); a shadow batch never fails a call.
- **Version and group pins** (`pins.GroupPins`): a call's batches all go to one scorer version, and so do the
  calls of one group, reserved at the group's first pick.

- **Only the scored frames of inline videos.** When every scorer of a worker picks frames by the frame rule
  (its ready() answer says how many each), an inline (C, F, H, W) tensor is cut to the union of the frames
  they pick before it is sent there (`frames.FrameSubset`), as the framework slices
  `generated_output[:, indices]` in its rollout process; each scorer then takes its own frames from it.

`score_detailed` returns a `ScoreReport` with the results, the deepest per-worker queue a batch of the call
joined (0: it waited behind nothing; miles records it under the pool's name in
`sample.reward_max_queue_depth`) and the inline bytes sent."""
from __future__ import annotations

import asyncio
import logging
import time
from collections import Counter
from dataclasses import dataclass, field

import ray

from ..contract import COMPONENT_ERRORS_KEY, ClientMetricNames, actor_prefix
from ..errors import BatchTooLarge, PoolUnavailable, SampleError, ScorerError, unwrap
from .dispatch import LOSSES, Dispatcher, Step, await_ref, next_step
from .pins import GroupPins, Pin, VersionGone
from .router import ANY, BATCH_RETRIES, SUSPECT_SECONDS, UNREACHABLE_COOLDOWN_SECONDS, Member, Router
from .shadow import ShadowFanOut

log = logging.getLogger("rewardpool.client")
TIMEOUTS = ClientMetricNames.TIMEOUTS.make()
SAMPLE_ERRORS = ClientMetricNames.SAMPLE_ERRORS.make()
OVERLOADED_COOLDOWN_SECONDS = 0.5
DEADLINE_GRACE = 0.2  # a worker that held a batch past the caller's deadline
STORE_RETRY_SECONDS = 0.5  # between tries of a batch whose worker could not reach the store master

@dataclass
class ScoreReport:
    results: list  # float | dict | SampleError, one per input, in order
    max_queue_depth: int = 0  # deepest queue (this client's batches ahead of one) on a worker it dispatched to
    sent_bytes: int = 0  # bytes of inline tensors sent, resends included (stored outputs are read by the workers)
    workers: Counter = field(default_factory=Counter)  # batches scored, per worker
    retries: int = 0  # batches sent again (worker lost, draining, overloaded)
    store_waits: int = 0  # tries that found the store master not answering, and waited
    version: str | None = None  # the scorer version that gave every score of this call
    versions: list = field(default_factory=list)  # per sample: the version that scored it (None: not scored)
    restarts: int = 0  # times the call was scored again because its version left the pool
    shadowed: int = 0  # samples also scored by a shadow version (spec.rollout.shadow), not returned
    # per sample index: {component: reason} of the optional components that refused it (their score is NaN)
    component_errors: dict = field(default_factory=dict)
    shadow_tasks: list = field(default_factory=list, repr=False)  # shadow batches the call waits for

    @property
    def errors(self) -> list[SampleError]:
        return [r for r in self.results if isinstance(r, SampleError)]


def patience(unavailable_seconds: float, none_since: float, deadline: float | None) -> float:
    """How long a pool may have no live worker before the call gives up: `unavailable_seconds`, or longer
    when the caller's deadline is further away (a pool recovering from a Ray head restart, say, comes back
    within it)."""
    return unavailable_seconds if deadline is None else max(unavailable_seconds, deadline - none_since)


class AsyncRewardPoolClient:
    def __init__(self, pool: str, namespace: str = "default", ray_namespace: str = "rewardpool", *,
                 refresh_seconds: float = 5.0, attempts: int = 4, batch_size: int | None = None,
                 timeout: float | None = None, unavailable_seconds: float = 30.0,
                 max_outstanding_per_worker: int | None = None, seed: int | None = None, shadow: bool = True):
        self.router = Router(actor_prefix(namespace, pool), ray_namespace, refresh_seconds, seed=seed)
        self.pool, self.namespace = pool, namespace
        self.attempts, self.batch_size, self.timeout = attempts, batch_size, timeout
        self.unavailable_seconds = unavailable_seconds
        self.max_outstanding = max_outstanding_per_worker  # None: each worker's advertised max_queue
        self.components: list[str] | None = None
        self.num_frames: dict[str, int | None] | None = None
        self.scorers: dict[str, str] = {}  # component -> its scorer (a built-in's name or a class path)
        self.scorer_args: dict[str, dict] = {}  # component -> its args
        self.groups = GroupPins(f"{namespace}/{pool}")  # the pins of the caller's groups
        self.shadows = ShadowFanOut(self.router, enabled=shadow)  # batches sent beside, to shadow workers
        self.dispatcher = Dispatcher(self.router, self.shadows, self._members)  # batches out, per worker
        self.transfer_retries = 0  # batches sent to another worker after a worker could not read their outputs

    # ---------------------------------------------------------------------------------------------------------
    @property
    def waiting(self) -> int:
        """Batches waiting here because no worker has room."""
        return self.dispatcher.waiting

    @property
    def moved(self) -> int:
        """Batches moved from a long queue to a worker with room."""
        return self.dispatcher.moved

    @property
    def served(self) -> Counter:
        return self.router.served

    @property
    def retries(self) -> int:
        return self.router.retries

    @property
    def store_outages(self) -> int:
        """Batch tries that found the store master not answering (a restart, a failover) and waited it out."""
        return self.router.store_outages

    async def refresh(self) -> list[str]:
        names = await asyncio.to_thread(self.router.refresh)
        self._probe_new()
        return names

    async def _members(self) -> None:
        if self.router.due():
            await asyncio.to_thread(self.router.refresh)
        self._probe_new()

    def _probe_new(self) -> None:
        now = time.monotonic()
        # new workers; and shadow workers again now and then: a promoted one takes calls
        for m in self.router.unready() + [m for m in self.router.shadows()
                                          if now - m.probed_at > self.router.refresh_seconds]:
            if not m.probing:
                m.probing = True
                asyncio.ensure_future(self._probe(m))

    async def _probe(self, m: Member) -> None:
        """A new worker becomes a candidate once it answers ready() (its constructor has finished)."""
        try:
            info = await asyncio.wrap_future(m.handle.ready.remote().future())
            m.draining = bool(info.get("draining"))
            m.frames = info.get("frames")
            m.version = info.get("version")
            m.shadow = bool(info.get("shadow"))
            m.probed_at = time.monotonic()
            m.ready = True
            self.dispatcher.wake()
        except Exception as e:  # noqa: BLE001 (gone while starting)
            log.info("%s did not come up: %s", m.name, type(e).__name__)
            self.router.drop(m.name)
        finally:
            m.probing = False

    async def _learn(self, deadline: float | None) -> None:
        """The pool's batch size and queue limit, from one worker's ready()."""
        if self.batch_size is not None and self.max_outstanding is not None and self.components is not None:
            return
        for lost in range(self.attempts + 1):
            m = await self._acquire(set(), deadline)
            try:
                info = await await_ref(m.handle.ready.remote(), deadline)
                break
            except ray.exceptions.RayActorError as e:  # gone before it answered: ask another
                self.router.drop(m.name)
                if lost == self.attempts:
                    raise PoolUnavailable(f"{self.namespace}/{self.pool}: workers died before answering") from e
            finally:
                self.router.done(m, None)
                self.dispatcher.wake()
        if self.batch_size is None:
            self.batch_size = int(info["batch_size"])
        if self.max_outstanding is None:
            self.max_outstanding = int(info.get("max_queue") or 64)
        self.router.max_outstanding = self.max_outstanding
        self.components = info.get("components") or []
        self.num_frames = info.get("num_frames")
        self.scorers, self.scorer_args = info.get("scorers") or {}, info.get("args") or {}

    async def describe(self, timeout: float | None = None) -> dict:
        """What the pool scores with, from one worker's ready(): its components (the keys of a mixture's results),
        each one's numFrames (None: every frame), scorer (built-in name or class path) and args."""
        await self._learn(None if timeout is None else time.monotonic() + timeout)
        return {"components": list(self.components or []), "num_frames": dict(self.num_frames or {}),
                "scorers": dict(self.scorers), "args": {k: dict(v) for k, v in self.scorer_args.items()}}

    async def _acquire(self, tried: set[str], deadline: float | None, pin: Pin | None = None) -> Member:
        """A worker for one batch, of the call's scorer version once it has one: wait for room (backpressure)
        or for the pool to have a live worker."""
        pin = pin or Pin()
        none_since = None
        while True:
            await self._members()
            m = self.router.pick(tried, pin.version)
            if m is not None:
                if pin.version is ANY:  # the call's first pick decides its version (no await in between)
                    pin.version = m.version
                return m
            if deadline is not None and time.monotonic() >= deadline:
                raise asyncio.TimeoutError
            if pin.version is not ANY and not self.router.versions()[pin.version] and self.router.versions():
                raise VersionGone(pin.version)  # other versions serve, this one no longer does
            if self.router.eligible(tried, pin.version):  # an eligible worker is full: wait for a batch to finish
                await self.dispatcher.wait_for_room(0.5)
                continue
            if tried:  # every worker was tried once: all are candidates again
                tried.clear()
                continue
            if self.router.unready():  # a worker is starting: wait for it, however long it loads
                none_since = None
                await asyncio.sleep(0.1)
                continue
            none_since = none_since or time.monotonic()
            if time.monotonic() - none_since > patience(self.unavailable_seconds, none_since, deadline):
                raise PoolUnavailable(f"no live worker of {self.namespace}/{self.pool} for "
                                      f"{self.unavailable_seconds:.0f}s (draining or unreachable: "
                                      f"{self.router.describe()})")
            await asyncio.to_thread(self.router.refresh)
            await asyncio.sleep(0.2)

    async def _score_batch(self, outputs: list, prompts: list[str], deadline: float | None,
                           report: ScoreReport, pin: Pin) -> list:
        """One batch on one worker of the call's version, moved to another when its worker drains, is full or
        dies (`dispatch.next_step` says which)."""
        tried: set[str] = set()
        lost = 0
        last: BaseException | None = None
        outage_since: float | None = None  # the store master stopped answering this batch's reads
        transfer_retried = False  # the batch went elsewhere once after a failed read
        while True:
            m = await self._acquire(tried, deadline, pin)
            try:
                return await self.dispatcher.send(m, outputs, prompts, pin.group, report, deadline)
            except (asyncio.TimeoutError, asyncio.CancelledError):
                raise
            except Exception as e:  # noqa: BLE001 (sorted by next_step)
                err, cause, step = e, unwrap(e), next_step(e, transfer_retried=transfer_retried)
            if step is Step.RESEND:
                continue
            if step is Step.WAIT_STORE:
                # A store outage (a master restart, an HA failover) is the pool's, not this worker's: the batch
                # waits it out, within the caller's deadline, and goes again (nothing was read).
                outage_since = outage_since or time.monotonic()
                if time.monotonic() - outage_since > patience(self.unavailable_seconds, outage_since, deadline):
                    raise cause
                log.warning("%s: the store master does not answer; batch waits and goes again", m.name)
                self.router.store_outages += 1
                report.store_waits += 1
                await asyncio.sleep(STORE_RETRY_SECONDS)
                continue
            if step is Step.RAISE:
                raise cause
            if step is Step.ELSEWHERE_ONCE:
                # Its own data path may be broken (a bad MTU, a duplicate address on its RoCE interface).
                log.warning("%s could not read the batch's outputs (%s); another worker tries", m.name, cause)
                self.router.exclude(m.name, SUSPECT_SECONDS)
                self.transfer_retries += 1
                transfer_retried = True
            elif step is Step.SKIP_DRAINING:
                log.info("%s is draining; batch goes elsewhere", m.name)
                self.router.mark_draining(m.name)
            elif step is Step.SKIP_SHADOW:
                log.info("%s shadows the serving version; batch goes elsewhere", m.name)
                self.router.mark_shadow(m.name)
            elif step is Step.BACK_OFF:
                self.router.exclude(m.name, OVERLOADED_COOLDOWN_SECONDS)
                await asyncio.sleep(0.05)
            elif step is Step.LOST_UNREACHABLE:
                log.warning("%s unreachable mid-batch; retrying elsewhere", m.name)
                self.router.exclude(m.name, UNREACHABLE_COOLDOWN_SECONDS)
            elif step is Step.LOST:
                log.warning("%s lost mid-batch; retrying elsewhere: %s", m.name, type(err).__name__)
                self.router.drop(m.name)
            if step in LOSSES:
                lost, last = lost + 1, err
            tried.add(m.name)
            report.retries += 1
            self.router.retries += 1
            BATCH_RETRIES.inc()
            if lost >= self.attempts:
                raise PoolUnavailable(f"batch lost its worker {lost} times (attempts={self.attempts})") from last

    async def _one_by_one(self, start: int, outputs: list, prompts: list[str], deadline: float | None,
                          report: ScoreReport, pin: Pin, e: BaseException) -> None:
        """A batch that failed: find the bad sample(s) by scoring one at a time, so the others still get theirs."""
        if len(outputs) == 1:
            report.results[start] = SampleError(start, e)
            return
        log.info("batch of %d failed (%s: %s); scoring its samples one by one", len(outputs), type(e).__name__, e)
        await asyncio.gather(*(self._score_chunk(start + i, [o], [p], deadline, report, pin)
                               for i, (o, p) in enumerate(zip(outputs, prompts))))

    async def _score_chunk(self, start: int, outputs: list, prompts: list[str], deadline: float | None,
                           report: ScoreReport, pin: Pin) -> None:
        try:
            scores = await self._score_batch(outputs, prompts, deadline, report, pin)
        except (asyncio.CancelledError, asyncio.TimeoutError, VersionGone):
            raise
        except PoolUnavailable as e:
            for i in range(len(outputs)):
                report.results[start + i] = SampleError(start + i, e)
            return
        except BatchTooLarge as e:
            if e.batch_size and e.batch_size < len(outputs):
                # A worker whose batchSize is smaller than this client split by (a roll lowered it): split
                # again by its size, and from now on, instead of scoring the samples one by one.
                if self.batch_size is None or e.batch_size < self.batch_size:
                    log.warning("%s/%s: a worker takes batches of %d (this client split by %s); splitting by %d "
                                "from now on", self.namespace, self.pool, e.batch_size, self.batch_size,
                                e.batch_size)
                    self.batch_size = e.batch_size
                n = e.batch_size
                await asyncio.gather(*(self._score_chunk(start + i, outputs[i:i + n], prompts[i:i + n], deadline,
                                                         report, pin) for i in range(0, len(outputs), n)))
                return
            await self._one_by_one(start, outputs, prompts, deadline, report, pin, e)
            return
        except Exception as e:  # noqa: BLE001
            await self._one_by_one(start, outputs, prompts, deadline, report, pin, e)
            return
        if len(scores) != len(outputs):
            err = RuntimeError(f"worker returned {len(scores)} scores for {len(outputs)} outputs")
            for i in range(len(outputs)):
                report.results[start + i] = SampleError(start + i, err)
            return
        # a sample the scorer refused comes back as its ScorerError: that sample fails, the others keep theirs;
        # an optional component's reasons (its score NaN) move from the result to the report
        for i, s in enumerate(scores):
            if isinstance(s, ScorerError):
                s = SampleError(start + i, s)
            elif isinstance(s, dict) and COMPONENT_ERRORS_KEY in s:
                s = dict(s)
                report.component_errors[start + i] = s.pop(COMPONENT_ERRORS_KEY)
            report.results[start + i] = s
        report.versions[start:start + len(outputs)] = [pin.version] * len(outputs)

    async def score_detailed(self, outputs: list, prompts: list[str], *, timeout: float | None = None,
                             raise_errors: bool = False, group: str | None = None) -> ScoreReport:
        """Score, with the details of how (see ScoreReport). Every score of one call comes from one scorer
        version; so do all calls that share `group` (a GRPO prompt group, a rollout) while that version has
        workers. When a call's version leaves the pool mid-call (a roll), the call is scored again, whole, on
        another version (the outputs are still stored: a pool client never releases them)."""
        if len(outputs) != len(prompts):
            raise ValueError(f"{len(outputs)} outputs but {len(prompts)} prompts")
        timeout = self.timeout if timeout is None else timeout
        started = time.monotonic()
        deadline = None if timeout is None else started + timeout
        if not outputs:
            return ScoreReport(results=[])
        try:
            await self._learn(deadline)
        except asyncio.TimeoutError:
            raise TimeoutError(f"{self.namespace}/{self.pool}: no worker answered within {timeout}s") from None
        pin, restarts = self.groups.pin(group, self.router.versions()), 0
        while True:
            try:
                report = await self._score_once(outputs, prompts, deadline, timeout, pin)
                break
            except VersionGone as e:
                restarts += 1
                log.warning("%s/%s: scorer version %s left the pool mid-call; scoring the call again on another "
                            "version (restart %d)", self.namespace, self.pool, e, restarts)
                if restarts > self.attempts:
                    raise PoolUnavailable(f"{self.namespace}/{self.pool}: the scorer version changed under the "
                                          f"call {restarts} times") from None
                pin = self.groups.repin(group, pin, self.router.versions())
        report.restarts = restarts
        report.version = pin.version if pin.version is not ANY else None
        SAMPLE_ERRORS.inc(len(report.errors))
        if raise_errors and report.errors:
            first = report.errors[0]
            raise first.cause
        return report

    @property
    def shadowed(self) -> int:
        """Samples scored by a shadow version beside the serving one."""
        return self.shadows.shadowed

    @property
    def shadow_failures(self) -> int:
        """Shadow batches that did not come back (never a call's failure)."""
        return self.shadows.failures

    @property
    def group_moves(self) -> int:
        """Groups moved to another version because theirs left the pool."""
        return self.groups.moves

    async def _score_once(self, outputs: list, prompts: list[str], deadline: float | None, timeout,
                          pin: Pin) -> ScoreReport:
        report = ScoreReport(results=[None] * len(outputs), versions=[None] * len(outputs))
        try:
            await self._score_all(outputs, prompts, deadline, timeout, pin, report)
            await self.shadows.end(report, deadline)
            return report
        finally:  # a call that raised (a deadline, its version gone, cancelled) leaves no shadow batch behind
            left = [t for t in report.shadow_tasks if not t.done()]
            for t in left:
                t.cancel()
            if left:
                await asyncio.gather(*left, return_exceptions=True)

    async def _score_all(self, outputs: list, prompts: list[str], deadline: float | None, timeout, pin: Pin,
                         report: ScoreReport) -> None:
        n = self.batch_size
        tasks = [asyncio.ensure_future(self._score_chunk(i, outputs[i:i + n], prompts[i:i + n], deadline, report,
                                                         pin))
                 for i in range(0, len(outputs), n)]
        try:
            # A moment past the deadline, so each batch sees its own timeout first (and marks its worker); the
            # first exception (a timeout, the version gone) ends the wait.
            done, pending = await asyncio.wait(tasks, return_when=asyncio.FIRST_EXCEPTION,
                                               timeout=None if deadline is None
                                               else max(0.0, deadline - time.monotonic()) + DEADLINE_GRACE)
        except asyncio.CancelledError:
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            raise
        failed = [t.exception() for t in done if not t.cancelled() and t.exception() is not None]
        if pending:  # the deadline passed, or a batch raised
            for t in pending:
                t.cancel()
            await asyncio.gather(*pending, return_exceptions=True)
        gone = [e for e in failed if isinstance(e, VersionGone)]
        timed_out = any(isinstance(e, asyncio.TimeoutError) for e in failed)
        if gone and not timed_out:
            raise gone[0]
        if pending or timed_out:
            left = sum(1 for r in report.results if r is None)
            TIMEOUTS.inc()
            raise TimeoutError(f"{self.namespace}/{self.pool}: {left} of {len(outputs)} samples not scored within "
                               f"the {timeout}s deadline; their batches were cancelled on the workers")
        if failed:  # a bug here, not a sample's failure
            raise failed[0]
        self.dispatcher.idle()

    async def score(self, outputs: list, prompts: list[str], *, timeout: float | None = None,
                    raise_errors: bool = False, group: str | None = None) -> list:
        """Scores in input order: a float per sample (a dict `{component..., "weighted": sum}` for a pool
        with several scorers), or a SampleError for a sample that could not be scored. All from one scorer
        version (and, with `group`, the version the group's earlier calls had, while it has workers)."""
        return (await self.score_detailed(outputs, prompts, timeout=timeout, raise_errors=raise_errors,
                                          group=group)).results
