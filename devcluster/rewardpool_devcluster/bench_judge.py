"""`rewardpool-bench judge`: images/s of one worker's openai-judge against a loopback chat-completions server whose
every judgement takes --latency seconds (a VLM's time per image), by the scorer's per-worker concurrency. The
worker's own cost (rounding, PNG encoding, HTTP) is what separates the figures from concurrency / latency.

`--hosted`: a real engine instead, llama.cpp's server (the tiny judge model, tiny_judge.py) started with the
command the operator renders for a pool's engine container, judged as a yes/no grader. The same images are judged
by the judge's own client calling the engine directly, and as stored outputs through a worker actor and the pool
client (read from a real mooncake_master through the registered buffer, the Ray hop, the actor's slots), in one
run, alternately: items/s and p50/p99 seconds per call of --batch images, and the pool's over the direct one."""
from __future__ import annotations

import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def add_arguments(ap) -> None:
    ap.add_argument("--latency", type=float, default=0.2, help="seconds the server takes per judgement")
    ap.add_argument("--concurrency", nargs="+", type=int, default=[1, 4, 8, 16])
    ap.add_argument("--images", type=int, default=64, help="images per measurement (batches of --batch)")
    ap.add_argument("--batch", type=int, default=16, help="the pool's batchSize")
    ap.add_argument("--size", type=int, default=512, help="image side in pixels (the PNG each request carries)")
    ap.add_argument("--hosted", action="store_true", help="a real llama.cpp engine, directly and through the pool")
    ap.add_argument("--rounds", type=int, default=10, help="--hosted: calls per path")


def main(args) -> int:
    if args.hosted:
        return hosted(args)
    import torch

    from rewardpool_worker.scorers.openai_judge import OpenAIJudgeScorer

    server = subprocess.Popen([sys.executable, "-m", "rewardpool_devcluster.judge_server", "--latency",
                               str(args.latency)], stdout=subprocess.PIPE, text=True)
    try:
        port = int(server.stdout.readline().split()[1])
        url = f"http://127.0.0.1:{port}/v1"
        g = torch.Generator().manual_seed(0)
        images = [torch.rand(3, 1, args.size, args.size, generator=g) for _ in range(args.batch)]
        prompts = [f"an image {i}" for i in range(args.batch)]
        print(f"openai-judge, one worker: {args.images} images of {args.size}x{args.size}, batchSize {args.batch}, "
              f"server latency {args.latency * 1000:.0f} ms per judgement")
        print(f"{'concurrency':>11} {'images/s':>9} {'ideal':>7} {'of ideal':>8}")
        base = None
        for c in args.concurrency:
            judge = OpenAIJudgeScorer(base_url=url, model="bench", concurrency=c)
            judge.warmup()
            t0 = time.perf_counter()
            done = 0
            while done < args.images:
                scores = judge.score_batch(images, prompts)
                assert all(isinstance(s, float) for s in scores), scores
                done += len(scores)
            rate = done / (time.perf_counter() - t0)
            ideal = min(c, args.batch) / args.latency if args.latency else float("inf")
            base = base or rate
            print(f"{c:>11} {rate:>9.1f} {ideal:>7.1f} {rate / ideal:>8.0%}   ({rate / base:.1f}x concurrency "
                  f"{args.concurrency[0]})")
    finally:
        server.kill()
        server.wait()
    return 0


def _engine(tmp: Path):
    """The tiny judge model served as a pool's llamacpp engine container serves it: (process, /v1 URL, model)."""
    import urllib.request

    from rewardpool_operator.api.spec import Pool
    from rewardpool_operator.pool import engine

    from . import tiny_judge
    from .cluster import free_port

    tiny_judge.write(tmp / "tiny.gguf")
    pool = Pool.from_object({"metadata": {"name": "bench", "namespace": "bench"}, "spec": {
        "image": "w", "store": {"master": "127.0.0.1:1", "protocol": "tcp", "segmentSize": "0"},
        "scorer": {"name": "openai-judge", "engine": {"kind": "llamacpp", "model": {"pvc": {"claimName": "w"}},
                                                      "modelFile": "tiny.gguf", "maxModelLen": 2048}}}})
    port = free_port()
    proc = subprocess.Popen(tiny_judge.local_command(pool, 0, tmp, port), stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}/v1"
    for _ in range(300):
        try:
            urllib.request.urlopen(url + "/models", timeout=1).read()
            break
        except OSError:
            time.sleep(0.1)
    return proc, url, engine.served_name(pool.spec.scorer, pool.spec.scorer.engine)


