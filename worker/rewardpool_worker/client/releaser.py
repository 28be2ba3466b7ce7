"""`Releaser`: removes each stored output from the store exactly once, after its last reward.

- `expect(refs, rewards=N, rollout=R)`: each output gets N rewards before it may go (a per-sample reward and a
  group reward: 2), and belongs to rollout R (media keep-N counts per rollout).
- `rewarded(refs, token=...)`: one reward arrived for each ref. The last one releases it. With a `token` (the
  reward's name, a call id) a repeated call (a retry after a lost answer) is recognised and changes nothing.
- `failed(refs)`: these samples will get no (more) rewards (their scoring failed, the group was dropped):
  release them now, whatever they were still waiting for; counted in `stats.failed_released`.

Every call checks all its refs before it changes anything: an unexpected, duplicate or unknown ref raises
ValueError and leaves the Releaser as it was, so nothing is half-marked. A ref is claimed under the lock
before its remove runs, so concurrent callers never remove the same output twice. The first `media_keep`
outputs of each rollout to be released (not failed ones) are read back as tensors before the remove and handed
over once (`take_media(rollout)`). A failed media read or remove is counted, never raised.

Memory stays flat over a run of any length: what the Releaser keeps of an output after its release (its key
and reward tokens, so a retried call is recognised and a second release refused) is forgotten when its rollout
ends (`end_rollout`) and in any case beyond the newest RELEASED_MEMORY outputs; media not taken is kept for the
newest MEDIA_ROLLOUTS rollouts only; a remove's later check is given up after CONFIRM_GIVE_UP_SECONDS of a
master that does not answer (counted, and a metric).

A caller that crashes between scoring and release leaves its outputs in the store. They are found by key:
give every output of a run a key prefix of its own (e.g. `<run id>/r<rollout>/<sample>`), and after a
restart call `sweep(master_http, prefix)` (or `sweep_stale`), which lists the master's keys through its HTTP
`/get_all_keys` (the metrics port, 9003 by default) and removes those under the prefix that this Releaser is
not waiting on. Mooncake keeps an object until it is removed or evicted above the high watermark, so without
a sweep a stale output costs store capacity until eviction.

A highly available master (`etcd://`, op log on) acknowledges a remove once its op-log entry is queued, before
it is durable in etcd; a leader that dies in that window comes back, on the standby that takes over, with the
output still there. So against such a master every remove is confirmed once, `confirm_after` seconds later
(longer than a failover takes): the next call that finds confirmations due asks the master whether those keys
exist and removes again any that do (`stats.resurrected`). `settle()` waits for and does the outstanding
confirmations (the end of a run)."""
from __future__ import annotations

import logging
import threading
import time
import urllib.request
from collections import Counter, OrderedDict, deque
from dataclasses import dataclass, field

from ..contract import ClientMetricNames

from ..records import OutputRef
from ..store import LeaseHeld, MasterUnreachable, ObjectNotFound, Store, StoreError

log = logging.getLogger("rewardpool.client")

# In the training job's process (its default registry): releases happen here, not in the workers.
OUTAGE_RETRY_SECONDS = 0.5
# A leader failover takes ~10 s here (3 missed pings, then the new leader's 5 s warm-up); an op-log entry is
# durable within milliseconds unless etcd itself is failing.
CONFIRM_AFTER_SECONDS = 30.0
CONFIRM_GIVE_UP_SECONDS = 600.0  # a master that answers no check for this long: the check is abandoned (counted)
RELEASED_MEMORY = 65536  # released outputs remembered (a duplicate reward for one is refused as "already released")
MEDIA_ROLLOUTS = 4  # rollouts whose media is kept until taken (older ones' is dropped: a caller that never takes it)
MEDIA_BUDGETS = 1024  # rollouts whose media budget is remembered without end_rollout
RELEASES = ClientMetricNames.RELEASES.make()
RELEASE_FAILURES = ClientMetricNames.RELEASE_FAILURES.make()
MEDIA_FAILURES = ClientMetricNames.MEDIA_FAILURES.make()
SWEPT = ClientMetricNames.SWEPT.make()
CONFIRMS_ABANDONED = ClientMetricNames.CONFIRMS_ABANDONED.make()


