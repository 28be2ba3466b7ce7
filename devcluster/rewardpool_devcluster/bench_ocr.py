"""`rewardpool-bench ocr`: images/s of one worker's ocr scorer (PaddleOCR 2.x on the CPU, as miles runs it) by
image size, on the models of random_ocr.py (PaddleOCR's real pipeline: detection resize, DB post-processing,
crops, CTC decoding; small networks, so the figures are the pipeline's cost, not PP-OCRv4's network time), with
images of --lines light text lines each, as SD3.5 posters with quoted text. The reward's own formula (target,
Levenshtein) is timed apart."""
from __future__ import annotations

import tempfile
import time
from pathlib import Path


def add_arguments(ap) -> None:
    ap.add_argument("--sizes", nargs="+", type=int, default=[512, 1024], help="image sides in pixels")
    ap.add_argument("--lines", type=int, default=3, help="text lines per image")
    ap.add_argument("--batch", type=int, default=4, help="the pool's batchSize")
    ap.add_argument("--batches", type=int, default=5, help="timed batches per row (after one warm-up)")


def _poster(size: int, lines: int, seed: int):
    import torch

    g = torch.Generator().manual_seed(seed)
    img = torch.rand(3, size, size, generator=g) * 0.1
    step = size // (lines + 1)
    for k in range(lines):
        top = step * (k + 1) - size // 32
        img[:, top:top + size // 16, size // 10: size - size // 10] = 0.95
    return img


def main(args) -> int:
    from rewardpool_worker.contract import ScorerConfig
    from rewardpool_worker.scorers import build_scorer
    from rewardpool_worker.scorers.ocr import ocr_reward, ocr_target

    from . import random_ocr

    print(f"ocr, one worker (CPU): batches of {args.batch} images with {args.lines} text lines, {args.batches} timed "
          "batches per row")
    print(f"{'image':>10} {'load s':>7} {'images/s':>9} {'ms/image':>9} {'formula us':>11}")
    with tempfile.TemporaryDirectory(prefix="bench-ocr-") as tmp:
        path = random_ocr.build(Path(tmp) / "ocr")
        t0 = time.perf_counter()
        scorer = build_scorer(ScorerConfig(name="ocr", model_path=str(path), device="cpu"))
        scorer.warmup()
        load = time.perf_counter() - t0
        prompts = [f'a poster that reads "Grand Opening {i}"' for i in range(args.batch)]
        for size in args.sizes:
            images = [_poster(size, args.lines, i) for i in range(args.batch)]
            scorer.score_batch(images, prompts)
            t1 = time.perf_counter()
            for _ in range(args.batches):
                scores = scorer.score_batch(images, prompts)
                assert all(isinstance(s, float) for s in scores), scores
            total = time.perf_counter() - t1
            n = args.batch * args.batches
            t2 = time.perf_counter()
            for _ in range(1000):
                ocr_reward("grandopeningl", ocr_target(prompts[0]))
            formula = (time.perf_counter() - t2) / 1000
            print(f"{size:>4}x{size:<5} {load:>7.2f} {n / total:>9.2f} {1000 * total / n:>9.1f} {1e6 * formula:>11.1f}",
                  flush=True)
    return 0
