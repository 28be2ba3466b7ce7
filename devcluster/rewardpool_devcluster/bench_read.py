"""`rewardpool-bench read`: read paths compared in one run, on a real mooncake_master over loopback TCP.

For each output size and location (the reader's own segment, or a segment another process lends):
  fresh      allocate and register new memory per read, read, unregister (the origin's read_many)
  registered the RegisteredTensorReader, copying the output out of its registered buffer
  views      the RegisteredTensorReader's zero-copy views, released after each read
  memcpy     a plain copy of the same number of bytes, the yardstick
Each is the median of --repeats reads, reported as seconds, GB/s and time relative to memcpy.

Then ranged reads of videos (--shapes, default LTX-2.3's (3, 121, 512, 768) in uint8 and float32, and an output
of MiniMax-H3's size, 1.23 GB of float32 video) in a segment another process lends: for each numFrames (1, 3, 8,
and all: a whole read), the zero-copy read of only the picked frames' byte ranges, the bytes it moved, and its
time relative to a memcpy of those picked bytes."""
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


LTX = (3, 121, 512, 768)
H3 = (3, 121, 928, 912)  # 1.23 GB as float32: the origin's MiniMax-H3 output size, as a 121-frame video
DEFAULT_SHAPES = [f"{'x'.join(map(str, LTX))}:uint8", f"{'x'.join(map(str, LTX))}:float32",
                  f"{'x'.join(map(str, H3))}:float32"]


def parse_shape(text: str) -> tuple[tuple[int, ...], str]:
    dims, _, dtype = text.partition(":")
    shape = tuple(int(d) for d in dims.split("x"))
    if len(shape) != 4:
        raise SystemExit(f"--shapes {text!r}: a (C, F, H, W) video is CxFxHxW[:dtype]")
    return shape, dtype or "uint8"


def run_ranged(shapes: list[str], counts: list[int | None], repeats: int) -> list[dict]:
    """Ranged against whole reads of videos another process lends, each against a memcpy of what it moved."""
    from rewardpool_worker.contract import StoreConfig
    from rewardpool_worker.frames import picked_frames
    from rewardpool_worker.runtime.reader import RegisteredTensorReader
    from rewardpool_worker.store import Store

    from .mooncake import Master, Producer

    parsed = [parse_shape(t) for t in shapes]
    biggest = max(torch.Size(sh).numel() * torch.empty(0, dtype=getattr(torch, dt)).element_size()
                  for sh, dt in parsed)
    rows = []
    with tempfile.TemporaryDirectory(prefix="rewardpool-bench-ranged-") as tmp:
        master = Master(Path(tmp))
        producer = Producer(master, segment=biggest * 3 // 2 + (64 << 20))
        store = Store.connect(StoreConfig(master=master.address, protocol="tcp", segment_bytes=0,
                                          local_buffer_bytes=16 << 20), "127.0.0.1")
        try:
            for i, (shape, dtype) in enumerate(parsed):
                ref = producer.put(f"bench-ranged-{i}", seed=3, shape=shape, dtype=dtype)
                reader = RegisteredTensorReader(store)
                reader.read(ref)  # the one registration, paid before timing
                for k in counts:
                    picks = picked_frames(ref.shape, [k])
                    moved = ref.nbytes if picks is None else ref.nbytes // shape[1] * len(picks)
                    src = torch.empty(moved, dtype=torch.uint8).fill_(7)
                    dst = torch.empty(moved, dtype=torch.uint8)
                    memcpy = _median_time(lambda: dst.copy_(src), repeats)
                    src = dst = None
                    t = _median_time(lambda: reader.view_many([ref], [picks]).release(), repeats)
                    row = {"shape": "x".join(map(str, shape)), "dtype": dtype, "output_bytes": ref.nbytes,
                           "num_frames": k if k is not None else "all", "bytes_moved": moved,
                           "fraction": round(moved / ref.nbytes, 4), "read_s": round(t, 4),
                           "memcpy_picked_s": round(memcpy, 4), "x_memcpy": round(t / memcpy, 2)}
                    rows.append(row)
                    print(json.dumps(row), file=sys.stderr, flush=True)
                reader.close()
                producer.remove(ref.key)
        finally:
            store.close()
            producer.close()
            master.stop()
    return rows


def table(rows: list[dict]) -> str:
    out = ["| output | numFrames | bytes moved | of the output | read s | memcpy of the picked bytes s | x memcpy |",
           "|---|---|---|---|---|---|---|"]
    for r in rows:
        out.append(f"| {r['shape']} {r['dtype']} ({r['output_bytes'] / 1e6:.0f} MB) | {r['num_frames']} | "
                   f"{r['bytes_moved'] / 1e6:.1f} MB | {r['fraction']:.4f} | {r['read_s']} | "
                   f"{r['memcpy_picked_s']} | {r['x_memcpy']} |")
    return "\n".join(out)


def main(args) -> int:
    out = run([int(s) for s in args.sizes], args.repeats) if args.sizes else {"results": []}
    shapes = DEFAULT_SHAPES if args.shapes is None else args.shapes
    if shapes:
        counts = [None if k == "all" else int(k) for k in args.num_frames]
        out["ranged"] = run_ranged(shapes, counts, args.repeats)
        print(table(out["ranged"]), file=sys.stderr)
    print(json.dumps(out, indent=2))
    return 0
