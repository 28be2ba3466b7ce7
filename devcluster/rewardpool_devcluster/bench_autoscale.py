"""`rewardpool-bench autoscale`: the origin's LTX-2.3 rollout, time-compressed and scaled to this machine, run
through the whole system (control plane, operator, a real worker process per kwok pod, mooncake_master,
Ray), in several configurations side by side in one run: one fixed worker, N fixed workers (N = what the
autoscaler peaked at), the built-in autoscaler, and the autoscaler with the rollout hint
(`rewardpool_worker.client.demand.expect` at each rollout's start).

Origin figures: 64 videos of 269 MB a rollout; generation done ~2.3 min into the rollout; scoring takes 7.5
min with one PickScore actor (7.0 s a video). Here time runs `--compress` times faster (default 5: 27.6 s of
generation, 1.4 s a video; a worker's ~8 s start-up on this machine then stands for ~40 s, about what a
PickScore worker takes on a GPU node, where 10x would make it 80 s) and outputs are 100x smaller (2.69 MB). A rollout cannot end before its last
output is generated and scored: the generation-bound time is generation + one video's scoring, and each
rollout is reported as a ratio to it. Worker start-up (pod created -> its actor serving) is measured and
reported on its own, not hidden in the rollout times. Per rollout: time and ratio, the store's peak, put
failures (the engine retries them, which regenerates), outputs evicted before scoring, scale events; per
configuration: batches per worker. Run it with scripts/in-netns.sh (Ray needs the loopback-only namespace).

The `-cache` configurations give the scorer weights from a RewardModelCache: a CLIP-H/14-sized model (3.74 GB)
scaled by the time compression (0.75 GB at 5x: read at the disk's own speed it takes what the whole model takes
compressed), copied onto both kwok nodes by the cache's own agent and copy code (kwokcache.py) before the pool
exists, the copies evicted from the page cache before each configuration (nothing else: imports stay as warm as in
the other configurations): every new worker reads the weights from its node's copy before it serves, so the
scale-up pays the weight load (from the disk for a node's first worker, from the page cache for the next ones)."""
from __future__ import annotations

import json
import os
import queue
import tempfile
import threading
import time
import urllib.request
from datetime import datetime, timezone
from pathlib import Path

from rewardpool_worker.contract import HTTP_PORT

from . import plots
from .cluster import REPO, LocalCluster
from .fleet import WorkerFleet
from .mooncake import Master, Producer
from .nodes import RDMA_LABEL
from .stack import OperatorProcess, helm_install, service_account_kubeconfig

