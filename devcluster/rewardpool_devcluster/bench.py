"""`rewardpool-bench` (or `python -m rewardpool_devcluster.bench`): the project's benchmarks. Dev tooling, like
the rest of this package: not in either image, and never imported by the operator or the worker. Each prints
its figures (ratios within one run: these machines are noisy); docs/benchmarks.md records them."""
from __future__ import annotations

import argparse
import sys


def _bench_ready(args) -> int:
    from .bench_ready import bench_ready  # needs the local control plane

    return bench_ready(args)


def _bench_operator(args) -> int:
    from .bench_operator import bench_operator

    return bench_operator(args)


def _bench_autoscale(args) -> int:
    from .bench_autoscale import bench_autoscale

    return bench_autoscale(args)


def _bench_read(args) -> int:
    from .bench_read import main as bench_read  # needs the worker extra

    return bench_read(args)


def _bench_score(args) -> int:
    from .bench_score import main as bench_score  # needs the worker extra

    return bench_score(args)


def _bench_hps(args) -> int:
    from .bench_hps import main as bench_hps  # needs the worker extra

    return bench_hps(args)


def _bench_ocr(args) -> int:
    from .bench_ocr import main as bench_ocr  # needs the worker extra

    return bench_ocr(args)


def _bench_judge(args) -> int:
    from .bench_judge import main as bench_judge  # needs the worker extra

    return bench_judge(args)


def _bench_http(args) -> int:
    from .bench_http import run  # needs the worker extra

    return run(args)


def _bench_coldstart(args) -> int:
    from .bench_coldstart import run  # needs the worker extra and the demo's environment

    return run(args)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="rewardpool-bench", description=__doc__)
    bsub = ap.add_subparsers(dest="bench", required=True)
    ready = bsub.add_parser("ready", help="apply-to-all-Ready latency of a pool on the local control plane")
    ready.add_argument("--workers", type=int, default=16)
    ready.add_argument("--runs", type=int, default=5)
    ready.set_defaults(func=_bench_ready)

    opb = bsub.add_parser("operator", help="N pools x M workers on kwok: pods/s, Ready latency, memory, writes")
    opb.add_argument("--pools", type=int, default=50)
    opb.add_argument("--workers", type=int, default=16)
    opb.add_argument("--nodes", type=int, default=4)
    opb.add_argument("--steady", type=int, default=60, help="seconds of the steady-state write count")
    opb.add_argument("--timeout", type=int, default=900)
    opb.add_argument("--baseline", choices=["none", "replicaset"], default="none",
                     help="first the same pods through ReplicaSets on the same control plane, and the ratio")
    opb.add_argument("--out", default="", help="also write the JSON here")
    opb.set_defaults(func=_bench_operator)

    asb = bsub.add_parser("autoscale", help="LTX-2.3 rollouts, time-compressed: fixed pools vs the autoscaler")
    asb.add_argument("--rollouts", type=int, default=5)
    asb.add_argument("--max-workers", type=int, default=6)
    asb.add_argument("--compress", type=float, default=5.0, help="how much faster than real time")
    asb.add_argument("--gap", type=float, default=3.0, help="seconds between rollouts (compressed)")
    asb.add_argument("--configs", default="fixed-1,fixed-n,autoscaled,autoscaled-hint",
                     help="also autoscaled-cache, autoscaled-cache-hint: the scorer's weights from a model cache")
    asb.add_argument("--out", default="", help="also write the JSON here")
    asb.add_argument("--segment-fraction", type=float, default=1.0,
                     help="the engine's segment relative to the sizing rule (below 1: undersized, evictions)")
    asb.set_defaults(func=_bench_autoscale)

    read = bsub.add_parser("read", help="store read paths compared: fresh registration, registered reader, views")
    read.add_argument("--sizes", nargs="*", default=[str(269_000_000), str(1_230_000_000)],
                      help="output sizes in bytes (default: an LTX-2.3 video and a MiniMax-H3 output; none given: "
                           "skip the whole-read table)")
    read.add_argument("--repeats", type=int, default=3)
    read.add_argument("--shapes", nargs="*", default=None,
                      help="videos CxFxHxW[:dtype] for the ranged reads (default: LTX-2.3 uint8 and float32, "
                           "H3-sized float32; none given: skip)")
    read.add_argument("--num-frames", nargs="+", default=["1", "3", "8", "all"],
                      help="numFrames of the ranged reads ('all': a whole read)")
    read.set_defaults(func=_bench_read)

    score = bsub.add_parser("score", help="PickScore frames/s and outputs/s of one worker, read and score apart")
    from .bench_score import add_arguments  # argparse only: no torch at import

    add_arguments(score)
    score.set_defaults(func=_bench_score)

    hps = bsub.add_parser("hps", help="hps images/s of one worker by model and image size")
    from .bench_hps import add_arguments as hps_arguments

    hps_arguments(hps)
    hps.set_defaults(func=_bench_hps)
    ocr = bsub.add_parser("ocr", help="ocr images/s of one worker (PaddleOCR on the CPU) by image size")
    from .bench_ocr import add_arguments as ocr_arguments

    ocr_arguments(ocr)
    ocr.set_defaults(func=_bench_ocr)
    judge = bsub.add_parser("judge", help="openai-judge images/s of one worker by concurrency, loopback server")
    from .bench_judge import add_arguments as judge_arguments

    judge_arguments(judge)
    judge.set_defaults(func=_bench_judge)
    http = bsub.add_parser("http", help="HTTP next to Ray for LTX-sized stored outputs; two jobs sharing a worker")
    from .bench_http import add_arguments as http_arguments

    http_arguments(http)
    http.set_defaults(func=_bench_http)
    cold = bsub.add_parser("coldstart", help="replicas 0 to the first score on the real node, the model from a PVC, "
                                             "by phase, next to the disk's own read time")
    from .bench_coldstart import add_arguments as coldstart_arguments

    coldstart_arguments(cold)
    cold.set_defaults(func=_bench_coldstart)

    args = ap.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
