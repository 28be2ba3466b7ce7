"""`rewardpool-bench read`: read paths compared in one run, on a real mooncake_master over loopback TCP.

For each output size and location (the reader's own segment, or a segment another process lends):
  fresh      allocate and register new memory per read, read, unregister (the origin's read_many)
  registered the RegisteredTensorReader, copying the output out of its registered buffer
  views      the RegisteredTensorReader's zero-copy views, released after each read
  memcpy     a plain copy of the same number of bytes, the yardstick
Each is the median of --repeats reads, reported as seconds, GB/s and time relative to memcpy."""
from __future__ import annotations

import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch


def _median_time(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def run(sizes: list[int], repeats: int) -> dict:
    from rewardpool_worker.contract import StoreConfig
    from rewardpool_worker.records import OutputRef, put_output
    from rewardpool_worker.runtime.reader import RegisteredTensorReader
    from rewardpool_worker.store import Store

    from .mooncake import Master, Producer

    biggest = max(sizes)
    results = []
    with tempfile.TemporaryDirectory(prefix="rewardpool-bench-read-") as tmp:
        master = Master(Path(tmp))
        segment = biggest * 3 // 2 + (64 << 20)  # room for the output plus the allocator's slack
        producer = Producer(master, segment=segment)
        store = Store.connect(StoreConfig(master=master.address, protocol="tcp", segment_bytes=segment,
                                          local_buffer_bytes=16 << 20), "127.0.0.1")
        try:
            for size in sizes:
                remote = producer.put(f"bench-remote-{size}", seed=1, shape=(size,), dtype="uint8")
                local = put_output(store, f"bench-local-{size}", torch.randint(0, 255, (size,), dtype=torch.uint8),
                                   preferred_segment=store.hostname)
                src = torch.empty(size, dtype=torch.uint8).fill_(7)
                dst = torch.empty(size, dtype=torch.uint8)
                memcpy = _median_time(lambda: dst.copy_(src), repeats)
                src = dst = None  # free 2 x size before the reads
                for where, ref in (("own segment", local), ("other process", remote)):
                    reader = RegisteredTensorReader(store)
                    reader.read(ref)  # the one registration, paid before timing (that is the point of it)

                    def fresh(ref: OutputRef = ref):
                        buf = torch.empty(ref.nbytes, dtype=torch.uint8)
                        store.register(buf)
                        try:
                            store.get_into(ref.key, buf.data_ptr(), ref.nbytes)
                        finally:
                            store.unregister(buf)

                    def views(ref: OutputRef = ref):
                        reader.view_many([ref]).release()

                    row = {"bytes": size, "location": where, "memcpy_s": round(memcpy, 4),
                           "memcpy_GBps": round(size / memcpy / 1e9, 2)}
                    for name, fn in (("fresh", fresh), ("registered", lambda: reader.read(ref)), ("views", views)):
                        t = _median_time(fn, repeats)
                        row[f"{name}_s"] = round(t, 4)
                        row[f"{name}_GBps"] = round(size / t / 1e9, 2)
                        row[f"{name}_x_memcpy"] = round(t / memcpy, 2)
                    row["registrations"] = reader.stats.registrations
                    results.append(row)
                    print(json.dumps(row), file=sys.stderr, flush=True)
                    reader.close()
                store.remove(local.key, force=True)
                producer.remove(remote.key)
        finally:
            store.close()
            producer.close()
            master.stop()
    return {"transport": "tcp (loopback)", "repeats": repeats, "results": results}


def main(args) -> int:
    print(json.dumps(run([int(s) for s in args.sizes], args.repeats), indent=2))
    return 0
