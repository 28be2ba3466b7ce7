"""`rewardpool-bench hps`: images/s of one worker's hps scorer on this machine's CPU (or GPU), by model and
image size. For each model (`tiny`: the tests' small open_clip config; `vit-h-14`: HPS v2's real architecture
with random weights, since no weights can be downloaded here) the scorer is built as a worker builds it, warmed
up, and scores batches of --batch images (the pool's batchSize pairs in one forward); the table gives images/s
and the share of the time spent in HPS's preprocessing (resize, pad, normalise) against the forward."""
from __future__ import annotations

import tempfile
import time
from pathlib import Path


def add_arguments(ap) -> None:
    ap.add_argument("--models", nargs="+", default=["tiny", "vit-h-14"], choices=["tiny", "vit-h-14"])
    ap.add_argument("--sizes", nargs="+", type=int, default=[512, 1024], help="image sides in pixels")
    ap.add_argument("--batch", type=int, default=8, help="the pool's batchSize (miles' --hps-batch-size: 8)")
    ap.add_argument("--batches", type=int, default=3, help="timed batches per row (after one warm-up)")
    ap.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda"])


def main(args) -> int:
    import torch

    from rewardpool_worker.contract import ScorerConfig
    from rewardpool_worker.scorers import build_scorer
    from rewardpool_worker.scorers.hps import hps_pixels

    from . import random_hps

    print(f"hps, one worker: batches of {args.batch} images, {args.batches} timed batches per row, "
          f"torch threads {torch.get_num_threads()}")
    print(f"{'model':>9} {'image':>10} {'load s':>7} {'images/s':>9} {'preprocess':>11} {'forward':>8}")
    g = torch.Generator().manual_seed(0)
    with tempfile.TemporaryDirectory(prefix="bench-hps-") as tmp:
        for model in args.models:
            path, arch = random_hps.build(Path(tmp) / model, model)
            t0 = time.perf_counter()
            scorer = build_scorer(ScorerConfig(name="hps", model_path=str(path), device=args.device,
                                               args={"architecture": arch}))
            scorer.warmup()
            load = time.perf_counter() - t0
            for size in args.sizes:
                images = [torch.rand(3, size, size, generator=g) for _ in range(args.batch)]
                prompts = [f'a poster that reads "hello {i}"' for i in range(args.batch)]
                scorer.score_batch(images, prompts)  # warm-up at this size
                t1 = time.perf_counter()
                for _ in range(args.batches):
                    scores = scorer.score_batch(images, prompts)
                    assert all(isinstance(s, float) for s in scores), scores
                total = time.perf_counter() - t1
                t2 = time.perf_counter()
                for _ in range(args.batches):
                    for im in images:
                        hps_pixels(scorer.frame(im), scorer.image_size)
                pre = time.perf_counter() - t2
                n = args.batch * args.batches
                print(f"{model:>9} {size:>4}x{size:<5} {load:>7.1f} {n / total:>9.2f} {pre / total:>10.0%} "
                      f"{1 - pre / total:>8.0%}", flush=True)
            del scorer
    return 0
