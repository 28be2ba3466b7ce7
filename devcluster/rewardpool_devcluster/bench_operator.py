"""`rewardpool-bench operator`: many pools at once on the local control plane (kwok nodes), and with
`--baseline replicaset` the same pods through the in-tree ReplicaSet controller first (each ReplicaSet with
the same headless Service and disruption budget a pool gets), on the same control plane, one after the
other, so the two are compared in one run. Prints JSON per path: pods created per
second, all-Ready time, apply-to-Ready p50/p99 per pool (or ReplicaSet), the operator's peak memory (and per
1,000 workers), the API writes it makes per minute once everything is steady, etcd's and the apiserver's
memory; and the ratio of all-Ready times (ReplicaSet / RewardPool: above 1 means pools are faster)."""
from __future__ import annotations

import copy
import json
from collections import Counter
import os
import statistics
import tempfile
import threading
import time
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from . import plots
from .bench_ready import pool
from .cluster import LocalCluster
from .nodes import kwok_node
from .stack import OperatorProcess, helm_install, service_account_kubeconfig


def _pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(q * (len(xs) - 1))))]


def _rss_mib(pid: int) -> int:
    try:
        for line in open(f"/proc/{pid}/status"):
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) // 1024
    except OSError:
        pass
    return 0


def _requests(api, token: str) -> Counter:
    """The API server's own request counts by verb and resource, from its /metrics."""
    resp = api.call_api("GET", api.configuration.host + "/metrics", header_params={"authorization": f"Bearer {token}"})
    text = resp.read().decode()
    if resp.status != 200:
        raise RuntimeError(f"apiserver /metrics: {resp.status} {text[:200]}")
    out: Counter = Counter()
    for fam in text_string_to_metric_families(text):
        if fam.name == "apiserver_request":
            for s in fam.samples:
                if s.name == "apiserver_request_total":
                    out[f"{s.labels.get('verb')} {s.labels.get('resource')}"] += int(s.value)
    return out


def _busiest(before: Counter, after: Counter, n: int = 8) -> dict[str, int]:
    return dict((after - before).most_common(n))


def _pool_body(name: str, workers: int) -> dict:
    body = pool(name, workers)
    body["spec"]["store"]["protocol"] = "tcp"  # small, fast pods: the controller is what is measured
    body["spec"].pop("network")
    body["spec"]["scorer"] = {"name": "mean-intensity"}
    return body


def _baseline(name: str, workers: int) -> list[dict]:
    """What the baseline creates for one pool: the Service and disruption budget the operator creates for it
    (same specs, selecting the ReplicaSet's pods) and a ReplicaSet of the very pod the operator renders
    (owner reference and identity label aside), so both paths give the control plane the same objects and
    the same pods to handle."""
    from rewardpool_operator.pool import builders, owned, sizing
    from rewardpool_operator.api.spec import Pool

    p = Pool.from_object({**_pool_body(name, workers), "metadata": {"name": name, "namespace": "baseline"}})
    tpl = builders.pod_template(p, sizing.compute(p.spec))
    selector = {"bench/rs": name}
    meta = {"labels": selector, "annotations": tpl["metadata"].get("annotations") or {}}
    spec = copy.deepcopy(tpl["spec"])
    spec["volumes"] = [v for v in spec["volumes"] if v["name"] != "control"]  # no Secret in this namespace
    spec["containers"][0]["volumeMounts"] = [m for m in spec["containers"][0]["volumeMounts"] if m["name"] != "control"]
    spec["topologySpreadConstraints"][0]["labelSelector"] = {"matchLabels": selector}
    svc, pdb = owned.headless_service(p), owned.disruption_budget(p)
    for obj in (svc, pdb):
        obj["metadata"] = {"name": obj["metadata"]["name"]}
        obj["spec"]["selector"] = selector if obj is svc else {"matchLabels": selector}
    rs = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": name},
          "spec": {"replicas": workers, "selector": {"matchLabels": selector},
                   "template": {"metadata": meta, "spec": spec}}}
    return [svc, pdb, rs]


