"""The worker's Ray actor: one per pod, named `rewardpool:<namespace>/<pool>:<pod>` so pool clients find it,
and pinned to the pod's own Ray node (with the pod's GPUs as its num_gpus). It owns the store client, the
registered readers and the scorer(s), and it is Ready only once all three work: the store answered, the
buffers are registered, the model is loaded and one warm-up forward has run."""
from __future__ import annotations

import hashlib
import hmac
import logging
import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import ray

from ..contract import (ANNOTATIONS_FILE, GROUP_ACTIVE_SECONDS, READ_SLOTS, SHADOW_ANNOTATION, Agreement,
                        WorkerConfig, scorer_version)
from ..errors import Draining, Forbidden, ModelUnavailable, Shadowing
from ..records import OutputRef
from ..scorers import build_scorers, frames_declared
from ..scorers.base import option
from ..scorers.mixture import WEIGHTED
from ..store import Store, StoreError
from .fairslots import DEFAULT_TENANT
from .network import parse_annotations_file
from .models import weight_bytes
from .reader import ALIGN, RegisteredTensorReader
from .slots import StoredOutputRewardActor

log = logging.getLogger("rewardpool.worker")
# Calls beyond the first wait inside the actor (for a read slot), so in_flight is the true queue depth.
MAX_CONCURRENCY = 64
# Batches accepted at once; one more is refused with Overloaded, answered at once from one of the threads
# kept spare above it (so a refusal does not wait unseen in Ray's own queue). A client sends each worker at
# most this many (it reads it from ready()); only several clients together can meet the refusal.
MAX_QUEUE = MAX_CONCURRENCY - 8
# Health and stats calls run in their own threads: a backlog of 64 waiting batches must not starve them
# (that would read as a wedged worker and get a healthy pod restarted).
CONTROL = "control"
CONCURRENCY_GROUPS = {CONTROL: 4}
STORE_PROBE_KEY = "rewardpool-readiness-probe"  # never put: is_exist on it is a round trip to the master
STORE_PROBE_SECONDS = 5.0
SHADOW_READ_SECONDS = 1.0  # how often the pod's annotations file is read for the shadow annotation


def model_digest(cfg: WorkerConfig) -> str:
    """sha256 of the contents of every model and processor directory (or file) the scorers load, with each
    file's path relative to its root: a new checkpoint written to the same path is a new scorer version. A
    path that is not on disk (a hub id a custom scorer resolves itself) counts by its name."""
    h = hashlib.sha256()
    paths = sorted({p for c in cfg.components for p in (c.model_path, c.processor_path) if p})
    for root in map(Path, paths):
        h.update(f"root {root}\n".encode())
        files = sorted(f for f in root.rglob("*") if f.is_file()) if root.is_dir() else [root] * root.is_file()
        for f in files:
            h.update(f"file {f.relative_to(root) if root.is_dir() else f.name}\n".encode())
            with open(f, "rb") as fh:
                for chunk in iter(lambda: fh.read(1 << 20), b""):
                    h.update(chunk)
    return h.hexdigest()


def headline(score) -> float:
    """The one number a result agrees on: a single scorer's score, a mixture's weighted sum."""
    return float(score[WEIGHTED] if isinstance(score, dict) else score)


