"""Shadow fan-out: while the pool shadows a new scorer version (spec.rollout.shadow), each batch a call sends to a
serving worker also goes, when a shadow worker has none of this client's batches, to that shadow worker at the same
time (the same stored outputs, read by each; an inline tensor is sent to both). The call returns the serving
version's scores only, after its shadow batches end (so no shadow read outlives the call the caller releases
after), and the shadow worker is told both scores to report the agreement the operator shows. A shadow batch that
fails costs the call nothing."""
from __future__ import annotations

import asyncio
import logging
import time
import uuid

import ray
import torch

from ..errors import unwrap
from ..frames import inline_bytes, subset
from .router import SUSPECT_SECONDS, UNREACHABLE_COOLDOWN_SECONDS, Member, Router, cancel_remote

log = logging.getLogger("rewardpool.client")
SHADOW_GRACE_SECONDS = 30.0  # how long a call waits for its shadow batches after its own are scored


class ShadowFanOut:
    def __init__(self, router: Router, enabled: bool = True):
        self.router, self.enabled = router, enabled
        self.shadowed = 0  # samples scored by a shadow version beside the serving one
        self.failures = 0  # shadow batches that did not come back

    def send(self, m: Member, outputs: list, prompts: list[str], report) -> asyncio.Future | None:
        """Send the batch also to an idle shadow worker, if the pool has one; returns the future the serving side
        resolves with (its version, its scores) or None (its batch failed), or None when no shadow batch went."""
        if not self.enabled:
            return None
        s = self.router.pick_shadow(m.version)
        if s is None:
            return None
        sid = uuid.uuid4().hex
        sent = [subset(o, s.frames) if s.frames and isinstance(o, torch.Tensor) else o for o in outputs]
        report.sent_bytes += sum(inline_bytes(o) for o in sent)
        ref = s.handle.shadow_batch.remote(sent, prompts, sid)
        serving = asyncio.get_running_loop().create_future()
        report.shadow_tasks.append(asyncio.ensure_future(self._finish(s, ref, sid, serving, report)))
        return serving

    async def _finish(self, s: Member, ref, sid: str, serving: asyncio.Future, report) -> None:
        """The shadow batch's end: its scores and the serving version's go to the shadow worker as pairs."""
        try:
            own = await asyncio.wrap_future(ref.future())
            got = await serving
            if got is not None and len(got[1]) == len(own):
                s.handle.record_agreement.remote(got[0], got[1], own)
                report.shadowed += len(own)
                self.shadowed += len(own)
        except asyncio.CancelledError:  # past its grace, or the call ended: skipped a while (it may hang)
            cancel_remote(s, ref, sid)
            self.router.exclude(s.name, SUSPECT_SECONDS)
            raise
        except Exception as e:  # noqa: BLE001 (a shadow batch never fails the call)
            self.failures += 1
            log.info("shadow batch on %s failed: %s: %s", s.name, type(unwrap(e)).__name__, str(unwrap(e))[:200])
            if isinstance(e, ray.exceptions.RayActorError) and not isinstance(e, ray.exceptions.ActorUnavailableError):
                self.router.drop(s.name)
            else:
                self.router.exclude(s.name, UNREACHABLE_COOLDOWN_SECONDS)
        finally:
            self.router.done(s, None)

    async def end(self, report, deadline: float | None) -> None:
        """Wait for the call's shadow batches (their reads must end before the caller releases the outputs), at
        most SHADOW_GRACE_SECONDS past the serving batches and never past the deadline; one still out then is
        cancelled (by the caller's cleanup), and its worker skipped for a while."""
        if not report.shadow_tasks:
            return
        limit = SHADOW_GRACE_SECONDS if deadline is None else min(SHADOW_GRACE_SECONDS,
                                                                  max(0.0, deadline - time.monotonic()))
        _, late = await asyncio.wait(report.shadow_tasks, timeout=limit)
        if late:
            self.failures += len(late)
            log.warning("%d shadow batch(es) still out %.0fs after the call's batches; cancelled", len(late), limit)
