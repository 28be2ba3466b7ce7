"""`rewardpool-bench http`: what scoring over HTTP costs next to Ray, and how two jobs share one worker.

A real mooncake_master on loopback TCP, a producer process lending the segment the outputs are put into, a real
Ray cluster and one worker actor (the worker's own class) with the worker entrypoint's HTTP server in front of it.

1. overhead: the same batch of LTX-2.3-sized stored outputs (3 x 121 x 512 x 768 uint8, 143 MB each; the scorer
   picks --num-frames frames, so the worker reads only those byte ranges) scored through the Ray client and
   through the HTTP client, alternately, --rounds times each: median seconds per call and the ratio.
2. share: a small job (--small batches) and a job --ratio times larger, each a tenant with its own token, on one
   worker whose scorer takes --model-seconds per batch. The small job alone, then both started together with
   equal weights, with the small job weighted 2 and 3, and with no tenants (first come, first served): the small
   job's time beside the big one over its time alone, and every output of both scored exactly once. Both jobs keep
   every batch in flight, so the worker is saturated: under weighted fair sharing (round robin) a share of
   w / (w + 1) would bound the small job at (w + 1) / w of its time alone (2x at equal weights); the worker's Fair
   Sojourn slots (fairslots.py) let it finish first, and the big job no later than under fair sharing."""
from __future__ import annotations

import asyncio
import statistics
import tempfile
import time
from pathlib import Path

LTX_SHAPE = (3, 121, 512, 768)


class FixedTimeScorer:
    """A model that takes a fixed time per batch (so contention between jobs is the model's, as on a GPU)."""

    quantise = "truncate"

    def __init__(self, seconds: float = 0.05):
        self.seconds = seconds

    def warmup(self):
        pass

    def score_batch(self, outputs, prompts):
        time.sleep(self.seconds)
        return [float(o.float().mean()) for o in outputs]


def add_arguments(ap) -> None:
    ap.add_argument("--rounds", type=int, default=15, help="calls per path in the overhead part")
    ap.add_argument("--batch", type=int, default=4, help="outputs per call in the overhead part")
    ap.add_argument("--num-frames", type=int, default=4, help="frames the scorer picks (the bytes read)")
    ap.add_argument("--small", type=int, default=12, help="batches of the small job in the share part")
    ap.add_argument("--ratio", type=int, default=4, help="the big job's size over the small one's")
    ap.add_argument("--model-seconds", type=float, default=0.1, help="the share part's model time per batch")


def _worker(master, pool: str, scorer: dict, tenants: dict[str, tuple[int, str]]):
    """A worker's actor, given the tenants' shares as the entrypoint gives them once the operator sent them."""
    import ray

    from rewardpool_worker.contract import RayConfig, ScorerConfig, StoreConfig, WorkerConfig
    from rewardpool_worker.runtime.actor import start_actor

    cfg = WorkerConfig(pool=pool, namespace="bench",
                       store=StoreConfig(master=master.address, protocol="tcp", segment_bytes=0,
                                         local_buffer_bytes=16 << 20),
                       scorer=ScorerConfig(**scorer), ray=RayConfig(namespace="rewardpool"),
                       read_buffer_bytes=64 << 20, tenant_auth=bool(tenants))
    actor = start_actor(cfg, f"{pool}-pod-0", "127.0.0.1", control_key="k")
    if tenants:
        ray.get(actor.set_tenant_weights.remote(_tenants(tenants).weights(), "k"))
    return actor


def _tenants(tenants: dict[str, tuple[int, str]]):
    """name -> (weight, token) as the operator sends it: shares and the tokens' digests."""
    import hashlib

    from rewardpool_worker.contract import Tenant, Tenants

    return Tenants(tenants=[Tenant(name=n, weight=w, sha256=hashlib.sha256(t.encode()).hexdigest())
                            for n, (w, t) in tenants.items()])


def _serve(actor, tenants: dict[str, tuple[int, str]]):
    import ray

    from rewardpool_worker.runtime import http_score
    from rewardpool_worker.runtime.control import ControlAuth
    from rewardpool_worker.runtime.main import State, serve_http
    from rewardpool_worker.runtime.metrics import WorkerMetrics
    from rewardpool_worker.runtime.tenants import TenantAuth

    state = State()
    state.phase = "ready"
    state.detail = ray.get(actor.ready.remote())
    auth = TenantAuth(bool(tenants))
    if tenants:
        auth.update(_tenants(tenants))
    state.scoring = http_score.Scoring(actor, state.detail, auth=auth)
    server = serve_http("127.0.0.1", 0, state, WorkerMetrics(), ControlAuth("/nonexistent"))
    return server, f"http://127.0.0.1:{server.server_address[1]}"


