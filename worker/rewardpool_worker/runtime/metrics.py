"""Prometheus metrics of a worker, served on /metrics (names in the contract, contract.WorkerMetricNames;
releases are counted where they happen: in the pool client's process). The actor process keeps the counts;
the entrypoint copies them into these collectors once a second (the HTTP server lives in the entrypoint)."""
from __future__ import annotations

from prometheus_client import CollectorRegistry

from ..contract import WorkerMetricNames as N
from ..contract import score_buckets


class WorkerMetrics:
    def __init__(self, scorer: str = "default"):
        self.registry = r = CollectorRegistry()
        self.scorer = scorer  # the `scorer` label: the scorer's name, or the mixture's names joined by "+"
        self.queue_depth = N.QUEUE_DEPTH.make(r)
        self.pending_bytes = N.PENDING_BYTES.make(r)
        self.inline_bytes = N.INLINE_BYTES.make(r)
        self.read_seconds = N.OUTPUT_READ_SECONDS.make(r)
        self.score_seconds = N.OUTPUT_SCORE_SECONDS.make(r)
        self.batch_size = N.BATCH_SIZE.make(r)
        self.queue_wait = N.QUEUE_WAIT_SECONDS.make(r)
        self.scored = N.SCORED_OUTPUTS.make(r)
        self.batches = N.BATCHES.make(r)
        self.refused = N.REFUSED_BATCHES.make(r)
        self.bytes_read = N.READ_BYTES.make(r)
        self.tenant_depth = N.TENANT_QUEUE_DEPTH.make(r)
        self.tenant_batches = N.TENANT_BATCHES.make(r)
        self.tenant_wait = N.TENANT_QUEUE_WAIT_SECONDS.make(r)
        self.store_reads = N.STORE_READS.make(r)
        self.store_reads.labels("ok"), self.store_reads.labels("failed")  # both series at 0 from the start
        self.registrations = N.BUFFER_REGISTRATIONS.make(r)
        self.holding = N.READ_SLOTS_IN_USE.make(r)
        self.buffer_bytes = N.READ_BUFFER_BYTES.make(r)
        self.draining = N.DRAINING.make(r)
        self.active_groups = N.ACTIVE_GROUPS.make(r)
        self.model_busy = N.MODEL_BUSY_SECONDS.make(r)
        self.warmup_seconds = N.WARMUP_SECONDS.make(r)
        self.load_seconds = N.MODEL_LOAD_SECONDS.make(r)
        self.scored.labels(scorer)  # present at 0 before the first batch: a dashboard's rate() has a series
        self.score_seconds.labels(scorer)
        self._last: dict = {}
        self.score = self.score_squares = None  # made at startup(), from the scorers' score ranges
        self.version = "unknown"

    def startup(self, ready: dict) -> None:
        self.warmup_seconds.set(ready.get("warmup_seconds") or 0.0)
        self.load_seconds.set(ready.get("load_seconds") or 0.0)
        # The score series exist (at 0) from Ready on, per component and this worker's scorer version, so a
        # window's increase() starts from the first score.
        self.version = ready.get("version") or "unknown"
        ranges = {k: tuple(v) for k, v in (ready.get("score_ranges") or {}).items()} or {"score": (0.0, 1.0)}
        if self.score is None:
            self.score = N.SCORE.make(self.registry, buckets=score_buckets(list(ranges.values())))
            self.score_squares = N.SCORE_SQUARES.make(self.registry)
        for component in ranges:
            self.score.labels(component, self.version)
            self.score_squares.labels(component, self.version)

    def update(self, stats: dict) -> None:
        """Fold an actor stats snapshot in (counters advance by the difference since the last one)."""
        self.queue_depth.set(stats["queue_depth"])
        self.pending_bytes.set(stats["pending_bytes"])
        self.inline_bytes.set(stats.get("inline_bytes", 0))
        self.draining.set(1 if stats["draining"] else 0)
        self.active_groups.set(stats.get("active_groups", 0))
        self.holding.set(stats.get("holding", 0))
        self.buffer_bytes.set(stats.get("buffer_bytes", 0))
        self.model_busy.set(stats.get("model_busy_seconds", 0.0))
        for name, counter in (("bytes_read", self.bytes_read), ("batches", self.batches),
                              ("refused", self.refused), ("registrations", self.registrations),
                              ("outputs", self.scored.labels(self.scorer)),
                              ("reads_ok", self.store_reads.labels("ok")),
                              ("read_failures", self.store_reads.labels("failed"))):
            delta = stats.get(name, 0) - self._last.get(name, 0)
            if delta > 0:
                counter.inc(delta)
        waiting = stats.get("tenants_waiting") or {}
        for tenant in set(waiting) | set(stats.get("tenants_served") or {}):
            self.tenant_depth.labels(tenant).set(waiting.get(tenant, 0))
            delta = (stats.get("tenants_served") or {}).get(tenant, 0) \
                - (self._last.get("tenants_served") or {}).get(tenant, 0)
            if delta > 0:
                self.tenant_batches.labels(tenant).inc(delta)
        for tenant, seconds in stats.get("tenant_waits", []):
            self.tenant_wait.labels(tenant).observe(seconds)
        for n, wait, read, score in stats.get("batch_log", []):
            self.batch_size.observe(n)
            self.queue_wait.observe(wait)
            for _ in range(n):  # per output: a batch's time spread over its outputs
                self.read_seconds.observe(read / n)
                self.score_seconds.labels(self.scorer).observe(score / n)
        if self.score is not None:
            for component, value in stats.get("score_log", []):
                self.score.labels(component, self.version).observe(value)
                self.score_squares.labels(component, self.version).inc(value * value)
        self._last = stats
