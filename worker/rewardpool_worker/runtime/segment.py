"""A stopping worker's last duty: its segment may still hold outputs other workers have to read (the master placed
them there), and they go with the process. So on SIGTERM, once its own batches are done, the worker waits (within
its drain timeout) until the master says the segment is empty, as the operator waits before it deletes a drained
worker. Without store.metricsAddress nothing can say, and the worker exits as before."""
from __future__ import annotations

import logging
import time
import urllib.request

from ..contract import MASTER_METRICS_PATH, SEGMENTS_DETAIL_PATH, StoreConfig, segment_used

log = logging.getLogger("rewardpool.worker")
POLL_SECONDS = 1.0
SAY_EVERY_SECONDS = 10.0


def _get(url: str) -> str | None:
    try:
        with urllib.request.urlopen(url, timeout=5) as r:
            return r.read().decode()
    except (OSError, ValueError):
        return None


def held_bytes(metrics_address: str, segment: str) -> int | None:
    """What the master says the segment holds; None when it does not answer (a standby, a restart)."""
    base = f"http://{metrics_address}"
    return segment_used(_get(base + SEGMENTS_DETAIL_PATH), _get(base + MASTER_METRICS_PATH), segment)


def wait_until_empty(store: StoreConfig, segment: str | None, deadline: float, read=held_bytes) -> int | None:
    """Wait until the segment holds nothing or the deadline passes; returns what it held last (0: empty; None:
    not known). Returns 0 at once when the worker lends no segment or the pool set no metricsAddress."""
    if not store.metrics_address or store.segment_bytes <= 0 or not segment:
        return 0
    said = 0.0
    while True:
        used = read(store.metrics_address, segment)
        if used == 0:
            return 0
        now = time.monotonic()
        if now >= deadline:
            return used
        if now - said >= SAY_EVERY_SECONDS:
            what = f"{used} bytes of outputs" if used is not None else "outputs (the master does not answer)"
            log.info("waiting for the %s in this worker's segment %s to be released before exiting (%.0fs left)",
                     what, segment, deadline - now)
            said = now
        time.sleep(min(POLL_SECONDS, max(0.0, deadline - now)))