def _row(name: str, seconds: list[float], items: int) -> dict:
    qs = statistics.quantiles(seconds, n=100) if len(seconds) > 1 else seconds * 99
    return {"path": name, "items_s": items * len(seconds) / sum(seconds), "p50": statistics.median(seconds),
            "p99": qs[98]}


def hosted(args) -> int:
    import asyncio

    import ray

    from rewardpool_worker.client.async_client import AsyncRewardPoolClient
    from rewardpool_worker.contract import EngineLink, RayConfig, ScorerConfig, StoreConfig, WorkerConfig
    from rewardpool_worker.runtime.actor import start_actor
    from rewardpool_worker.scorers.openai_judge import OpenAIJudgeScorer

    from .mooncake import Master, Producer
    from .producer import make_tensor

    shape, concurrency = (3, args.size, args.size), max(args.concurrency)
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        engine, url, model = _engine(tmp)
        master = Master(tmp)
        producer = Producer(master, segment=256 << 20)
        ray.init(namespace="rewardpool", include_dashboard=False, log_to_driver=False)
        try:
            args_ = {"form": "yes-probability", "concurrency": concurrency}
            link = EngineLink(kind="llamacpp", url=url, model=model)
            cfg = WorkerConfig(pool="bj", namespace="bench", read_buffer_bytes=64 << 20,
                               store=StoreConfig(master=master.address, protocol="tcp", segment_bytes=0,
                                                 local_buffer_bytes=16 << 20),
                               scorer=ScorerConfig(name="openai-judge", args=args_, engine=link,
                                                   batch_size=args.batch), ray=RayConfig(namespace="rewardpool"))
            t0 = time.perf_counter()
            actor = start_actor(cfg, "bj-pod-0", "127.0.0.1", control_key="k")
            ray.get(actor.ready.remote())
            start_s = time.perf_counter() - t0
            refs = [producer.put(f"bj-{i}", seed=i, shape=shape, dtype="uint8") for i in range(args.batch)]
            images = [make_tensor(i, list(shape), "uint8") for i in range(args.batch)]
            prompts = [f"an image {i}" for i in range(args.batch)]
            direct = OpenAIJudgeScorer(base_url=url, model=model, hosted="llamacpp", **args_)
            client = AsyncRewardPoolClient("bj", "bench")
            times: dict[str, list[float]] = {"direct": [], "pool": []}

            async def run():
                want = direct.score_batch(images, prompts)
                got = await client.score_detailed(refs, prompts, timeout=120)  # warm both paths
                assert got.errors == [] and got.results == want, (got.results, want)
                for _ in range(args.rounds):
                    t = time.perf_counter()
                    assert direct.score_batch(images, prompts) == want
                    times["direct"].append(time.perf_counter() - t)
                    t = time.perf_counter()
                    r = await client.score_detailed(refs, prompts, timeout=120)
                    times["pool"].append(time.perf_counter() - t)
                    assert r.errors == [] and r.results == want
            asyncio.run(run())
            rows = [_row(n, times[n], args.batch) for n in ("direct", "pool")]
            print(f"hosted judge: llama.cpp (llama-cpp-python) serving the tiny judge model, yes-probability, "
                  f"{args.rounds} calls of {args.batch} {args.size}x{args.size} images per path, concurrency "
                  f"{concurrency}; the worker actor's start with the engine up (store, buffers, warm-up judgement): "
                  f"{start_s:.2f} s")
            print("| path | items/s | p50 s per call | p99 s per call |\n|---|---|---|---|")
            for r in rows:
                print(f"| {r['path']} | {r['items_s']:.1f} | {r['p50']:.4f} | {r['p99']:.4f} |")
            print(f"pool items/s over direct: {rows[1]['items_s'] / rows[0]['items_s']:.3f}")
            log = ray.get(actor.stats.remote())["batch_log"][-args.rounds:]  # (outputs, waited, read, model)
            print(f"inside the worker, median per batch: slot wait {statistics.median(b[1] for b in log):.4f} s, "
                  f"store read {statistics.median(b[2] for b in log):.4f} s, the judge (its requests to the engine) "
                  f"{statistics.median(b[3] for b in log):.4f} s")
            ray.kill(actor)
            for r in refs:
                producer.remove(r.key)
        finally:
            ray.shutdown()
            producer.close()
            master.stop()
            engine.kill()
            engine.wait()
    return 0
