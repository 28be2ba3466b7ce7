"""Dispatch: one batch to one worker, and what a failure there means.

- `send()` sends a batch to a worker and accounts for it in one try/finally: the batch is in the worker's queue
  (`queued`) from the send to its end, whatever the end (scores, an error, a deadline, a cancellation); the
  router hears its time once; a caller waiting for room is woken; a shadow batch sent beside it learns the
  serving side's scores or that there are none.
- `next_step()` is the table of what a failed try means for its batch (`Step`), pure: moved off a long queue
  (send again, free), the store master down (wait it out), a worker that could not read (another tries once),
  draining, shadowing, full, unreachable, gone, or the batch's own failure (raised).
- The dispatcher owns the batches out per worker and moves batches still waiting in a long queue to workers with
  room (`rebalance`): a scale-up helps the backlog already sent, and a draining worker's queue moves off it."""
from __future__ import annotations

import asyncio
import enum
import logging
import time
import uuid
from typing import Awaitable, Callable

import ray
import torch

from ..contract import READ_SLOTS
from ..errors import Cancelled, Draining, Overloaded, Shadowing, unwrap
from ..frames import inline_bytes, subset
from ..store import MasterUnreachable, TransferFailed
from .router import SUSPECT_SECONDS, Member, Router, cancel_remote
from .shadow import ShadowFanOut

log = logging.getLogger("rewardpool.client")


class Step(enum.Enum):
    RESEND = "resend"  # taken back from a long queue before it was read: send again, no attempt spent
    WAIT_STORE = "wait_store"  # the store master did not answer (a restart, a failover): wait, send again
    ELSEWHERE_ONCE = "elsewhere_once"  # this worker could not read the outputs: another worker tries once
    SKIP_DRAINING = "skip_draining"  # the worker drains: skipped until it leaves, the batch goes elsewhere
    SKIP_SHADOW = "skip_shadow"  # the worker shadows the serving version: only shadow batches go to it
    BACK_OFF = "back_off"  # the worker is full: skipped a moment
    LOST_UNREACHABLE = "lost_unreachable"  # unreachable mid-batch: skipped a while, an attempt spent
    LOST = "lost"  # the worker died: dropped, an attempt spent
    RAISE = "raise"  # the batch's own failure (a scorer error, a batch too large, a second failed read)


# The steps that spend one of the batch's attempts (the others cost nothing but time).
LOSSES = frozenset({Step.LOST_UNREACHABLE, Step.LOST})


class Moved(Exception):
    """A batch this client took back from a worker's long queue (the worker dropped it unread)."""


def next_step(e: BaseException, *, transfer_retried: bool) -> Step:
    """What a try that raised `e` means for its batch. `transfer_retried`: the batch already went elsewhere once
    after a failed read."""
    cause = unwrap(e)
    if isinstance(cause, Moved):
        return Step.RESEND
    if isinstance(cause, MasterUnreachable):
        return Step.WAIT_STORE
    if isinstance(cause, TransferFailed):
        # A second failure is the outputs' (their segment's owner gone), not this worker's.
        return Step.RAISE if transfer_retried else Step.ELSEWHERE_ONCE
    if isinstance(cause, Draining):
        return Step.SKIP_DRAINING
    if isinstance(cause, Shadowing):
        return Step.SKIP_SHADOW
    if isinstance(cause, Overloaded):
        return Step.BACK_OFF
    if isinstance(e, ray.exceptions.ActorUnavailableError):  # a subclass of RayActorError: asked first
        return Step.LOST_UNREACHABLE
    if isinstance(e, ray.exceptions.RayActorError):
        return Step.LOST
    return Step.RAISE