def overhead(master, producer, args) -> dict:
    import ray

    from rewardpool_worker.client.async_client import AsyncRewardPoolClient
    from rewardpool_worker.client.http_client import HttpRewardPoolClient

    actor = _worker(master, "bh-over", {"name": "mean-intensity", "num_frames": args.num_frames,
                                        "batch_size": args.batch}, {})
    server, url = _serve(actor, {})
    refs = [producer.put(f"bh-ltx-{i}", seed=i, shape=LTX_SHAPE, dtype="uint8") for i in range(args.batch)]
    prompts = ["a generated video"] * len(refs)
    via_ray, via_http = AsyncRewardPoolClient("bh-over", "bench"), HttpRewardPoolClient(url, timeout=120)

    async def run():
        times = {"ray": [], "http": []}
        a = await via_ray.score_detailed(refs, prompts, timeout=120)  # warm both paths
        b = await via_http.score_detailed(refs, prompts)
        assert a.results == b.results and a.version == b.version, (a.results, b.results)
        for _ in range(args.rounds):
            for name, client in (("ray", via_ray), ("http", via_http)):
                t0 = time.perf_counter()
                r = await client.score_detailed(refs, prompts, timeout=120)
                times[name].append(time.perf_counter() - t0)
                assert not r.errors
        return times
    times = asyncio.run(run())
    server.shutdown()
    ray.kill(actor)
    for r in refs:
        producer.remove(r.key)
    ray_s, http_s = statistics.median(times["ray"]), statistics.median(times["http"])
    return {"batch": args.batch, "bytes_per_output": refs[0].nbytes, "ray_s": ray_s, "http_s": http_s,
            "ratio": http_s / ray_s}


def share(master, producer, args, tmp: Path) -> list[dict]:
    import ray

    from rewardpool_worker.client.http_client import HttpRewardPoolClient

    refs = [producer.put(f"bh-share-{i}", seed=100 + i, shape=(3, 2, 64, 64)) for i in range(8)]
    rows = []
    scorer = {"class": "rewardpool_devcluster.bench_http:FixedTimeScorer", "batch_size": 1,
              "args": {"seconds": args.model_seconds}}
    cases = [("alone", None), ("equal weights", {"small": 1, "big": 1}), ("small weighted 2", {"small": 2, "big": 1}),
             ("small weighted 3", {"small": 3, "big": 1}), ("no tenants (first come)", {})]
    alone = None
    for label, weights in cases:
        tenants = {k: (w, f"tok-{k}") for k, w in (weights or {"small": 1, "big": 1}).items()} if weights != {} else {}
        actor = _worker(master, f"bh-share-{len(rows)}", scorer, tenants)
        server, url = _serve(actor, tenants)

        async def job(token, batches):
            client = HttpRewardPoolClient(url, token if weights != {} else None, timeout=600)
            client.batch_size = 1
            t0 = time.perf_counter()
            # every batch in flight at once (a rollout's whole reward step), one batch per request
            got = await asyncio.gather(*(client.score_detailed([refs[i % len(refs)]], ["p"])
                                         for i in range(batches)))
            assert all(not r.errors and r.results[0] is not None for r in got)
            return time.perf_counter() - t0, len(got)

        async def run():
            if weights is None:
                return (await job("tok-small", args.small)), None
            big = asyncio.ensure_future(job("tok-big", args.small * args.ratio))
            await asyncio.sleep(0.05)  # the big job's batches are queued first
            small = await job("tok-small", args.small)
            return small, await big
        (t_small, n_small), big = asyncio.run(run())
        served = ray.get(actor.stats.remote())["batches"]
        want = n_small + (big[1] if big else 0)
        assert served == want, f"{label}: the worker scored {served} batches for {want} sent"
        if weights is None:
            alone = t_small
        rows.append({"case": label, "small_s": t_small, "big_s": big[0] if big else None,
                     "small_over_alone": t_small / alone, "batches_scored": served})
        server.shutdown()
        ray.kill(actor)
    for r in refs:
        producer.remove(r.key)
    return rows


def run(args) -> int:
    import ray

    from .mooncake import Master, Producer

    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        master = Master(tmp)
        producer = Producer(master, segment=1 << 30)
        ray.init(namespace="rewardpool", include_dashboard=False, log_to_driver=False)
        try:
            print(f"overhead: {args.rounds} calls of {args.batch} LTX-2.3-sized stored outputs "
                  f"({'x'.join(map(str, LTX_SHAPE))} uint8), {args.num_frames} frames read each", flush=True)
            o = overhead(master, producer, args)
            print(f"| path | median s per call |\n|---|---|\n| Ray | {o['ray_s']:.4f} |\n| HTTP | {o['http_s']:.4f} |\n"
                  f"HTTP / Ray: {o['ratio']:.3f}", flush=True)
            print(f"\nshare: a small job of {args.small} batches and one of {args.small * args.ratio}, "
                  f"{args.model_seconds}s of model time per batch, one worker", flush=True)
            rows = share(master, producer, args, tmp)
            print("| case | small job s | big job s | small / alone | batches scored |\n|---|---|---|---|---|")
            for r in rows:
                big = f"{r['big_s']:.2f}" if r["big_s"] is not None else "-"
                print(f"| {r['case']} | {r['small_s']:.2f} | {big} | {r['small_over_alone']:.2f} | "
                      f"{r['batches_scored']} |", flush=True)
        finally:
            ray.shutdown()
            producer.close()
            master.stop()
    return 0
