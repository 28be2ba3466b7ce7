"""`rewardpool` command: run the operator, show pools' status, render a pool's objects, print sizing."""
from __future__ import annotations

import argparse
import faulthandler
import json
import os
import signal
import sys

import yaml

from ..api.findings import blocks_workers
from ..api.spec import KIND, Pool, PoolSpec
from ..pool import sizing, validate


def _load_pools(path: str) -> list[dict]:
    text = sys.stdin.read() if path == "-" else open(path).read()
    docs = [d for d in yaml.safe_load_all(text) if d]
    pools = [d for d in docs if d.get("kind") == KIND]
    if not pools:
        raise SystemExit(f"error: {path} holds no {KIND}")
    return pools


def cmd_operator(args) -> int:
    import os

    import kopf

    from .. import handlers  # noqa: F401 (registers the handlers)

    # The operator-wide options, as handlers.py reads them from kopf's memo.
    lease = None if args.no_leader_election else args.lease_namespace or os.environ.get("POD_NAMESPACE") or None
    memo = kopf.Memo(namespaces=list(args.namespace or []), lease_namespace=lease)

    if args.metrics_port:
        from prometheus_client import start_http_server

        host, _, port = args.metrics_port.rpartition(":")
        start_http_server(int(port), addr=host or "0.0.0.0")
    kopf.configure(verbose=args.verbose, log_format=kopf.LogFormat.JSON if args.log_json else kopf.LogFormat.FULL)
    kopf.run(standalone=True, clusterwide=not args.namespace, namespaces=args.namespace or (),
             liveness_endpoint=args.liveness, memo=memo)
    return 0


def cmd_agent(args) -> int:
    import asyncio
    import logging

    from ..modelcache.agent import run

    missing = [f for f in ("node", "namespace", "image") if not getattr(args, f)]
    if missing:
        raise SystemExit("error: the agent needs " + ", ".join(f"--{m}" for m in missing))
    logging.basicConfig(level=logging.INFO, format='{"t":"%(asctime)s","level":"%(levelname)s","msg":"%(message)s"}'
                        if args.log_json else "%(asctime)s %(levelname)s %(message)s")
    return asyncio.run(run(args))


def cmd_cache_copy(args) -> int:
    from ..modelcache import copier as cachecopy

    return cachecopy.main(args)


def cmd_render(args) -> int:
    from ..pool.builders import pod_template
    from ..pool.owned import desired_objects

    out, blocked = [], []
    for obj in _load_pools(args.file):
        obj.setdefault("metadata", {}).setdefault("namespace", args.namespace)
        obj["metadata"].setdefault("uid", "<pool-uid>")
        pool = Pool.from_object(obj)
        size = sizing.compute(pool.spec)
        problems = size.problems + validate.check(pool.spec, pod_template(pool, size))
        for p in problems:
            print(f"# {pool.name}: {p.reason}{' (blocking)' if p.blocking else ''}: {p.message}", file=sys.stderr)
        objs = desired_objects(pool, size)
        if blocks_workers(problems):
            blocked.append(pool.name)  # the operator creates the pool's other objects but no worker pod
            objs = [o for o in objs if o["kind"] != "Pod"]
        out.extend(objs)
    yaml.safe_dump_all(out, sys.stdout, sort_keys=False)
    if blocked:
        print(f"# no worker pods rendered for {', '.join(blocked)}: blocking findings above", file=sys.stderr)
        return 1
    return 0


def cmd_size(args) -> int:
    if args.file:
        spec = Pool.from_object(_load_pools(args.file)[0]).spec
    else:
        spec = PoolSpec.model_validate({
            "image": "-", "replicas": args.replicas, "scorer": {"name": args.scorer, "batchSize": args.batch_size,
                                                           "numFrames": args.num_frames,
                                                           "gpus": args.gpus, "dtype": args.dtype,
                                                           "framesPerForward": args.frames_per_forward},
            "store": {"master": "-:0", "segmentSize": args.segment_size, "protocol": args.protocol},
            "sizing": {"samplesPerRollout": args.samples_per_rollout, "outputBytesPerSample": args.output_bytes,
                       "latentBytesPerSample": args.latent_bytes, "latentRollouts": args.latent_rollouts,
                       "highWatermark": args.high_watermark, "framesPerSample": args.frames_per_sample}})
    json.dump(sizing.compute(spec).as_dict(), sys.stdout, indent=2)
    print()
    return 0