class RewardWorker:
    def __init__(self, cfg_json: str, local_hostname: str, annotations_file: str | None = None,
                 control_key: str | None = None):
        self.cfg = WorkerConfig.from_json(cfg_json)
        # drain and promote change what the worker serves: only the pod's entrypoint (which drew this key, and is
        # itself reached with the pool's control token) may call them, not any driver of the Ray cluster
        self._control_key = control_key
        # the pod's Downward API annotations: SHADOW_ANNOTATION there puts this worker in shadow (read before
        # the actor is named, so no client sees it serve first)
        self._annotations_file = annotations_file or os.environ.get("REWARDPOOL_ANNOTATIONS_FILE", ANNOTATIONS_FILE)
        self._shadow, self._shadow_read = self._read_shadow(), time.monotonic()
        self._promoted = False  # the operator's POST /promote: before the kubelet refreshes the file
        self.agreement: dict[str, Agreement] = {}  # serving version -> the pairs of its scores and this one's
        cap = self.cfg.read_buffer_max_bytes
        # Start-up as a critical path: the store client with its registered read buffers, and the digest of the
        # weights' files, run beside the weight load (none needs another; the digest's hashing and the store's
        # registration leave the GIL), so the actor is as slow as the slowest of them, not their sum.
        started = time.perf_counter()
        with ThreadPoolExecutor(2, thread_name_prefix="start") as ex:
            connecting = ex.submit(self._connect, local_hostname, cap, started)
            digesting = ex.submit(self._digest, started)
            try:
                self.scorer = build_scorers(self.cfg)
                self.load_seconds = time.perf_counter() - started
                self.version = scorer_version(self.cfg.scorer_version, digesting.result())
            except (OSError, ValueError, RuntimeError, EOFError, KeyError) as e:  # files that are not a model
                paths = ", ".join(sorted({c.model_path for c in self.cfg.components if c.model_path})) or "(none)"
                connecting.cancel()
                raise ModelUnavailable(f"the model at {paths} does not load: {type(e).__name__}: "
                                       f"{str(e)[:300]}") from e
            self.store, self.readers = connecting.result()  # its own failure, raised as itself
        log.info("scorer version %s; in parallel: weights loaded in %.2fs, files digested in %.2fs, store client "
                 "and read buffers in %.2fs", self.version, self.load_seconds, self.digest_seconds,
                 self.store_seconds)
        self.weight_bytes = weight_bytes(self.cfg)
        # inline outputs held at once: at most what the read slots hold (the formula counts the slots, so a pool
        # fed inline tensors can hold that much again; README, "Inline outputs")
        self.actor = StoredOutputRewardActor(self.scorer, self.readers, batch_size=self.cfg.scorer.batch_size,
                                             max_batch_bytes=cap, wedge_floor_seconds=self.cfg.wedge_floor_seconds,
                                             max_queue=MAX_QUEUE, component=self.cfg.components[0].component,
                                             max_inline_bytes=READ_SLOTS * cap)
        self.actor.warm_up()
        self.actor.score_log.clear()  # the warm-up forward's scores are no one's
        log.info("model loaded in %.2fs, warm-up forward %.2fs", self.load_seconds, self.actor.warmup_seconds)
        self.draining = False
        self._groups: dict[str, float] = {}  # caller group -> when its last batch arrived
        self._groups_lock = threading.Lock()
        self._store_ok, self._store_error, self._probed = False, "not probed yet", 0.0
        self._probe()
        # Probed from its own thread: a master that stops answering must make the worker unready, and must
        # not stall the stats calls that liveness depends on (an unready worker is left alone, a dead one
        # is restarted: a store outage is not a reason to restart every worker).
        threading.Thread(target=self._probe_forever, daemon=True, name="store-probe").start()

    def _connect(self, local_hostname: str, cap: int, started: float):
        """The store client and its registered read buffers (one per read slot, warmed: registered now)."""
        store = Store.connect(self.cfg.store, local_hostname)
        # The cap leaves room for the 64-byte alignment of each output in the buffer.
        readers = [RegisteredTensorReader(store, initial_bytes=self.cfg.read_buffer_bytes,
                                          max_bytes=cap + ALIGN * self.cfg.scorer.batch_size if cap else 0)
                   for _ in range(READ_SLOTS)]
        for r in readers:
            r.warm()
        self.store_seconds = time.perf_counter() - started
        return store, readers

    def _digest(self, started: float) -> str:
        digest = model_digest(self.cfg)
        self.digest_seconds = time.perf_counter() - started
        return digest

    def _read_shadow(self) -> bool:
        try:
            return SHADOW_ANNOTATION in parse_annotations_file(Path(self._annotations_file).read_text())
        except (OSError, ValueError):  # no file (not under a kubelet), or a partial write: as before
            return getattr(self, "_shadow", False)

    def shadow(self) -> bool:
        """In shadow while the pod carries SHADOW_ANNOTATION (read at most every SHADOW_READ_SECONDS), until
        promoted."""
        if self._promoted:
            return False
        if time.monotonic() - self._shadow_read >= SHADOW_READ_SECONDS:
            was, self._shadow, self._shadow_read = self._shadow, self._read_shadow(), time.monotonic()
            if was and not self._shadow:
                log.info("scorer version %s takes traffic (shadow annotation removed)", self.version)
        return self._shadow

    def _authorize(self, key: str | None, what: str) -> None:
        if self._control_key is None or key is None or not hmac.compare_digest(str(key), self._control_key):
            log.warning("refused %s over Ray: not this pod's entrypoint's key", what)
            raise Forbidden(f"{self.cfg.pool}: {what} is for this pod's entrypoint only (the operator drains and "
                            "promotes a worker through its HTTP, with the pool's control token)")

    @ray.method(concurrency_group=CONTROL)
    def set_tenant_weights(self, weights: dict[str, int], key: str | None = None) -> None:
        """The tenants' shares of the read slots, as the operator last sent them (spec.access.tenants)."""
        self._authorize(key, "set_tenant_weights")
        self.actor.set_tenant_weights(weights)

    @ray.method(concurrency_group=CONTROL)
    def promote(self, key: str | None = None) -> bool:
        """This version takes traffic now; returns whether the worker was in shadow."""
        self._authorize(key, "promote")
        was, self._promoted = self.shadow(), True
        if was:
            log.info("scorer version %s takes traffic (promoted)", self.version)
        return was

    def _probe(self) -> None:
        try:
            self.store.exists(STORE_PROBE_KEY)
            self._store_ok, self._store_error = True, None
        except StoreError as e:
            self._store_ok, self._store_error = False, str(e)
        self._probed = time.monotonic()

    def _probe_forever(self) -> None:
        while True:
            time.sleep(STORE_PROBE_SECONDS)
            self._probe()

    def _store_reachable(self) -> bool:
        """The master answered the last probe, and that probe is recent (a hung probe counts as no answer)."""
        if time.monotonic() - self._probed > 3 * STORE_PROBE_SECONDS:
            self._store_error = f"the master has not answered a probe for {time.monotonic() - self._probed:.0f}s"
            return False
        return self._store_ok

    @ray.method(concurrency_group=CONTROL)
    def ready(self) -> dict:
        """Readiness, computed: the master answers now, every read buffer is registered (when sized), the
        model is loaded and its warm-up forward ran."""
        sized = self.cfg.read_buffer_bytes > 0
        return {"store": self._store_reachable(), "store_error": self._store_error,
                "buffer_registered": all(r.stats.registrations > 0 for r in self.readers) or not sized,
                "model_loaded": self.scorer is not None, "load_seconds": self.load_seconds,
                # beside the weight load, from the same start: the store client and buffers, the files' digest
                "store_seconds": self.store_seconds, "digest_seconds": self.digest_seconds,
                "weight_bytes": self.weight_bytes,
                "warmup_seconds": self.actor.warmup_seconds, "batch_size": self.cfg.scorer.batch_size,
                "max_queue": MAX_QUEUE, "components": [c.component for c in self.cfg.components],
                "num_frames": {c.component: c.num_frames for c in self.cfg.components},
                # what each component is and its args (never a secret: those are refused in args), for callers
                # that check the pool against their own flags (the miles hook's --hps-version)
                "scorers": {c.component: c.ref for c in self.cfg.components},
                "args": {c.component: dict(c.args) for c in self.cfg.components},
                "frames": frames_declared(self.scorer) if self.scorer is not None else None,
                "draining": self.draining, "shadow": self.shadow(), "version": self.version, "score_ranges": score_ranges(self.scorer,
                                                                                               self.cfg),
                "store_hostname": self.store.hostname}

    def score_batch(self, outputs: list, prompts: list[str], batch_id=None, group: str | None = None,
                    tenant: str = DEFAULT_TENANT, priority: str = "train") -> list:
        """Scores in order. Raises (typed, see errors.py) Draining, Overloaded, Cancelled, ScorerError, the
        store's errors (ObjectNotFound, ...) and BatchTooLarge. `group`: the caller's group key (the client
        pins a group to one scorer version), counted in stats' active_groups; `tenant` and `priority`: the job
        calling and why, for its fair share of the read slots (fairslots.py)."""
        if self.draining:
            raise Draining(f"{self.cfg.pool}: worker is draining")
        if self.shadow():
            raise Shadowing(f"{self.cfg.pool}: worker shadows the serving scorer version (version {self.version})")
        if group is not None:
            with self._groups_lock:
                self._groups[group] = time.monotonic()
        return self.actor.score_batch(outputs, prompts, batch_id, tenant=tenant, priority=priority)

    def shadow_batch(self, outputs: list, prompts: list[str], batch_id=None) -> list:
        """A batch a client scores here beside the serving version (the same stored outputs): scores in order,
        for the client to pair with the serving version's (record_agreement). Taken in shadow or not (a client
        may still send one just after the version took traffic); refused only while draining."""
        if self.draining:
            raise Draining(f"{self.cfg.pool}: worker is draining")
        return self.actor.score_batch(outputs, prompts, batch_id)

    @ray.method(concurrency_group=CONTROL)
    def record_agreement(self, serving_version: str, serving: list, own: list) -> int:
        """Add the pairs (serving version's score, this worker's) of one shadow batch; returns the pairs held
        against that version."""
        acc = self.agreement.setdefault(str(serving_version), Agreement())
        for x, y in zip(serving, own):
            if isinstance(x, BaseException) or isinstance(y, BaseException):
                continue  # a sample either version refused agrees on nothing
            acc.add(headline(x), headline(y))
        return acc.n

    def _active_groups(self) -> int:
        cut = time.monotonic() - GROUP_ACTIVE_SECONDS
        with self._groups_lock:
            for g in [g for g, t in self._groups.items() if t < cut]:
                del self._groups[g]
            return len(self._groups)

    @ray.method(concurrency_group=CONTROL)
    def cancel(self, batch_ids: list) -> int:
        """The caller's deadline passed: batches still waiting here are dropped before they read."""
        return self.actor.cancel(batch_ids)

    def read_outputs(self, refs: list[OutputRef]):
        """Read outputs back as tensors (media logging)."""
        return self.actor.read_copies(refs)

    @ray.method(concurrency_group=CONTROL)
    def drain(self, key: str | None = None) -> dict:
        self._authorize(key, "drain")
        if not self.draining:
            self.draining = True
            try:  # outputs stop landing in this worker's segment; what is there stays readable
                self.store.stop_placements()
            except StoreError as e:  # the drain goes on: the operator still waits for the segment to empty
                log.warning("could not stop placements in this worker's segment: %s", e)
        return self.stats()

    @ray.method(concurrency_group=CONTROL)
    def stats(self) -> dict:
        return {**self.actor.stats(), "draining": self.draining, "store_ok": self._store_reachable(),
                "active_groups": self._active_groups(), "shadow": self.shadow(),
                "agreement": {v: a.model_dump() for v, a in self.agreement.items()}}

    @ray.method(concurrency_group=CONTROL)
    def memory(self, reset_peak: bool = False) -> dict:
        """This process's resident memory now and at its peak (bytes), from /proc."""
        return process_memory(reset_peak)


