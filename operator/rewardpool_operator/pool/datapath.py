"""Which workers have a broken data path, judged from their store reads, pure.

A worker whose RoCE interface is misconfigured (a bad MTU, a duplicate address on net1) answers its probes and
stays Ready, yet fails a share of every call's reads (the client moves those batches to another worker, at the
cost of a transfer timeout each). A worker cannot tell that from outputs whose owner is gone (every worker fails
those alike), but the operator sees all of them: a worker whose reads fail while its peers' reads of the same
minutes succeed has a broken path of its own. The plan drains and replaces it (through the roll's hold).

The window: each worker's read counters (`rewardpool_worker_store_read_batches_total{result}`, since its start) are
remembered per scrape for WINDOW_SECONDS; a counter that went down is a restarted worker, counted from zero."""
from __future__ import annotations

from dataclasses import dataclass

WINDOW_SECONDS = 120.0
MIN_FAILURES = 3  # a worker is judged only on this many failed batch reads in the window
FAILING_SHARE = 0.5  # ... that are at least this share of its reads
PEER_MIN_OK = 3  # and only against peers that read this many batches in the window
PEER_MAX_FAILING_SHARE = 0.1  # with at most this share failed (else the outputs or the store are at fault)


@dataclass(frozen=True)
class Reads:
    ok: int = 0
    failed: int = 0

    @property
    def total(self) -> int:
        return self.ok + self.failed

    @property
    def failing_share(self) -> float:
        return self.failed / self.total if self.total else 0.0


Samples = dict[str, list[tuple[float, int, int]]]  # pod IP -> (when scraped, ok, failed) within the window


def remember(samples: Samples, counters: dict[str, tuple[int, int]], now: float) -> None:
    """Add one scrape's counters; forget workers that no longer answer and samples past the window."""
    for ip in set(samples) - set(counters):
        del samples[ip]
    for ip, (ok, failed) in counters.items():
        kept = [s for s in samples.get(ip, []) if now - s[0] <= WINDOW_SECONDS]
        samples[ip] = kept + [(now, ok, failed)]


def window(samples: Samples) -> dict[str, Reads]:
    """Each worker's reads within the window: the counters' increase from its oldest sample to its newest (from
    zero after a restart: a counter that went down)."""
    out: dict[str, Reads] = {}
    for ip, s in samples.items():
        ok = failed = 0
        for (_, ok0, f0), (_, ok1, f1) in zip(s, s[1:]):
            ok += ok1 - ok0 if ok1 >= ok0 else ok1
            failed += f1 - f0 if f1 >= f0 else f1
        out[ip] = Reads(ok, failed)
    return out


def broken(reads: dict[str, Reads]) -> dict[str, str]:
    """Pod IP -> why, for each worker whose reads fail while its peers' succeed. Nothing when no peer reads well
    (a pool of one, no traffic, or every worker failing: the outputs' owner or the store, not a worker)."""
    failing = {ip: r for ip, r in reads.items() if r.failed >= MIN_FAILURES and r.failing_share >= FAILING_SHARE}
    out: dict[str, str] = {}
    for ip, r in failing.items():
        peers = [p for other, p in reads.items() if other not in failing and other != ip]
        good = Reads(sum(p.ok for p in peers), sum(p.failed for p in peers))
        if good.ok < PEER_MIN_OK or good.failing_share > PEER_MAX_FAILING_SHARE:
            continue
        out[ip] = (f"{r.failed} of its {r.total} batch reads failed in the last {WINDOW_SECONDS:.0f}s while its "
                   f"{len(peers)} peer(s) read {good.ok} with {good.failed} failed (a bad MTU or a duplicate "
                   f"address on its RoCE interface?)")
    return out
