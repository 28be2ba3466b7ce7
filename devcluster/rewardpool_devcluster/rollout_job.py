"""A training job's reward step, run as a pod on the real node (the dev cluster mounts this file from a
ConfigMap into the worker image; it imports only what a training job imports): put a batch of generated videos
(synthetic tensors shaped like LTX-2.3 outputs, scaled down) into the store from this pod's own segment, score
them through the pool client over Ray, release each after its reward, and print one JSON line with the result.

  python3 rollout_job.py POOL NAMESPACE --samples N --frames F --height H --width W [--batch B] [--rounds R]
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time


def join_ray(address: str, node_ip: str) -> None:
    import ray

    os.environ.setdefault("RAY_DEFAULT_PYTHON_VERSION_MATCH_LEVEL", "minor")
    subprocess.run(["ray", "start", f"--address={address}", f"--node-ip-address={node_ip}", "--num-cpus=0",
                    "--disable-usage-stats", "--object-store-memory=100000000"], check=True,
                   stdout=subprocess.DEVNULL)
    ray.init(address=address, namespace="rewardpool", log_to_driver=False)


def interface_address(name: str) -> str | None:
    """IPv4 address of a network interface (net1: the secondary network Multus attached), or None."""
    import fcntl
    import socket
    import struct

    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            raw = fcntl.ioctl(s.fileno(), 0x8915, struct.pack("256s", name.encode()[:15]))  # SIOCGIFADDR
        except OSError:
            return None
    return socket.inet_ntoa(raw[20:24])


def tcp_peers() -> list[list[str]]:
    """[local ip, remote ip] of this pod's established TCP connections (/proc/net/tcp)."""
    import socket
    import struct

    out = []
    for line in open("/proc/net/tcp").read().splitlines()[1:]:
        f = line.split()
        if f[3] != "01":  # ESTABLISHED
            continue
        ip = lambda h: socket.inet_ntoa(struct.pack("<I", int(h.split(":")[0], 16)))  # noqa: E731
        out.append([ip(f[1]), ip(f[2])])
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("pool")
    ap.add_argument("namespace")
    ap.add_argument("--master", required=True)
    ap.add_argument("--ray", required=True)
    ap.add_argument("--samples", type=int, default=16)
    ap.add_argument("--frames", type=int, default=9)
    ap.add_argument("--height", type=int, default=64)
    ap.add_argument("--width", type=int, default=96)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--pause", type=float, default=0.0, help="seconds between rounds (scale-in tests)")
    args = ap.parse_args()
    # with a secondary network attached, the store client announces (and its transfers use) that address
    node_ip = interface_address("net1") or os.environ["POD_IP"]
    os.environ.setdefault("MC_TCP_BIND_ADDRESS", node_ip)

    import torch
    from concurrent.futures import ThreadPoolExecutor

    from rewardpool_worker.client import Releaser, RewardPoolClient
    from rewardpool_worker.contract import StoreConfig
    from rewardpool_worker.records import put_output
    from rewardpool_worker.store import Store

    t0 = time.monotonic()
    join_ray(args.ray, os.environ["POD_IP"])
    nbytes = args.frames * 3 * args.height * args.width
    store = Store.connect(StoreConfig(master=args.master, protocol="tcp",
                                      segment_bytes=max(64 << 20, 2 * args.samples * nbytes),
                                      local_buffer_bytes=16 << 20), node_ip)
    client = RewardPoolClient(args.pool, args.namespace)
    releaser = Releaser(store)
    t_setup = time.monotonic() - t0
    scores, keys, served = [], [], {}
    t_score = 0.0
    for r in range(args.rounds):
        refs = []
        for i in range(args.samples):
            g = torch.Generator().manual_seed(r * 100000 + i)
            # an LTX-2.3 video output as the framework lays it out: channels x frames x height x width, uint8
            # (scaled down in height and width)
            video = (torch.rand(3, args.frames, args.height, args.width, generator=g) * 255).to(torch.uint8)
            refs.append(put_output(store, f"{args.namespace}/{args.pool}/r{r}/s{i}", video,
                                   preferred_segment=store.hostname))
        releaser.expect(refs)
        keys += [x.key for x in refs]
        batches = [refs[i:i + args.batch] for i in range(0, len(refs), args.batch)]
        t = time.monotonic()
        with ThreadPoolExecutor(len(batches)) as ex:
            futs = [(b, ex.submit(client.score, b, ["a generated video"] * len(b))) for b in batches]
            for b, f in futs:
                s = f.result()
                scores += s
                releaser.rewarded(b)
        t_score += time.monotonic() - t
        if args.pause and r + 1 < args.rounds:
            time.sleep(args.pause)
    peers = tcp_peers()
    left = sum(store.exists(k) for k in keys)
    print("ROLLOUT_RESULT " + json.dumps({"scored": len(scores), "seconds": round(t_score, 3), "setup_seconds": round(t_setup, 3),
                      "workers": len(set(client.served)), "served": dict(client.served),
                      "retries": client.retries, "released": releaser.stats.released,
                      "release_failures": releaser.stats.release_failures, "pending": releaser.pending,
                      "first_scores": [round(s, 4) for s in scores[:4]], "left": left,
                      "store_hostname": store.hostname, "pod_ip": os.environ["POD_IP"], "tcp_peers": peers}),
          flush=True)
    store.close()
    return 0 if len(scores) == args.samples * args.rounds and releaser.pending == 0 and left == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