@dataclass
class ReleaseStats:
    released: int = 0
    release_failures: int = 0
    already_gone: int = 0  # of release_failures: the master had no such object (evicted, or a put a failover lost)
    lease_forced: int = 0
    media_kept: int = 0
    media_failures: int = 0
    failed_released: int = 0  # of `released` + `release_failures`: samples released through failed()
    duplicates: int = 0  # repeated calls (same token, or failed() on a released sample) that changed nothing
    swept: int = 0
    outage_retries: int = 0  # removes tried again because the store master did not answer
    confirmed: int = 0  # removes checked again later against a highly available master
    resurrected: int = 0  # of those, outputs a leader failover brought back: removed again
    confirms_abandoned: int = 0  # checks given up: the master did not answer for CONFIRM_GIVE_UP_SECONDS
    media_dropped: int = 0  # media samples dropped because their rollout's media was never taken


def list_keys(master_http: str, timeout: float = 10.0) -> list[str]:
    """Every key the master holds, from its HTTP admin endpoint (host:port of the metrics server)."""
    url = master_http if master_http.startswith("http") else f"http://{master_http}"
    with urllib.request.urlopen(f"{url}/get_all_keys", timeout=timeout) as r:
        return [k for k in r.read().decode().splitlines() if k]


def sweep_stale(store: Store, master_http: str, prefix: str, keep: set[str] = frozenset()) -> list[str]:
    """Remove every stored output under `prefix` not in `keep` (force: a crashed reader's lease protects no
    one). Only for a prefix nobody is still using. Returns the keys removed."""
    if not prefix:
        raise ValueError("a sweep needs a key prefix (an empty one would remove every output in the store)")
    removed = []
    for key in list_keys(master_http):
        if key.startswith(prefix) and key not in keep:
            try:
                store.remove(key, force=True)
                removed.append(key)
            except ObjectNotFound:
                pass
            except StoreError as e:
                log.warning("sweep: remove of %s failed: %s", key, str(e))
    SWEPT.inc(len(removed))
    return removed


