"""`rewardpool-bench ready`: apply-to-all-Ready latency of one pool on the local control plane (real
apiserver, scheduler, kwok), with the operator running as its own process. Prints JSON."""
from __future__ import annotations

import json
import statistics
import tempfile
import time
from pathlib import Path

from .cluster import LocalCluster
from .stack import OperatorProcess, helm_install, service_account_kubeconfig


def pool(name: str, workers: int) -> dict:
    return {"apiVersion": "rewardpool.io/v1alpha1", "kind": "RewardPool", "metadata": {"name": name},
            "spec": {"replicas": workers, "image": "rewardpool-worker:bench",
                     "scorer": {"name": "pickscore", "numFrames": 8, "modelPath": "/models/pickscore"},
                     "store": {"master": "127.0.0.1:50051", "protocol": "rdma"},
                     "sizing": {"samplesPerRollout": 64, "outputBytesPerSample": "269M"},
                     "network": {"ipvlan": {"master": "bond0", "ipam": {"type": "whereabouts",
                                                                         "range": "192.168.60.0/24"}}}}}


def bench_ready(args) -> int:
    import urllib3
    from kubernetes import client, config

    urllib3.disable_warnings(urllib3.exceptions.InsecureRequestWarning)  # the loopback cluster's own cert

    with tempfile.TemporaryDirectory(prefix="rewardpool-bench-") as tmp:
        cluster = LocalCluster(Path(tmp)).start()
        op = None
        try:
            helm_install(cluster)
            op = OperatorProcess(service_account_kubeconfig(cluster), Path(tmp) / "operator.log").start()
            api = config.new_client_from_config(str(cluster.kubeconfig))
            co, core = client.CustomObjectsApi(api), client.CoreV1Api(api)
            runs = []
            for i in range(args.runs):
                ns = f"bench-{i}"
                core.create_namespace({"metadata": {"name": ns}})
                t0 = time.monotonic()
                co.create_namespaced_custom_object("rewardpool.io", "v1alpha1", ns, "rewardpools",
                                                   pool("bench", args.workers))
                while True:
                    st = co.get_namespaced_custom_object("rewardpool.io", "v1alpha1", ns, "rewardpools",
                                                         "bench").get("status") or {}
                    ready = any(c["type"] == "Ready" and c["status"] == "True" for c in st.get("conditions", []))
                    if ready and st.get("readyReplicas") == args.workers:
                        break
                    if time.monotonic() - t0 > 300:
                        raise SystemExit(f"run {i}: pool not Ready after 300s: {st}")
                    time.sleep(0.05)
                dt = time.monotonic() - t0
                runs.append(dt)
                print(f"run {i + 1}/{args.runs}: {args.workers} workers Ready in {dt:.2f}s", flush=True)
                core.delete_namespace(ns)
            print(json.dumps({"workers": args.workers, "runs_s": [round(r, 3) for r in runs],
                              "median_s": round(statistics.median(runs), 3),
                              "pods_per_s_median": round(args.workers / statistics.median(runs), 1)}, indent=2))
        finally:
            if op:
                op.stop()
            cluster.stop()
    return 0
