"""`python -m rewardpool_devcluster demo|down`: the embedded default that `make demo` / `make down` run."""
from __future__ import annotations

import argparse
import json
import logging
import sys
import time

from .cluster import REPO, LocalCluster
from .stack import kubectl

DEMO_DIR = REPO / ".rewardpool" / "demo"


def step(msg: str) -> None:
    print(f"==> {time.strftime('%H:%M:%S')} {msg}", flush=True)


def demo() -> int:
    """The main job on the dev cluster's real node: images built from the Dockerfile, the operator from its chart,
    the store master and Ray head as pods, a pool of real worker containers, and a training job's reward step
    scoring generated videos through it. Runs inside the demo's network namespace (make demo)."""
    from .incluster import INFRA_NS, infra_objects, real_node_pool, rollout_job_objects
    from .nodes import default_nodes
    from .realnode import NODE_LABEL, TOLERATION, RealNode
    from .stack import helm_install_incluster

    t0 = time.monotonic()
    if (DEMO_DIR / "node-state.json").exists() or (DEMO_DIR / "cp" / "state.json").exists():
        step("a demo is already running; stopping it first (make down)")
        down()
    step("starting the control plane, kwok nodes and the real node (containerd, kubelet, kube-proxy, CoreDNS, "
         "Multus + whereabouts)")
    node = RealNode.create(DEMO_DIR, kwok_nodes=default_nodes())
    cluster = node.cluster
    step(f"real node Ready ({', '.join(f'{k} {v:.0f}s' for k, v in node.timings.items())})")

    def k(*args, **kw):
        return kubectl(cluster, *args, **kw)

    def apply(objs):
        import yaml
        k("apply", "-f", "-", input=yaml.safe_dump_all(objs))

    step(f"helm install of the chart: the operator from {node.images.operator}, in-cluster config")
    helm_install_incluster(cluster, node.images.operator, {NODE_LABEL: "real"}, [TOLERATION])
    cluster.wait_crd_established("rewardpools.rewardpool.io")
    step("the Mooncake master and a Ray head as pods with Services (namespace rewardpool)")
    apply(infra_objects(node.images.worker))
    for d in ("mooncake-master", "ray-head"):
        k("rollout", "status", "-n", INFRA_NS, f"deployment/{d}", "--timeout=240s", timeout=260)
    from .prometheus import built, for_dev_cluster

    # Prometheus is the suite's build (minutes of Go on a cold machine): the demo uses it when it is there
    prom = for_dev_cluster(cluster.kubeconfig, DEMO_DIR / "prometheus", INFRA_NS) if built() else None
    if prom:
        step(f"Prometheus {prom.url} scraping the operator and workers (the chart's PodMonitor/ServiceMonitor) "
             "and the store master")
    else:
        step("no Prometheus: it is not built yet (the suite's install builds it: make test, or "
             "bash devcluster/build-prometheus.sh); the demo goes on without it")
    ns = "demo"
    k("create", "namespace", ns, check=False)
    apply([node.macvlan_attachment(ns)])
    step("applying a 2-worker RewardPool on the real node (macvlan secondary network, tcp store)")
    t_apply = time.monotonic()
    apply([real_node_pool("pickscore-demo", ns, node.images.worker, replicas=2, attachment=f"{ns}/macvlan-store")])
    deadline = time.monotonic() + 300
    while True:
        res = k("wait", "--for=condition=Ready", "-n", ns, "rewardpool/pickscore-demo", "--timeout=10s", check=False)
        if res.returncode == 0:
            break
        if time.monotonic() > deadline:
            print(k("describe", "rewardpool", "-n", ns, "pickscore-demo", check=False).stdout)
            print(k("get", "pods", "-n", ns, "-o", "wide", check=False).stdout)
            return 1
        print("    ...", k("get", "pods", "-n", ns, "--no-headers", check=False).stdout.strip().replace("\n", "\n    ... "),
              flush=True)
    step(f"pool Ready {time.monotonic() - t_apply:.1f}s after apply (2 real containers, image present)")
    from .incluster import startup_breakdown
    pods = json.loads(k("get", "pods", "-n", ns, "-l", "rewardpool.io/pool=pickscore-demo", "-o", "json").stdout)["items"]
    for pod in pods:
        print(f"    start-up of {pod['metadata']['name']}:")
        for phase, secs in startup_breakdown(k, ns, pod):
            print(f"      {secs:6.1f}s  {phase}")
    step("a rollout job puts 32 generated videos (LTX-2.3-shaped uint8 tensors, scaled down) into the store, "
         "scores them through the pool client, releases them")
    apply(rollout_job_objects("rollout", ns, node.images.worker, "pickscore-demo", samples=32, frames=9, height=128,
                              width=192, batch=4, attachment=f"{ns}/macvlan-store"))
    deadline = time.monotonic() + 300
    while True:
        st = json.loads(k("get", "job", "-n", ns, "rollout", "-o", "json").stdout).get("status", {})
        if st.get("succeeded") or st.get("failed") or time.monotonic() > deadline:
            break
        time.sleep(1)
    logs = k("logs", "-n", ns, "job/rollout", "--tail=200", check=False).stdout
    if not st.get("succeeded"):
        print(logs)
        step("the rollout job failed (log above)")
        return 1
    from .incluster import job_result
    r = job_result(logs)
    print()
    print(f"scored {r['scored']} outputs in {r['seconds']:.2f} s ({r['scored'] / r['seconds']:.1f} outputs/s) "
          f"across {r['workers']} workers; {r['left']} left in the store")
    print(f"first scores: {r['first_scores']}")
    print()
    print(k("get", "nodes", "-o", "wide").stdout)  # the real node next to the kwok ones
    print(k("get", "rp", "-A").stdout)
    print(k("get", "pods", "-A", "-o", "wide").stdout)
    print(f"export KUBECONFIG={cluster.kubeconfig}   # kubectl from inside the namespace: "
          f"nsenter --net=/run/netns/{node.key} kubectl ...")
    print(f"nsenter --net=/run/netns/{node.key} rewardpool status -n {ns} pickscore-demo --watch   # the pool, live")
    if prom:
        print(f"Prometheus: nsenter --net=/run/netns/{node.key} curl -s '{prom.url}/api/v1/query' --data-urlencode "
              f"'query=sum by (pool) (rewardpool_worker_scored_outputs_total)'   # the dashboard: "
              "charts/rewardpool-operator/dashboards/rewardpool.json")
    print(f"logs: {DEMO_DIR} (kubelet.log, containerd.log, cp/*.log)")
    print(f"demo took {time.monotonic() - t0:.0f}s; stop everything with: make down")
    return 0


def down() -> int:
    from .realnode import RealNode

    from .prometheus import Prometheus

    stopped = Prometheus.stop_recorded(DEMO_DIR / "prometheus")
    stopped += RealNode.stop_recorded(DEMO_DIR)
    stopped += LocalCluster.stop_recorded(DEMO_DIR / "cp")
    stopped += LocalCluster.stop_recorded(DEMO_DIR)  # an older, kwok-only demo
    print("stopped: " + (", ".join(stopped) if stopped else "nothing was running"))
    return 0


def main() -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    ap = argparse.ArgumentParser(prog="python -m rewardpool_devcluster")
    ap.add_argument("command", choices=["demo", "down"])
    args = ap.parse_args()
    if args.command == "down":
        return down()
    try:
        return demo()
    except Exception:
        step("the demo failed; stopping what it started")
        down()
        raise


if __name__ == "__main__":
    sys.exit(main())
