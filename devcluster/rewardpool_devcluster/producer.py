"""A producer in its own process: lends a segment to the store and puts deterministic tensors into it,
like a generating engine. Commands on stdin, one JSON per line; answers on stdout.

  {"put": KEY, "seed": S, "shape": [...], "dtype": "float32"}  -> {"ref": {...}}
  {"remove": KEY}                                              -> {"ok": true}
"""
from __future__ import annotations

import json
import sys

import torch

from rewardpool_worker.contract import StoreConfig
from rewardpool_worker.records import put_output
from rewardpool_worker.store import Store


def make_tensor(seed: int, shape: list[int], dtype: str) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    t = torch.rand(*shape, generator=g)
    return (t * 255).to(torch.uint8) if dtype == "uint8" else t.to(getattr(torch, dtype))


def main() -> None:
    master, segment = sys.argv[1], int(sys.argv[2])
    store = Store.connect(StoreConfig(master=master, protocol="tcp", segment_bytes=segment,
                                      local_buffer_bytes=16 << 20), "127.0.0.1")
    print(json.dumps({"hostname": store.hostname}), flush=True)
    for line in sys.stdin:
        cmd = json.loads(line)
        try:
            if "put" in cmd:
                # into a named segment, by default our own; "anywhere" lets the master place it
                where = cmd.get("segment") or (None if cmd.get("anywhere") else store.hostname)
                ref = put_output(store, cmd["put"], make_tensor(cmd["seed"], cmd["shape"], cmd["dtype"]),
                                 preferred_segment=where)
                print(json.dumps({"ref": {**ref.__dict__, "shape": list(ref.shape)}}), flush=True)
            elif "remove" in cmd:
                store.remove(cmd["remove"], force=True)
                print(json.dumps({"ok": True}), flush=True)
        except Exception as e:  # report, keep serving
            print(json.dumps({"error": f"{type(e).__name__}: {e}"}), flush=True)
    store.close()


if __name__ == "__main__":
    main()