@dataclass
class Releaser:
    """Counts rewards down per output key and releases each output exactly once, after its last reward."""
    store: Store
    media_keep: int = 0  # per rollout
    reader: object = None  # a RegisteredTensorReader (or anything with read(ref)) for media read-back
    outage_seconds: float = 60.0  # how long a release waits for a store master that does not answer
    confirm_after: float = CONFIRM_AFTER_SECONDS
    confirm_removals: bool | None = None  # None: when the master is highly available (store.follows_leader)
    stats: ReleaseStats = field(default_factory=ReleaseStats)

    def __post_init__(self):
        self._lock = threading.Lock()
        self._pending: Counter[str] = Counter()
        self._refs: dict[str, OutputRef] = {}
        self._rollout: dict[str, object] = {}
        self._tokens: dict[str, set] = {}  # pending key -> the reward tokens counted for it
        # released key -> (its rollout, its tokens): a retried call is recognised, a second release refused;
        # forgotten at end_rollout and beyond RELEASED_MEMORY (oldest first)
        self._released: OrderedDict[str, tuple[object, frozenset]] = OrderedDict()
        self._media_slots: OrderedDict[object, int] = OrderedDict()
        self._media_by_rollout: OrderedDict[object, list[tuple[str, object]]] = OrderedDict()
        if self.confirm_removals is None:
            self.confirm_removals = bool(getattr(self.store, "follows_leader", False))
        # (when removed, key, when first asked and not answered), oldest first
        self._unconfirmed: deque[tuple[float, str, float | None]] = deque()

    @staticmethod
    def _unique(refs: list[OutputRef]) -> None:
        seen = Counter(r.key for r in refs)
        dup = [k for k, n in seen.items() if n > 1]
        if dup:
            raise ValueError(f"refs listed twice in one call: {dup[:5]}")

    def expect(self, refs: list[OutputRef], rewards: int = 1, rollout: object = None) -> None:
        """Each ref will get `rewards` more rewards before it may be released."""
        if rewards < 1:
            raise ValueError("rewards must be at least 1")
        self._unique(refs)
        with self._lock:
            for r in refs:  # check all before changing anything
                if r.key in self._released:
                    raise ValueError(f"{r.key!r} was already released")
                if r.key in self._rollout and self._rollout[r.key] != rollout:
                    raise ValueError(f"{r.key!r} is pending in rollout {self._rollout[r.key]!r}, not {rollout!r}")
            for r in refs:
                self._pending[r.key] += rewards
                self._refs[r.key] = r
                self._rollout[r.key] = rollout

    def _claim(self, key: str, media: list, due: list, failed: bool) -> None:
        """Caller holds the lock: `key` is released by this call and no other."""
        self._pending.pop(key, None)
        rollout = self._rollout.pop(key)
        self._released[key] = (rollout, frozenset(self._tokens.pop(key, ())))
        while len(self._released) > RELEASED_MEMORY:
            self._released.popitem(last=False)
        ref = self._refs.pop(key)
        if not failed and self.media_keep > 0:
            if rollout not in self._media_slots:
                self._media_slots[rollout] = self.media_keep
                while len(self._media_slots) > MEDIA_BUDGETS:
                    self._media_slots.popitem(last=False)
            if self._media_slots[rollout] > 0:
                self._media_slots[rollout] -= 1
                media.append((ref, rollout))
        due.append(ref)

    def rewarded(self, refs: list[OutputRef], token: object = None) -> list[str]:
        """One reward arrived for each ref; release those whose last reward this was. Returns released keys."""
        self._unique(refs)
        due, media = [], []
        with self._lock:
            fresh = []
            for r in refs:  # check all before changing anything
                if token is not None and (token in self._tokens.get(r.key, ())
                                          or token in self._released.get(r.key, (None, ()))[1]):
                    continue  # this reward was counted already (a retried call)
                if self._pending.get(r.key, 0) <= 0:
                    what = "was already released" if r.key in self._released else "was never expected"
                    raise ValueError(f"{r.key!r} got a reward it was not expecting: it {what}")
                fresh.append(r)
            self.stats.duplicates += len(refs) - len(fresh)
            for r in fresh:
                if token is not None:
                    self._tokens.setdefault(r.key, set()).add(token)
                self._pending[r.key] -= 1
                if self._pending[r.key] == 0:
                    self._claim(r.key, media, due, failed=False)
        self._finish(media, due, failed=False)
        self._confirm_due()
        return [r.key for r in due]

    def failed(self, refs: list[OutputRef]) -> list[str]:
        """These samples get no more rewards: release them now. A sample already released is counted as a
        duplicate and left alone; one never expected raises (before anything changes)."""
        self._unique(refs)
        due: list = []
        with self._lock:
            for r in refs:
                if r.key not in self._released and r.key not in self._pending:
                    raise ValueError(f"{r.key!r} was never expected")
            for r in refs:
                if r.key in self._released:
                    self.stats.duplicates += 1
                    continue
                self._claim(r.key, [], due, failed=True)
        self._finish([], due, failed=True)
        self._confirm_due()
        return [r.key for r in due]

    def _finish(self, media: list, due: list, failed: bool) -> None:
        for ref, rollout in media:
            self._keep_media(ref, rollout)
        for r in due:
            self._remove(r.key, failed)

    def take_media(self, rollout: object = None) -> list[tuple[str, object]]:
        """The kept media samples of a rollout, handed over once (the Releaser keeps no reference to them)."""
        with self._lock:
            return self._media_by_rollout.pop(rollout, [])

    def end_rollout(self, rollout: object) -> None:
        """A finished rollout: forget its media budget, media not taken, and its released outputs (a reward for
        one of them after this is refused as never expected, as for any output this Releaser does not know)."""
        with self._lock:
            self._media_slots.pop(rollout, None)
            self.stats.media_dropped += len(self._media_by_rollout.pop(rollout, []))
            for key in [k for k, (r, _) in self._released.items() if r == rollout]:
                del self._released[key]

    def _keep_media(self, ref: OutputRef, rollout: object) -> None:
        try:
            tensor = self.reader.read(ref)
            with self._lock:
                self._media_by_rollout.setdefault(rollout, []).append((ref.key, tensor))
                self._media_by_rollout.move_to_end(rollout)
                while len(self._media_by_rollout) > MEDIA_ROLLOUTS:  # never taken: dropped, oldest first
                    _, dropped = self._media_by_rollout.popitem(last=False)
                    self.stats.media_dropped += len(dropped)
                self.stats.media_kept += 1
        except Exception as e:  # media is best effort: never fail the rollout for it
            log.warning("media read of %s failed: %s", ref.key, str(e))
            with self._lock:
                self.stats.media_failures += 1
            MEDIA_FAILURES.inc()

    def _remove(self, key: str, failed: bool = False) -> None:
        """Remove once. A read in the last `lease` seconds (the scoring read, a media read, even is_exist)
        leaves a lease that makes a plain remove fail with OBJECT_HAS_LEASE. Every read of this output has
        finished by now (its last reward is in), so the lease protects nobody: remove with force, and count it,
        instead of stalling the rollout for the lease or leaving the output in the store."""
        if failed:
            with self._lock:
                self.stats.failed_released += 1
        try:
            self._remove_through_outage(key)
            with self._lock:
                self.stats.released += 1
                if self.confirm_removals:
                    self._unconfirmed.append((time.monotonic(), key, None))
            RELEASES.inc()
            return
        except ObjectNotFound:
            # evicted, removed elsewhere, or (highly available master) a put the failover lost after it was read
            log.warning("release of %s: already gone from the store (evicted or removed elsewhere)", key)
            with self._lock:
                self.stats.already_gone += 1
        except StoreError as e:
            log.warning("release of %s failed: %s", key, str(e))
        with self._lock:
            self.stats.release_failures += 1
        RELEASE_FAILURES.inc()

    def _remove_through_outage(self, key: str) -> None:
        """A master that does not answer (restarting, failing over) is waited for up to `outage_seconds`: an
        output given up on here would stay in the store for good."""
        since = time.monotonic()
        while True:
            try:
                try:
                    self.store.remove(key)
                except LeaseHeld:
                    with self._lock:
                        self.stats.lease_forced += 1
                    self.store.remove(key, force=True)
                return
            except MasterUnreachable:
                if time.monotonic() - since > self.outage_seconds:
                    raise
                with self._lock:
                    self.stats.outage_retries += 1
                time.sleep(OUTAGE_RETRY_SECONDS)

    def _confirm_due(self) -> None:
        """Check the removes made `confirm_after` seconds ago (see the module's notes). Keys the master gives
        no answer for wait for the next call; each key is checked by one caller at a time."""
        if not self.confirm_removals:
            return
        now = time.monotonic()
        with self._lock:
            due = []
            while self._unconfirmed and now - self._unconfirmed[0][0] >= self.confirm_after:
                due.append(self._unconfirmed.popleft())
        if not due:
            return
        keys = [k for _, k, _ in due]
        try:
            present = self.store.batch_exists(keys)
        except Exception as e:  # noqa: BLE001 (the call's own releases are done: never fail it for a check)
            log.warning("checking %d earlier removes failed, asking again later: %s", len(keys), str(e))
            present = [None] * len(keys)
        back = [k for k, there in zip(keys, present) if there]
        # not answered: asked again by the next call, until CONFIRM_GIVE_UP_SECONDS after the first try
        unanswered = [(t, k, first if first is not None else now) for (t, k, first), there in zip(due, present)
                      if there is None]
        kept = [d for d in unanswered if now - d[2] < CONFIRM_GIVE_UP_SECONDS]
        abandoned = len(unanswered) - len(kept)
        if abandoned:
            log.warning("gave up checking %d earlier removes: the store master answered no check for %.0fs",
                        abandoned, CONFIRM_GIVE_UP_SECONDS)
            CONFIRMS_ABANDONED.inc(abandoned)
        with self._lock:
            self._unconfirmed.extendleft(reversed(kept))
            self.stats.confirmed += len(keys) - len(unanswered)
            self.stats.resurrected += len(back)
            self.stats.confirms_abandoned += abandoned
        for key in back:
            log.warning("release of %s: a store leader failover brought it back; removing it again", key)
            try:
                self._remove_through_outage(key)
                with self._lock:  # a second failover could undo this one too
                    self._unconfirmed.append((time.monotonic(), key, None))
            except ObjectNotFound:
                pass
            except StoreError as e:
                log.warning("removing %s again failed: %s", key, str(e))
                with self._lock:
                    self.stats.release_failures += 1
                RELEASE_FAILURES.inc()

    def settle(self, timeout: float | None = None) -> int:
        """Wait for the outstanding remove confirmations and do them (the end of a run). Returns how many are
        still unconfirmed (0 unless `timeout` ran out, e.g. the master stayed away)."""
        end = None if timeout is None else time.monotonic() + timeout
        while True:
            self._confirm_due()
            with self._lock:
                left = len(self._unconfirmed)
                oldest = self._unconfirmed[0][0] if left else 0.0
            now = time.monotonic()
            if not left or (end is not None and now >= end):
                return left
            # until the oldest is due; a master that did not answer is asked again every OUTAGE_RETRY_SECONDS
            wait = max(oldest + self.confirm_after - now, OUTAGE_RETRY_SECONDS)
            time.sleep(wait if end is None else min(wait, end - now))

    def sweep(self, master_http: str, prefix: str) -> list[str]:
        """After a crash: remove outputs under `prefix` left in the store that this Releaser is not waiting on."""
        with self._lock:
            keep = set(self._pending)
        removed = sweep_stale(self.store, master_http, prefix, keep)
        with self._lock:
            self.stats.swept += len(removed)
        return removed

    @property
    def pending(self) -> int:
        with self._lock:
            return len(self._pending)