def score_ranges(scorer, cfg: WorkerConfig) -> dict[str, tuple[float, float]]:
    """Each logged component's usual score range (the score histogram's buckets): a mixture's components, and
    its weighted sum's range from theirs."""
    parts = getattr(scorer, "components", None)
    if not isinstance(parts, list):
        return {cfg.components[0].component: tuple(option(scorer, "score_range"))}
    out = {name: tuple(option(s, "score_range")) for name, _, s in parts}
    ends = [(w * out[n][0], w * out[n][1]) for n, w, _ in parts]
    out[WEIGHTED] = (sum(min(e) for e in ends), sum(max(e) for e in ends))
    return out


def process_memory(reset_peak: bool = False) -> dict:
    """VmRSS and VmHWM of this process. `reset_peak` restarts the peak (Linux clear_refs 5)."""
    if reset_peak:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    fields = {}
    with open("/proc/self/status") as f:
        for line in f:
            key, _, value = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                fields[key] = int(value.split()[0]) * 1024
    return {"rss": fields.get("VmRSS", 0), "peak_rss": fields.get("VmHWM", 0)}


NAME_TAKEN_SECONDS = 60.0  # how long a new actor waits for this pod's earlier one to let go of its name
NAME_RETRY_SECONDS = 0.5


def local_node_strategy():
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    return NodeAffinitySchedulingStrategy(node_id=ray.get_runtime_context().get_node_id(), soft=False)


