"""Store clients in their own processes for tests that stop them (SIGSTOP: a peer or master that does not answer,
as behind a cut network). Run as `python -m tests.worker.store_procs producer|reader MASTER`; each prints one JSON
line per step on stdout. The reader connects as a worker does (Store.connect's transport settings) and reads through
the worker's RegisteredTensorReader; each line on its stdin names a key to read."""
from __future__ import annotations

import json
import sys
import time

import torch

from rewardpool_worker.contract import StoreConfig
from rewardpool_worker.records import OutputRef
from rewardpool_worker.runtime.reader import RegisteredTensorReader
from rewardpool_worker.store import Store

NBYTES = 1 << 20


def producer(master: str, keys: list[str]) -> None:
    s = Store.connect(StoreConfig(master=master, protocol="tcp", segment_bytes=64 << 20, local_buffer_bytes=16 << 20),
                      "127.0.0.1")
    for k in keys:
        s.put_bytes(k, torch.full((NBYTES,), 7, dtype=torch.uint8), preferred_segment=s.hostname)
    print(json.dumps({"ready": True}), flush=True)
    time.sleep(3600)


def reader(master: str) -> None:
    s = Store.connect(StoreConfig(master=master, protocol="tcp", segment_bytes=0, local_buffer_bytes=16 << 20),
                      "127.0.0.1")
    r = RegisteredTensorReader(s, initial_bytes=NBYTES)
    r.warm()
    print(json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        key = line.strip()
        t0 = time.monotonic()
        try:
            (t,) = r.read_many([OutputRef(key, NBYTES, "uint8", (NBYTES,))])
            out = {"ok": int(t[0]) == 7}
        except Exception as e:  # noqa: BLE001 (reported to the test)
            out = {"error": type(e).__name__, "message": str(e)}
        out.update(seconds=time.monotonic() - t0, retries=r.stats.transfer_retries)
        print(json.dumps(out), flush=True)


if __name__ == "__main__":
    {"producer": lambda: producer(sys.argv[2], sys.argv[3:]), "reader": lambda: reader(sys.argv[2])}[sys.argv[1]]()
