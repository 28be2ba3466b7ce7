"""Prometheus metrics of a worker, served on /metrics (releases are counted where they happen: in the
pool client's process, see client.py). The actor process keeps the counts; the entrypoint
copies them into these collectors once a second (the HTTP server lives in the entrypoint process)."""
from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

READ_BUCKETS = (0.01, 0.03, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)


class WorkerMetrics:
    def __init__(self):
        self.registry = r = CollectorRegistry()
        self.queue_depth = Gauge("rewardpool_worker_queue_depth", "Requests accepted and not finished", registry=r)
        self.in_flight = Gauge("rewardpool_worker_in_flight", "Batches being read or scored", registry=r)
        self.pending_bytes = Gauge("rewardpool_worker_pending_bytes", "Stored bytes of accepted, unfinished requests",
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
        self._last: dict = {}

    def update(self, stats: dict) -> None:
        """Fold an actor stats snapshot in (counters advance by the difference since the last one)."""
        self.queue_depth.set(stats["queue_depth"])
        self.in_flight.set(stats["in_flight"])
        self.pending_bytes.set(stats["pending_bytes"])
        self.registrations.set(stats["registrations"])
        self.draining.set(1 if stats["draining"] else 0)
        for name, counter in (("bytes_read", self.bytes_read), ("batches", self.batches)):
            delta = stats[name] - self._last.get(name, 0)
            if delta > 0:
                counter.inc(delta)
        for t in stats.get("read_times", []):
            self.read_seconds.observe(t)
        for t in stats.get("score_times", []):
            self.score_seconds.observe(t)
        self._last = stats
