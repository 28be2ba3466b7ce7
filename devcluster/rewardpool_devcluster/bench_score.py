"""`rewardpool-bench score`: PickScore throughput of one worker, read and score timed apart.

A real mooncake_master on loopback TCP and a store client lending the segment the outputs are put into; a
StoredOutputRewardActor with the worker's two read slots and PickScore, as a worker hosts it. For each model
(`tiny`: the test CLIP; `clip-h14`: PickScore's CLIP-H/14 shapes with random weights, since no weights can be
downloaded here) and each framesPerForward, the outputs are scored in batches of --batch-size after one
warm-up batch, and the table gives:

  frames/s     picked frames scored per second of model time
  outputs/s    outputs per second of read + score (one worker, batches one after another)
  MB read      bytes the store moved per output (ranged reads: the picked frames only)
  per stage    seconds per output: read (into the registered buffer, zero-copy), pick + quantise
               (`frames.pick_frames`), text (the prompts' forward), preprocess (the CLIP processor on PIL frames),
               forward (the image forwards), the total, and which stage is the slowest

Scores do not depend on framesPerForward; the bench checks that they agree across the runs."""
from __future__ import annotations

import json
import sys
import tempfile
import time
from pathlib import Path


# A worker's scoring path, stage by stage: the store read (ranged: the picked frames only), frame picking and
# the uint8 conversion, the prompts' text forward, the CLIP processor, the image forwards.
STAGES = ("read", "pick", "text", "preprocess", "forward")


def _videos(n: int, frames: int, height: int, width: int):
    import torch

    g = torch.Generator().manual_seed(1234)
    for _ in range(n):
        yield torch.rand(3, frames, height, width, generator=g)


def bench_model(model: str, model_dir: Path, store, args, refs, prompts) -> list[dict]:
    from rewardpool_worker.contract import READ_SLOTS
    from rewardpool_worker.runtime.reader import RegisteredTensorReader
    from rewardpool_worker.runtime.slots import StoredOutputRewardActor
    from rewardpool_worker.scorers.pickscore import PickScoreScorer

    rows, reference = [], None
    batch_bytes = args.batch_size * refs[0].nbytes
    for fpf in args.frames_per_forward:
        t0 = time.perf_counter()
        scorer = PickScoreScorer(str(model_dir), num_frames=args.num_frames, device=args.device, dtype=args.dtype,
                                 frames_per_forward=fpf)
        load = time.perf_counter() - t0
        readers = [RegisteredTensorReader(store, initial_bytes=batch_bytes, max_bytes=batch_bytes + 4096)
                   for _ in range(READ_SLOTS)]
        for r in readers:
            r.warm()
        actor = StoredOutputRewardActor(scorer, readers, batch_size=args.batch_size)
        warmup = actor.warm_up()  # lazy initialisation paid here, as a worker pays it before Ready
        actor.stats()
        scorer.stage_seconds.clear()
        read_bytes = sum(r.stats.bytes_read for r in readers)
        scores = []
        for i in range(0, len(refs), args.batch_size):
            scores += actor.score_batch(refs[i:i + args.batch_size], prompts[i:i + args.batch_size])
        st = actor.stats()
        read, score = sum(b[2] for b in st["batch_log"]), sum(b[3] for b in st["batch_log"])
        n = len(refs)
        frames = n * min(args.num_frames or args.frames, args.frames)
        if reference is None:
            reference = scores
        agree = max(abs(a - b) for a, b in zip(scores, reference))
        stages = {"read": read, **{k: scorer.stage_seconds[k] for k in STAGES[1:]}}
        row = {"model": model, "device": scorer.device, "dtype": args.dtype, "framesPerForward": fpf,
               "outputs": n, "frames": frames, "frames_per_s": round(frames / score, 2),
               "outputs_per_s": round(n / (read + score), 3), "read_s_per_output": round(read / n, 4),
               "score_s_per_output": round(score / n, 4),
               "read_bytes_per_output": (sum(r.stats.bytes_read for r in readers) - read_bytes) // n,
               **{f"{k}_s_per_output": round(v / n, 4) for k, v in stages.items()},
               "total_s_per_output": round((read + score) / n, 4), "slowest_stage": max(stages, key=stages.get),
               "warmup_s": round(warmup, 3), "load_s": round(load, 2), "max_score_diff_vs_first": agree}
        print(json.dumps(row), file=sys.stderr, flush=True)
        rows.append(row)
        for r in readers:
            r.close()
        del actor, scorer
    return rows


