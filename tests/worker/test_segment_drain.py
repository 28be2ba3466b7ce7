"""A draining worker's segment on a real mooncake_master: placements stop (a put that asks for that segment
lands elsewhere), what it already holds stays readable, and the operator's reading of the segment's usage
(from the master's own endpoints) still counts those outputs until they are released, so the drain waits."""
from __future__ import annotations

import asyncio

import torch

from rewardpool_operator.controller.workers import HttpWorkerClient
from rewardpool_worker.contract import StoreConfig
from rewardpool_worker.records import put_output
from rewardpool_worker.store import Store


def _used(master, segment: str) -> int | None:
    return asyncio.run(HttpWorkerClient().segment_used_bytes(f"127.0.0.1:{master.metrics_port}", segment))


def test_a_drained_segment_takes_no_new_outputs_and_keeps_what_it_holds_readable(master, store):
    worker = Store.connect(StoreConfig(master=master.address, protocol="tcp", segment_bytes=32 << 20,
                                       local_buffer_bytes=16 << 20), "127.0.0.1")
    try:
        assert worker.segment_ids, "the worker's segment is mounted by it (so it can be unmounted gracefully)"
        held = torch.arange(4096, dtype=torch.int32)
        ref = put_output(store, "drain-seg/held", held, preferred_segment=worker.hostname)
        assert _used(master, worker.hostname) == held.numel() * 4

        assert worker.stop_placements() is True
        assert worker.stop_placements() is False  # idempotent: nothing left to drain

        # what it holds stays readable, and still counts as held (the operator keeps the pod)
        back = torch.empty(4096, dtype=torch.int32)
        store.get_into(ref.key, back.data_ptr(), ref.nbytes)
        assert torch.equal(back, held)
        assert _used(master, worker.hostname) == held.numel() * 4
        # a new output asking for the draining segment lands in another one
        later = put_output(store, "drain-seg/later", torch.ones(1024, dtype=torch.int32),
                           preferred_segment=worker.hostname)
        assert later.key in master.keys()
        assert _used(master, worker.hostname) == held.numel() * 4
        # released: the segment is empty, and the drain may finish
        store.remove(ref.key, force=True)
        store.remove(later.key, force=True)
        assert _used(master, worker.hostname) == 0
    finally:
        worker.close()


def test_a_worker_stopped_by_sigterm_waits_until_its_segment_is_read_and_released(ray_cluster, master, store,
                                                                                   tmp_path):
    """The entrypoint as a pod runs it, with a segment and the master's metrics (store.metricsAddress): an output
    another client stored in its segment keeps it from exiting after SIGTERM (an eviction, a pod deletion), and
    it stops once that output is released, well before its drain deadline."""
    import signal
    import time

    from rewardpool_operator.pool import builders, sizing
    from rewardpool_operator.api.spec import Pool
    from tests.conftest import wait_for
    from tests.worker.conftest import start_entrypoint

    pool = Pool.from_object({"metadata": {"name": "term", "namespace": "t", "uid": "u"}, "spec": {
        "replicas": 1, "image": "w", "scorer": {"name": "mean-intensity", "batchSize": 2},
        "store": {"master": master.address, "metricsAddress": f"127.0.0.1:{master.metrics_port}",
                  "protocol": "tcp", "segmentSize": "32Mi", "localBufferSize": "16Mi"},
        "sizing": {"samplesPerRollout": 4, "outputBytesPerSample": "1Mi"}, "drainTimeoutSeconds": 120,
        "ray": {"address": ray_cluster, "namespace": "rewardpool"}}})
    # the rendered config carries the master's metrics address to the worker
    assert builders.worker_config(pool, sizing.compute(pool.spec)).store.metrics_address == \
        f"127.0.0.1:{master.metrics_port}"
    proc, _, log_path, info = start_entrypoint(pool, tmp_path, "term-abcde")
    try:
        segment = info["store_hostname"]
        ref = put_output(store, "term/held", torch.arange(8192, dtype=torch.int32), preferred_segment=segment)
        assert _used(master, segment) == ref.nbytes  # it landed in the worker's segment

        proc.send_signal(signal.SIGTERM)
        wait_for(lambda: "to be read and released" in log_path.read_text(), timeout=30,
                 what="the worker saying it waits for its segment")
        time.sleep(2)
        assert proc.poll() is None, log_path.read_text()[-3000:]  # still there: the output would go with it
        back = torch.empty(8192, dtype=torch.int32)
        store.get_into(ref.key, back.data_ptr(), ref.nbytes)  # and still readable
        assert torch.equal(back, torch.arange(8192, dtype=torch.int32))
        store.remove(ref.key, force=True)
        assert proc.wait(30) == 0, log_path.read_text()[-3000:]
        assert "holds nothing: stopping" in log_path.read_text()
    finally:
        if proc.poll() is None:
            proc.kill()
