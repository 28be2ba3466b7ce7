"""The demo's environment in .rewardpool/demo: the control plane with the kwok nodes and the real node, the
operator installed from its chart (in-cluster, on the real node), the Mooncake master and a Ray head as pods,
and Prometheus when it is built. `up()` brings it up (stopping a previous one first), `down()` stops whatever
a previous process left running (`make down`). What runs on it is demo.py's."""
from __future__ import annotations

import time
from dataclasses import dataclass

import yaml

from .cluster import REPO, LocalCluster
from .incluster import INFRA_NS, infra_objects
from .nodes import default_nodes
from .prometheus import Prometheus, built, for_dev_cluster
from .realnode import RealNode
from .realnode_config import NODE_LABEL, TOLERATION
from .stack import helm_install_incluster, kubectl

DEMO_DIR = REPO / ".rewardpool" / "demo"


def step(msg: str) -> None:
    print(f"==> {time.strftime('%H:%M:%S')} {msg}", flush=True)


@dataclass
class Environment:
    node: RealNode
    prom: Prometheus | None  # None: not built yet

    @property
    def cluster(self) -> LocalCluster:
        return self.node.cluster

    def kubectl(self, *args: str, **kw):
        return kubectl(self.cluster, *args, **kw)

    def apply(self, objs: list[dict]) -> None:
        self.kubectl("apply", "-f", "-", input=yaml.safe_dump_all(objs))


def up() -> Environment:
    """Runs inside the demo's network namespace (make demo)."""
    if (DEMO_DIR / "node-state.json").exists() or (DEMO_DIR / "cp" / "state.json").exists():
        step("a demo is already running; stopping it first (make down)")
        down()
    step("starting the control plane, kwok nodes and the real node (containerd, kubelet, kube-proxy, CoreDNS, "
         "Multus + whereabouts)")
    node = RealNode.create(DEMO_DIR, kwok_nodes=default_nodes())
    env = Environment(node, None)
    step(f"real node Ready ({', '.join(f'{k} {v:.0f}s' for k, v in node.timings.items())})")
    step(f"helm install of the chart: the operator from {node.images.operator}, in-cluster config")
    helm_install_incluster(env.cluster, node.images.operator, {NODE_LABEL: "real"}, [TOLERATION])
    env.cluster.wait_crd_established("rewardpools.rewardpool.io")
    step("the Mooncake master and a Ray head as pods with Services (namespace rewardpool)")
    env.apply(infra_objects(node.images.worker))
    for d in ("mooncake-master", "ray-head"):
        env.kubectl("rollout", "status", "-n", INFRA_NS, f"deployment/{d}", "--timeout=240s", timeout=260)
    # Prometheus is the suite's build (minutes of Go on a cold machine): the demo uses it when it is there
    env.prom = for_dev_cluster(env.cluster.kubeconfig, DEMO_DIR / "prometheus", INFRA_NS) if built() else None
    if env.prom:
        step(f"Prometheus {env.prom.url} scraping the operator and workers (the chart's PodMonitor/ServiceMonitor) "
             "and the store master")
    else:
        step("no Prometheus: it is not built yet (the suite's install builds it: make test, or "
             "bash devcluster/build-prometheus.sh); the demo goes on without it")
    return env


def down() -> int:
    stopped = Prometheus.stop_recorded(DEMO_DIR / "prometheus")
    stopped += RealNode.stop_recorded(DEMO_DIR)
    stopped += LocalCluster.stop_recorded(DEMO_DIR / "cp")
    stopped += LocalCluster.stop_recorded(DEMO_DIR)  # an older, kwok-only demo
    print("stopped: " + (", ".join(stopped) if stopped else "nothing was running"))
    return 0
