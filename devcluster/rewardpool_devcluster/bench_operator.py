"""`rewardpool bench operator`: many pools at once on the local control plane (kwok nodes). Prints JSON:
pods created per second, apply-to-all-Ready p50/p99 per pool, the operator's peak memory, and the API writes
it makes per minute once everything is steady (zero when nothing changes)."""
from __future__ import annotations

import json
import os
import statistics
import tempfile
import threading
import time
from pathlib import Path

from .bench_ready import pool
from .cluster import LocalCluster
from .nodes import kwok_node
from .stack import OperatorProcess, helm_install, service_account_kubeconfig


def _pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(q * (len(xs) - 1))))]


def bench_operator(args) -> int:
    import urllib3
    from kubernetes import client, config

    urllib3.disable_warnings(urllib3.exceptions.InsecureRequestWarning)
    n_pools, workers = args.pools, args.workers
    nodes = [kwok_node(f"rdma-node-{i}", rdma=True, memory="64Ti", cpu="2000", pods="5000") for i in range(args.nodes)]
    with tempfile.TemporaryDirectory(prefix="rewardpool-bench-op-") as tmp:
        cluster = LocalCluster(Path(tmp)).start(nodes=nodes)
        op = None
        try:
            helm_install(cluster)
            op = OperatorProcess(service_account_kubeconfig(cluster), Path(tmp) / "operator.log").start()
            api = config.new_client_from_config(str(cluster.kubeconfig))
            api.configuration.connection_pool_maxsize = 32
            co, core = client.CustomObjectsApi(api), client.CoreV1Api(api)
            core.create_namespace({"metadata": {"name": "bench"}})
            created: dict[str, float] = {}
            ready_at: dict[str, float] = {}
            t0 = time.monotonic()

            def create(i: int) -> None:
                name = f"pool-{i:03d}"
                body = pool(name, workers)
                body["spec"]["store"]["protocol"] = "tcp"  # small, fast pods: the operator is what is measured
                body["spec"].pop("network")
                body["spec"]["scorer"] = {"name": "mean-intensity"}
                created[name] = time.monotonic()
                co.create_namespaced_custom_object("rewardpool.io", "v1alpha1", "bench", "rewardpools", body)

            threads = [threading.Thread(target=create, args=(i,)) for i in range(n_pools)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            print(f"created {n_pools} pools in {time.monotonic() - t0:.1f}s", flush=True)
            last_print = 0.0
            while len(ready_at) < n_pools:
                now = time.monotonic()
                for p in co.list_namespaced_custom_object("rewardpool.io", "v1alpha1", "bench", "rewardpools")["items"]:
                    st = p.get("status") or {}
                    name = p["metadata"]["name"]
                    if name not in ready_at and st.get("readyReplicas") == workers and any(
                            c["type"] == "Ready" and c["status"] == "True" for c in st.get("conditions", [])):
                        ready_at[name] = now
                if now - last_print > 5:
                    print(f"  {len(ready_at)}/{n_pools} pools Ready after {now - t0:.0f}s", flush=True)
                    last_print = now
                if now - t0 > args.timeout:
                    raise SystemExit(f"only {len(ready_at)}/{n_pools} pools Ready after {args.timeout}s")
                time.sleep(0.2)
            all_ready = time.monotonic() - t0
            pods = len(core.list_namespaced_pod("bench").items)
            latencies = [ready_at[n] - created[n] for n in created]
            time.sleep(10)  # let the last status writes and events settle
            w0 = op.metric("rewardpool_operator_api_writes_total")
            r0 = op.metric("rewardpool_operator_reconciles_total")
            time.sleep(args.steady)
            writes = op.metric("rewardpool_operator_api_writes_total") - w0
            reconciles = op.metric("rewardpool_operator_reconciles_total") - r0
            cores = os.cpu_count() or 1
            out = {
                "pools": n_pools, "workers_per_pool": workers, "pods": pods, "nodes": args.nodes, "cores": cores,
                "all_ready_s": round(all_ready, 1), "pods_per_s": round(pods / all_ready, 1),
                "pods_per_s_per_core": round(pods / all_ready / cores, 1),
                "apply_to_ready_p50_s": round(statistics.median(latencies), 2),
                "apply_to_ready_p99_s": round(_pct(latencies, 0.99), 2),
                "operator_peak_rss_mib": round(op.peak_rss_bytes() / 2**20),
                "steady_window_s": args.steady, "steady_api_writes_per_min": round(writes * 60 / args.steady, 2),
                "steady_reconciles": int(reconciles),
                "kuberay_reference": {"pods": 10000, "seconds": 200, "pods_per_s": 50.0,
                                      "note": "published KubeRay kwok figure on a much larger machine"},
            }
            print(json.dumps(out, indent=2))
        finally:
            if op:
                op.stop()
            cluster.stop()
    return 0