def cmd_status(args) -> int:
    import asyncio

    from . import statusfetch

    if args.pool and args.all_namespaces:
        raise SystemExit("error: a pool name cannot be combined with --all-namespaces")
    if args.interval <= 0:
        raise SystemExit("error: --interval must be positive")
    faulthandler.register(signal.SIGUSR1, all_threads=True)  # `kill -USR1` prints where it is (a hung watch)
    try:
        return asyncio.run(statusfetch.run(args.pool, args.namespace, args.all_namespaces, args.watch,
                                           args.interval, args.kubeconfig, args.context))
    except KeyboardInterrupt:  # Ctrl-C is how a --watch ends: not an error
        return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="rewardpool", description=__doc__)
    sub = ap.add_subparsers(dest="cmd", required=True)

    op = sub.add_parser("operator", help="run the operator (kopf)")
    op.add_argument("--namespace", "-n", action="append", help="watch only these namespaces (repeatable)")
    op.add_argument("--liveness", default="http://0.0.0.0:8080/healthz", help="kopf health endpoint")
    op.add_argument("--log-json", action="store_true", help="structured JSON logs")
    op.add_argument("--metrics-port", default="", help="[host:]port for the operator's Prometheus metrics")
    op.add_argument("--verbose", action="store_true")
    op.add_argument("--lease-namespace", default="",
                    help="namespace of the leader-election Lease (default: $POD_NAMESPACE, set by the chart)")
    op.add_argument("--no-leader-election", action="store_true",
                    help="reconcile without holding the Lease (only safe with a single replica)")
    op.set_defaults(func=cmd_operator)

    st = sub.add_parser("status", help="pools at a glance: workers, demand, scaling, drains, problems, events")
    st.add_argument("pool", nargs="?", help="one pool in full; without it, a table of the namespace's pools")
    st.add_argument("-n", "--namespace", help="default: the kubeconfig context's namespace")
    st.add_argument("-A", "--all-namespaces", action="store_true", help="every namespace's pools (no POOL)")
    st.add_argument("-w", "--watch", action="store_true", help="redraw every --interval seconds until Ctrl-C")
    st.add_argument("--interval", type=float, default=2.0, help="seconds between redraws with --watch")
    st.add_argument("--kubeconfig", help="default: $KUBECONFIG, else ~/.kube/config, else in-cluster")
    st.add_argument("--context", help="kubeconfig context (default: its current context)")
    st.set_defaults(func=cmd_status)

    rd = sub.add_parser("render", help="print every object the operator would create for a pool")
    rd.add_argument("-f", "--file", required=True, help="RewardPool YAML ('-' for stdin)")
    rd.add_argument("--namespace", default="default")
    rd.set_defaults(func=cmd_render)

    sz = sub.add_parser("size", help="print the segment and memory sizing as JSON")
    sz.add_argument("-f", "--file", help="take the figures from a RewardPool YAML")
    sz.add_argument("--samples-per-rollout", type=int, default=64)
    sz.add_argument("--output-bytes", default="269M")
    sz.add_argument("--latent-bytes", default="0")
    sz.add_argument("--latent-rollouts", type=int, default=2)
    sz.add_argument("--high-watermark", type=float, default=0.9)
    sz.add_argument("--replicas", type=int, default=1)
    sz.add_argument("--segment-size", default="auto")
    sz.add_argument("--batch-size", type=int, default=8)
    sz.add_argument("--scorer", default="pickscore")
    sz.add_argument("--num-frames", type=int, default=None, help="the scorer's numFrames (unset: every frame)")
    sz.add_argument("--frames-per-sample", type=int, default=None,
                    help="frames of one stored video (with --num-frames: read slots sized for the picked frames)")
    sz.add_argument("--gpus", type=int, default=0, help="GPUs per worker (adds the GPU memory figure)")
    sz.add_argument("--dtype", default="float32", choices=["float32", "float16", "bfloat16"])
    sz.add_argument("--frames-per-forward", type=int, default=32)
    sz.add_argument("--protocol", default="rdma", choices=["rdma", "tcp"])
    sz.set_defaults(func=cmd_size)

    ag = sub.add_parser("agent", help="the model cache's node agent (a DaemonSet of the chart)")
    ag.add_argument("--node", default=os.environ.get("NODE_NAME"), help="this node (default: $NODE_NAME)")
    ag.add_argument("--namespace", default=os.environ.get("POD_NAMESPACE"), help="where copy pods run")
    ag.add_argument("--image", default=os.environ.get("AGENT_IMAGE"), help="the copy pods' image (this one)")
    ag.add_argument("--root", default="/cache", help="the node's cache root as the agent sees it")
    ag.add_argument("--host-root", default="/var/lib/rewardpool/models", help="the same directory on the node")
    ag.add_argument("--default-node-selector", action="append", metavar="KEY=VALUE",
                    help="the nodes a cache without nodeSelector goes to (repeatable)")
    ag.add_argument("--interval", type=float, default=5.0, help="seconds between passes")
    ag.add_argument("--once", action="store_true", help="one pass, then exit")
    ag.add_argument("--log-json", action="store_true", help="structured JSON logs")
    ag.set_defaults(func=cmd_agent)

    cp = sub.add_parser("cache-copy", help="copy, verify and publish a cache's source on this node (copy pods)")
    cp.add_argument("--cache", required=True)
    cp.add_argument("--root", required=True, help="the node's cache root")
    cp.add_argument("--source", required=True)
    cp.add_argument("--identity", required=True, help="the source identity the copy is made from")
    cp.add_argument("--node", help="the node (for the logs)")
    cp.add_argument("--digest", help="the digest the copy must have (sha256:...)")
    cp.set_defaults(func=cmd_cache_copy)

    args = ap.parse_args(argv)
    return args.func(args)