def _measure(n: int, create, observe, timeout: float, what: str) -> dict:
    """`observe()` -> (names of the objects with every pod Ready, pods Ready in all)."""
    created: dict[str, float] = {}
    ready_at: dict[str, float] = {}
    timeline: list[tuple[float, int]] = []  # (seconds since the first create, pods Ready) for the plot
    t0 = time.monotonic()

    def one(i: int) -> None:
        name = f"{what}-{i:04d}"
        created[name] = time.monotonic()
        create(name)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    print(f"{what}: created {n} in {time.monotonic() - t0:.1f}s", flush=True)
    last = 0.0
    while len(ready_at) < n:
        now = time.monotonic()
        names, pods_ready = observe()
        for name in names:
            ready_at.setdefault(name, now)
        timeline.append((round(now - t0, 2), pods_ready))
        if now - last > 5:
            print(f"  {what}: {len(ready_at)}/{n} all-Ready after {now - t0:.0f}s", flush=True)
            last = now
        if now - t0 > timeout:
            raise SystemExit(f"{what}: only {len(ready_at)}/{n} Ready after {timeout}s")
        time.sleep(0.2)
    total = time.monotonic() - t0
    lat = [ready_at[k] - created[k] for k in created]
    return {"all_ready_s": round(total, 1), "apply_to_ready_p50_s": round(statistics.median(lat), 2),
            "apply_to_ready_p99_s": round(_pct(lat, 0.99), 2), "ready_timeline": timeline}