def run(args) -> dict:
    import torch
    from rewardpool_worker.contract import StoreConfig
    from rewardpool_worker.records import put_output
    from rewardpool_worker.store import Store

    from . import random_clip
    from .mooncake import Master

    out_bytes = 3 * args.frames * args.height * args.width * 4
    results = []
    with tempfile.TemporaryDirectory(prefix="rewardpool-bench-score-") as tmp:
        master = Master(Path(tmp))
        segment = (args.outputs + 1) * out_bytes * 3 // 2 + (64 << 20)
        store = Store.connect(StoreConfig(master=master.address, protocol="tcp", segment_bytes=segment,
                                          local_buffer_bytes=16 << 20), "127.0.0.1")
        try:
            refs = [put_output(store, f"bench-score-{i}", v, preferred_segment=store.hostname)
                    for i, v in enumerate(_videos(args.outputs, args.frames, args.height, args.width))]
            prompts = [f"a short video of scene number {i}, cinematic lighting" for i in range(args.outputs)]
            for model in args.models:
                t0 = time.perf_counter()
                model_dir = random_clip.build(Path(tmp) / model, model)
                print(f"built {model} in {time.perf_counter() - t0:.1f}s", file=sys.stderr, flush=True)
                n = args.outputs if model == "tiny" else min(args.outputs, args.large_outputs)
                results += bench_model(model, model_dir, store, args, refs[:n], prompts[:n])
                for f in model_dir.iterdir():  # a CLIP-H is 4 GB on disk: free it before the next model
                    f.unlink()
        finally:
            for i in range(args.outputs):
                store.remove(f"bench-score-{i}", force=True)
            store.close()
            master.stop()
    return {"transport": "tcp (loopback)", "output_shape": [3, args.frames, args.height, args.width],
            "output_bytes": out_bytes, "num_frames": args.num_frames, "batch_size": args.batch_size,
            "torch": torch.__version__, "threads": torch.get_num_threads(),
            "gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None, "results": results}


def table(report: dict) -> str:
    lines = ["| model | device | dtype | framesPerForward | frames/s | outputs/s | MB read/output | "
             "s per output: read | pick + quantise | text | preprocess | forward | total | slowest |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in report["results"]:
        stages = " | ".join(str(r[f"{k}_s_per_output"]) for k in STAGES)
        lines.append(f"| {r['model']} | {r['device']} | {r['dtype']} | {r['framesPerForward']} | {r['frames_per_s']} "
                     f"| {r['outputs_per_s']} | {r['read_bytes_per_output'] / 1e6:.2f} | {stages} "
                     f"| {r['total_s_per_output']} | {r['slowest_stage']} |")
    return "\n".join(lines)


def add_arguments(p) -> None:
    p.add_argument("--models", nargs="+", default=["tiny", "clip-h14"], choices=["tiny", "small", "clip-h14"])
    p.add_argument("--frames-per-forward", nargs="+", type=int, default=[1, 8, 32])
    p.add_argument("--outputs", type=int, default=16, help="outputs scored per run (tiny)")
    p.add_argument("--large-outputs", type=int, default=4, help="outputs per run for clip-h14 (slow on CPU)")
    p.add_argument("--frames", type=int, default=16, help="frames of each stored video")
    p.add_argument("--height", type=int, default=480)
    p.add_argument("--width", type=int, default=640)
    p.add_argument("--num-frames", type=int, default=8, help="frames PickScore picks of each video")
    p.add_argument("--batch-size", type=int, default=4)
    p.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda"])
    p.add_argument("--dtype", default="float32", choices=["float32", "float16", "bfloat16"])
    p.add_argument("--json", help="also write the report here")


def main(args) -> int:
    report = run(args)
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2))
    print(json.dumps({k: v for k, v in report.items() if k != "results"}))
    print(table(report))
    return 0
