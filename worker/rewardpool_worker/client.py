"""What the training job imports: score stored outputs through a RewardPool, and release them.

`RewardPoolClient` finds the pool's live actors by name in Ray, sends each batch to the actor with the least
outstanding work, refreshes membership as the pool scales, and retries a batch on another actor when one
dies or drains: nothing is lost, because outputs stay in the store until they are released. A call with more
outputs than the pool's scorer.batchSize (which the actors refuse: their memory holds one batch per read
slot) is split into batches of that size, scored concurrently, and the results joined in order. A pool with
several scorers returns one dict per output, `{component..., "weighted": sum}`.

`Releaser` removes each output exactly once, after its last reward (a sample scored by several reward
models, or a group reward, counts down to zero first), keeping the first N scored samples for media logging
(read back as tensors before the remove). A failed media read or remove is counted, never raised."""
from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from dataclasses import dataclass, field

import ray
from prometheus_client import Counter as PromCounter

from .records import OutputRef
from .store import LeaseHeld, ObjectNotFound, Store, StoreError

log = logging.getLogger("rewardpool.client")


# In the training job's process (its default registry): releases happen here, not in the workers.
RELEASES = PromCounter("rewardpool_client_releases", "Outputs released from the store after their last reward")
RELEASE_FAILURES = PromCounter("rewardpool_client_release_failures", "Releases that failed (counted, not raised)")
MEDIA_FAILURES = PromCounter("rewardpool_client_media_failures", "Media read-backs that failed")
BATCH_RETRIES = PromCounter("rewardpool_client_batch_retries", "Batches retried on another actor")


class PoolUnavailable(RuntimeError):
    pass


@dataclass
class _Member:
    name: str
    handle: object
    outstanding: int = 0


class RewardPoolClient:
    def __init__(self, pool: str, namespace: str = "default", ray_namespace: str = "rewardpool",
                 refresh_seconds: float = 5.0, attempts: int = 4, batch_size: int | None = None):
        self.prefix = f"rewardpool:{namespace}/{pool}:"
        self.ray_namespace, self.refresh_seconds, self.attempts = ray_namespace, refresh_seconds, attempts
        self.batch_size = batch_size  # None: learned from the actors (their scorer.batchSize)
        self._members: dict[str, _Member] = {}
        self._lock = threading.Lock()
        self._refreshed = 0.0
        self.retries = 0
        self.served: Counter[str] = Counter()  # batches scored, per actor name

    # membership ------------------------------------------------------------------------------------------------
    def refresh(self) -> list[str]:
        names = sorted(n["name"] if isinstance(n, dict) else n
                       for n in ray.util.list_named_actors(all_namespaces=True)
                       if (n["namespace"] if isinstance(n, dict) else self.ray_namespace) == self.ray_namespace
                       and (n["name"] if isinstance(n, dict) else n).startswith(self.prefix))
        with self._lock:
            for gone in set(self._members) - set(names):
                del self._members[gone]
            for name in names:
                if name not in self._members:
                    try:
                        self._members[name] = _Member(name, ray.get_actor(name, namespace=self.ray_namespace))
                    except ValueError:  # died between the listing and the lookup
                        continue
            self._refreshed = time.monotonic()
            return list(self._members)

    def members(self) -> list[str]:
        if time.monotonic() - self._refreshed > self.refresh_seconds or not self._members:
            self.refresh()
        return list(self._members)

    def _pick(self, exclude: set[str]) -> _Member:
        self.members()
        with self._lock:
            live = [m for m in self._members.values() if m.name not in exclude]
            if not live:
                raise PoolUnavailable(f"no live actor for {self.prefix}* (tried {sorted(exclude) or 'none'})")
            m = min(live, key=lambda m: (m.outstanding, m.name))
            m.outstanding += 1
            return m

    def _drop(self, name: str) -> None:
        with self._lock:
            self._members.pop(name, None)

    # scoring ---------------------------------------------------------------------------------------------------
    def _batch_limit(self) -> int:
        """The pool's batch size, asked of one actor; an actor that died (a crashed worker container) or does
        not answer is dropped and the next one asked, like a batch."""
        last: Exception | None = None
        for _ in range(self.attempts):
            if self.batch_size is not None:
                break
            try:
                member = self._pick(set())
            except PoolUnavailable:
                self.refresh()
                member = self._pick(set())
            try:
                self.batch_size = int(ray.get(member.handle.ready.remote(), timeout=60)["batch_size"])
            except (ray.exceptions.RayActorError, ray.exceptions.ActorUnavailableError,
                    ray.exceptions.GetTimeoutError) as e:
                log.warning("actor %s did not answer ready; asking another: %s", member.name, type(e).__name__)
                self._drop(member.name)
                last = e
            finally:
                member.outstanding -= 1
        if self.batch_size is None:
            raise PoolUnavailable(f"no actor answered ready in {self.attempts} attempts") from last
        return self.batch_size

    def score(self, outputs: list, prompts: list[str]) -> list:
        """Score outputs: one batch per scorer.batchSize outputs, concurrently, results in order."""
        if len(outputs) != len(prompts):
            raise ValueError(f"{len(outputs)} outputs but {len(prompts)} prompts")
        if not outputs:
            return []
        n = self._batch_limit()
        if len(outputs) <= n:
            return self._score_batch(outputs, prompts)
        from concurrent.futures import ThreadPoolExecutor

        if not hasattr(self, "_splits"):  # its own threads: a split never waits on the submit() pool
            self._splits = ThreadPoolExecutor(16, thread_name_prefix="rewardpool-split")
        parts = [self._splits.submit(self._score_batch, outputs[i:i + n], prompts[i:i + n])
                 for i in range(0, len(outputs), n)]
        return [s for p in parts for s in p.result()]

    def _score_batch(self, outputs: list, prompts: list[str]) -> list:
        """Score one batch; on an actor that died or drains, retry on another (the outputs are still stored)."""
        tried: set[str] = set()
        last: Exception | None = None
        for _ in range(self.attempts):
            try:
                member = self._pick(tried)
            except PoolUnavailable:
                self.refresh()  # the pool may have scaled since: look again, all members eligible
                tried.clear()
                member = self._pick(tried)
            try:
                scores = ray.get(member.handle.score_batch.remote(outputs, prompts))
                self.served[member.name] += 1
                return scores
            except (ray.exceptions.RayActorError, ray.exceptions.ActorUnavailableError) as e:
                log.warning("actor %s lost mid-batch; retrying elsewhere: %s", member.name, type(e).__name__)
                self._drop(member.name)
                last = e
            except ray.exceptions.RayTaskError as e:
                if "Draining" not in str(e):
                    raise
                log.info("actor %s is draining; retrying elsewhere", member.name)
                self._drop(member.name)
                last = e
            finally:
                member.outstanding -= 1
            tried.add(member.name)
            self.retries += 1
            BATCH_RETRIES.inc()
        raise PoolUnavailable(f"batch failed on {self.attempts} actors") from last

    def submit(self, outputs: list, prompts: list[str]):
        """Score asynchronously in a thread; returns a concurrent.futures.Future."""
        from concurrent.futures import ThreadPoolExecutor

        if not hasattr(self, "_pool"):
            self._pool = ThreadPoolExecutor(16, thread_name_prefix="rewardpool-client")
        return self._pool.submit(self.score, outputs, prompts)


