"""`python -m rewardpool_devcluster demo|down`: the embedded default that `make demo` / `make down` run."""
from __future__ import annotations

import argparse
import json
import logging
import sys
import time

from .cluster import REPO, LocalCluster
from .stack import OPERATOR_NS, OperatorProcess, helm_install, kubectl, service_account_kubeconfig

DEMO_DIR = REPO / ".rewardpool" / "demo"
EXAMPLE = REPO / "examples" / "pickscore-pool.yaml"


def step(msg: str) -> None:
    print(f"==> {time.strftime('%H:%M:%S')} {msg}", flush=True)


def demo() -> int:
    if (DEMO_DIR / "state.json").exists():
        step("a demo is already running; stopping it first (make down)")
        down()
    step("starting the local control plane (etcd, kube-apiserver, controller-manager, scheduler, kwok)")
    cluster = LocalCluster(DEMO_DIR).start()
    step("installing the Helm chart (CRD, ServiceAccount, RBAC)")
    helm_install(cluster)
    step("starting the operator with the chart ServiceAccount's identity")
    op = OperatorProcess(service_account_kubeconfig(cluster), DEMO_DIR / "operator.log").start()
    state = json.loads((DEMO_DIR / "state.json").read_text())
    state["pids"]["operator"] = op.proc.pid
    (DEMO_DIR / "state.json").write_text(json.dumps(state))
    step(f"applying {EXAMPLE.relative_to(REPO)}")
    kubectl(cluster, "apply", "-f", str(EXAMPLE))
    step("waiting until the pool's workers are Running and Ready")
    deadline = time.monotonic() + 180
    while True:
        res = kubectl(cluster, "wait", "--for=condition=Ready", "rewardpool/pickscore", "--timeout=10s", check=False)
        if res.returncode == 0:
            break
        if time.monotonic() > deadline:
            print(kubectl(cluster, "describe", "rewardpool", "pickscore").stdout)
            print(op.log_tail(15))
            return 1
        print("    ...", kubectl(cluster, "get", "rewardpool", "pickscore", "--no-headers", check=False).stdout.strip(),
              flush=True)
    print()
    print(kubectl(cluster, "get", "rewardpools").stdout)
    print(kubectl(cluster, "get", "pods", "-l", "rewardpool.io/pool=pickscore", "-o", "wide").stdout)
    print(kubectl(cluster, "get", "network-attachment-definitions,services").stdout)
    print(f"export KUBECONFIG={cluster.kubeconfig}")
    print(f"operator log: {DEMO_DIR / 'operator.log'} (namespace {OPERATOR_NS} holds the chart)")
    print("stop everything with: make down")
    return 0


def down() -> int:
    stopped = LocalCluster.stop_recorded(DEMO_DIR)
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