def bench_operator(args) -> int:
    import urllib3
    from kubernetes import client, config

    urllib3.disable_warnings(urllib3.exceptions.InsecureRequestWarning)
    n, workers = args.pools, args.workers
    # capacity never limits: each worker requests a CPU, so 10,000 workers need 10,000 CPUs across the nodes
    nodes = [kwok_node(f"rdma-node-{i}", rdma=True, memory="64Ti", cpu="20000", pods="5000") for i in range(args.nodes)]
    with tempfile.TemporaryDirectory(prefix="rewardpool-bench-op-") as tmp:
        cluster = LocalCluster(Path(tmp)).start(nodes=nodes)
        op = None
        try:
            helm_install(cluster)
            api = config.new_client_from_config(str(cluster.kubeconfig))
            api.configuration.connection_pool_maxsize = 64
            co, core, apps = client.CustomObjectsApi(api), client.CoreV1Api(api), client.AppsV1Api(api)
            out: dict = {"pools": n, "workers_per_pool": workers, "pods": n * workers, "nodes": args.nodes,
                         "cores": os.cpu_count() or 1}

            if args.baseline == "replicaset":
                core.create_namespace({"metadata": {"name": "baseline"}})
                req0 = _requests(api, cluster.admin_token)

                def rs_ready() -> tuple[list[str], int]:
                    items = apps.list_namespaced_replica_set("baseline").items
                    return ([r.metadata.name for r in items if (r.status.ready_replicas or 0) == workers],
                            sum(r.status.ready_replicas or 0 for r in items))
                policy = client.PolicyV1Api(api)

                def create_baseline(name: str) -> None:
                    svc, pdb, rs = _baseline(name, workers)
                    core.create_namespaced_service("baseline", svc)
                    policy.create_namespaced_pod_disruption_budget("baseline", pdb)
                    apps.create_namespaced_replica_set("baseline", rs)
                rs = _measure(n, create_baseline, rs_ready, args.timeout, "replicaset")
                rs["pods_per_s"] = round(n * workers / rs["all_ready_s"], 1)
                rs["kube_controller_manager_rss_mib"] = _rss_mib(cluster.procs["kube-controller-manager"].pid)
                rs["apiserver_requests"] = _busiest(req0, _requests(api, cluster.admin_token))
                out["replicaset"] = rs
                core.delete_namespace("baseline")  # its pods go before the pools come
                while any(ns.metadata.name == "baseline" for ns in core.list_namespace().items):
                    time.sleep(1)

            op = OperatorProcess(service_account_kubeconfig(cluster), Path(tmp) / "operator.log").start()
            time.sleep(2)
            idle_mib = _rss_mib(op.proc.pid)
            core.create_namespace({"metadata": {"name": "bench"}})
            req0 = _requests(api, cluster.admin_token)

            def pools_ready() -> tuple[list[str], int]:
                items = co.list_namespaced_custom_object("rewardpool.io", "v1alpha1", "bench", "rewardpools")["items"]
                return ([p["metadata"]["name"] for p in items if (p.get("status") or {}).get("readyReplicas") == workers
                         and any(c["type"] == "Ready" and c["status"] == "True"
                                 for c in (p.get("status") or {}).get("conditions", []))],
                        sum((p.get("status") or {}).get("readyReplicas") or 0 for p in items))
            rp = _measure(n, lambda name: co.create_namespaced_custom_object(
                "rewardpool.io", "v1alpha1", "bench", "rewardpools", _pool_body(name, workers)),
                pools_ready, args.timeout, "rewardpool")
            rp["pods_per_s"] = round(n * workers / rp["all_ready_s"], 1)
            rp["apiserver_requests"] = _busiest(req0, _requests(api, cluster.admin_token))
            # every pod write the operator made (creates, drain marks, deletes): n * workers when none was wasted
            rp["operator_pod_writes"] = int(op.metric("rewardpool_operator_api_writes_total", kind="pod"))
            rp["pods_at_end"] = len(core.list_namespaced_pod("bench", label_selector="rewardpool.io/pool").items)
            rp["operator_events"] = dict(Counter(e.reason for e in core.list_namespaced_event("bench").items
                                                 if e.source and e.source.component == "rewardpool-operator"))
            time.sleep(10)  # let the last status writes and events settle
            w0, r0 = op.metric("rewardpool_operator_api_writes_total"), op.metric("rewardpool_operator_reconciles_total")
            time.sleep(args.steady)
            rp["steady_window_s"] = args.steady
            rp["steady_api_writes_per_min"] = round((op.metric("rewardpool_operator_api_writes_total") - w0)
                                                    * 60 / args.steady, 2)
            rp["steady_reconciles"] = int(op.metric("rewardpool_operator_reconciles_total") - r0)
            rp["operator_peak_rss_mib"] = round(op.peak_rss_bytes() / 2**20)
            rp["operator_idle_rss_mib"] = idle_mib
            rp["operator_rss_mib_per_1000_workers"] = round((op.peak_rss_bytes() / 2**20 - idle_mib) / (n * workers)
                                                            * 1000, 1)
            out["rewardpool"] = rp
            out["etcd_rss_mib"] = _rss_mib(cluster.procs["etcd"].pid)
            out["kube_apiserver_rss_mib"] = _rss_mib(cluster.procs["kube-apiserver"].pid)
            if "replicaset" in out:
                out["ratio_all_ready_replicaset_over_rewardpool"] = round(
                    out["replicaset"]["all_ready_s"] / rp["all_ready_s"], 2)
            out["kuberay_reference"] = {"pods": 10000, "seconds": 200, "pods_per_s": 50.0,
                                        "note": "published KubeRay kwok figure on a much larger machine"}
            print(json.dumps({k: ({kk: vv for kk, vv in v.items() if kk != "ready_timeline"} if isinstance(v, dict)
                                  else v) for k, v in out.items()}, indent=2))
            if args.out:
                Path(args.out).write_text(json.dumps(out, separators=(",", ":")))  # compact: it holds the timeline
                print(f"timeline plot: {plots.operator_timeline(out, Path(args.out).with_suffix('.png'))}")
        finally:
            if op:
                op.stop()
            cluster.stop()
    return 0