class Dispatcher:
    def __init__(self, router: Router, shadows: ShadowFanOut, members: Callable[[], Awaitable[None]]):
        self.router, self.shadows, self._members = router, shadows, members
        self.queued: dict[str, dict[str, float]] = {}  # per worker: batch id -> when sent, not finished
        self.moved_ids: set[str] = set()  # batch ids taken back from a worker's queue, to be sent elsewhere
        self.moved = 0  # batches moved from a long queue to a worker with room
        self.waiting = 0  # batches waiting here because no worker has room
        self._room: asyncio.Event | None = None
        self._rebalancer: asyncio.Task | None = None

    # room ----------------------------------------------------------------------------------------------------
    def wake(self) -> None:
        """A batch finished or a worker joined: callers waiting for room look again."""
        if self._room is not None:
            self._room.set()
            self._room = None

    async def wait_for_room(self, seconds: float) -> None:
        if self._room is None:
            self._room = asyncio.Event()
        self.waiting += 1
        try:
            await asyncio.wait_for(self._room.wait(), seconds)
        except asyncio.TimeoutError:
            pass
        finally:
            self.waiting -= 1

    # one batch, one worker -------------------------------------------------------------------------------------
    async def send(self, m: Member, outputs: list, prompts: list[str], group: str | None, report,
                   deadline: float | None) -> list:
        """The batch's scores from worker `m`, or its exception. Whatever the end, the batch leaves the worker's
        queue and the router hears its time once (a deadline prices it at the time it took and makes the worker
        suspect: a hung worker costs the deadline once)."""
        batch_id = uuid.uuid4().hex
        depth = m.outstanding  # this client's batches there, this one included
        # the queue this batch joined, as the framework's own pool counts it: 0 when it waited behind nothing
        report.max_queue_depth = max(report.max_queue_depth, depth - 1)
        t0 = time.monotonic()
        elapsed = None
        # inline videos cut to the frames this worker's scorers pick (its own ready() answer: during a roll two
        # workers may pick differently)
        sent = [subset(o, m.frames) if m.frames and isinstance(o, torch.Tensor) else o for o in outputs]
        report.sent_bytes += sum(inline_bytes(o) for o in sent)
        ref = (m.handle.score_batch.remote(sent, prompts, batch_id, group=group) if group is not None
               else m.handle.score_batch.remote(sent, prompts, batch_id))
        shadow = self.shadows.send(m, outputs, prompts, report)
        del sent
        self.queued.setdefault(m.name, {})[batch_id] = t0
        self._ensure_rebalancer()
        try:
            scores = await await_ref(ref, deadline)
            # The worker's time per batch: the wait behind this client's own batches there taken out (a worker
            # that had a long queue is not thereby slow).
            elapsed = (time.monotonic() - t0) / depth
            report.workers[m.name] += 1
            self.router.served[m.name] += 1
            if shadow is not None and not shadow.done():
                shadow.set_result((m.version, scores))
            return scores
        except (asyncio.TimeoutError, asyncio.CancelledError) as e:
            cancel_remote(m, ref, batch_id)
            if isinstance(e, asyncio.TimeoutError) or (deadline is not None and time.monotonic() >= deadline):
                elapsed = time.monotonic() - t0  # the call's deadline (seen first or by the gather)
                self.router.exclude(m.name, SUSPECT_SECONDS)
            raise
        except Exception as e:  # noqa: BLE001 (the caller sorts it with next_step)
            if isinstance(unwrap(e), Cancelled) and batch_id in self.moved_ids:
                raise Moved(m.name) from None  # taken back by rebalance() before it was read
            raise
        finally:
            if shadow is not None and not shadow.done():
                shadow.set_result(None)  # the serving batch failed: nothing to compare with
            self.moved_ids.discard(batch_id)
            if self.queued.get(m.name, {}).pop(batch_id, None) is not None:
                self.router.done(m, elapsed)
                self.wake()

    # moving waiting batches ------------------------------------------------------------------------------------
    def _ensure_rebalancer(self) -> None:
        if self._rebalancer is None or self._rebalancer.done():
            self._rebalancer = asyncio.ensure_future(self._rebalance_loop())

    def idle(self) -> None:
        """Nothing out: no task left behind on the loop."""
        if not any(self.queued.values()) and self._rebalancer is not None:
            self._rebalancer.cancel()
            self._rebalancer = None

    async def _rebalance_loop(self) -> None:
        """While batches are out: follow the pool's membership, and move batches still waiting in a long queue to
        workers with room (a worker that joined after the batches were sent, or one that drained its queue
        faster). The waiting batches are cancelled on their worker (it drops a batch only before reading it; one
        already reading finishes there) and sent again through the router."""
        period = max(0.2, min(self.router.refresh_seconds, 2.0))
        while any(self.queued.values()):
            await asyncio.sleep(period)
            try:
                await self._members()
                self.rebalance()
            except Exception as e:  # noqa: BLE001 (never kill the loop over a listing hiccup)
                log.debug("rebalance: %s", e)

    def rebalance(self, running: int = READ_SLOTS) -> None:
        members = {m.name: m for m in self.router.snapshot()}
        takers = [m for m in members.values() if m.ready and not m.draining and not m.shadow]
        if not takers:
            return
        total = sum(len(q) for q in self.queued.values())
        fair = -(-total // len(takers))  # ceil
        room = sum(max(0, fair - m.outstanding) for m in takers if m.outstanding + 1 < fair)
        for name, queue in self.queued.items():
            m = members.get(name)
            if room <= 0 or m is None:
                continue
            keep = 0 if m.draining else max(fair, running)
            excess = [b for b in sorted(queue, key=queue.get) if b not in self.moved_ids][keep:]
            excess = excess[:room]
            if excess:
                self.moved_ids.update(excess)
                room -= len(excess)
                self.moved += len(excess)
                m.handle.cancel.remote(excess)


async def await_ref(ref, deadline: float | None):
    fut = asyncio.wrap_future(ref.future())
    remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
    return await asyncio.wait_for(fut, remaining)