SAMPLES, GEN_MIN, SCORE_MIN = 64, 2.3, 7.5  # origin: generation done at 2.3 min; 7.5 min of scoring a rollout
OUTPUT_BYTES = 2_690_000  # 269 MB / 100
SHAPE = (OUTPUT_BYTES // 4,)  # float32
COMPRESS = float(os.environ.get("REWARDPOOL_BENCH_COMPRESS", "5"))  # read by the workers' scorer too


def gen_s(compress: float = COMPRESS) -> float:
    return GEN_MIN * 60 / compress


def score_s(compress: float = COMPRESS) -> float:
    return SCORE_MIN * 60 / SAMPLES / compress


class LtxTimingScorer:
    """Scores like the origin's PickScore actor in time only: 7.0 s a video, compressed."""

    def score_batch(self, outputs, prompts):
        time.sleep(score_s() * len(outputs))
        return [float(o.float().mean()) for o in outputs]


class CachedTimingScorer(LtxTimingScorer):
    """The same, with weights: it reads every file under its model path at start (streamed, like a loader's reads
    of a safetensors file; nothing kept), so a worker serves only once the weights are in."""

    def __init__(self, model_path):
        self.bytes = 0
        for root, _, files in os.walk(model_path):
            for name in sorted(files):
                with open(os.path.join(root, name), "rb", buffering=0) as f:
                    while chunk := f.read(16 << 20):
                        self.bytes += len(chunk)
        if not self.bytes:
            raise RuntimeError(f"no weights under {model_path}")


CLIP_H_BYTES = 3_740_000_000  # PickScore's CLIP-H/14 safetensors
CACHE, CACHE_CLAIM = "bench-weights", "bench-weights-source"


def model_bytes(compress: float = COMPRESS) -> int:
    return int(CLIP_H_BYTES / compress)


def write_model(folder: Path, size: int) -> None:
    """`size` bytes of weights in 1 GiB shards (the bytes' values do not matter to a read)."""
    folder.mkdir(parents=True, exist_ok=True)
    chunk, left, shard = b"\x01" * (16 << 20), size, 0
    while left > 0:
        part = min(left, 1 << 30)
        with open(folder / f"model-{shard:05d}.safetensors", "wb") as f:
            for _ in range(part // len(chunk)):
                f.write(chunk)
            f.write(chunk[:part % len(chunk)])
        left, shard = left - part, shard + 1


def make_cache(co, core, tmp: Path, kubeconfig: Path, nodes: list[str]):
    """The cache of the -cache configurations, Ready on every node; (its nodes' agents, seconds to fill it)."""
    from rewardpool_operator.modelcache.layout import GROUP, KIND, PLURAL, VERSION

    from .kwokcache import KwokCaches
    from .stack import OPERATOR_NS

    write_model(tmp / "weights" / "clip-h", model_bytes())
    core.create_namespaced_persistent_volume_claim(OPERATOR_NS, {  # what the cache's source names
        "metadata": {"name": CACHE_CLAIM}, "spec": {"accessModes": ["ReadOnlyMany"], "storageClassName": "none",
                                                    "resources": {"requests": {"storage": "1Ki"}}}})
    co.create_cluster_custom_object(GROUP, VERSION, PLURAL, {
        "apiVersion": f"{GROUP}/{VERSION}", "kind": KIND, "metadata": {"name": CACHE},
        "spec": {"source": {"pvc": {"claimName": CACHE_CLAIM, "subPath": "clip-h"}},
                 "nodeSelector": {RDMA_LABEL: "true"}}})
    caches = KwokCaches(kubeconfig, nodes, tmp / "nodes", {CACHE_CLAIM: tmp / "weights"})
    return caches, caches.fill(co, CACHE)


def disk_read_s(folder: Path) -> float:
    """The disk's own read of the files under `folder` (dd, O_DIRECT): what a weight load from it is bounded by."""
    import subprocess

    t0 = time.monotonic()
    for f in sorted(p for p in folder.rglob("*") if p.is_file()):
        subprocess.run(["dd", f"if={f}", "of=/dev/null", "bs=16M", "iflag=direct", "status=none"], check=True)
    return time.monotonic() - t0


def evict(folders: list[Path]) -> None:
    """The files under `folders` out of the page cache (and nothing else: the workers' imports stay as warm as in
    the other configurations), so each node's first reader reads its weights from the disk."""
    os.sync()
    for folder in folders:
        for f in (p for p in folder.rglob("*") if p.is_file()):
            fd = os.open(f, os.O_RDONLY)
            try:
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            finally:
                os.close(fd)


def _run(co, core, ns: str, name: str, spec: dict, master: Master, producer: Producer, rollouts: int,
         log_dir: Path, gap: float, hint: bool, mounts=None, evict_first: list[Path] = ()) -> dict:
    from rewardpool_worker.client import demand
    from rewardpool_worker.client import Releaser, RewardPoolClient
    from rewardpool_worker.contract import StoreConfig, actor_prefix
    from rewardpool_worker.errors import SampleError
    from rewardpool_worker.store import Store

    store = Store.connect(StoreConfig(master=master.address, protocol="tcp", segment_bytes=0,
                                      local_buffer_bytes=16 << 20), "127.0.0.1")
    peak, stop = [0.0], threading.Event()
    replicas_at: list[tuple[float, int]] = []
    timeline: list[dict] = []  # what the plot draws, sampled every 0.2 s
    outstanding, spans = [0], []
    pod_created: dict[str, float] = {}
    startup: dict[str, float] = {}
    weight_load: dict[str, float] = {}  # the worker's own /healthz: seconds to read its weights
    client = RewardPoolClient(name, ns, refresh_seconds=1)
    prefix = actor_prefix(ns, name)

    def watch():
        while not stop.wait(0.2):
            m = master.metrics()
            peak[0] = max(peak[0], m.get("master_allocated_bytes", 0))
            try:
                obj = co.get_namespaced_custom_object("rewardpool.io", "v1alpha1", ns, "rewardpools", name)
                r, st = obj["spec"]["replicas"], obj.get("status") or {}
                if not replicas_at or replicas_at[-1][1] != r:
                    replicas_at.append((time.monotonic(), r))
                members = client.refresh()
                timeline.append({"t": round(time.monotonic() - t_create, 2), "desired": r,
                                 "ready": st.get("readyReplicas") or 0, "serving": len(members),
                                 "queue": st.get("queueDepth") or 0,
                                 "outstanding": outstanding[0],
                                 "fill": round(m.get("master_allocated_bytes", 0)
                                               / max(m.get("master_total_capacity_bytes", 0), 1), 3)})
                for p in core.list_namespaced_pod(ns, label_selector=f"rewardpool.io/pool={name}").items:
                    if p.metadata.name not in pod_created:  # wall clock to monotonic, once per pod
                        age = datetime.now(timezone.utc).timestamp() - p.metadata.creation_timestamp.timestamp()
                        pod_created[p.metadata.name] = time.monotonic() - max(age, 0.0)
                for member in members:
                    pod = member[len(prefix):]
                    if pod in pod_created and pod not in startup:
                        startup[pod] = time.monotonic() - pod_created[pod]
                    if mounts and pod in startup and pod not in weight_load and pod in fleet.ips:
                        # the actor registers a moment before the worker records its load: ask until it has
                        with urllib.request.urlopen(f"http://{fleet.ips[pod]}:{HTTP_PORT}/healthz", timeout=5) as r:
                            if (took := json.load(r).get("startup", {}).get("weight_load_seconds")) is not None:
                                weight_load[pod] = took
            except Exception:
                pass

    evicted0 = master.metrics().get("master_evicted_key_count", 0)
    fleet = WorkerFleet(core, ns, name, log_dir, env={"PYTHONPATH": str(REPO),
                                                      "REWARDPOOL_BENCH_COMPRESS": str(COMPRESS)}, mounts=mounts)
    if evict_first:
        evict(evict_first)  # the weights come from the node's disk, as when the copy was made long ago
    with fleet:
        t_create = time.monotonic()
        co.create_namespaced_custom_object("rewardpool.io", "v1alpha1", ns, "rewardpools", {
            "apiVersion": "rewardpool.io/v1alpha1", "kind": "RewardPool", "metadata": {"name": name}, "spec": spec})
        threading.Thread(target=watch, daemon=True).start()
        deadline = time.monotonic() + 180
        while len(client.refresh()) < spec["replicas"]:
            if time.monotonic() > deadline:
                raise SystemExit(f"{name}: the workers did not come up")
            time.sleep(0.5)
        first_ready_s = time.monotonic() - t_create
        releaser, per_rollout = Releaser(store), []
        ideal = gen_s() + score_s()
        for r in range(rollouts):
            served0 = dict(client.served)
            t0 = time.monotonic()
            peak[0], put_failures = 0.0, 0
            evicted_before = master.metrics().get("master_evicted_key_count", 0)
            if hint:
                demand.expect(name, ns, SAMPLES, ttl_seconds=ideal * 4)
            # The trainer releases each output as soon as its reward is in (a thread off the client's own),
            # while generation goes on: the store holds only what is generated and not yet scored.
            done: queue.Queue = queue.Queue()
            counts = {"lost": 0}

            def release_as_scored(n: int = SAMPLES) -> None:
                for _ in range(n):
                    fut, ref = done.get()
                    try:
                        (result,) = fut.result()
                        failed = isinstance(result, SampleError)  # evicted before it was read: regenerated
                    except Exception:
                        failed = True
                    if failed:
                        counts["lost"] += 1
                        releaser.failed([ref])
                    else:
                        releaser.rewarded([ref])
                    outstanding[0] -= 1
            releasing = threading.Thread(target=release_as_scored, daemon=True)
            releasing.start()
            for i in range(SAMPLES):  # the engine: outputs come out evenly over the generation time
                target = t0 + gen_s() * (i + 1) / SAMPLES
                time.sleep(max(0.0, target - time.monotonic()))
                while True:
                    try:
                        ref = producer.put(f"{name}-r{r}-{i}", seed=r * 1000 + i, shape=SHAPE)
                        break
                    except RuntimeError:  # a failed put is retried, which regenerates the output
                        put_failures += 1
                        time.sleep(0.05)
                releaser.expect([ref])
                outstanding[0] += 1
                client.submit([ref], ["a video"]).add_done_callback(lambda f, ref=ref: done.put((f, ref)))
            releasing.join(timeout=900)
            lost = counts["lost"]
            took = time.monotonic() - t0
            spans.append((round(t0 - t_create, 2), round(t0 + took - t_create, 2)))
            if hint:
                demand.expect(name, ns, 0)
            events = [(round(t - t0, 1), n) for t, n in replicas_at if t0 <= t <= t0 + took]
            per_worker = {w.rpartition(":")[2]: n - served0.get(w, 0) for w, n in sorted(client.served.items())
                          if n - served0.get(w, 0)}
            per_rollout.append({"s": round(took, 2), "ratio_to_generation_bound": round(took / ideal, 2),
                                "store_peak_outputs": round(peak[0] / OUTPUT_BYTES, 1), "put_failures": put_failures,
                                "evicted_before_scoring": lost, "store_evictions": int(
                                    master.metrics().get("master_evicted_key_count", 0) - evicted_before),
                                "scale_events": events, "batches_per_worker": per_worker})
            print(f"  {name}: rollout {r + 1}/{rollouts} in {took:.1f}s ({took / ideal:.2f}x the generation "
                  f"bound; replicas now {replicas_at[-1][1] if replicas_at else '?'}; batches per worker "
                  f"{per_worker}; moved to joining workers so far {client.aio.moved})", flush=True)
            time.sleep(gap)
        stop.set()
        co.delete_namespaced_custom_object("rewardpool.io", "v1alpha1", ns, "rewardpools", name)
    store.close()
    return {"rollouts": per_rollout, "first_workers_ready_s": round(first_ready_s, 1),
            "worker_startup_s": sorted(round(v, 1) for v in startup.values()),
            **({"weight_load_s": sorted(round(v, 2) for v in weight_load.values())} if mounts else {}),
            "max_replicas": max([n for _, n in replicas_at] or [spec["replicas"]]),
            "released": releaser.stats.released, "failed_released": releaser.stats.failed_released,
            "batches_per_worker": dict(client.served),
            "total_evictions": int(master.metrics().get("master_evicted_key_count", 0) - evicted0),
            "rollout_spans": spans, "timeline": timeline}


def bench_autoscale(args) -> int:
    import ray
    import urllib3
    from kubernetes import client, config

    urllib3.disable_warnings(urllib3.exceptions.InsecureRequestWarning)
    import logging
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s %(message)s")
    logging.getLogger("rewardpool.client").setLevel(logging.INFO)
    global COMPRESS
    COMPRESS = args.compress
    os.environ["REWARDPOOL_BENCH_COMPRESS"] = str(args.compress)
    os.environ.setdefault("MC_TCP_BIND_ADDRESS", "127.0.0.1")
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))
    with tempfile.TemporaryDirectory(prefix="rewardpool-bench-as-") as tmp:
        tmp = Path(tmp)
        cluster = LocalCluster(tmp / "cluster").start()
        master = Master(tmp)
        # The engine's segment follows the sizing rule: one rollout of outputs below the 0.9 eviction watermark
        # (`--segment-fraction` below 1 undersizes it, like the origin's 16gb against 17 GB of LTX-2.3 outputs).
        producer = Producer(master, segment=int(SAMPLES * OUTPUT_BYTES / 0.9 * args.segment_fraction))
        op = None
        ray.init(num_cpus=2, object_store_memory=256 << 20, include_dashboard=False, namespace="rewardpool",
                 log_to_driver=False)
        try:
            helm_install(cluster)
            os.environ["KUBECONFIG"] = str(cluster.kubeconfig)  # the demand hint writes the pool annotation
            op = OperatorProcess(service_account_kubeconfig(cluster), tmp / "operator.log").start()
            api = config.new_client_from_config(str(cluster.kubeconfig))
            co, core = client.CustomObjectsApi(api), client.CoreV1Api(api)
            core.create_namespace({"metadata": {"name": "bench"}})
            base = {"image": "rewardpool-worker:bench", "replicas": 1,
                    "scorer": {"class": "rewardpool_devcluster.bench_autoscale:LtxTimingScorer", "batchSize": 1},
                    "store": {"master": master.address, "metricsAddress": f"127.0.0.1:{master.metrics_port}",
                              "protocol": "tcp", "segmentSize": 0, "localBufferSize": "16Mi"},
                    "sizing": {"samplesPerRollout": SAMPLES, "outputBytesPerSample": str(OUTPUT_BYTES)},
                    "ray": {"address": ray.get_runtime_context().gcs_address, "namespace": "rewardpool"},
                    "drainTimeoutSeconds": 30}
            results = {}
            auto = {"enabled": True, "minReplicas": 1, "maxReplicas": args.max_workers, "targetQueueDepth": 4}
            configs = [c.strip() for c in args.configs.split(",") if c.strip()]
            # fixed-n takes the autoscaler's peak: run the autoscaled configurations first.
            order = sorted(configs, key=lambda c: c.startswith("fixed"))
            caches, fill_s, dd_s = None, None, None
            if any(c.endswith(("-cache", "-cache-hint")) for c in configs):
                caches, fill_s = make_cache(co, core, tmp, cluster.kubeconfig,
                                            [n.metadata.name for n in core.list_node().items
                                             if (n.metadata.labels or {}).get(RDMA_LABEL) == "true"])
                dd_s = disk_read_s(next(iter(caches.roots.values())) / CACHE / "data")
                print(f"cache {CACHE}: {model_bytes() / 1e9:.2f} GB copied onto every RDMA node in {fill_s:.1f} s; "
                      f"the disk reads one copy in {dd_s:.2f} s (dd, O_DIRECT)", flush=True)
            for name in order:
                if name == "fixed-1":
                    extra, hint = {"replicas": 1}, False
                elif name == "fixed-n":
                    peak = max([results[c]["max_replicas"] for c in results if c.startswith("autoscaled")]
                               or [args.max_workers])
                    extra, hint = {"replicas": peak}, False
                else:
                    extra, hint = {"autoscaling": auto}, name.endswith("hint")
                cached = "-cache" in name
                if cached:
                    extra["scorer"] = {"class": "rewardpool_devcluster.bench_autoscale:CachedTimingScorer",
                                       "batchSize": 1, "model": {"cache": {"name": CACHE}}}
                print(f"{name}: {args.rollouts} rollouts of {SAMPLES} outputs", flush=True)
                results[name] = _run(co, core, "bench", name, {**base, **extra}, master, producer, args.rollouts,
                                     tmp, args.gap, hint, mounts=caches.mounts if cached else None,
                                     evict_first=list(caches.roots.values()) if cached else [])
            out = {"time_compression": COMPRESS, "output_bytes": OUTPUT_BYTES, "samples": SAMPLES,
                   "generation_s": round(gen_s(), 2), "score_s_per_output": round(score_s(), 3),
                   "generation_bound_s": round(gen_s() + score_s(), 2), "gap_s": args.gap,
                   **({"cache_model_bytes": model_bytes(), "cache_fill_s": round(fill_s, 1),
                        "disk_read_s": round(dd_s, 2)} if caches else {}),
                   **{c: results[c] for c in configs}}
            print(json.dumps({k: ({kk: vv for kk, vv in v.items() if kk != "timeline"} if isinstance(v, dict) else v)
                              for k, v in out.items()}, indent=2))
            if args.out:
                Path(args.out).write_text(json.dumps(out, separators=(",", ":")))  # compact: it holds the timeline
                png = plots.autoscale_timeline(out, configs, Path(args.out).with_suffix(".png"))
                print(f"timeline plot: {png}")
        finally:
            if op:
                op.stop()
            producer.close()
            master.stop()
            ray.shutdown()
            cluster.stop()
    return 0
