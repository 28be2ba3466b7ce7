"""`rewardpool bench autoscale`: the origin's LTX-2.3 rollout, time-compressed and scaled to this machine, run
through the whole system (control plane, operator, a real worker process per kwok pod, mooncake_master,
Ray), once with one fixed worker and once with the built-in autoscaler, side by side in one run.

Origin figures: 64 videos of 269 MB a rollout; generation done ~2.3 min into the rollout; scoring takes 7.5
min with one PickScore actor (7.0 s a video). Here time runs 60x faster (2.3 s of generation, 0.117 s a
video) and outputs are 100x smaller (2.69 MB). Reported per configuration: rollout times, the store's peak
bytes, put failures (the engine retries them, which regenerates) and evictions. Run it with
scripts/in-netns.sh (Ray needs the loopback-only namespace)."""
from __future__ import annotations

import json
import os
import tempfile
import threading
import time
from concurrent.futures import as_completed
from pathlib import Path

from .cluster import REPO, LocalCluster
from .fleet import WorkerFleet
from .mooncake import Master, Producer
from .stack import OperatorProcess, helm_install, service_account_kubeconfig

COMPRESS = 60
SAMPLES, GEN_S, SCORE_S_PER_VIDEO = 64, 2.3 * 60 / COMPRESS, 7.5 * 60 / 64 / COMPRESS
OUTPUT_BYTES = 2_690_000  # 269 MB / 100
SHAPE = (OUTPUT_BYTES // 4,)  # float32


class LtxTimingScorer:
    """Scores like the origin's PickScore actor in time only: 7.0 s a video, compressed 60x."""

    def score_batch(self, outputs, prompts):
        time.sleep(SCORE_S_PER_VIDEO * len(outputs))
        return [float(o.float().mean()) for o in outputs]


def _run(co, core, ns: str, name: str, spec: dict, master: Master, producer: Producer, ray_address: str,
         rollouts: int, log_dir: Path) -> dict:
    from rewardpool_worker.client import Releaser, RewardPoolClient, SampleError
    from rewardpool_worker.config import StoreConfig
    from rewardpool_worker.store import Store

    store = Store.connect(StoreConfig(master=master.address, protocol="tcp", segment_bytes=0,
                                      local_buffer_bytes=16 << 20), "127.0.0.1")
    peak, replicas_seen, stop = [0.0], [], threading.Event()

    def watch():
        while not stop.wait(0.2):
            m = master.metrics()
            peak[0] = max(peak[0], m.get("master_allocated_bytes", 0))
            try:
                replicas_seen.append(co.get_namespaced_custom_object("rewardpool.io", "v1alpha1", ns, "rewardpools",
                                                                     name)["spec"]["replicas"])
            except Exception:
                pass

    evicted0 = master.metrics().get("master_evicted_key_count", 0)
    with WorkerFleet(core, ns, name, log_dir, env={"PYTHONPATH": str(REPO)}):
        co.create_namespaced_custom_object("rewardpool.io", "v1alpha1", ns, "rewardpools", {
            "apiVersion": "rewardpool.io/v1alpha1", "kind": "RewardPool", "metadata": {"name": name}, "spec": spec})
        client = RewardPoolClient(name, ns, refresh_seconds=1)
        deadline = time.monotonic() + 120
        while not client.refresh():
            if time.monotonic() > deadline:
                raise SystemExit(f"{name}: no worker came up")
            time.sleep(0.5)
        threading.Thread(target=watch, daemon=True).start()
        releaser, put_failures, lost, rollout_s, peaks = Releaser(store), 0, 0, [], []
        per_rollout = []
        for r in range(rollouts):
            served0 = dict(client.served)
            t0 = time.monotonic()
            peak[0] = 0.0
            futures = {}
            for i in range(SAMPLES):  # the engine: outputs come out evenly over the generation time
                target = t0 + GEN_S * (i + 1) / SAMPLES
                time.sleep(max(0.0, target - time.monotonic()))
                while True:
                    try:
                        ref = producer.put(f"{name}-r{r}-{i}", seed=r * 1000 + i, shape=SHAPE)
                        break
                    except RuntimeError:  # a failed put is retried, which regenerates the output
                        put_failures += 1
                        time.sleep(0.05)
                releaser.expect([ref])
                futures[client.submit([ref], ["a video"])] = ref
            for fut in as_completed(futures, timeout=600):
                try:
                    (result,) = fut.result()
                    failed = isinstance(result, SampleError)  # evicted before it was read: regenerated
                except Exception:
                    failed = True
                if failed:
                    lost += 1
                    releaser.failed([futures[fut]])
                else:
                    releaser.rewarded([futures[fut]])
            rollout_s.append(time.monotonic() - t0)
            per_rollout.append({w.rpartition(":")[2]: n - served0.get(w, 0) for w, n in sorted(client.served.items())
                                if n - served0.get(w, 0)})
            print(f"  {name}: batches per worker {per_rollout[-1]}, moved to joining workers so far "
                  f"{client.aio.moved}, retries {client.retries}", flush=True)
            peaks.append(int(peak[0]))
            print(f"  {name}: rollout {r + 1}/{rollouts} in {rollout_s[-1]:.1f}s "
                  f"(replicas now {replicas_seen[-1] if replicas_seen else '?'})", flush=True)
        stop.set()
        co.delete_namespaced_custom_object("rewardpool.io", "v1alpha1", ns, "rewardpools", name)
    store.close()
    return {"rollout_s": [round(x, 2) for x in rollout_s],
            "rollout_s_uncompressed_min": [round(x * COMPRESS / 60, 2) for x in rollout_s],
            "store_peak_bytes": peaks, "store_peak_outputs": [round(p / OUTPUT_BYTES, 1) for p in peaks],
            "put_failures": put_failures, "outputs_lost_before_scoring": lost,
            "evictions": int(master.metrics().get("master_evicted_key_count", 0) - evicted0),
            "released": releaser.stats.released, "max_replicas": max(replicas_seen or [0]),
            "batches_per_worker": dict(client.served), "batches_per_worker_per_rollout": per_rollout}


def bench_autoscale(args) -> int:
    import ray
    import urllib3
    from kubernetes import client, config

    urllib3.disable_warnings(urllib3.exceptions.InsecureRequestWarning)
    import logging
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s %(message)s")
    logging.getLogger("rewardpool.client").setLevel(logging.INFO)
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
            for name, extra in (("fixed", {}), ("autoscaled", {"autoscaling": {
                    "enabled": True, "minReplicas": 1, "maxReplicas": args.max_workers, "targetQueueDepth": 4,
                    "scaleDownDelaySeconds": 3}})):
                print(f"{name}: {args.rollouts} rollouts of {SAMPLES} outputs", flush=True)
                results[name] = _run(co, core, "bench", name, {**base, **extra}, master, producer,
                                     base["ray"]["address"], args.rollouts, tmp)
            print(json.dumps({"time_compression": COMPRESS, "output_bytes": OUTPUT_BYTES, "samples": SAMPLES,
                              "generation_s": round(GEN_S, 2), "score_s_per_output": round(SCORE_S_PER_VIDEO, 3),
                              **results}, indent=2))
        finally:
            if op:
                op.stop()
            producer.close()
            master.stop()
            ray.shutdown()
            cluster.stop()
    return 0
