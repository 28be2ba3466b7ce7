"""`rewardpool-bench judge`: images/s of one worker's openai-judge against a loopback chat-completions server whose
every judgement takes --latency seconds (a VLM's time per image), by the scorer's per-worker concurrency. The
worker's own cost (rounding, PNG encoding, HTTP) is what separates the figures from concurrency / latency."""
from __future__ import annotations

import subprocess
import sys
import time


def add_arguments(ap) -> None:
    ap.add_argument("--latency", type=float, default=0.2, help="seconds the server takes per judgement")
    ap.add_argument("--concurrency", nargs="+", type=int, default=[1, 4, 8, 16])
    ap.add_argument("--images", type=int, default=64, help="images per measurement (batches of --batch)")
    ap.add_argument("--batch", type=int, default=16, help="the pool's batchSize")
    ap.add_argument("--size", type=int, default=512, help="image side in pixels (the PNG each request carries)")


def main(args) -> int:
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
