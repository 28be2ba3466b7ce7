"""Prometheus metrics of a worker, served on /metrics (releases are counted where they happen: in the
pool client's process, see client.py). The actor process keeps the counts; the entrypoint
copies them into these collectors once a second (the HTTP server lives in the entrypoint process)."""
from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from .config import PENDING_BYTES_METRIC, QUEUE_DEPTH_METRIC

READ_BUCKETS = (0.01, 0.03, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)


class WorkerMetrics:
    def __init__(self):
        self.registry = r = CollectorRegistry()
        self.queue_depth = Gauge(QUEUE_DEPTH_METRIC, "Requests accepted and not finished", registry=r)
        self.in_flight = Gauge("rewardpool_worker_in_flight", "Batches being read or scored", registry=r)
        self.pending_bytes = Gauge(PENDING_BYTES_METRIC, "Stored bytes of accepted, unfinished requests",
                                   registry=r)
        self.read_seconds = Histogram("rewardpool_worker_read_seconds", "Time to read a batch from the store",
                                      buckets=READ_BUCKETS, registry=r)
        self.score_seconds = Histogram("rewardpool_worker_score_seconds", "Time to score a batch",
                                       buckets=READ_BUCKETS, registry=r)
        self.bytes_read = Counter("rewardpool_worker_read_bytes", "Bytes read from the store", registry=r)
        self.registrations = Gauge("rewardpool_worker_buffer_registrations", "Read buffer registrations so far",
                                   registry=r)
        self.batches = Counter("rewardpool_worker_batches", "Batches scored", registry=r)
        self.draining = Gauge("rewardpool_worker_draining", "1 while the worker drains", registry=r)
        self.refused = Counter("rewardpool_worker_batches_refused", "Batches refused as larger than batchSize",
                               registry=r)
        self.holding = Gauge("rewardpool_worker_read_slots_in_use",
                             "Batches holding a read buffer (being read or scored, or read ahead); at most 2",
                             registry=r)
        self.buffer_bytes = Gauge("rewardpool_worker_read_buffer_bytes", "Registered read buffer bytes, all slots",
                                  registry=r)
        self.model_busy = Gauge("rewardpool_worker_model_busy_seconds",
                                "How long the batch now in the model has run (0 when idle)", registry=r)
        self.warmup_seconds = Gauge("rewardpool_worker_warmup_seconds",
                                    "Time of the warm-up forward run before the worker became Ready", registry=r)
        self.load_seconds = Gauge("rewardpool_worker_model_load_seconds", "Time to load the scorer(s)", registry=r)
        self._last: dict = {}

    def startup(self, ready: dict) -> None:
        self.warmup_seconds.set(ready.get("warmup_seconds") or 0.0)
        self.load_seconds.set(ready.get("load_seconds") or 0.0)

    def update(self, stats: dict) -> None:
        """Fold an actor stats snapshot in (counters advance by the difference since the last one)."""
        self.queue_depth.set(stats["queue_depth"])
        self.in_flight.set(stats["in_flight"])
        self.pending_bytes.set(stats["pending_bytes"])
        self.registrations.set(stats["registrations"])
        self.draining.set(1 if stats["draining"] else 0)
        self.holding.set(stats.get("holding", 0))
        self.buffer_bytes.set(stats.get("buffer_bytes", 0))
        self.model_busy.set(stats.get("model_busy_seconds", 0.0))
        for name, counter in (("bytes_read", self.bytes_read), ("batches", self.batches), ("refused", self.refused)):
            delta = stats.get(name, 0) - self._last.get(name, 0)
            if delta > 0:
                counter.inc(delta)
        for t in stats.get("read_times", []):
            self.read_seconds.observe(t)
        for t in stats.get("score_times", []):
            self.score_seconds.observe(t)
        self._last = stats
