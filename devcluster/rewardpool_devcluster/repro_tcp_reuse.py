"""Reproduce a store read over a stale TCP connection (dev tooling):

    python -m rewardpool_devcluster.repro_tcp_reuse

A long-lived reader (a worker) reads from writer W1 (a trainer), W1 exits, and W2 starts at the same address and
draws the same TCP data port from Mooncake's range (15000-17000; the script holds the others so that happens
within a minute). The reader's pooled connection to that address and port is dead: its first read of W2's output
fails with TRANSFER_FAIL (measured with a plain get: 0 bytes, then every later get succeeds).
RegisteredTensorReader asks once more (`_fetch`), so the worker's read succeeds with `transfer_retries` 1. Prints
what each read got."""
from __future__ import annotations

import os
import re
import resource
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

WRITER = r'''
import os, sys
from rewardpool_worker.contract import StoreConfig
from rewardpool_worker.store import Store
s = Store.connect(StoreConfig(master=sys.argv[1], protocol="tcp", segment_bytes=64 << 20,
                              local_buffer_bytes=16 << 20), "127.0.0.1")
rc = s.raw.put(sys.argv[2], os.urandom(1 << 20))
print("PUT", rc, flush=True)
sys.stdin.readline()
s.close()
os._exit(0)
'''
LOW, HIGH = 15000, 17000  # Mooncake's findAvailableTcpPort


def main() -> int:
    from rewardpool_worker.contract import StoreConfig
    from rewardpool_worker.records import OutputRef
    from rewardpool_worker.runtime.reader import RegisteredTensorReader
    from rewardpool_worker.store import Store

    from .mooncake import Master

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, 8192), hard))
    tmp = Path(tempfile.mkdtemp())
    master = Master(tmp)

    def writer(key: str):
        err = tmp / f"{key}.err"
        p = subprocess.Popen([sys.executable, "-c", WRITER, master.address, key], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, stderr=open(err, "w"), text=True)
        if not p.stdout.readline().startswith("PUT 0"):
            p.kill()
            return None, None
        return p, int(re.search(r"TcpTransport: listen on port (\d+)", err.read_text()).group(1))

    def stop(p):
        p.stdin.write("\n")
        p.stdin.flush()
        p.wait()

    try:
        store = Store.connect(StoreConfig(master=master.address, protocol="tcp", segment_bytes=0,
                                          local_buffer_bytes=16 << 20), "127.0.0.1")
        reader = RegisteredTensorReader(store, initial_bytes=4 << 20)
        w1, port = writer("first")
        reader.read_many([OutputRef("first", 1 << 20, "uint8", (1 << 20,))])
        print(f"W1 on TCP port {port}: read")
        stop(w1)
        held = []
        for p in range(LOW, HIGH + 1):
            if p == port or p >= HIGH - 30:
                continue
            s = socket.socket()
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                s.bind(("0.0.0.0", p))
                s.listen(1)
                held.append(s)
            except OSError:
                s.close()
        for attempt in range(200):
            w2, p2 = writer(f"second-{attempt}")
            if w2 is None:
                continue
            if p2 == port:
                break
            stop(w2)
        else:
            print("W2 never drew the same port; run again")
            return 1
        for s in held:
            s.close()
        print(f"W2 on the same TCP port {p2} after {attempt + 1} start(s)")
        (t,) = reader.read_many([OutputRef(f"second-{attempt}", 1 << 20, "uint8", (1 << 20,))])
        print(f"the worker's reader: {t.numel()} bytes, transfer_retries {reader.stats.transfer_retries}")
        # the same with a second reader's plain get (no retry): its first read over the dead connection fails
        other = Store.connect(StoreConfig(master=master.address, protocol="tcp", segment_bytes=0,
                                          local_buffer_bytes=16 << 20), "127.0.0.1")
        print("a fresh client's plain get (a new connection):", len(other.raw.get(f"second-{attempt}") or b""),
              "bytes")
        stop(w2)
        return 0
    finally:
        master.stop()


if __name__ == "__main__":
    sys.exit(main())