@dataclass
class ReleaseStats:
    released: int = 0
    release_failures: int = 0
    lease_forced: int = 0
    media_kept: int = 0
    media_failures: int = 0


@dataclass
class Releaser:
    """Counts rewards down per output key and releases each output exactly once, after its last reward."""
    store: Store
    media_keep: int = 0
    reader: object = None  # a RegisteredTensorReader for media read-back
    stats: ReleaseStats = field(default_factory=ReleaseStats)

    def __post_init__(self):
        self._lock = threading.Lock()
        self._pending: Counter[str] = Counter()
        self._refs: dict[str, OutputRef] = {}
        self._released: set[str] = set()
        self.media: list[tuple[str, object]] = []  # (key, tensor) of the kept media samples
        self._media_slots = self.media_keep

    def expect(self, refs: list[OutputRef], rewards: int = 1) -> None:
        """Register that each ref will get `rewards` more rewards before it may be released."""
        with self._lock:
            for r in refs:
                if r.key in self._released:
                    raise ValueError(f"{r.key!r} was already released")
                self._pending[r.key] += rewards
                self._refs[r.key] = r

    def rewarded(self, refs: list[OutputRef]) -> list[str]:
        """One reward arrived for each ref; release those whose last reward this was. Returns released keys."""
        due, media = [], []
        with self._lock:
            for r in refs:
                if self._pending[r.key] <= 0:
                    raise ValueError(f"{r.key!r} got a reward it was not expecting")
                self._pending[r.key] -= 1
                if self._pending[r.key] == 0:
                    del self._pending[r.key]
                    self._released.add(r.key)  # claimed under the lock: no other thread releases it
                    if self._media_slots > 0:
                        self._media_slots -= 1
                        media.append(self._refs[r.key])
                    due.append(self._refs.pop(r.key))
        for r in media:
            self._keep_media(r)
        for r in due:
            self._remove(r.key)
        return [r.key for r in due]

    def _keep_media(self, ref: OutputRef) -> None:
        try:
            tensor = self.reader.read(ref)
            with self._lock:
                self.media.append((ref.key, tensor))
                self.stats.media_kept += 1
        except Exception as e:  # media is best effort: never fail the rollout for it
            log.warning("media read of %s failed: %s", ref.key, e)
            with self._lock:
                self.stats.media_failures += 1
            MEDIA_FAILURES.inc()

    def _remove(self, key: str) -> None:
        """Remove once. A read in the last `lease` seconds (the scoring read, a media read, even is_exist)
        leaves a lease that makes a plain remove fail with OBJECT_HAS_LEASE. Every read of this output has
        finished by now (its last reward is in), so the lease protects nobody: remove with force, and count it,
        instead of stalling the rollout for the lease or leaving the output in the store."""
        try:
            try:
                self.store.remove(key)
            except LeaseHeld:
                with self._lock:
                    self.stats.lease_forced += 1
                self.store.remove(key, force=True)
            with self._lock:
                self.stats.released += 1
            RELEASES.inc()
            return
        except ObjectNotFound:
            log.warning("release of %s: already gone from the store (evicted or removed elsewhere)", key)
        except StoreError as e:
            log.warning("release of %s failed: %s", key, e)
        with self._lock:
            self.stats.release_failures += 1
        RELEASE_FAILURES.inc()

    @property
    def pending(self) -> int:
        with self._lock:
            return len(self._pending)
