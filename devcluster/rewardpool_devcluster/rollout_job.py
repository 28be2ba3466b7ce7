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


def _rounded(score):
    """A score, or a mixture's dict of them, to 4 digits."""
    return {k: round(v, 4) for k, v in score.items()} if isinstance(score, dict) else round(score, 4)


def _component_means(scores: list) -> dict:
    """A mixture's mean per component over the samples that component scored (NaN: an optional one refused)."""
    keys = sorted({k for s in scores if isinstance(s, dict) for k in s})
    out = {}
    for k in keys:
        vals = [s[k] for s in scores if isinstance(s, dict) and s.get(k) == s.get(k)]
        out[k] = round(sum(vals) / len(vals), 4) if vals else None
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
    ap.add_argument("--hold", type=float, default=0.0,
                    help="seconds each round's outputs wait in the store before they are scored (fault tests)")
    ap.add_argument("--scale", type=float, default=1.0, help="brightness of the videos (1: uniform in 0..255)")
    ap.add_argument("--pattern", choices=["uniform", "last-frame", "poster"], default="uniform",
                    help="poster: a dark image with light text lines (SD3.5 posters, for the OCR reward)")
    ap.add_argument("--prompt", default="a generated video",
                    help="each sample's prompt; {i} is its index (e.g. 'a poster that reads \"Sale {i}\"')")
    ap.add_argument("--group", default=None,
                    help="one group key for every call (a rollout pinned to one scorer version through a roll)")
    ap.add_argument("--stop-file", default=None,
                    help="end after the round during which this file appears (--rounds is then the most): a test "
                         "keeps the job going until it has seen what it waits for (kubectl exec ... touch FILE)")
    ap.add_argument("--fault-seconds", type=float, default=300.0,
                    help="how long one batch keeps asking again through a fault before the job fails")
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

    from rewardpool_worker.errors import PoolUnavailable, SampleError
    from rewardpool_worker.store import StoreError

    # What a training job does when its infrastructure has a fault mid-rollout: it still holds the outputs it
    # generated, so an output the store lost (a master restart forgets every object) is put again, and a
    # sample the pool could not score (recovering from a Ray head restart) is asked for again: any store
    # error (ObjectNotFound, ReplicaNotReady, MasterUnreachable, TransferFailed, ...) or PoolUnavailable.
    again_causes = (StoreError, PoolUnavailable)

    t0 = time.monotonic()
    join_ray(args.ray, os.environ["POD_IP"])
    nbytes = args.frames * 3 * args.height * args.width
    store = Store.connect(StoreConfig(master=args.master, protocol="tcp",
                                      segment_bytes=max(64 << 20, 2 * args.samples * nbytes),
                                      local_buffer_bytes=16 << 20), node_ip)
    client = RewardPoolClient(args.pool, args.namespace)
    releaser = Releaser(store)
    t_setup = time.monotonic() - t0
    scores: dict[str, float] = {}
    keys: list[str] = []
    scored_at: list[float] = []  # wall-clock time of every batch that returned scores
    counts = {"put_retries": 0, "asked_again": 0}
    versions: list[str | None] = []  # the scorer version of every call, in order

    def put(key: str, video):
        since = time.monotonic()
        while True:
            try:
                ref = put_output(store, key, video, preferred_segment=store.hostname)
                keys.append(ref.key)
                return ref
            except StoreError:
                if time.monotonic() - since > args.fault_seconds:
                    raise
                counts["put_retries"] += 1
                time.sleep(0.5)

    def score_until_done(items: list[tuple[str, object, object, str]]) -> None:
        """items: (name, video, ref, prompt). Every name gets exactly one score."""
        since, attempt = time.monotonic(), 0
        while items:
            report = client.submit_detailed([ref for _, _, ref, _ in items], [p for *_, p in items],
                                            group=args.group).result()
            got = report.results
            versions.append(report.version)
            again = []
            for (name, video, ref, prompt), s in zip(items, got):
                if not isinstance(s, SampleError):
                    assert name not in scores, f"{name} scored twice"
                    scores[name] = s
                    releaser.rewarded([ref])
                    continue
                if not isinstance(s.cause, again_causes) or time.monotonic() - since > args.fault_seconds:
                    raise s
                releaser.failed([ref])
                again.append((name, video, None, prompt))
            if len(again) < len(items):
                scored_at.append(round(time.time(), 2))
            items = []
            if again:
                counts["asked_again"] += len(again)
                attempt += 1
                time.sleep(0.5)
                for name, video, _, prompt in again:
                    ref = put(f"{name}/a{attempt}", video)
                    releaser.expect([ref])
                    items.append((name, video, ref, prompt))

    t_score = 0.0
    rounds = 0
    for r in range(args.rounds):
        rounds = r + 1
        items = []
        for i in range(args.samples):
            g = torch.Generator().manual_seed(r * 100000 + i)
            # an LTX-2.3 video output as the framework lays it out: channels x frames x height x width, uint8
            # (scaled down in height and width)
            video = (torch.rand(3, args.frames, args.height, args.width, generator=g) * 255 * args.scale)
            if args.pattern == "last-frame":  # only the last frame lit: frame rules that differ score it apart
                video[:, :-1] = 0
            elif args.pattern == "poster":  # dark, with two light lines where text would be
                video *= 0.1
                for top in (args.height // 4, args.height // 2 + args.height // 8):
                    video[:, :, top:top + max(args.height // 8, 4), args.width // 10:args.width - args.width // 10] = \
                        240 + 15 * torch.rand(1, generator=g)
            video = video.to(torch.uint8)
            name = f"{args.namespace}/{args.pool}/r{r}/s{i}"
            items.append((name, video, put(name, video), args.prompt.replace("{i}", str(i))))
        releaser.expect([item[2] for item in items])
        if args.hold:  # the round's outputs wait in the store before they are scored (a fault finds them there)
            time.sleep(args.hold)
        batches = [items[i:i + args.batch] for i in range(0, len(items), args.batch)]
        t = time.monotonic()
        with ThreadPoolExecutor(len(batches)) as ex:
            for f in [ex.submit(score_until_done, b) for b in batches]:
                f.result()
        t_score += time.monotonic() - t
        print(f"ROUND {r} scored at {time.time():.2f}", flush=True)  # progress, for tests that inject a fault
        if args.stop_file and os.path.exists(args.stop_file):
            break
        if args.pause and r + 1 < args.rounds:
            time.sleep(args.pause)
    peers = tcp_peers()
    left = sum(store.exists(k) for k in keys)
    print("ROLLOUT_RESULT " + json.dumps({"scored": len(scores), "rounds": rounds, "seconds": round(t_score, 3), "setup_seconds": round(t_setup, 3),
                      "workers": len(set(client.served)), "served": dict(client.served),
                      "retries": client.retries, "released": releaser.stats.released,
                      "release_failures": releaser.stats.release_failures, "pending": releaser.pending,
                      "failed_released": releaser.stats.failed_released,
                      "first_scores": [_rounded(scores[f"{args.namespace}/{args.pool}/r0/s{i}"])
                                       for i in range(min(4, args.samples))], "left": left,
                      "component_means": _component_means(list(scores.values())),
                      "store_outages": client.store_outages, "scored_at": scored_at, **counts,
                      "versions": sorted({v for v in versions if v}), "version_switches": sum(
                          1 for a, b in zip(versions, versions[1:]) if a and b and a != b),
                      "store_hostname": store.hostname, "pod_ip": os.environ["POD_IP"], "tcp_peers": peers}),
          flush=True)
    store.close()
    return 0 if len(scores) == args.samples * rounds and releaser.pending == 0 and left == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