def start_actor(cfg: WorkerConfig, pod_name: str, local_hostname: str, annotations_file: str | None = None,
                control_key: str | None = None):
    """Create this pod's named actor on this node; returns its handle once constructed. `control_key`: what its
    drain and promote must be called with (the entrypoint draws it; None: they are refused)."""
    cls = ray.remote(concurrency_groups=CONCURRENCY_GROUPS)(RewardWorker)
    name = cfg.actor_name(pod_name)
    deadline = time.monotonic() + NAME_TAKEN_SECONDS
    while True:
        try:
            handle = cls.options(name=name, namespace=cfg.ray.namespace, max_concurrency=MAX_CONCURRENCY,
                                 num_cpus=0, num_gpus=cfg.scorer.gpus,
                                 scheduling_strategy=local_node_strategy()).remote(cfg.to_json(), local_hostname,
                                                                                   annotations_file, control_key)
            break
        except ValueError as e:  # ray.exceptions.ActorAlreadyExistsError: the name is still registered
            if time.monotonic() > deadline:
                raise
            # This pod's own earlier actor (its container restarted: the old process is gone or going, and the
            # Ray cluster has not noticed yet). The pod's name is this pod's alone, so it is ours to end: kill
            # it and take the name, instead of crashing until the cluster frees it (the container's next restart).
            log.warning("the actor name %s is still taken (%s): ending this pod's earlier actor", name, e)
            try:
                ray.kill(ray.get_actor(name, namespace=cfg.ray.namespace), no_restart=True)
            except ValueError:  # gone in between
                pass
            time.sleep(NAME_RETRY_SECONDS)
    ray.get(handle.ready.remote())
    return handle
